//! Inference-time scaling (issue 22) on llama.cpp: throughput of N samples decoded together
//! ([`Session::generate_n`], one batch per step) against N sequential generations with the
//! same seeds, on both models; then accuracy of greedy decoding against self-consistency
//! ([`Session::self_consistency`], a vote on `/answer`) on `fixtures/scaling/arithmetic.jsonl`.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use stencil_mask::CompiledGrammar;
use stencil_runtime::decode::sample_seed;
use stencil_runtime::sampling::SamplingParams;
use stencil_runtime::select::{Extractor, Normalizer, SelfConsistencyParams};
use stencil_runtime::{GenerateRequest, Generation, Model, ModelOptions, Session, SessionOptions, StopReason};
use stencil_test_support::fixtures::{model_path, GEMMA3_MODEL_FILE, SMOLLM2_MODEL_FILE};
use stencil_test_support::models::extraction_prompt;

/// Settings of the scaling part.
pub struct ScalingArgs {
    /// Runs per throughput measurement (the median is reported).
    pub repetitions: usize,
    /// Samples decoded together.
    pub ns: Vec<usize>,
    /// Tokens per free-text sample (`ignore_eos`).
    pub free_tokens: u32,
    /// Cap per schema-constrained sample.
    pub schema_tokens: u32,
    /// Sampling of every sampled run (throughput, self-consistency).
    pub temperature: f32,
    pub top_k: u32,
    pub seed: u64,
    /// Questions of the task set used (from the start; `None`: all).
    pub questions: Option<usize>,
    /// Self-consistency sample counts.
    pub votes: Vec<usize>,
    /// Cap per answer.
    pub answer_tokens: u32,
}

impl Default for ScalingArgs {
    fn default() -> Self {
        ScalingArgs {
            repetitions: 1,
            ns: vec![1, 4, 8],
            free_tokens: 64,
            schema_tokens: 128,
            temperature: 0.8,
            top_k: 40,
            seed: 1,
            questions: None,
            votes: vec![5, 10],
            answer_tokens: 200,
        }
    }
}

impl ScalingArgs {
    fn sampling(&self) -> SamplingParams {
        SamplingParams {
            temperature: self.temperature,
            top_k: self.top_k,
            seed: Some(self.seed),
            ..SamplingParams::default()
        }
    }
}

const MODELS: [(&str, &str); 2] = [("SmolLM2-135M", SMOLLM2_MODEL_FILE), ("Gemma 3 270M", GEMMA3_MODEL_FILE)];

/// One throughput row: N samples of one request, together and one after another.
struct Throughput {
    model: &'static str,
    workload: &'static str,
    n: usize,
    /// Tokens the N samples generated, each way (every run of a way decodes the same).
    batched_tokens: usize,
    sequential_tokens: usize,
    /// Median seconds of the whole run, and of its prompt evaluation(s).
    batched_s: f64,
    sequential_s: f64,
    batched_prefill_s: f64,
    sequential_prefill_s: f64,
    /// Samples whose tokens and stop reason equal their sequential twin's, over all runs.
    identical: usize,
    compared: usize,
    /// Samples that ended naturally (EOS or grammar complete), batched, last run.
    complete: usize,
}

impl Throughput {
    fn batched_tps(&self) -> f64 {
        self.batched_tokens as f64 / self.batched_s.max(1e-9)
    }
    fn sequential_tps(&self) -> f64 {
        self.sequential_tokens as f64 / self.sequential_s.max(1e-9)
    }
    fn ratio(&self) -> f64 {
        self.batched_tps() / self.sequential_tps().max(1e-9)
    }
    /// The ratio with every prompt evaluation left out of both times (what a sequential
    /// loop that reused the prompt's KV cells would come close to).
    fn decode_ratio(&self) -> f64 {
        let b = self.batched_tokens as f64 / (self.batched_s - self.batched_prefill_s).max(1e-9);
        let s = self.sequential_tokens as f64 / (self.sequential_s - self.sequential_prefill_s).max(1e-9);
        b / s.max(1e-9)
    }
}

