//! `stencil generate --n N --vote ...` (self-consistency) and `--best-of N [--scorer CMD]`:
//! N samples decoded together, then a majority vote or verifiers pick the output.

use std::io::{Read, Write};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use stencil_runtime::select::{Candidate, Extractor, Normalizer, SelfConsistencyParams, Verifiers};
use stencil_runtime::{GenerateRequest, Generation, Session};

use crate::error::CliError;
use crate::generate::{append_line, runtime};
use crate::source::LoadedSchema;

/// How the N samples become one output.
pub enum Selection {
    /// Self-consistency: a majority vote over each sample's answer.
    Vote { n: usize, extractor: Extractor, case_fold: bool, early_stop: bool },
    /// Best-of-N: the schema, then `scorer` (a shell command), then mean log-probability.
    BestOf { n: usize, scorer: Option<String> },
}

impl Selection {
    /// Samples to decode.
    pub fn n(&self) -> usize {
        match self {
            Selection::Vote { n, .. } | Selection::BestOf { n, .. } => *n,
        }
    }
}

/// How long a `--scorer` command may take for one candidate.
const SCORER_TIMEOUT: Duration = Duration::from_secs(30);

/// Decodes the samples, selects one, prints it, and logs the samples and the decision.
/// Returns the selected sample (the caller validates it) or `None` when nothing was chosen.
pub fn run(
    selection: &Selection,
    session: &mut Session,
    request: &GenerateRequest,
    schema: Option<&LoadedSchema>,
    log: Option<&std::path::Path>,
    quiet: bool,
) -> Result<Option<Generation>, CliError> {
    if request.params.is_greedy() && !quiet {
        eprintln!(
            "warning: {} samples at temperature 0 are all the greedy output; set --temperature (or --preset chat-nucleus)",
            selection.n()
        );
    }
    let (winner, decision, samples, cost) = match selection {
        Selection::Vote { n, extractor, case_fold, early_stop } => {
            let params = SelfConsistencyParams {
                n: *n,
                extractor: extractor.clone(),
                normalizer: Normalizer::default().with_case_fold(*case_fold),
                early_stop: *early_stop,
            };
            let run = session.self_consistency(request, &params).map_err(runtime)?;
            if !quiet {
                let v = &run.vote;
                let counts: Vec<String> = v.counts.iter().map(|(a, c)| format!("{a} ×{c}")).collect();
                eprintln!(
                    "vote: {} ({:.0} % agreement; {}{}); {} of {} samples voted{}, {} tokens in {:.0} ms",
                    v.winner.as_deref().unwrap_or("no answer"),
                    100.0 * v.agreement,
                    counts.join(", "),
                    if v.abstained > 0 { format!(", {} gave no answer", v.abstained) } else { String::new() },
                    v.samples_used,
                    run.samples.len(),
                    if v.stopped_early { " (decided early, the rest cancelled)" } else { "" },
                    run.cost.tokens,
                    run.cost.total_ms,
                );
            }
            let decision = json!({ "method": "self-consistency", "answers": run.answers, "vote": run.vote });
            (run.vote.winner_sample, decision, run.samples, run.cost)
        }
        Selection::BestOf { n, scorer } => {
            let mut verifiers = Verifiers::new();
            if let Some(schema) = schema {
                verifiers = verifiers
                    .with_schema(&schema.document, &schema.options.registry)
                    .map_err(|e| CliError::Usage(format!("the schema cannot be used to verify candidates: {e}")))?;
            }
            if let Some(cmd) = scorer {
                verifiers = verifiers.with_scorer(move |c: &Candidate| score_with(cmd, &c.text));
            }
            let run = session.best_of(request, *n, &mut verifiers).map_err(runtime)?;
            if !quiet {
                eprintln!(
                    "best of {}: {}; {} tokens in {:.0} ms",
                    n, run.decision.reason, run.cost.tokens, run.cost.total_ms
                );
            }
            let decision = json!({ "method": "best-of-n", "scorer": scorer, "decision": run.decision });
            (run.decision.winner, decision, run.samples, run.cost)
        }
    };
    if let Some(log) = log {
        let records: Vec<Value> =
            samples.iter().map(|g| serde_json::to_value(&g.record).unwrap_or(Value::Null)).collect();
        let texts: Vec<&str> = samples.iter().map(|g| g.text.as_str()).collect();
        let line =
            json!({ "samples": records, "texts": texts, "selected": winner, "selection": decision, "cost": cost });
        append_line(log, &line.to_string())?;
    }
    Ok(winner.map(|i| samples[i].clone()))
}

/// Runs `cmd` through the shell with the candidate on stdin; its stdout must be one number
/// (higher is better). A failure, a non-number or a timeout rejects the candidate.
fn score_with(cmd: &str, text: &str) -> Result<f64, String> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A scorer that does not read its input is fine.
        let _ = stdin.write_all(text.as_bytes());
    }
    let start = Instant::now();
    let status = loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) => break status,
            None if start.elapsed() > SCORER_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{cmd:?} took longer than {} s", SCORER_TIMEOUT.as_secs()));
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let mut out = String::new();
    let mut err = String::new();
    child.stdout.take().map(|mut o| o.read_to_string(&mut out));
    child.stderr.take().map(|mut e| e.read_to_string(&mut err));
    if !status.success() {
        return Err(format!("{cmd:?} exited with {status}: {}", err.trim()));
    }
    out.trim().parse::<f64>().map_err(|_| format!("{cmd:?} printed {:?}, not a number", out.trim()))
}

/// Exit status when nothing was selected.
pub fn nothing_selected() -> ExitCode {
    eprintln!("error: no sample was selected (see the reasons above)");
    ExitCode::from(1)
}
