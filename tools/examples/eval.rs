//! Tool-calling evaluation: on the fixture prompts (`fixtures/tools/eval.jsonl`, each with
//! the tool a correct call names and, for most, arguments the request determines) and tools
//! (`fixtures/tools/tools.json`), the rate of valid calls and of correct tool names for
//! multi-stage, single-grammar and unconstrained decoding of the envelope, then for each
//! model family's tool format ([`stencil_tools::format`]) shown to the model by a system
//! prompt, with the same model, prompts and sampling (greedy unless `--temperature`).
//!
//! ```sh
//! cargo run --release -p stencil-tools --example eval -- --out tools-eval.md
//! ```
//!
//! Options: `--model FILE` (default: SmolLM2-135M-Instruct from the model cache),
//! `--prompts FILE`, `--tools FILE`, `--limit N` (first N prompts), `--max-tokens N`
//! (per generation, default 256), `--temperature T` and `--seed S` (default 0 and 7),
//! `--threads N` (default 1), `--formats LIST` (comma-separated format names, default every
//! format; `none`: the strategies table only), `--no-strategies` (the formats table only),
//! `--verbose` (every reply on stderr), `--out FILE` (the tables are also written there).
//!
//! A reply counts as a **valid call** when it holds at least one call, every call names a
//! tool of the set, its arguments validate against that tool's schema and the reply obeys
//! the tool choice; **correct tool** when, moreover, its first call names the expected tool;
//! **expected arguments** when, moreover, that call's arguments hold every expected
//! argument with an equal value (numbers compared as numbers), over the prompts that expect
//! some.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::Value;
use stencil_runtime::sampling::SamplingParams;
use stencil_runtime::{ChatMessage, Model, ModelOptions, SessionOptions};
use stencil_test_support::fixtures::{model_path, SMOLLM2_MODEL_FILE};
use stencil_tools::format::{ToolFormat, FORMAT_NAMES};
use stencil_tools::{CallOptions, Strategy, ToolCaller, ToolChoice, ToolError, ToolSet};

