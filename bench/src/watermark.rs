//! The watermark on llama.cpp (issue 26): how often the detector finds it with the key (true
//! positives) and finds one in text made without it (false positives), on both models, at two
//! temperatures, free text and under a JSON schema.
//!
//! Every text of a cell (one per prompt of `fixtures/watermark/prompts.txt`) is decoded
//! together in one [`Decoder`](stencil_runtime::decode::Decoder); the watermarked and the
//! plain runs use the same seeds.
//! Each text is tested twice with the key: as `stencil watermark detect` sees it (the text
//! re-tokenized by the model's tokenizer, every token scored), and with the generation's own
//! tokens, leaving out those that had no choice (forced by the grammar, or the single allowed
//! token of a step: log-probability `None` or exactly 0), which carry no signal.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use stencil_mask::CompiledGrammar;
use stencil_runtime::sampling::{Detection, SamplingParams, WatermarkKey, WatermarkParams};
use stencil_runtime::{GenerateRequest, Generation, Model, ModelOptions, Prompt, Session, SessionOptions};
use stencil_test_support::fixtures::{model_path, GEMMA3_MODEL_FILE, SMOLLM2_MODEL_FILE};

/// Settings of the watermark part.
pub struct WatermarkArgs {
    /// Prompts used (from the start of the file; `None`: all).
    pub prompts: Option<usize>,
    /// Tokens per text (free text ignores EOS; a schema output may end sooner).
    pub max_tokens: u32,
    pub temperatures: Vec<f32>,
    pub seed: u64,
    /// The detection threshold on z.
    pub threshold: f64,
    /// llama.cpp threads.
    pub threads: u32,
}

impl Default for WatermarkArgs {
    fn default() -> Self {
        WatermarkArgs {
            prompts: None,
            max_tokens: 200,
            temperatures: vec![1.0, 0.7],
            seed: 1,
            threshold: 4.0,
            threads: 1,
        }
    }
}

const MODELS: [(&str, &str); 2] = [("SmolLM2-135M", SMOLLM2_MODEL_FILE), ("Gemma 3 270M", GEMMA3_MODEL_FILE)];
const KEY: &str = "stencil benchmark key";

/// One cell: the texts of one model, temperature, constraint and watermark setting.
struct Cell {
    model: &'static str,
    temperature: f32,
    schema: bool,
    watermarked: bool,
    texts: usize,
    tokens: usize,
    /// Tokens with no choice (forced, or a single allowed token).
    no_choice: usize,
    /// Schema runs: outputs that ended naturally (EOS or the grammar's end, not the cap),
    /// and those of them that validate.
    complete: usize,
    valid: usize,
    /// Tested as the CLI does: the text re-tokenized.
    text: Tally,
    /// The generation's tokens, those with no choice left out.
    sampled: Tally,
    seconds: f64,
}

#[derive(Default)]
struct Tally {
    scored: usize,
    green_fraction_sum: f64,
    z_sum: f64,
    detected: usize,
}

impl Tally {
    fn add(&mut self, d: &Detection, threshold: f64) {
        self.scored += d.scored;
        self.green_fraction_sum += d.green_fraction;
        self.z_sum += d.z;
        self.detected += usize::from(d.is_watermarked(threshold));
    }
}

