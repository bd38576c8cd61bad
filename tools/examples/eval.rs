//! Tool-calling evaluation: on the fixture prompts (`fixtures/tools/eval.jsonl`, each with
//! the tool a correct call names) and tools (`fixtures/tools/tools.json`), the rate of valid
//! calls and of correct tool names for multi-stage, single-grammar and unconstrained
//! decoding, with the same model, prompt and sampling (greedy unless `--temperature`).
//!
//! ```sh
//! cargo run --release -p stencil-tools --example eval -- --out tools-eval.md
//! ```
//!
//! Options: `--model FILE` (default: SmolLM2-135M-Instruct from the model cache),
//! `--prompts FILE`, `--tools FILE`, `--limit N` (first N prompts), `--max-tokens N`
//! (per generation, default 256), `--temperature T` and `--seed S` (default 0 and 7),
//! `--threads N` (default 1), `--verbose` (every reply on stderr), `--out FILE` (the table
//! is also written there).
//!
//! A reply counts as a **valid call** when it holds at least one call, every call names a
//! tool of the set, its arguments validate against that tool's schema and the reply obeys
//! the tool choice; **correct tool** when, moreover, its first call names the expected tool.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::Value;
use stencil_runtime::sampling::SamplingParams;
use stencil_runtime::{ChatMessage, Model, ModelOptions, SessionOptions};
use stencil_test_support::fixtures::{model_path, SMOLLM2_MODEL_FILE};
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
    text: usize,
    tokens: usize,
    ms: f64,
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
        let prompt = v["prompt"].as_str().ok_or("each line needs \"prompt\"")?.to_string();
        let tool = v["tool"].as_str().ok_or("each line needs \"tool\"")?.to_string();
        prompts.push((prompt, tool));
    }
    if let Some(n) = args.limit {
        prompts.truncate(n);
    }
    let path = args.model.clone().unwrap_or_else(|| model_path(SMOLLM2_MODEL_FILE));
    let model = Model::load(&path, &ModelOptions::default())?;
    let mut session = model.session(&SessionOptions { n_threads: args.threads, ..Default::default() })?;
    let caller = ToolCaller::new(&model, tools);
    let params = SamplingParams {
        temperature: args.temperature,
        seed: Some(args.seed),
        max_tokens: args.max_tokens,
        ..SamplingParams::greedy()
    };

    // Warm-up (untimed): the shared system prompt goes into the KV cache, so that no row
    // pays for its prefill.
    if let Some((prompt, _)) = prompts.first() {
        let warm = CallOptions { params: params.clone(), ..Default::default() };
        let _ = caller.call(&mut session, &[ChatMessage::user(prompt.clone())], &warm);
    }
    let mut rows = Vec::new();
    for choice in [ToolChoice::Required, ToolChoice::Auto] {
        for strategy in [Strategy::MultiStage, Strategy::SingleGrammar, Strategy::Unconstrained] {
            let options =
                CallOptions { choice: choice.clone(), strategy, params: params.clone(), ..Default::default() };
            let mut tally = Tally::default();
            for (prompt, expected) in &prompts {
                let start = Instant::now();
                let result = caller.call(&mut session, &[ChatMessage::user(prompt.clone())], &options);
                tally.ms += start.elapsed().as_secs_f64() * 1e3;
                tally.replies += 1;
                let (text, verdict) = match &result {
                    Ok(turn) => {
                        tally.tokens += turn.generated_tokens();
                        if turn.calls.is_empty() {
                            tally.text += 1;
                            (turn.text.clone(), "text".to_string())
                        } else {
                            tally.valid += 1;
                            let right = turn.calls[0].name == *expected;
                            tally.correct += usize::from(right);
                            (turn.text.clone(), if right { "correct".into() } else { "wrong tool".into() })
                        }
                    }
                    Err(ToolError::InvalidCall { error, text, records, .. }) => {
                        tally.tokens += records.iter().map(|r| r.generated_tokens).sum::<usize>();
                        (text.clone(), format!("invalid: {error}"))
                    }
                    Err(e) => return Err(e.to_string().into()),
                };
                if args.verbose {
                    eprintln!("[{strategy} {choice}] {prompt}\n  -> {verdict}\n  {text:?}");
                }
            }
            rows.push((strategy, choice.clone(), tally));
        }
    }

    let pct = |n: usize, d: usize| if d == 0 { 0.0 } else { 100.0 * n as f64 / d as f64 };
    let mut table = format!(
        "Tool calling on {} prompts over {} tools ({}), model {}, {}, max {} tokens per generation.\n\n",
        prompts.len(),
        caller.tools().len(),
        args.prompts.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
        model.info().name,
        if args.temperature == 0.0 {
            "greedy".to_string()
        } else {
            format!("temperature {} seed {}", args.temperature, args.seed)
        },
        args.max_tokens,
    );
    table
        .push_str("| decoding | tool_choice | valid calls | correct tool | text replies | tokens/reply | ms/reply |\n");
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
    print!("{table}");
    if let Some(out) = &args.out {
        std::fs::write(out, &table)?;
    }
    Ok(())
}