struct Args {
    model: Option<PathBuf>,
    prompts: PathBuf,
    tools: PathBuf,
    limit: Option<usize>,
    max_tokens: u32,
    temperature: f32,
    seed: u64,
    threads: u32,
    verbose: bool,
    out: Option<PathBuf>,
    formats: Vec<ToolFormat>,
    strategies: bool,
}

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/tools")).join(rel)
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        model: None,
        prompts: fixture("eval.jsonl"),
        tools: fixture("tools.json"),
        limit: None,
        max_tokens: 256,
        temperature: 0.0,
        seed: 7,
        threads: 1,
        verbose: false,
        out: None,
        formats: FORMAT_NAMES.iter().map(|n| n.parse().expect("a format name")).collect(),
        strategies: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--model" => args.model = Some(value()?.into()),
            "--prompts" => args.prompts = value()?.into(),
            "--tools" => args.tools = value()?.into(),
            "--limit" => args.limit = Some(value()?.parse().map_err(|e| format!("--limit: {e}"))?),
            "--max-tokens" => args.max_tokens = value()?.parse().map_err(|e| format!("--max-tokens: {e}"))?,
            "--temperature" => args.temperature = value()?.parse().map_err(|e| format!("--temperature: {e}"))?,
            "--seed" => args.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--threads" => args.threads = value()?.parse().map_err(|e| format!("--threads: {e}"))?,
            "--out" => args.out = Some(value()?.into()),
            "--verbose" => args.verbose = true,
            "--no-strategies" => args.strategies = false,
            "--formats" => {
                let list = value()?;
                args.formats = if list == "none" {
                    Vec::new()
                } else {
                    list.split(',')
                        .map(|n| n.parse().map_err(|e| format!("--formats: {e}")))
                        .collect::<Result<_, _>>()?
                };
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

#[derive(Default)]
struct Tally {
    replies: usize,
    valid: usize,
    correct: usize,
    /// Replies whose first call names the expected tool with the expected arguments, and
    /// the prompts that expect arguments.
    arguments: usize,
    expecting: usize,
    text: usize,
    tokens: usize,
    ms: f64,
}

/// One prompt: the request, the tool a correct call names, the arguments it determines.
struct Prompt {
    text: String,
    tool: String,
    arguments: Option<serde_json::Map<String, Value>>,
}

/// Whether `got` holds every expected argument with an equal value.
fn expected_arguments(expected: &serde_json::Map<String, Value>, got: &Value) -> bool {
    expected.iter().all(|(k, v)| match (got.get(k), v) {
        (Some(Value::Number(a)), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Some(a), b) => a == b,
        (None, _) => false,
    })
}

/// Decodes every prompt with `caller` and `options`, and tallies the replies.
fn tally(
    caller: &ToolCaller,
    session: &mut stencil_runtime::Session<'_>,
    prompts: &[Prompt],
    options: &CallOptions,
    label: &str,
    verbose: bool,
) -> Result<Tally, Box<dyn std::error::Error>> {
    let mut tally = Tally::default();
    for p in prompts {
        let start = Instant::now();
        let result = caller.call(session, &[ChatMessage::user(p.text.clone())], options);
        tally.ms += start.elapsed().as_secs_f64() * 1e3;
        tally.replies += 1;
        tally.expecting += usize::from(p.arguments.is_some());
        let (text, verdict) = match &result {
            Ok(turn) => {
                tally.tokens += turn.generated_tokens();
                if turn.calls.is_empty() {
                    tally.text += 1;
                    (turn.text.clone(), "text".to_string())
                } else {
                    tally.valid += 1;
                    let right = turn.calls[0].name == p.tool;
                    tally.correct += usize::from(right);
                    let args =
                        right && p.arguments.as_ref().is_some_and(|e| expected_arguments(e, &turn.calls[0].arguments));
                    tally.arguments += usize::from(args);
                    let verdict = match (right, args) {
                        (true, true) => "correct, expected arguments",
                        (true, false) => "correct",
                        _ => "wrong tool",
                    };
                    (turn.text.clone(), verdict.to_string())
                }
            }
            Err(ToolError::InvalidCall { error, text, records, .. }) => {
                tally.tokens += records.iter().map(|r| r.generated_tokens).sum::<usize>();
                (text.clone(), format!("invalid: {error}"))
            }
            Err(e) => return Err(e.to_string().into()),
        };
        if verbose {
            eprintln!("[{label}] {}\n  -> {verdict}\n  {text:?}", p.text);
        }
    }
    Ok(tally)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let tools = ToolSet::from_openai_json(&std::fs::read_to_string(&args.tools)?)?;
    let mut prompts = Vec::new();
    for (i, line) in std::fs::read_to_string(&args.prompts)?.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| format!("{}:{}: {e}", args.prompts.display(), i + 1))?;
        let text = v["prompt"].as_str().ok_or("each line needs \"prompt\"")?.to_string();
        let tool = v["tool"].as_str().ok_or("each line needs \"tool\"")?.to_string();
        prompts.push(Prompt { text, tool, arguments: v["arguments"].as_object().cloned() });
    }
    if let Some(n) = args.limit {
        prompts.truncate(n);
    }
    let path = args.model.clone().unwrap_or_else(|| model_path(SMOLLM2_MODEL_FILE));
    let model = Model::load(&path, &ModelOptions::default())?;
    let mut session = model.session(&SessionOptions { n_threads: args.threads, ..Default::default() })?;
    let caller = ToolCaller::new(&model, tools.clone());
    let params = SamplingParams {
        temperature: args.temperature,
        seed: Some(args.seed),
        max_tokens: args.max_tokens,
        ..SamplingParams::greedy()
    };

    // Warm-up (untimed): the shared system prompt goes into the KV cache, so that no row
    // pays for its prefill.
    if let Some(p) = prompts.first() {
        let warm = CallOptions { params: params.clone(), ..Default::default() };
        let _ = caller.call(&mut session, &[ChatMessage::user(p.text.clone())], &warm);
    }
    let pct = |n: usize, d: usize| if d == 0 { 0.0 } else { 100.0 * n as f64 / d as f64 };
    let sampling = if args.temperature == 0.0 {
        "greedy".to_string()
    } else {
        format!("temperature {} seed {}", args.temperature, args.seed)
    };
    let mut table = String::new();
    if args.strategies {
        let mut rows = Vec::new();
        for choice in [ToolChoice::Required, ToolChoice::Auto] {
            for strategy in [Strategy::MultiStage, Strategy::SingleGrammar, Strategy::Unconstrained] {
                let options =
                    CallOptions { choice: choice.clone(), strategy, params: params.clone(), ..Default::default() };
                let label = format!("{strategy} {choice}");
                rows.push((
                    strategy,
                    choice.clone(),
                    tally(&caller, &mut session, &prompts, &options, &label, args.verbose)?,
                ));
            }
        }
        table.push_str(&format!(
            "Tool calling on {} prompts over {} tools ({}), model {}, {sampling}, max {} tokens per generation.\n\n",
            prompts.len(),
            caller.tools().len(),
            args.prompts.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
            model.info().name,
            args.max_tokens,
        ));
        table.push_str(
            "| decoding | tool_choice | valid calls | correct tool | text replies | tokens/reply | ms/reply |\n",
        );
        table.push_str("|---|---|---:|---:|---:|---:|---:|\n");
        for (strategy, choice, t) in &rows {
            table.push_str(&format!(
                "| {strategy} | {choice} | {:.0}% ({}/{}) | {:.0}% ({}/{}) | {} | {:.1} | {:.0} |\n",
                pct(t.valid, t.replies),
                t.valid,
                t.replies,
                pct(t.correct, t.replies),
                t.correct,
                t.replies,
                t.text,
                t.tokens as f64 / t.replies.max(1) as f64,
                t.ms / t.replies.max(1) as f64,
            ));
        }
    }
    if !args.formats.is_empty() {
        let mut rows = Vec::new();
        for format in &args.formats {
            let caller = ToolCaller::new(&model, tools.clone()).with_format(format.clone())?;
            let options = CallOptions { choice: ToolChoice::Required, params: params.clone(), ..Default::default() };
            // Untimed: the format's grammar compiles once.
            if !matches!(format, ToolFormat::Envelope(_)) {
                caller.format_grammar(&options, "")?;
            }
            let label = format!("{format} required");
            rows.push((format.clone(), tally(&caller, &mut session, &prompts, &options, &label, args.verbose)?));
        }
        if !table.is_empty() {
            table.push('\n');
        }
        table.push_str(&format!(
            "Each tool format through a system prompt that shows it (the model's template has no tool format), \
             `tool_choice: required`, one grammar per format (the envelope: multi-stage), model {}, {sampling}, \
             max {} tokens.\n\n",
            model.info().name,
            args.max_tokens,
        ));
        table.push_str("| format | valid calls | correct tool | expected arguments | tokens/reply | ms/reply |\n");
        table.push_str("|---|---:|---:|---:|---:|---:|\n");
        for (format, t) in &rows {
            table.push_str(&format!(
                "| {format} | {:.0}% ({}/{}) | {:.0}% ({}/{}) | {:.0}% ({}/{}) | {:.1} | {:.0} |\n",
                pct(t.valid, t.replies),
                t.valid,
                t.replies,
                pct(t.correct, t.replies),
                t.correct,
                t.replies,
                pct(t.arguments, t.expecting),
                t.arguments,
                t.expecting,
                t.tokens as f64 / t.replies.max(1) as f64,
                t.ms / t.replies.max(1) as f64,
            ));
        }
    }
    print!("{table}");
    if let Some(out) = &args.out {
        std::fs::write(out, &table)?;
    }
    Ok(())
}