/// Runs the part; returns its Markdown section.
pub fn run(repo: &Path, args: &WatermarkArgs) -> String {
    let t0 = Instant::now();
    let mut prompts: Vec<String> = std::fs::read_to_string(repo.join("fixtures/watermark/prompts.txt"))
        .expect("fixtures/watermark/prompts.txt")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    if let Some(k) = args.prompts {
        prompts.truncate(k);
    }
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo.join("fixtures/watermark/essay.json")).expect("fixtures/watermark/essay.json"),
    )
    .expect("JSON");
    let watermark = WatermarkParams::new(WatermarkKey::new(KEY));
    let greenlist = watermark.greenlist().expect("valid watermark");
    let mut cells = Vec::new();
    for (label, file) in MODELS {
        eprintln!("watermark: {label}");
        let model = Model::load(model_path(file), &ModelOptions::default()).expect("model loads");
        let compiled = stencil_schema::compile_schema(&schema, &Default::default()).expect("schema compiles");
        let grammar = CompiledGrammar::new(&compiled.grammar, model.vocab().clone()).expect("grammar compiles");
        let options = SessionOptions {
            n_ctx: (prompts.len() * (args.max_tokens as usize + 96)).max(512) as u32,
            n_threads: args.threads,
            n_seq_max: prompts.len() as u32,
            ..Default::default()
        };
        let mut session = model.session(&options).expect("session");
        for &temperature in &args.temperatures {
            for schema_on in [false, true] {
                for watermarked in [true, false] {
                    eprintln!("watermark: {label}, T = {temperature}, schema {schema_on}, watermark {watermarked}");
                    let params = SamplingParams {
                        temperature,
                        top_k: 0,
                        max_tokens: args.max_tokens,
                        ignore_eos: !schema_on,
                        seed: Some(args.seed),
                        watermark: watermarked.then(|| watermark.clone()),
                        ..SamplingParams::default()
                    };
                    let requests: Vec<GenerateRequest> = prompts
                        .iter()
                        .map(|p| {
                            let text = if schema_on {
                                format!("{p} Answer in JSON with a title and paragraphs.")
                            } else {
                                p.clone()
                            };
                            let r =
                                GenerateRequest::new(Prompt::user_or_text(&model, text)).with_params(params.clone());
                            if schema_on {
                                r.with_grammar(Arc::clone(&grammar), "json-schema")
                            } else {
                                r
                            }
                        })
                        .collect();
                    let start = Instant::now();
                    let outputs = generate_all(&mut session, &requests);
                    let mut cell = Cell {
                        model: label,
                        temperature,
                        schema: schema_on,
                        watermarked,
                        texts: outputs.len(),
                        tokens: 0,
                        no_choice: 0,
                        complete: 0,
                        valid: 0,
                        text: Tally::default(),
                        sampled: Tally::default(),
                        seconds: start.elapsed().as_secs_f64(),
                    };
                    for g in &outputs {
                        let no_choice = |i: usize| g.logprobs[i].is_none_or(|l| l == 0.0);
                        cell.tokens += g.tokens.len();
                        cell.no_choice += (0..g.tokens.len()).filter(|&i| no_choice(i)).count();
                        let retokenized = text_tokens(&model, &g.text);
                        cell.text.add(&greenlist.detect(&retokenized), args.threshold);
                        cell.sampled.add(&greenlist.detect_where(&g.tokens, |i| !no_choice(i)), args.threshold);
                        if schema_on && g.stop_reason.is_natural() {
                            cell.complete += 1;
                            let valid = serde_json::from_str::<Value>(&g.text)
                                .is_ok_and(|v| stencil_schema::validate(&schema, &v, &Default::default()).is_ok());
                            cell.valid += usize::from(valid);
                        }
                    }
                    cells.push(cell);
                }
            }
        }
    }
    render(&cells, prompts.len(), args, t0.elapsed().as_secs_f64())
}

/// Every request decoded together; the generations in request order.
fn generate_all(session: &mut Session<'_>, requests: &[GenerateRequest]) -> Vec<Generation> {
    session.reset();
    let mut batch = session.decoder();
    let mut done: Vec<Option<Generation>> = requests.iter().map(|_| None).collect();
    let mut keep = |finished: Vec<(usize, stencil_runtime::Result<Generation>)>| {
        for (handle, result) in finished {
            done[handle] = Some(result.expect("generation"));
        }
    };
    for request in requests {
        batch.add(request).expect("add");
        keep(batch.take_finished(|_, _| {}));
    }
    while !batch.is_idle() {
        keep(batch.step(|_, _| {}).expect("step"));
    }
    drop(batch);
    done.into_iter().map(|g| g.expect("every text finishes")).collect()
}