/// One decoding method on the task set.
#[derive(Default)]
struct Accuracy {
    method: String,
    questions: usize,
    correct: usize,
    /// Questions where some counted sample gave the right answer.
    any_correct: usize,
    /// Questions without an answer (no sample voted, or greedy gave none).
    no_answer: usize,
    /// Samples cut by `max_tokens` (their JSON incomplete: no vote).
    cut: usize,
    samples_started: usize,
    samples_finished: usize,
    votes_counted: usize,
    stopped_early: usize,
    agreement_sum: f64,
    tokens: usize,
    ms: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn load_schema(repo: &Path, name: &str) -> Value {
    let path = repo.join(format!("fixtures/schemas/{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).expect("schema")).expect("JSON")
}

fn grammar(model: &Model, schema: &Value) -> Arc<CompiledGrammar> {
    let compiled = stencil_schema::compile_schema(schema, &Default::default()).expect("schema compiles");
    let g = CompiledGrammar::new(&compiled.grammar, model.vocab().clone()).expect("grammar compiles");
    g.warm_up();
    g
}

/// Runs the part; returns its Markdown section.
pub fn run(repo: &Path, args: &ScalingArgs) -> String {
    let t0 = Instant::now();
    let person = load_schema(repo, "person");
    let task = std::fs::read_to_string(repo.join("fixtures/prompts/person.txt")).expect("prompt");
    let max_n = args.ns.iter().copied().max().unwrap_or(1);
    let mut rows = Vec::new();
    let mut smollm2 = None;
    for (label, file) in MODELS {
        eprintln!("scaling: {label}");
        let model = Model::load(model_path(file), &ModelOptions::default()).expect("model loads");
        let prompt = extraction_prompt(&model, task.clone());
        let sampled = |max_tokens: u32| SamplingParams { max_tokens, ..args.sampling() };
        let free = GenerateRequest::new(prompt.clone())
            .with_params(SamplingParams { ignore_eos: true, ..sampled(args.free_tokens) });
        let constrained = GenerateRequest::new(prompt)
            .with_params(sampled(args.schema_tokens))
            .with_grammar(grammar(&model, &person), "json-schema");
        {
            let session = |n_seq_max: usize| {
                let options =
                    SessionOptions { n_ctx: 2048, n_threads: 1, n_seq_max: n_seq_max as u32, ..Default::default() };
                model.session(&options).expect("session")
            };
            let mut together = session(max_n);
            let mut alone = session(1);
            // Warm-up: page the weights in, size both sessions' buffers.
            let mut warm_up = free.clone();
            warm_up.params.max_tokens = 8;
            let _ = together.generate_n(&warm_up, max_n, |_, _| {});
            let _ = alone.generate(&warm_up, |_| {});
            for (workload, request) in [("free text", &free), ("JSON Schema", &constrained)] {
                for &n in &args.ns {
                    eprintln!("scaling: {label}, {workload}, N = {n}");
                    rows.push(throughput(&mut together, &mut alone, label, workload, request, n, args.repetitions));
                }
            }
        }
        if smollm2.is_none() {
            smollm2 = Some(model);
        }
    }
    let throughput_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let (accuracy, n_questions) = accuracy(repo, smollm2.as_ref().expect("SmolLM2 loaded"), args);
    render(&rows, &accuracy, n_questions, args, throughput_s, t1.elapsed().as_secs_f64())
}

/// N samples of `request` with `generate_n` on `together`, and N `generate` calls with the
/// samples' seeds on `alone`, alternating, `reps` times each. Every generation starts from an
/// empty KV cache: the batch evaluates the prompt once for its N samples, the sequential
/// generations once each (N independent requests; the prompt cache would otherwise serve
/// generations 2..N, and re-evaluating the prompt's last token alone does not give the
/// full prefill's logits bit for bit).
fn throughput(
    together: &mut Session<'_>,
    alone: &mut Session<'_>,
    model: &'static str,
    workload: &'static str,
    request: &GenerateRequest,
    n: usize,
    reps: usize,
) -> Throughput {
    let seed = request.params.seed.expect("a seeded request");
    let (mut batched_s, mut sequential_s) = (Vec::new(), Vec::new());
    let (mut batched_prefill, mut sequential_prefill) = (Vec::new(), Vec::new());
    let (mut identical, mut compared) = (0, 0);
    let (mut last_batch, mut last_sequential): (Vec<Generation>, Vec<Generation>) = (Vec::new(), Vec::new());
    for _ in 0..reps.max(1) {
        together.reset();
        let start = Instant::now();
        let batch = together.generate_n(request, n, |_, _| {}).expect("generate_n");
        batched_s.push(start.elapsed().as_secs_f64());
        batched_prefill.push(batch.first().map_or(0.0, |g| g.record.timings.prefill_ms / 1e3));

        let start = Instant::now();
        let sequential: Vec<Generation> = (0..n)
            .map(|i| {
                let mut one = request.clone();
                one.params.seed = Some(sample_seed(seed, i));
                alone.reset();
                alone.generate(&one, |_| {}).expect("generate")
            })
            .collect();
        sequential_s.push(start.elapsed().as_secs_f64());
        sequential_prefill.push(sequential.iter().map(|g| g.record.timings.prefill_ms / 1e3).sum());

        for (b, s) in batch.iter().zip(&sequential) {
            compared += 1;
            identical += (b.tokens == s.tokens && b.stop_reason == s.stop_reason) as usize;
        }
        (last_batch, last_sequential) = (batch, sequential);
    }
    let tokens = |gs: &[Generation]| gs.iter().map(|g| g.tokens.len()).sum();
    Throughput {
        model,
        workload,
        n,
        batched_tokens: tokens(&last_batch),
        sequential_tokens: tokens(&last_sequential),
        batched_s: median(batched_s),
        sequential_s: median(sequential_s),
        batched_prefill_s: median(batched_prefill),
        sequential_prefill_s: median(sequential_prefill),
        identical,
        compared,
        complete: last_batch.iter().filter(|g| g.stop_reason.is_natural()).count(),
    }
}

/// Greedy against self-consistency on the task set, SmolLM2.
fn accuracy(repo: &Path, model: &Model, args: &ScalingArgs) -> (Vec<Accuracy>, usize) {
    let set = std::fs::read_to_string(repo.join("fixtures/scaling/arithmetic.jsonl")).expect("task set");
    let mut questions: Vec<(String, i64)> = set
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("a JSON line");
            (v["question"].as_str().expect("question").to_string(), v["answer"].as_i64().expect("integer answer"))
        })
        .collect();
    let total = questions.len();
    if let Some(k) = args.questions {
        questions.truncate(k);
    }
    let schema = load_schema(repo, "answer");
    let g = grammar(model, &schema);
    let max_votes = args.votes.iter().copied().max().unwrap_or(1);
    let prompt_room = 512;
    let n_ctx = (prompt_room + max_votes * args.answer_tokens as usize) as u32;
    let options = SessionOptions { n_ctx, n_threads: 1, n_seq_max: max_votes as u32, ..Default::default() };
    let mut session = model.session(&options).expect("session");
    let extractor = Extractor::json_pointer("/answer").expect("pointer");
    let normalizer = Normalizer::default();
    let mut greedy = Accuracy { method: "greedy".into(), ..Default::default() };
    let mut voted: Vec<Accuracy> = args
        .votes
        .iter()
        .map(|&n| Accuracy { method: format!("self-consistency, N = {n}"), ..Default::default() })
        .collect();
    for (qi, (question, answer)) in questions.iter().enumerate() {
        eprintln!("scaling: question {}/{}", qi + 1, questions.len());
        let expected = answer.to_string();
        let prompt =
            extraction_prompt(model, format!("{question} Answer in JSON with your reasoning and the integer answer."));
        let request = GenerateRequest::new(prompt).with_grammar(g.clone(), "json-schema");
        let greedy_request =
            request.clone().with_params(SamplingParams { max_tokens: args.answer_tokens, ..SamplingParams::greedy() });
        let start = Instant::now();
        let out = session.generate(&greedy_request, |_| {}).expect("greedy generation");
        greedy.ms += start.elapsed().as_secs_f64() * 1e3;
        let got = extractor.extract(&out.text).and_then(|a| normalizer.key(&a));
        greedy.questions += 1;
        greedy.correct += (got.as_deref() == Some(expected.as_str())) as usize;
        greedy.any_correct += (got.as_deref() == Some(expected.as_str())) as usize;
        greedy.no_answer += got.is_none() as usize;
        greedy.samples_started += 1;
        greedy.samples_finished += 1;
        greedy.votes_counted += 1;
        greedy.cut += (out.stop_reason == StopReason::Length) as usize;
        greedy.tokens += out.tokens.len();

        let sampled = request.with_params(SamplingParams { max_tokens: args.answer_tokens, ..args.sampling() });
        for (acc, &n) in voted.iter_mut().zip(&args.votes) {
            let params = SelfConsistencyParams { n, extractor: extractor.clone(), normalizer, early_stop: true };
            let run = session.self_consistency(&sampled, &params).expect("self-consistency");
            acc.questions += 1;
            acc.correct += (run.vote.winner.as_deref() == Some(expected.as_str())) as usize;
            acc.any_correct += run.answers.iter().any(|a| a.as_deref() == Some(expected.as_str())) as usize;
            acc.no_answer += run.vote.winner.is_none() as usize;
            acc.samples_started += run.cost.samples;
            acc.samples_finished += run.cost.finished;
            acc.votes_counted += run.vote.samples_used;
            acc.stopped_early += run.vote.stopped_early as usize;
            acc.cut += run.samples.iter().filter(|g| g.stop_reason == StopReason::Length).count();
            acc.agreement_sum += run.vote.agreement;
            acc.tokens += run.cost.tokens;
            acc.ms += run.cost.total_ms;
        }
    }
    let mut all = vec![greedy];
    all.extend(voted);
    (all, total)
}

fn render(
    rows: &[Throughput],
    accuracy: &[Accuracy],
    total_questions: usize,
    args: &ScalingArgs,
    throughput_s: f64,
    accuracy_s: f64,
) -> String {
    let mut o = String::new();
    let sampling = format!("temperature {}, top-k {}", args.temperature, args.top_k);
    let _ = writeln!(o, "{}: N samples decoded together, and self-consistency\n", crate::SCALING_TITLE);
    let _ = writeln!(
        o,
        "Issue 22. `Session::generate_n` decodes N samples of one request in one llama.cpp batch per step \
         (the prompt evaluated once and shared, each sample with its own sampler, seed and matcher); \
         `Session::self_consistency` votes on their answers and cancels the samples still running once \
         the vote is decided. CPU, llama.cpp on one thread (`n_threads: 1`; the masks of all samples are \
         computed on a second thread during each forward pass), unified KV cache. Sample i of a request \
         seeded s is seeded s + i (`sample_seed`). The machine is shared: read the ratios.\n"
    );
    let _ = writeln!(o, "### Throughput: N samples together vs N sequential generations\n");
    let _ = writeln!(
        o,
        "N samples of `fixtures/prompts/person.txt` (SmolLM2: its chat template; Gemma: no template in \
         its GGUF, the text and `JSON:`), {sampling}, seed {seed}, `n_ctx` 2048: decoded together with \
         `generate_n` (*batched*, a session with `n_seq_max` {max_n}) and as N `generate` calls one after \
         another with the same per-sample seeds (*sequential*, a one-sequence session). Workloads: *free \
         text*, no grammar, {free} tokens per sample (`ignore_eos`); *JSON Schema*, constrained by \
         `fixtures/schemas/person.json` (fast-forward on), at most {cap} tokens per sample. tokens/s = \
         the tokens the N samples generated (forced ones included) over the wall time of the whole run, \
         prompt evaluation included for both: every run starts from an empty KV cache, the batch \
         evaluates the prompt once for all its samples, each sequential generation once for itself (N \
         independent requests); the *prefill* columns give that part. {reps}, the two ways alternating; \
         ratio = batched / sequential tokens/s; *decode-only ratio*: the same with the prefill \
         times taken out of both (close to what a sequential loop that reused the prompt's KV cells \
         would give). *Identical*: samples whose tokens and stop reason equal \
         their sequential twin's, over all runs. *Complete*: batched samples that ended by EOS or the \
         grammar (the others reached the token cap).\n",
        seed = args.seed,
        max_n = args.ns.iter().copied().max().unwrap_or(1),
        free = args.free_tokens,
        cap = args.schema_tokens,
        reps = if args.repetitions <= 1 {
            "One run per row".to_string()
        } else {
            format!("Median of {} runs per row", args.repetitions)
        },
    );
    let _ = writeln!(
        o,
        "| model | workload | N | tokens batched / sequential | batched tok/s | sequential tok/s | ratio | decode-only ratio | batched s (prefill) | sequential s (prefill) | identical | complete |"
    );
    let _ = writeln!(o, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} / {} | {:.1} | {:.1} | {:.2}× | {:.2}× | {:.2} ({:.2}) | {:.2} ({:.2}) | {}/{} | {}/{} |",
            r.model,
            r.workload,
            r.n,
            r.batched_tokens,
            r.sequential_tokens,
            r.batched_tps(),
            r.sequential_tps(),
            r.ratio(),
            r.decode_ratio(),
            r.batched_s,
            r.batched_prefill_s,
            r.sequential_s,
            r.sequential_prefill_s,
            r.identical,
            r.compared,
            r.complete,
            r.n
        );
    }
    let _ = writeln!(o);
    let top = args.ns.iter().copied().max().unwrap_or(1);
    let at_top: Vec<&Throughput> = rows.iter().filter(|r| r.n == top).collect();
    let met = at_top.iter().filter(|r| r.ratio() >= 2.0).count();
    let _ = writeln!(
        o,
        "- The goal, at least 2× the sequential throughput at N = {top}: met in {met} of {} rows ({}); \
         decode only: {}.",
        at_top.len(),
        at_top.iter().map(|r| format!("{} {} {:.2}×", r.model, r.workload, r.ratio())).collect::<Vec<_>>().join("; "),
        at_top
            .iter()
            .map(|r| format!("{} {} {:.2}×", r.model, r.workload, r.decode_ratio()))
            .collect::<Vec<_>>()
            .join("; ")
    );
    if args.ns.contains(&1) {
        let ones: Vec<String> = rows.iter().filter(|r| r.n == 1).map(|r| format!("{:.2}×", r.ratio())).collect();
        let _ = writeln!(
            o,
            "- N = 1 runs the same code both ways (`generate` is `generate_n` with one sample): its ratios \
             ({}) show how far one run of a row moves on this machine.",
            ones.join(", ")
        );
    }
    for (model, _) in MODELS {
        let of_model = || rows.iter().filter(|r| r.model == model);
        let (same, all) = of_model().fold((0, 0), |(a, b), r| (a + r.identical, b + r.compared));
        let differ: Vec<String> =
            of_model().filter(|r| r.identical < r.compared).map(|r| format!("{} N = {}", r.workload, r.n)).collect();
        let _ = writeln!(
            o,
            "- {model}: batched samples identical to their sequential generations: {same} of {all}{}.",
            if differ.is_empty() { String::new() } else { format!(" (differing in: {})", differ.join(", ")) }
        );
    }
    if rows.iter().any(|r| r.identical < r.compared) {
        let _ = writeln!(
            o,
            "- Where they differ, the logits do: the same seed then samples other tokens from the first \
             difference on. Gemma's GGUF is Q4_K_M, and llama.cpp's CPU backend repacks Q4_K weights \
             (`ggml-cpu/repack.cpp`): a matrix product over more than three rows runs its GEMM kernel, \
             over one to three rows its GEMV kernel, which round differently. A step of four or more \
             sequences is such a product, a lone sequence's step is not (seen: Gemma identical at N = 3, \
             not at N = 4, in a probe; SmolLM2's Q4_1 weights are not repacked)."
        );
    }
    let _ = writeln!(o, "- {throughput_s:.0} s for the throughput runs (both models).\n");

    let _ = writeln!(o, "### Accuracy: greedy vs self-consistency (SmolLM2-135M)\n");
    let n_q = accuracy.first().map_or(0, |a| a.questions);
    let used = if n_q == total_questions {
        format!("all {n_q} questions")
    } else {
        format!("the first {n_q} of its {total_questions} questions")
    };
    let votes = args.votes.iter().copied().max().unwrap_or(1);
    let _ = writeln!(
        o,
        "`fixtures/scaling/arithmetic.jsonl`, {used} (one- and two-step word problems, integer answers), \
         each asked as the chat message \"{{question}} Answer in JSON with your reasoning and the integer \
         answer.\" and constrained by `fixtures/schemas/answer.json` (`{{\"reasoning\": string, \"answer\": \
         integer}}`), at most {tok} tokens per sample, one session (`n_seq_max` {votes}, its prompt cache \
         on). *Greedy*: one generation at temperature 0. *Self-consistency*: `Session::self_consistency`, \
         N samples at {sampling}, seed {seed} for every question, the vote on `/answer` with the default \
         normalizer, early stop on (the samples still running are cancelled once the leader cannot be \
         overtaken or tied, so the winner is the one the full vote would give). *Correct*: the winner \
         (greedy: its answer) is the expected integer; *any sample right*: some counted vote was (what a \
         perfect selector could reach from those samples); *no answer*: no sample gave a parseable \
         answer; *cut*: samples that reached the token cap (incomplete JSON, no vote). *Samples decoded / \
         votes*: per question, samples decoded to their end (the others were cancelled) and votes \
         counted; *agreement*: the winner's share of the counted answers, mean over questions. Tokens \
         and time: all samples of all questions (cancelled ones up to where they stopped), wall clock.\n",
        tok = args.answer_tokens,
        seed = args.seed,
    );
    let _ = writeln!(
        o,
        "| decoding | correct | any sample right | no answer | cut | samples decoded / votes per question | stopped early | mean agreement | tokens | s | s per question |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, a) in accuracy.iter().enumerate() {
        let q = a.questions.max(1) as f64;
        let pct = |k: usize| format!("{:.0}% ({k}/{})", 100.0 * k as f64 / q, a.questions);
        let (early, agreement) = if i == 0 {
            ("–".to_string(), "–".to_string())
        } else {
            (a.stopped_early.to_string(), format!("{:.2}", a.agreement_sum / q))
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {:.1} / {:.1} | {early} | {agreement} | {} | {:.0} | {:.1} |",
            a.method,
            pct(a.correct),
            pct(a.any_correct),
            a.no_answer,
            a.cut,
            a.samples_finished as f64 / q,
            a.votes_counted as f64 / q,
            a.tokens,
            a.ms / 1e3,
            a.ms / 1e3 / q
        );
    }
    let _ = writeln!(o);
    if let Some(g) = accuracy.first() {
        let lines: Vec<String> = accuracy[1..]
            .iter()
            .map(|a| {
                format!(
                    "{}: {:+} correct over greedy, at {:.1}× its tokens and {:.1}× its time",
                    a.method,
                    a.correct as i64 - g.correct as i64,
                    a.tokens as f64 / g.tokens.max(1) as f64,
                    a.ms / g.ms.max(1e-9)
                )
            })
            .collect();
        let _ = writeln!(o, "- {}.", lines.join("; "));
    }
    let _ = writeln!(o, "- {accuracy_s:.0} s for the accuracy runs.\n");
    o
}
