//! Decode throughput on llama.cpp with both real models: free greedy decoding, Stencil's
//! JSON Schema masks (with and without fast-forward), and llama.cpp's own GBNF grammar
//! sampler on the same schema converted to GBNF (`stencil convert`), in one run.
//! Speculative decoding has its own part (`speculation.rs`).

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use stencil_mask::CompiledGrammar;
use stencil_runtime::sampling::SamplingParams;
use stencil_runtime::{GenerateRequest, Model, ModelOptions, Session, SessionOptions};
use stencil_test_support::fixtures::{model_path, GEMMA3_MODEL_FILE, SMOLLM2_MODEL_FILE};
use stencil_test_support::models::extraction_prompt;

/// Settings of the decode part.
pub struct DecodeArgs {
    pub repetitions: usize,
    pub free_tokens: u32,
    pub schema: &'static str,
}

impl Default for DecodeArgs {
    fn default() -> Self {
        DecodeArgs { repetitions: 3, free_tokens: 64, schema: "person" }
    }
}

/// One way of decoding, measured.
struct Row {
    model: &'static str,
    mode: &'static str,
    tokens: usize,
    passes: usize,
    /// Median over repetitions.
    tokens_per_s: f64,
    ms_per_pass: f64,
    mask_ms_per_token: Option<f64>,
    mask_wait_ms_per_token: Option<f64>,
    valid: Option<bool>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Runs the part; returns its Markdown section.
pub fn run(repo: &Path, args: &DecodeArgs) -> String {
    let schema_path = repo.join(format!("fixtures/schemas/{}.json", args.schema));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&schema_path).expect("schema")).expect("JSON");
    let gbnf = convert_to_gbnf(repo, &schema_path);
    let task = std::fs::read_to_string(repo.join("fixtures/prompts/person.txt")).expect("prompt");
    let compiled = stencil_schema::compile_schema(&schema, &Default::default()).expect("schema compiles");
    let mut rows = Vec::new();
    for (label, file) in [("SmolLM2-135M", SMOLLM2_MODEL_FILE), ("Gemma 3 270M", GEMMA3_MODEL_FILE)] {
        eprintln!("decode: {label}");
        let model = Model::load(model_path(file), &ModelOptions::default()).expect("model loads");
        let grammar = CompiledGrammar::new(&compiled.grammar, model.vocab().clone()).expect("grammar compiles");
        grammar.warm_up();
        let prompt = extraction_prompt(&model, task.clone());
        let options = SessionOptions { n_ctx: 2048, n_threads: 1, ..Default::default() };
        let mut session = model.session(&options).expect("session");
        let free = SamplingParams { max_tokens: args.free_tokens, ignore_eos: true, ..SamplingParams::greedy() };
        let constrained = SamplingParams { max_tokens: 400, ..SamplingParams::greedy() };
        let validates = |text: &str| {
            serde_json::from_str::<Value>(text)
                .ok()
                .is_some_and(|v| stencil_schema::validate(&schema, &v, &Default::default()).is_ok())
        };
        // Warm-up: page the weights in.
        let _ = session.generate(&GenerateRequest::new(prompt.clone()).with_params(free.clone()), |_| {});

        let stencil_row = |session: &mut Session<'_>, mode: &'static str, request: GenerateRequest, check: bool| {
            let mut runs = Vec::new();
            for _ in 0..args.repetitions {
                session.reset();
                runs.push(session.generate(&request, |_| {}).expect("generation"));
            }
            let last = runs.last().expect("a run");
            let per_token = |f: fn(&stencil_runtime::telemetry::Timings) -> f64| {
                median(runs.iter().map(|r| f(&r.record.timings) / r.tokens.len().max(1) as f64).collect())
            };
            let constrained = request.grammar.is_some();
            Row {
                model: label,
                mode,
                tokens: last.tokens.len(),
                passes: last.record.forward_passes,
                tokens_per_s: median(runs.iter().map(|r| r.record.timings.tokens_per_second).collect()),
                ms_per_pass: median(
                    runs.iter().map(|r| r.record.timings.decode_ms / r.record.forward_passes.max(1) as f64).collect(),
                ),
                mask_ms_per_token: constrained.then(|| per_token(|t| t.mask_ms)),
                mask_wait_ms_per_token: constrained.then(|| per_token(|t| t.mask_wait_ms)),
                valid: check.then(|| validates(&last.text)),
            }
        };
        rows.push(stencil_row(
            &mut session,
            "free (Stencil runtime, no grammar)",
            GenerateRequest::new(prompt.clone()).with_params(free),
            false,
        ));
        let mut request =
            GenerateRequest::new(prompt.clone()).with_params(constrained).with_grammar(grammar.clone(), "json-schema");
        request.fast_forward = false;
        rows.push(stencil_row(&mut session, "Stencil JSON Schema mask", request.clone(), true));
        request.fast_forward = true;
        rows.push(stencil_row(&mut session, "Stencil JSON Schema mask + fast-forward", request.clone(), true));

        for (mode, g, max) in [
            ("llama.cpp greedy, no grammar", None, args.free_tokens as usize),
            ("llama.cpp GBNF sampler (same schema as GBNF)", Some(gbnf.as_str()), 400),
        ] {
            let mut runs = Vec::new();
            for _ in 0..args.repetitions {
                session.reset();
                runs.push(session.generate_llama_grammar(&prompt, g, max).expect("llama.cpp run"));
            }
            let last = runs.last().expect("a run");
            rows.push(Row {
                model: label,
                mode,
                tokens: last.tokens.len(),
                passes: last.tokens.len(),
                tokens_per_s: median(
                    runs.iter().map(|r| r.tokens.len() as f64 / r.decode_time.as_secs_f64().max(1e-9)).collect(),
                ),
                ms_per_pass: median(
                    runs.iter().map(|r| r.decode_time.as_secs_f64() * 1e3 / r.tokens.len().max(1) as f64).collect(),
                ),
                mask_ms_per_token: g.map(|_| {
                    median(
                        runs.iter().map(|r| r.sample_time.as_secs_f64() * 1e3 / r.tokens.len().max(1) as f64).collect(),
                    )
                }),
                mask_wait_ms_per_token: None,
                valid: g.map(|_| validates(&last.text)),
            });
        }
    }
    render(&rows, args)
}