/// `text`'s tokens by the model's tokenizer, without BOS (what the detector scores).
fn text_tokens(model: &Model, text: &str) -> Vec<u32> {
    model.llama().vocab().tokenize(text.as_bytes(), false, false).into_iter().map(|t| t.0 as u32).collect()
}

fn render(cells: &[Cell], prompts: usize, args: &WatermarkArgs, seconds: f64) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{}: true and false positives on both models\n", crate::WATERMARK_TITLE);
    let _ = writeln!(
        o,
        "Issue 26. The greenlist watermark (`stencil_sampling::watermark`; γ 0.25, δ 2, context width 1, \
         left-hash) on {prompts} prompts of `fixtures/watermark/prompts.txt`, one text each, {max} tokens \
         (free text ignores EOS; under `fixtures/watermark/essay.json` an output may end sooner), plain \
         multinomial sampling (top-k off) at each temperature, seed {seed}, every text of a row decoded \
         together. *Watermark on*: generated with the key; *off*: the same requests and seeds without \
         it, tested with the key (false positives). Detected = z ≥ {threshold}. Two tests per text: \
         *as text*, what `stencil watermark detect` does (the text re-tokenized by the model's tokenizer, \
         every token scored, repeats once); *sampled only*, the generation's own tokens with those that \
         had no choice left out (forced by the grammar, or a step's single allowed token: the \
         *no choice* column). Valid / complete: of the schema outputs that ended by the grammar (not \
         at the token cap), those that validate.\n",
        max = args.max_tokens,
        seed = args.seed,
        threshold = args.threshold,
    );
    let _ = writeln!(
        o,
        "| model | T | constraint | watermark | texts | tokens/text | no choice | green fraction (as text) | mean z as text | detected as text | mean z sampled only | detected sampled only | valid / complete | s |"
    );
    let _ = writeln!(o, "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for c in cells {
        let n = c.texts.max(1) as f64;
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {:.0} | {:.1} % | {:.3} | {:.2} | {}/{} | {:.2} | {}/{} | {} | {:.0} |",
            c.model,
            c.temperature,
            if c.schema { "JSON Schema" } else { "none" },
            if c.watermarked { "on" } else { "off" },
            c.texts,
            c.tokens as f64 / n,
            100.0 * c.no_choice as f64 / c.tokens.max(1) as f64,
            c.text.green_fraction_sum / n,
            c.text.z_sum / n,
            c.text.detected,
            c.texts,
            c.sampled.z_sum / n,
            c.sampled.detected,
            c.texts,
            if c.schema { format!("{}/{}", c.valid, c.complete) } else { "–".into() },
            c.seconds,
        );
    }
    let _ = writeln!(o, "\nTrue-positive / false-positive rate (as text; sampled only):\n");
    for c in cells.iter().filter(|c| c.watermarked) {
        let off = cells
            .iter()
            .find(|d| !d.watermarked && d.model == c.model && d.temperature == c.temperature && d.schema == c.schema);
        let rate = |k: usize, n: usize| format!("{:.0} %", 100.0 * k as f64 / n.max(1) as f64);
        let _ = writeln!(
            o,
            "- {}, T {}, {}: TPR {} ; {}, FPR {} ; {}",
            c.model,
            c.temperature,
            if c.schema { "JSON Schema" } else { "free text" },
            rate(c.text.detected, c.texts),
            rate(c.sampled.detected, c.texts),
            off.map_or("–".into(), |d| rate(d.text.detected, d.texts)),
            off.map_or("–".into(), |d| rate(d.sampled.detected, d.texts)),
        );
    }
    let _ = writeln!(o, "\nThe part took {seconds:.0} s.\n");
    o
}