/// `stencil convert --schema PATH --whitespace flexible` from the release CLI.
fn convert_to_gbnf(repo: &Path, schema: &Path) -> String {
    let exe = repo.join("target/release/stencil");
    let out = Command::new(&exe)
        .arg("convert")
        .arg("--schema")
        .arg(schema)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/bench.sh builds it first)", exe.display()));
    assert!(out.status.success(), "stencil convert failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8 GBNF")
}

fn render(rows: &[Row], args: &DecodeArgs) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "## Decoding on llama.cpp: free vs Stencil's masks vs llama.cpp's grammar sampler\n");
    let _ = writeln!(
        o,
        "Greedy decoding of `fixtures/prompts/person.txt` constrained by `fixtures/schemas/{}.json` \
         (llama.cpp's sampler gets the same schema as GBNF from `stencil convert`), llama.cpp on one \
         thread (the mask is computed on a second thread during the forward pass), CPU, median of {} runs; \
         free decoding runs {} tokens past EOS. tokens/s counts every generated token (forced ones \
         included) over the decode time; \"ratio\" is tokens/s over free decoding with the Stencil \
         runtime on the same model. Mask ms/token: Stencil's mask computation (mostly overlapped) / \
         the part the decode loop waited for; for llama.cpp, the time in its sampler chain. \
         Speculative decoding: the next section.\n",
        args.schema, args.repetitions, args.free_tokens
    );
    let _ = writeln!(o, "| model | decoding | tokens | forward passes | tokens/s | ratio | ms/forward pass | mask ms/token (wait) | output validates |");
    let _ = writeln!(o, "|---|---|---:|---:|---:|---:|---:|---:|---|");
    for r in rows {
        let free =
            rows.iter().find(|f| f.model == r.model && f.mode.starts_with("free")).map_or(f64::NAN, |f| f.tokens_per_s);
        let mask = match (r.mask_ms_per_token, r.mask_wait_ms_per_token) {
            (Some(m), Some(w)) => format!("{m:.3} ({w:.3})"),
            (Some(m), None) => format!("{m:.3}"),
            _ => "–".into(),
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {:.1} | {:.2}× | {:.1} | {} | {} |",
            r.model,
            r.mode,
            r.tokens,
            r.passes,
            r.tokens_per_s,
            r.tokens_per_s / free,
            r.ms_per_pass,
            mask,
            r.valid.map_or("–", |v| if v { "yes" } else { "NO" })
        );
    }
    let _ = writeln!(o);
    o
}
