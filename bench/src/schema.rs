//! JSON Schema side by side: JSONSchemaBench's dev split through Stencil's schema compiler
//! (`stencil_schema`) and llguidance's native JSON Schema compiler, on the same vocabulary.
//!
//! Per schema (the first valid instance of its tests, serialized compactly):
//! 1. compile in each engine (thread CPU time; failures and warnings counted);
//! 2. tokenize the instance with the vocabulary's own tokenizer, add EOS;
//! 3. replay the tokens in each engine, timing only the full-mask call per step: "cold" on
//!    the freshly compiled grammar, "warm" a second replay on the same compiled grammar;
//! 4. record whether each engine accepts the whole instance.
//!
//! Every engine's work on one schema runs in a worker process (this binary with
//! `--schema-worker VOCAB`), under a per-schema time limit and an address-space limit: a
//! schema that stalls or exhausts memory kills only the worker, is counted as a timeout (or
//! crash) for that engine, and the worker is started again.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use llguidance::api::TopLevelGrammar;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use stencil_mask::vocab::Tokenizer;
use stencil_mask::{bitmask, CompiledGrammar, Matcher, Vocabulary};
use stencil_schema::{compile_schema, SchemaOptions};

use crate::timer::{percentile, time, Sample};
use crate::{die, first_line, llg, ms, ratio, summarize, us, Summary};

/// The JSON Schema part's options.
pub struct SchemaArgs {
    /// JSONSchemaBench's dev split: one folder per subset.
    pub corpus: PathBuf,
    /// How the corpus path is shown in the report (never an absolute machine path).
    pub corpus_label: String,
    pub per_subset: usize,
    pub subsets: Option<Vec<String>>,
    /// Per engine and schema (compile + both replays).
    pub timeout: Duration,
    /// Address-space limit of a worker process, GiB (0: none).
    pub mem_gib: u64,
}

impl SchemaArgs {
    pub fn new(repo_root: &Path) -> Self {
        SchemaArgs {
            corpus: repo_root.join("../shared/corpus/jsonschemabench"),
            corpus_label: "../shared/corpus/jsonschemabench".into(),
            per_subset: 25,
            subsets: None,
            timeout: Duration::from_secs(15),
            mem_gib: 8,
        }
    }
}

/// One schema of the sample.
pub struct Case {
    pub subset: String,
    pub file: String,
    pub schema: Value,
    /// The first valid test instance, serde_json's compact form (document key order).
    pub instance: String,
}

pub struct SubsetInfo {
    pub name: String,
    pub files: usize,
    /// Files read to find the sample (in sorted order).
    pub scanned: usize,
    /// Of those, files without a valid instance (or unreadable), skipped.
    pub skipped: usize,
}

/// The sample: per subset (sorted), the first `per_subset` files (sorted by name) that
/// have at least one valid test instance.
pub fn load_cases(a: &SchemaArgs) -> (Vec<Case>, Vec<SubsetInfo>) {
    let mut subsets: Vec<PathBuf> = std::fs::read_dir(&a.corpus)
        .unwrap_or_else(|e| {
            die(&format!(
                "JSONSchemaBench corpus {}: {e} (point --corpus at it, or run only the GBNF part with --parts gbnf)",
                a.corpus_label
            ))
        })
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    subsets.sort();
    let mut cases = Vec::new();
    let mut infos = Vec::new();
    for dir in subsets {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        if a.subsets.as_ref().is_some_and(|s| !s.contains(&name)) {
            continue;
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| die(&format!("{}: {e}", dir.display())))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        let mut info = SubsetInfo { name: name.clone(), files: files.len(), scanned: 0, skipped: 0 };
        let mut taken = 0;
        for p in &files {
            if taken == a.per_subset {
                break;
            }
            info.scanned += 1;
            let doc: Option<Value> = std::fs::read_to_string(p).ok().and_then(|t| serde_json::from_str(&t).ok());
            let Some(mut doc) = doc else {
                info.skipped += 1;
                continue;
            };
            let data = doc["tests"]
                .as_array()
                .and_then(|ts| ts.iter().find(|t| t["valid"].as_bool() == Some(true)))
                .map(|t| t["data"].clone());
            let (Some(data), Some(schema)) = (data, doc.get_mut("schema").map(Value::take)) else {
                info.skipped += 1;
                continue;
            };
            let instance = serde_json::to_string(&data).expect("a JSON value serializes");
            let file = p.file_name().unwrap().to_string_lossy().to_string();
            cases.push(Case { subset: name.clone(), file, schema, instance });
            taken += 1;
        }
        infos.push(info);
    }
    (cases, infos)
}

// ---------------------------------------------------------------------------------------
// The worker process

#[derive(Serialize)]
struct Job<'a> {
    engine: &'a str,
    schema: &'a Value,
    instance: &'a str,
}

#[derive(Serialize, Deserialize)]
struct Ready {
    stencil_setup: [u64; 2],
    llg_setup: [u64; 2],
}

/// What one engine did with one schema.
#[derive(Serialize, Deserialize, Default, Clone)]
pub struct Outcome {
    /// The compile failed (first line of the error).
    pub error: Option<String>,
    /// Keywords or constructs the engine did not enforce (lenient mode).
    pub warnings: usize,
    pub first_warning: Option<String>,
    /// Compile time [CPU, wall] ns.
    pub compile: [u64; 2],
    /// Stencil: CPU ns of schema → grammar IR and of IR → automaton.
    pub compile_split: Option<[u64; 2]>,
    /// Tokens of the instance (EOS not counted); `None`: the tokenizer cannot spell it.
    pub tokens: Option<usize>,
    pub tokenize_error: Option<String>,
    /// Every token of the instance and then EOS accepted.
    pub accepted: bool,
    pub reject: Option<String>,
    /// Where in the JSON text the refused byte is (see [`json_context`]).
    pub reject_where: Option<String>,
    /// Per-step mask times [CPU, wall] ns.
    pub cold: Vec<[u64; 2]>,
    pub warm: Vec<[u64; 2]>,
}

fn vocab_by_name(name: &str) -> Option<(&'static str, Arc<Vocabulary>, Arc<Tokenizer>)> {
    let (label, (v, t)) = match name {
        "smollm2" => ("SmolLM2-135M", stencil_test_support::fixtures::smollm2()),
        "gemma3" => ("Gemma 3 270M", stencil_test_support::fixtures::gemma3()),
        _ => return None,
    };
    Some((label, v, t))
}

fn pair(s: Sample) -> [u64; 2] {
    [s.cpu_ns, s.wall_ns]
}

fn sample(p: [u64; 2]) -> Sample {
    Sample { cpu_ns: p[0], wall_ns: p[1] }
}

/// `stencil-bench --schema-worker VOCAB`: reads jobs (one JSON line each) on stdin and
/// answers each with one JSON line on stdout; the first line it writes is `Ready`.
pub fn worker_main(vocab_name: String) -> ! {
    // A big stack: deeply nested schemas recurse in both compilers.
    let h = std::thread::Builder::new()
        .name("schema-worker".into())
        .stack_size(512 << 20)
        .spawn(move || worker_loop(&vocab_name))
        .expect("spawn the worker thread");
    std::process::exit(if h.join().is_ok() { 0 } else { 101 })
}

fn worker_loop(vocab_name: &str) {
    let (_, vocab, tok) = vocab_by_name(vocab_name).unwrap_or_else(|| die(&format!("unknown vocabulary {vocab_name}")));
    let (_, stencil_setup) = time(|| {
        let g = stencil_grammar::parse_gbnf("root ::= \"a\"").expect("trivial grammar");
        CompiledGrammar::new(&g, vocab.clone()).expect("trivial grammar compiles")
    });
    let (factory, llg_setup) = time(|| {
        let env = llg::tok_env(&vocab);
        llg::factory(&env).unwrap_or_else(|e| die(&format!("llguidance factory: {e}")))
    });
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let ready = Ready { stencil_setup: pair(stencil_setup), llg_setup: pair(llg_setup) };
    writeln!(out, "{}", serde_json::to_string(&ready).unwrap()).and_then(|_| out.flush()).expect("stdout");
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let job: Value = serde_json::from_str(&line).unwrap_or_else(|e| die(&format!("bad job: {e}")));
        let engine = job["engine"].as_str().unwrap_or_default().to_string();
        let instance = job["instance"].as_str().unwrap_or_default().to_string();
        let schema = &job["schema"];
        // Progress lines tell the parent where a schema over the time limit was stuck.
        let mut stage = |name: &str| {
            let _ = writeln!(out, "{}", json!({ "stage": name })).and_then(|_| out.flush());
        };
        let r = catch_unwind(AssertUnwindSafe(|| match engine.as_str() {
            "stencil" => run_stencil(&vocab, &tok, schema, &instance, &mut stage),
            "llguidance" => run_llg(&factory, &vocab, &tok, schema, &instance, &mut stage),
            e => die(&format!("unknown engine {e}")),
        }));
        let outcome = r.unwrap_or_else(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Outcome { error: Some(format!("panic: {}", first_line(&msg))), ..Default::default() }
        });
        writeln!(out, "{}", serde_json::to_string(&outcome).unwrap()).and_then(|_| out.flush()).expect("stdout");
    }
}

/// The instance's tokens then EOS, or why the tokenizer cannot spell it.
fn token_sequence(vocab: &Vocabulary, tok: &Tokenizer, instance: &str) -> Result<Vec<u32>, String> {
    let mut ids = tok.encode(instance).map_err(|e| first_line(&e.to_string()))?;
    ids.push(vocab.eos_ids()[0]);
    Ok(ids)
}

fn text_of(vocab: &Vocabulary, seq: &[u32], upto: usize) -> Vec<u8> {
    seq[..upto].iter().filter(|&&t| vocab.is_text(t)).flat_map(|&t| vocab.token_bytes(t).to_vec()).collect()
}

fn tail_text(vocab: &Vocabulary, seq: &[u32], upto: usize) -> String {
    crate::show_tail(&text_of(vocab, seq, upto))
}

/// Where a refusal happened: the JSON context of the first refused byte, given the text
/// before the refused token, the token and the byte's offset in it.
fn refusal_context(vocab: &Vocabulary, seq: &[u32], step: usize, offset: usize) -> String {
    let t = seq[step];
    if vocab.is_eos(t) {
        return "at EOS (the engine wants more text)".into();
    }
    let mut text = text_of(vocab, seq, step);
    let tb = vocab.token_bytes(t);
    let offset = offset.min(tb.len().saturating_sub(1));
    text.extend_from_slice(&tb[..offset]);
    json_context(&text, tb.get(offset).copied()).into()
}

/// A coarse JSON context of byte `next` after the (valid JSON prefix) `text`.
fn json_context(text: &[u8], next: Option<u8>) -> &'static str {
    let mut stack: Vec<u8> = Vec::new();
    let (mut in_str, mut esc, mut is_key, mut want_key) = (false, false, false, false);
    for &b in text {
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
            continue;
        }
        match b {
            b'{' => {
                stack.push(b'{');
                want_key = true;
            }
            b'[' => {
                stack.push(b'[');
                want_key = false;
            }
            b'}' | b']' => {
                stack.pop();
                want_key = false;
            }
            b',' => want_key = stack.last() == Some(&b'{'),
            b':' => want_key = false,
            b'"' => {
                in_str = true;
                is_key = want_key;
                want_key = false;
            }
            _ => {}
        }
    }
    let next = next.unwrap_or(0);
    if in_str {
        return if is_key { "inside an object key" } else { "inside a string value" };
    }
    match (stack.last(), next) {
        (_, b'"') if want_key => "at the start of an object key",
        (Some(b'{'), b',') => "at `,` after an object member",
        (Some(b'{'), b'}') => "at `}` (ending an object)",
        (Some(b'['), b',') => "at `,` after an array item",
        (Some(b'['), b']') => "at `]` (ending an array)",
        _ if text.last().is_some_and(|c| c.is_ascii_digit()) => "inside or after a number",
        _ => "at the start of a value",
    }
}

fn run_stencil(
    vocab: &Arc<Vocabulary>,
    tok: &Tokenizer,
    schema: &Value,
    instance: &str,
    stage: &mut dyn FnMut(&str),
) -> Outcome {
    let mut o = Outcome::default();
    stage("compile");
    let opts = SchemaOptions::compact().lenient();
    // Schema → grammar IR, then IR → automaton (timed apart, reported together and split).
    let (res, s1) = time(|| compile_schema(schema, &opts));
    o.compile = pair(s1);
    let res = res.map_err(|e| e.to_string()).and_then(|c| {
        let (g, s2) = time(|| CompiledGrammar::new(&c.grammar, vocab.clone()));
        o.compile = [s1.cpu_ns + s2.cpu_ns, s1.wall_ns + s2.wall_ns];
        o.compile_split = Some([s1.cpu_ns, s2.cpu_ns]);
        g.map(|g| (g, c.warnings)).map_err(|e| format!("engine: {e}"))
    });
    let (g, warnings) = match res {
        Ok(x) => x,
        Err(e) => {
            o.error = Some(first_line(&e));
            return o;
        }
    };
    o.warnings = warnings.len();
    o.first_warning = warnings.first().map(|w| first_line(&w.to_string()));
    let seq = match token_sequence(vocab, tok, instance) {
        Ok(s) => s,
        Err(e) => {
            o.tokenize_error = Some(e);
            return o;
        }
    };
    o.tokens = Some(seq.len() - 1);
    stage("replay");
    let replay = |out: &mut Vec<[u64; 2]>| -> Result<(), (String, String)> {
        let mut mask = bitmask::new_mask(vocab.mask_width());
        let mut m = Matcher::new(g.clone());
        for (i, &t) in seq.iter().enumerate() {
            let (r, s) = time(|| m.fill_mask(&mut mask));
            r.map_err(|e| (format!("step {i}: fill_mask: {}", first_line(&e.to_string())), "mask error".to_string()))?;
            out.push(pair(s));
            m.accept_token(t).map_err(|e| {
                let offset = match &e {
                    stencil_mask::MatchError::TokenRejected { byte_offset, .. } => byte_offset.unwrap_or(0),
                    _ => 0,
                };
                (
                    format!(
                        "step {i}, after {}: token {t} {} refused: {}",
                        tail_text(vocab, &seq, i),
                        crate::show_bytes(vocab.token_bytes(t)),
                        first_line(&e.to_string())
                    ),
                    refusal_context(vocab, &seq, i, offset),
                )
            })?;
        }
        Ok(())
    };
    let cold = replay(&mut o.cold);
    let _ = replay(&mut o.warm);
    o.accepted = cold.is_ok();
    if let Err((msg, at)) = cold {
        o.reject = Some(msg);
        o.reject_where = Some(at);
    }
    o
}

/// llguidance's JSON options for serde_json's compact style, lenient like Stencil's run.
fn llg_schema(schema: &Value) -> Value {
    let opts = json!({
        "whitespace_flexible": false,
        "item_separator": ",",
        "key_separator": ":",
        "lenient": true,
    });
    let mut s = match schema {
        Value::Bool(true) => json!({}),
        Value::Bool(false) => json!({"not": {}}),
        s => s.clone(),
    };
    if let Value::Object(m) = &mut s {
        m.insert("x-guidance".into(), opts);
    }
    s
}

fn run_llg(
    factory: &llguidance::ParserFactory,
    vocab: &Arc<Vocabulary>,
    tok: &Tokenizer,
    schema: &Value,
    instance: &str,
    stage: &mut dyn FnMut(&str),
) -> Outcome {
    let mut o = Outcome::default();
    let schema = llg_schema(schema);
    stage("compile");
    let (res, s) = time(|| -> anyhow::Result<llguidance::Matcher> {
        let parser = factory.create_parser(TopLevelGrammar::from_json_schema(schema))?;
        let m = llguidance::Matcher::new(Ok(parser));
        if let Some(e) = m.get_error() {
            anyhow::bail!("{e}");
        }
        Ok(m)
    });
    o.compile = pair(s);
    let mut m0 = match res {
        Ok(m) => m,
        Err(e) => {
            o.error = Some(first_line(&e.to_string()));
            return o;
        }
    };
    let warnings = m0.grammar_warnings();
    o.warnings = warnings.len();
    o.first_warning = warnings.first().map(|w| first_line(w));
    let seq = match token_sequence(vocab, tok, instance) {
        Ok(s) => s,
        Err(e) => {
            o.tokenize_error = Some(e);
            return o;
        }
    };
    o.tokens = Some(seq.len() - 1);
    stage("replay");
    let replay = |out: &mut Vec<[u64; 2]>| -> Result<(), (String, String)> {
        let mut m = m0.clone();
        for (i, &t) in seq.iter().enumerate() {
            let (r, s) = time(|| m.compute_mask_or_eos());
            match r {
                Ok(mask) => drop(mask),
                Err(e) => {
                    return Err((
                        format!("step {i}: compute_mask: {}", first_line(&e.to_string())),
                        "mask error".into(),
                    ))
                }
            }
            out.push(pair(s));
            // llguidance stops by itself once the grammar can only end.
            if vocab.is_eos(t) && m.is_stopped() {
                return Ok(());
            }
            m.consume_token(t).map_err(|e| {
                let msg = first_line(&e.to_string());
                // "... byte 'x' fails parse": the first such byte of the token.
                let offset = msg
                    .split("byte '")
                    .nth(1)
                    .and_then(|r| r.chars().next())
                    .and_then(|c| {
                        let mut buf = [0u8; 4];
                        let cb = c.encode_utf8(&mut buf).as_bytes();
                        vocab.token_bytes(t).windows(cb.len()).position(|w| w == cb)
                    })
                    .unwrap_or(0);
                (
                    format!(
                        "step {i}, after {}: token {t} {} refused: {msg}",
                        tail_text(vocab, &seq, i),
                        crate::show_bytes(vocab.token_bytes(t)),
                    ),
                    refusal_context(vocab, &seq, i, offset),
                )
            })?;
        }
        Ok(())
    };
    let cold = replay(&mut o.cold);
    let _ = replay(&mut o.warm);
    o.accepted = cold.is_ok();
    if let Err((msg, at)) = cold {
        o.reject = Some(msg);
        o.reject_where = Some(at);
    }
    o
}

// ---------------------------------------------------------------------------------------
// The parent side

/// One engine on one schema, as the parent saw it.
#[derive(Clone)]
pub enum Run {
    Done(Box<Outcome>),
    /// Over the per-schema time limit (in this stage: compile, replay); the worker was killed.
    Timeout(String),
    /// The worker died (memory limit, stack overflow, abort).
    Crash(String),
}

impl Run {
    fn done(&self) -> Option<&Outcome> {
        match self {
            Run::Done(o) => Some(o),
            _ => None,
        }
    }
    fn compiled(&self) -> Option<&Outcome> {
        self.done().filter(|o| o.error.is_none())
    }
    fn accepted(&self) -> bool {
        self.done().is_some_and(|o| o.accepted)
    }
}

pub struct CaseResult {
    pub subset: String,
    pub file: String,
    /// [Stencil, llguidance].
    pub runs: [Run; 2],
}

pub struct SchemaVocabResult {
    pub name: &'static str,
    pub size: usize,
    pub stencil_setup: Sample,
    pub llg_setup: Sample,
    pub restarts: usize,
    /// Wall seconds the parent waited on each engine's jobs (timeouts included).
    pub engine_wall: [f64; 2],
    pub cases: Vec<CaseResult>,
}

pub struct SchemaResults {
    pub subsets: Vec<SubsetInfo>,
    pub vocabs: Vec<SchemaVocabResult>,
    pub per_subset: usize,
    pub timeout: Duration,
    pub mem_gib: u64,
    pub corpus_label: String,
    pub seconds: f64,
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
    rx: Receiver<String>,
    ready: Ready,
}

enum Fail {
    Timeout(String),
    Crash(String),
}

impl Worker {
    fn spawn(vocab: &str, mem_gib: u64) -> Result<Worker, String> {
        use std::os::unix::process::CommandExt;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(exe);
        cmd.arg("--schema-worker").arg(vocab).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        if mem_gib > 0 {
            let bytes = mem_gib << 30;
            // SAFETY: only async-signal-safe work (setrlimit) between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit { rlim_cur: bytes as libc::rlim_t, rlim_max: bytes as libc::rlim_t };
                    if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().map_err(|e| format!("spawn the schema worker: {e}"))?;
        let stdout = child.stdout.take().expect("piped");
        let stdin = child.stdin.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(l) = line else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let line = match rx.recv_timeout(Duration::from_secs(300)) {
            Ok(l) => l,
            Err(e) => {
                let _ = child.kill();
                let st = child.wait().map(|s| s.to_string()).unwrap_or_default();
                return Err(format!("the schema worker did not start ({e:?}; {st})"));
            }
        };
        let ready: Ready = serde_json::from_str(&line).map_err(|e| format!("worker: {e}: {line}"))?;
        Ok(Worker { child, stdin, rx, ready })
    }

    fn call(&mut self, line: &str, timeout: Duration) -> Result<String, Fail> {
        if writeln!(self.stdin, "{line}").and_then(|_| self.stdin.flush()).is_err() {
            return Err(Fail::Crash(self.reap()));
        }
        let deadline = Instant::now() + timeout;
        let mut stage = String::from("start");
        loop {
            match self.rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(l) => {
                    match serde_json::from_str::<Value>(&l).ok().and_then(|v| v["stage"].as_str().map(String::from)) {
                        Some(s) => stage = s,
                        None => return Ok(l),
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(Fail::Timeout(stage));
                }
                Err(RecvTimeoutError::Disconnected) => return Err(Fail::Crash(format!("{} in {stage}", self.reap()))),
            }
        }
    }

    fn reap(&mut self) -> String {
        let _ = self.child.kill();
        self.child.wait().map(|s| s.to_string()).unwrap_or_else(|e| e.to_string())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn run(a: &SchemaArgs, vocabs: &[String]) -> SchemaResults {
    let t0 = std::time::Instant::now();
    let (cases, subsets) = load_cases(a);
    eprintln!("== JSON Schema: {} schemas from {} subsets", cases.len(), subsets.len());
    let mut out = Vec::new();
    for v in vocabs {
        let (name, vocab, _) =
            vocab_by_name(v).unwrap_or_else(|| die(&format!("unknown vocabulary {v} (smollm2, gemma3)")));
        let spawn = || Worker::spawn(v, a.mem_gib).unwrap_or_else(|e| die(&e));
        let mut worker = spawn();
        let mut r = SchemaVocabResult {
            name,
            size: vocab.len(),
            stencil_setup: sample(worker.ready.stencil_setup),
            llg_setup: sample(worker.ready.llg_setup),
            restarts: 0,
            engine_wall: [0.0; 2],
            cases: Vec::new(),
        };
        let mut last_subset = String::new();
        for c in &cases {
            if c.subset != last_subset {
                eprintln!("-- {name} / schema / {}", c.subset);
                last_subset = c.subset.clone();
            }
            let mut runs = Vec::new();
            for (e, engine) in ["stencil", "llguidance"].into_iter().enumerate() {
                let job = serde_json::to_string(&Job { engine, schema: &c.schema, instance: &c.instance }).unwrap();
                let t = Instant::now();
                let answer = worker.call(&job, a.timeout);
                r.engine_wall[e] += t.elapsed().as_secs_f64();
                let run = match answer {
                    Ok(line) => match serde_json::from_str::<Outcome>(&line) {
                        Ok(o) => Run::Done(Box::new(o)),
                        Err(e) => Run::Crash(format!("unreadable answer: {e}")),
                    },
                    Err(f) => {
                        let run = match f {
                            Fail::Timeout(s) => Run::Timeout(s),
                            Fail::Crash(s) => Run::Crash(s),
                        };
                        eprintln!(
                            "   {}/{}: {engine}: {}",
                            c.subset,
                            c.file,
                            match &run {
                                Run::Timeout(s) => format!("over the {} s limit in {s}", a.timeout.as_secs_f64()),
                                Run::Crash(s) => format!("worker died: {s}"),
                                Run::Done(_) => unreachable!(),
                            }
                        );
                        worker = spawn();
                        r.restarts += 1;
                        run
                    }
                };
                runs.push(run);
            }
            let [s, l]: [Run; 2] = runs.try_into().unwrap_or_else(|_| unreachable!());
            if std::env::var_os("STENCIL_BENCH_COMPILE_TIMES").is_some() {
                // Per-schema compile CPU ms (Stencil, llguidance) on stderr, to find the tail.
                let t = |r: &Run| r.compiled().map_or(f64::NAN, |o| o.compile[0] as f64 / 1e6);
                eprintln!("compile-ms {v} {}/{} {:.3} {:.3}", c.subset, c.file, t(&s), t(&l));
            }
            r.cases.push(CaseResult { subset: c.subset.clone(), file: c.file.clone(), runs: [s, l] });
        }
        drop(worker);
        out.push(r);
    }
    SchemaResults {
        subsets,
        vocabs: out,
        per_subset: a.per_subset,
        timeout: a.timeout,
        mem_gib: a.mem_gib,
        corpus_label: a.corpus_label.clone(),
        seconds: t0.elapsed().as_secs_f64(),
    }
}

// ---------------------------------------------------------------------------------------
// Aggregation and report

#[derive(Default)]
struct Agg {
    tried: usize,
    /// Per engine [Stencil, llguidance].
    compiled: [usize; 2],
    exact: [usize; 2],
    timeouts: [usize; 2],
    crashes: [usize; 2],
    untokenizable: usize,
    accepted: [usize; 2],
    both_compiled: usize,
    both_accepted: usize,
    only: [usize; 2],
    /// Compile CPU ns over schemas both engines compiled.
    compile: [Vec<u64>; 2],
    /// Compile CPU ns over each engine's own compiled schemas (for the max).
    compile_own: [Vec<u64>; 2],
    /// First cold mask over schemas both compiled (with a tokenizable instance).
    first_mask: [Vec<u64>; 2],
    /// Stencil's compile split over its compiled schemas: [schema → IR, IR → automaton].
    split: [Vec<u64>; 2],
    /// Mask samples over schemas whose instance both engines accept: `[engine][phase]`.
    masks: [[Vec<Sample>; 2]; 2],
    /// Over the same schemas, per schema: compile CPU ns plus the CPU ns of every mask of
    /// the cold replay (see [`compile_plus_cold`]).
    per_instance: [Vec<u64>; 2],
}

/// An engine's whole CPU cost of one generation: its compile plus every mask call of the
/// cold replay (Stencil builds its automaton in the compile, llguidance its lexer lazily
/// in the first masks; the sum counts both wherever they happen).
fn compile_plus_cold(o: &Outcome) -> u64 {
    o.compile[0] + o.cold.iter().map(|s| s[0]).sum::<u64>()
}

impl Agg {
    fn add(&mut self, c: &CaseResult) {
        self.tried += 1;
        for e in 0..2 {
            match &c.runs[e] {
                Run::Timeout(_) => self.timeouts[e] += 1,
                Run::Crash(_) => self.crashes[e] += 1,
                Run::Done(o) if o.error.is_none() => {
                    self.compiled[e] += 1;
                    self.exact[e] += (o.warnings == 0) as usize;
                    self.compile_own[e].push(o.compile[0]);
                    if let Some([a, b]) = o.compile_split {
                        self.split[0].push(a);
                        self.split[1].push(b);
                    }
                    self.accepted[e] += o.accepted as usize;
                }
                Run::Done(_) => {}
            }
        }
        if c.runs.iter().any(|r| r.compiled().is_some_and(|o| o.tokenize_error.is_some())) {
            self.untokenizable += 1;
        }
        let (s, l) = (c.runs[0].compiled(), c.runs[1].compiled());
        if let (Some(s), Some(l)) = (s, l) {
            self.both_compiled += 1;
            self.compile[0].push(s.compile[0]);
            self.compile[1].push(l.compile[0]);
            if let (Some(a), Some(b)) = (s.cold.first(), l.cold.first()) {
                self.first_mask[0].push(a[0]);
                self.first_mask[1].push(b[0]);
            }
        }
        let acc = [c.runs[0].accepted(), c.runs[1].accepted()];
        if acc[0] && acc[1] {
            self.both_accepted += 1;
            for (e, o) in [s, l].into_iter().enumerate() {
                let o = o.expect("accepted implies compiled");
                self.masks[e][0].extend(o.cold.iter().copied().map(sample));
                self.masks[e][1].extend(o.warm.iter().copied().map(sample));
                self.per_instance[e].push(compile_plus_cold(o));
            }
        } else if acc[0] {
            self.only[0] += 1;
        } else if acc[1] {
            self.only[1] += 1;
        }
    }
}

fn percentile_of(v: &[u64], p: f64) -> u64 {
    let mut v = v.to_vec();
    v.sort_unstable();
    percentile(&v, p)
}

fn p50(v: &[u64]) -> u64 {
    percentile_of(v, 50.0)
}

fn p99(v: &[u64]) -> u64 {
    percentile_of(v, 99.0)
}

fn max(v: &[u64]) -> u64 {
    v.iter().copied().max().unwrap_or(0)
}

fn ms_or_dash(v: &[u64], f: fn(&[u64]) -> u64) -> String {
    if v.is_empty() {
        "–".into()
    } else {
        ms(f(v))
    }
}

fn pooled(v: &SchemaVocabResult) -> Agg {
    let mut a = Agg::default();
    v.cases.iter().for_each(|c| a.add(c));
    a
}

fn by_subset(v: &SchemaVocabResult) -> BTreeMap<String, Agg> {
    let mut m: BTreeMap<String, Agg> = BTreeMap::new();
    for c in &v.cases {
        m.entry(c.subset.clone()).or_default().add(c);
    }
    m
}

fn us_or_dash(s: &Summary) -> [String; 3] {
    if s.n == 0 {
        ["–".into(), "–".into(), "–".into()]
    } else {
        [us(s.p50), us(s.p99), us(s.max)]
    }
}

/// Lines for the Summary section: all subsets pooled, per vocabulary and phase.
pub fn summary(o: &mut String, r: &SchemaResults) {
    let n: usize = r.vocabs.first().map(|v| v.cases.len()).unwrap_or(0);
    let _ = writeln!(
        o,
        "JSON Schema (JSONSchemaBench dev split, {n} schemas from {} subsets, compact JSON, both engines lenient; \
         compile: thread CPU ms over the schemas both compiled; mask: thread CPU µs per step over the instances both \
         engines accept; compile + cold masks: per such instance, compile plus every mask of the cold replay, thread \
         CPU ms; ratio = llguidance / Stencil):\n",
        r.subsets.len()
    );
    let _ = writeln!(
        o,
        "| vocabulary | phase | compiled Stencil / llguidance | instance accepted Stencil / llguidance (both) | compile p50 ms Stencil / llguidance | compile + cold masks per instance ms: p50 Stencil / llguidance; p99 Stencil / llguidance | Stencil p50 µs | llguidance p50 µs | ratio p50 | Stencil p99 µs | llguidance p99 µs | ratio p99 | steps |"
    );
    let _ = writeln!(o, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for v in &r.vocabs {
        let a = pooled(v);
        for (p, phase) in ["cold", "warm"].iter().enumerate() {
            let (s, l) = (summarize(&a.masks[0][p], true), summarize(&a.masks[1][p], true));
            let (counts, compile, whole) = if p == 0 {
                (
                    format!("{} / {} of {}", a.compiled[0], a.compiled[1], a.tried),
                    format!("{} / {}", ms_or_dash(&a.compile[0], p50), ms_or_dash(&a.compile[1], p50)),
                    // p50 pair, then p99 pair: "S / L; S / L".
                    format!(
                        "{} / {}; {} / {}",
                        ms_or_dash(&a.per_instance[0], p50),
                        ms_or_dash(&a.per_instance[1], p50),
                        ms_or_dash(&a.per_instance[0], p99),
                        ms_or_dash(&a.per_instance[1], p99)
                    ),
                )
            } else {
                (String::new(), String::new(), String::new())
            };
            let acc = if p == 0 {
                format!("{} / {} ({})", a.accepted[0], a.accepted[1], a.both_accepted)
            } else {
                String::new()
            };
            let _ = writeln!(
                o,
                "| {} | {phase} | {counts} | {acc} | {compile} | {whole} | {} | {} | {} | {} | {} | {} | {} |",
                v.name,
                us(s.p50),
                us(l.p50),
                ratio(l.p50, s.p50),
                us(s.p99),
                us(l.p99),
                ratio(l.p99, s.p99),
                s.n
            );
        }
    }
    let _ = writeln!(o);
    if let Some(v) = r.vocabs.iter().max_by_key(|v| v.size) {
        let a = pooled(v);
        let verdict = |x: u64, y: u64| {
            if x < y {
                "faster"
            } else if x == y {
                "tied"
            } else {
                "slower"
            }
        };
        for (p, phase) in ["cold", "warm"].iter().enumerate() {
            let (s, l) = (summarize(&a.masks[0][p], true), summarize(&a.masks[1][p], true));
            let _ = writeln!(
                o,
                "- JSON Schema, {} ({} tokens), {phase}: Stencil is **{}** at p50 ({} vs {} µs) and **{}** at p99 ({} vs {} µs).",
                v.name,
                v.size,
                verdict(s.p50, l.p50),
                us(s.p50),
                us(l.p50),
                verdict(s.p99, l.p99),
                us(s.p99),
                us(l.p99)
            );
        }
        let (cs, cl) = (p50(&a.compile[0]), p50(&a.compile[1]));
        let _ = writeln!(
            o,
            "- JSON Schema, {}: Stencil compiles {} of {} schemas, llguidance {}; compile p50 {} vs {} ms, p99 {} vs {} ms (Stencil's includes building its automaton; llguidance builds its lexer lazily, during the first masks).",
            v.name,
            a.compiled[0],
            a.tried,
            a.compiled[1],
            ms(cs),
            ms(cl),
            ms(p99(&a.compile[0])),
            ms(p99(&a.compile[1]))
        );
        let _ = writeln!(
            o,
            "- JSON Schema, {}: compile plus every cold mask of the instance, per schema: p50 {} vs {} ms, p99 {} vs {} ms (Stencil vs llguidance).",
            v.name,
            ms_or_dash(&a.per_instance[0], p50),
            ms_or_dash(&a.per_instance[1], p50),
            ms_or_dash(&a.per_instance[0], p99),
            ms_or_dash(&a.per_instance[1], p99)
        );
        let _ = writeln!(o);
    }
}

/// Error message → a coarse kind: quoted text, JSON pointers and numbers blanked.
fn kind(msg: &str) -> String {
    let mut out = String::new();
    let mut chars = msg.chars().peekable();
    while let Some(c) = chars.next() {
        // A `'` opens a quote only after a space or at the start (not in "doesn't").
        let quote = c == '"' || c == '`' || (c == '\'' && out.chars().last().filter(|x| !x.is_whitespace()).is_none());
        match c {
            _ if quote => {
                // Keep short backquoted keyword names (`pattern`), blank other quoted text.
                let mut inner = String::new();
                let mut closed = false;
                while let Some(d) = chars.next() {
                    if d == '\\' && c != '`' {
                        inner.push(d);
                        inner.extend(chars.next());
                        continue;
                    }
                    if d == c {
                        closed = true;
                        break;
                    }
                    inner.push(d);
                }
                let word = !inner.is_empty()
                    && inner.len() <= 24
                    && inner.chars().all(|x| x.is_ascii_alphanumeric() || "_-$".contains(x));
                if closed && (word || (c == '`' && inner.len() <= 24)) {
                    out.push(c);
                    out.push_str(&inner);
                    out.push(c);
                } else {
                    out.push_str("\"…\"");
                }
            }
            '#' => {
                while chars.peek().is_some_and(|d| !d.is_whitespace() && *d != ',' && *d != ')') {
                    chars.next();
                }
                out.push_str("#…");
            }
            c if c.is_ascii_digit() => {
                while chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                    chars.next();
                }
                out.push('N');
            }
            c => out.push(c),
        }
    }
    let out = out.trim().to_string();
    if out.chars().count() > 110 {
        format!("{}…", out.chars().take(110).collect::<String>())
    } else {
        out
    }
}

fn md(s: &str) -> String {
    s.replace('|', "\\|")
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() > n {
        format!("{}…", s.chars().take(n).collect::<String>())
    } else {
        s.to_string()
    }
}

/// The section after the GBNF ones.
pub fn section(o: &mut String, r: &SchemaResults) {
    let _ = writeln!(o, "## JSON Schema: JSONSchemaBench\n");
    let subsets: Vec<String> = r
        .subsets
        .iter()
        .map(|s| {
            let took = s.scanned - s.skipped;
            format!("{} {took} of {}", s.name, s.files)
        })
        .collect();
    // llguidance failures for want of `referencing`; instances both engines refuse.
    let no_ref = r
        .vocabs
        .first()
        .map(|v| {
            v.cases
                .iter()
                .filter(|c| c.runs[1].done().and_then(|d| d.error.as_ref()).is_some_and(|e| e.contains("referencing")))
                .count()
        })
        .unwrap_or(0);
    let (mut both_refused, mut key_refused) = (0, 0);
    if let Some(v) = r.vocabs.first() {
        for c in &v.cases {
            let (Some(s), Some(l)) = (c.runs[0].compiled(), c.runs[1].compiled()) else { continue };
            if s.reject.is_some() && l.reject.is_some() {
                both_refused += 1;
                let key = |o: &Outcome| o.reject_where.as_deref() == Some("inside an object key");
                key_refused += (key(s) && key(l)) as usize;
            }
        }
    }
    let _ = writeln!(
        o,
        "\
- **Schemas**: JSONSchemaBench's dev split, read in place from `{corpus}`; per subset the first {n} files
  (sorted by name) with at least one valid test instance ({subsets}). Each schema's first valid instance is
  serialized compactly with serde_json (keys in the instance's document order).
- **Compile**, both engines in lenient mode, compact JSON: Stencil = `stencil_schema::compile_schema` with
  `SchemaOptions::compact().lenient()` + `CompiledGrammar::new`; llguidance = `TopLevelGrammar::from_json_schema`
  with `\"x-guidance\": {{\"whitespace_flexible\": false, \"item_separator\": \",\", \"key_separator\": \":\",
  \"lenient\": true}}` + `ParserFactory::create_parser` + `Matcher::new`. One compile per schema and
  vocabulary (the one then replayed cold). *Compiled* = the compile succeeded; *exact* = it did so without a
  warning (nothing left unenforced: Stencil's `Unenforced` list, llguidance's `grammar_warnings`, which
  include its `oneOf`-as-`anyOf` fallback). Compile p50 and p99 and 1st-mask p50 are over the schemas
  both engines compiled; *max* over each engine's own.
- **Replay**: the instance tokenized by the vocabulary's own tokenizer (`Tokenizer::encode`), then EOS; the
  same ids fed to both engines, timing only the mask call per step exactly as in the GBNF part (Stencil
  `fill_mask`, llguidance `compute_mask_or_eos`, fast-forward off, no rayon). *Cold*: on the freshly compiled
  grammar; *warm*: replayed again on it. *Accepted*: every token and then EOS accepted (llguidance: or it
  stopped by itself at EOS). Mask percentiles pool the steps of the instances **both** engines accept, so
  both columns time the same steps.
- **Compile + cold masks**: per schema whose instance both engines accept, an engine's compile CPU time plus
  the CPU time of every mask call of its cold replay (the whole cost of one generation, wherever the engine
  does its work: Stencil builds its automaton in the compile, llguidance its lexer lazily in the first masks);
  p50 / p99 over those schemas.
- **Isolation**: each engine's work on a schema (compile and both replays) runs in a worker process with a
  {t} s limit per engine and schema and a {mem} GiB address-space limit; a schema over either counts as a
  timeout (crash) for that engine and the worker is restarted. The worker's per-vocabulary setup
  (Stencil's token trie; llguidance's `TokEnv` + `ParserFactory`) is outside all timings. Schemas run one
  after the other in the worker, as in a server: Stencil parses each known `format`'s regex (constants of
  the library) once per process, so the first schema with a format pays for its parse, later ones do not.
- llguidance is built as in the GBNF part, without its `referencing` feature: `$ref`s must be JSON pointers
  into the same document (`#/…`); {no_ref} sampled schema(s) failed in llguidance for that reason.
- *Accepted* measures whether the instance is in each engine's output language, not whether it is valid:
  both engines write declared properties in schema order, so a valid instance whose keys come in another
  order is refused. On {first}, {both_refused} instance(s) are refused by both engines, {key_refused} of
  them inside an object key in both (the key order, as far as checked: e.g. `username` before `password`
  where the schema declares `password` first).",
        no_ref = no_ref,
        first = r.vocabs.first().map(|v| v.name).unwrap_or("–"),
        both_refused = both_refused,
        key_refused = key_refused,
        corpus = r.corpus_label,
        n = r.per_subset,
        subsets = subsets.join(", "),
        t = r.timeout.as_secs_f64(),
        mem = if r.mem_gib > 0 { r.mem_gib.to_string() } else { "no".into() },
    );
    let _ = writeln!(o);
    for v in &r.vocabs {
        let _ = writeln!(o, "### {} ({} tokens)\n", v.name, v.size);
        let _ = writeln!(
            o,
            "Worker setup (CPU): Stencil token trie {} ms; llguidance TokEnv + ParserFactory {} ms. Wall time of all jobs \
             (compile, tokenize, two replays, process round trip; timeouts included): Stencil {:.1} s, llguidance {:.1} s; \
             {} worker restart(s).\n",
            ms(v.stencil_setup.cpu_ns),
            ms(v.llg_setup.cpu_ns),
            v.engine_wall[0],
            v.engine_wall[1],
            v.restarts
        );
        let _ = writeln!(
            o,
            "| subset | schemas | compiled Stencil / llguidance | exact Stencil / llguidance | timeouts (crashes) Stencil / llguidance | instance accepted Stencil / llguidance | accepted by both / only Stencil / only llguidance | compile p50 ms Stencil / llguidance | compile p99 ms Stencil / llguidance | compile max ms Stencil / llguidance | 1st mask p50 ms Stencil / llguidance | compile + cold masks p99 ms Stencil / llguidance |"
        );
        let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        let subs = by_subset(v);
        let all = pooled(v);
        let rows: Vec<(String, &Agg)> =
            subs.iter().map(|(k, a)| (k.clone(), a)).chain(std::iter::once(("**all**".to_string(), &all))).collect();
        for (name, a) in &rows {
            let tc = |e: usize| {
                if a.crashes[e] > 0 {
                    format!("{} ({})", a.timeouts[e], a.crashes[e])
                } else {
                    a.timeouts[e].to_string()
                }
            };
            let untok =
                if a.untokenizable > 0 { format!(" ({} not tokenizable)", a.untokenizable) } else { String::new() };
            let _ = writeln!(
                o,
                "| {name} | {} | {} / {} | {} / {} | {} / {} | {} / {}{untok} | {} / {} / {} | {} / {} | {} / {} | {} / {} | {} / {} | {} / {} |",
                a.tried,
                a.compiled[0],
                a.compiled[1],
                a.exact[0],
                a.exact[1],
                tc(0),
                tc(1),
                a.accepted[0],
                a.accepted[1],
                a.both_accepted,
                a.only[0],
                a.only[1],
                ms_or_dash(&a.compile[0], p50),
                ms_or_dash(&a.compile[1], p50),
                ms_or_dash(&a.compile[0], p99),
                ms_or_dash(&a.compile[1], p99),
                ms_or_dash(&a.compile_own[0], max),
                ms_or_dash(&a.compile_own[1], max),
                ms_or_dash(&a.first_mask[0], p50),
                ms_or_dash(&a.first_mask[1], p50),
                ms_or_dash(&a.per_instance[0], p99),
                ms_or_dash(&a.per_instance[1], p99),
            );
        }
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "Stencil's compile time, split (p50 / max ms over the schemas it compiled): schema → grammar IR {} / {}; \
             grammar IR → automaton {} / {}.\n",
            ms_or_dash(&all.split[0], p50),
            ms_or_dash(&all.split[0], max),
            ms_or_dash(&all.split[1], p50),
            ms_or_dash(&all.split[1], max),
        );
        let _ = writeln!(
            o,
            "Mask time per step, thread CPU µs, over the instances both engines accept (ratio = llguidance / Stencil; above 1: Stencil faster):\n"
        );
        let _ = writeln!(
            o,
            "| subset | phase | Stencil p50 | llguidance p50 | ratio p50 | Stencil p99 | llguidance p99 | ratio p99 | Stencil max | llguidance max | steps |"
        );
        let _ = writeln!(o, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (name, a) in &rows {
            for (p, phase) in ["cold", "warm"].iter().enumerate() {
                let (s, l) = (summarize(&a.masks[0][p], true), summarize(&a.masks[1][p], true));
                let (ss, ls) = (us_or_dash(&s), us_or_dash(&l));
                let _ = writeln!(
                    o,
                    "| {name} | {phase} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    ss[0],
                    ls[0],
                    ratio(l.p50, s.p50),
                    ss[1],
                    ls[1],
                    ratio(l.p99, s.p99),
                    ss[2],
                    ls[2],
                    s.n
                );
            }
        }
        let _ = writeln!(o);
        let walls: Vec<Summary> =
            (0..2).flat_map(|e| (0..2).map(move |p| (e, p))).map(|(e, p)| summarize(&all.masks[e][p], false)).collect();
        let _ = writeln!(
            o,
            "Wall-clock cross-check, all subsets pooled (p50 / p99 µs): Stencil cold {} / {}, warm {} / {}; llguidance cold {} / {}, warm {} / {}.\n",
            us(walls[0].p50),
            us(walls[0].p99),
            us(walls[1].p50),
            us(walls[1].p99),
            us(walls[2].p50),
            us(walls[2].p99),
            us(walls[3].p50),
            us(walls[3].p99)
        );
        tail(o, v);
    }
    failures(o, r);
}

/// The slowest `n` of `(value, label)` pairs, slowest first.
fn slowest<T: Clone>(mut v: Vec<(u64, T)>, n: usize) -> Vec<(u64, T)> {
    v.sort_by_key(|x| std::cmp::Reverse(x.0));
    v.truncate(n);
    v
}

/// The tail of one vocabulary's run (issue 28): per engine, the slowest cold mask steps
/// (over the instances both engines accept, so both engines time the same steps) and the
/// slowest compiles (over each engine's own compiled schemas), with their schemas.
fn tail(o: &mut String, v: &SchemaVocabResult) {
    let engines = ["Stencil", "llguidance"];
    let _ = writeln!(
        o,
        "The tail, per engine: cold (first-walk) mask steps over the instances both engines accept, compiles over \
         the engine's own compiled schemas; p99.9 by nearest rank; *schemas over* counts the schemas with at \
         least one such step or compile (thread CPU). `cargo run --release -p stencil-bench --example cold_steps -- \
         SCHEMA INSTANCE` lists one instance's slow steps with the text before them:\n"
    );
    let _ = writeln!(
        o,
        "| engine | cold mask p99.9 / max µs | schemas with a cold mask over 1 ms / 5 ms | slowest cold masks, µs (schema, step) | compile p99.9 / max ms | schemas compiling over 20 ms / 50 ms | slowest compiles, ms (schema) |"
    );
    let _ = writeln!(o, "|---|---:|---:|---|---:|---:|---|");
    let both: Vec<&CaseResult> = v.cases.iter().filter(|c| c.runs.iter().all(Run::accepted)).collect();
    for (e, engine) in engines.iter().enumerate() {
        let steps: Vec<(u64, (String, usize))> = both
            .iter()
            .flat_map(|c| {
                let o = c.runs[e].done().expect("accepted implies done");
                o.cold.iter().enumerate().map(move |(i, s)| (s[0], (format!("{}/{}", c.subset, c.file), i)))
            })
            .collect();
        let worst_step =
            |c: &&CaseResult| c.runs[e].done().and_then(|o| o.cold.iter().map(|s| s[0]).max()).unwrap_or(0);
        let over_ms = |ms: u64| both.iter().filter(|c| worst_step(c) > ms * 1_000_000).count();
        let compiles: Vec<(u64, String)> = v
            .cases
            .iter()
            .filter_map(|c| c.runs[e].compiled().map(|o| (o.compile[0], format!("{}/{}", c.subset, c.file))))
            .collect();
        let compile_ns: Vec<u64> = compiles.iter().map(|c| c.0).collect();
        let compiles_over = |ms: u64| compile_ns.iter().filter(|&&ns| ns > ms * 1_000_000).count();
        let step_ns: Vec<u64> = steps.iter().map(|s| s.0).collect();
        let worst_steps = slowest(steps, 3)
            .into_iter()
            .map(|(ns, (file, i))| format!("{} ({}, {i})", us(ns), md(&file)))
            .collect::<Vec<_>>()
            .join(", ");
        let worst_compiles = slowest(compiles, 3)
            .into_iter()
            .map(|(ns, file)| format!("{} ({})", ms(ns), md(&file)))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            o,
            "| {engine} | {} / {} | {} / {} | {worst_steps} | {} / {} | {} / {} | {worst_compiles} |",
            if step_ns.is_empty() { "–".into() } else { us(percentile_of(&step_ns, 99.9)) },
            if step_ns.is_empty() { "–".into() } else { us(max(&step_ns)) },
            over_ms(1),
            over_ms(5),
            ms_or_dash(&compile_ns, |v| percentile_of(v, 99.9)),
            ms_or_dash(&compile_ns, max),
            compiles_over(20),
            compiles_over(50),
        );
    }
    let _ = writeln!(o);
}

/// Why schemas failed, per engine: compile errors and warnings by kind (distinct schema
/// files, an example), and every instance only one engine accepts.
fn failures(o: &mut String, r: &SchemaResults) {
    let engines = ["Stencil", "llguidance"];
    let _ = writeln!(o, "### Failures\n");
    for (e, engine) in engines.iter().enumerate() {
        // kind → (files, example)
        let mut errors: BTreeMap<String, (std::collections::BTreeSet<String>, String)> = BTreeMap::new();
        let mut warns: BTreeMap<String, (std::collections::BTreeSet<String>, String)> = BTreeMap::new();
        let mut rejects: BTreeMap<String, (std::collections::BTreeSet<String>, String)> = BTreeMap::new();
        for v in &r.vocabs {
            for c in &v.cases {
                let file = format!("{}/{}", c.subset, c.file);
                // 0: compile failure, 1: refused instance.
                let (msg, which) = match &c.runs[e] {
                    Run::Timeout(s) => (format!("over the {} s limit in {s}", r.timeout.as_secs_f64()), 0),
                    Run::Crash(s) => (format!("worker died: {s}"), 0),
                    Run::Done(d) => {
                        if let Some(w) = &d.first_warning {
                            let ent =
                                warns.entry(kind(w)).or_insert_with(|| (Default::default(), format!("{file}: {w}")));
                            ent.0.insert(file.clone());
                        }
                        match (&d.error, &d.reject) {
                            (Some(err), _) => (err.clone(), 0),
                            (None, Some(rej)) => (format!("[{}] {rej}", v.name), 1),
                            _ => continue,
                        }
                    }
                };
                let (k, map) = if which == 1 {
                    // Group refusals by where in the JSON text they happened.
                    let at = c.runs[e].done().and_then(|d| d.reject_where.clone()).unwrap_or_default();
                    (format!("refused {at}"), &mut rejects)
                } else {
                    (kind(&msg), &mut errors)
                };
                let ent = map.entry(k).or_insert_with(|| (Default::default(), format!("{file}: {msg}")));
                ent.0.insert(file);
            }
        }
        let mut list = |title: &str, m: BTreeMap<String, (std::collections::BTreeSet<String>, String)>| {
            if m.is_empty() {
                return;
            }
            let mut v: Vec<_> = m.into_iter().collect();
            v.sort_by(|a, b| b.1 .0.len().cmp(&a.1 .0.len()).then(a.0.cmp(&b.0)));
            let total: usize = v.iter().map(|x| x.1 .0.len()).sum();
            let _ = writeln!(
                o,
                "{engine}, {title} ({total} schema files; by kind, most frequent first, at most 15 kinds):\n"
            );
            for (k, (files, ex)) in v.into_iter().take(15) {
                let _ = writeln!(o, "- {} × {}: e.g. {}", files.len(), md(&clip(&k, 110)), md(&clip(ex.trim(), 240)));
            }
            let _ = writeln!(o);
        };
        list("compile failures", errors);
        list("first warning of lenient compiles", warns);
        list("valid instances refused", rejects);
    }
    // Disagreements, each listed.
    let mut lines = Vec::new();
    for v in &r.vocabs {
        for c in &v.cases {
            let acc = [c.runs[0].accepted(), c.runs[1].accepted()];
            if acc[0] == acc[1] || c.runs.iter().any(|r| r.compiled().is_none()) {
                continue;
            }
            let (yes, no) = if acc[0] { (0, 1) } else { (1, 0) };
            let why = c.runs[no].done().and_then(|d| d.reject.clone().or(d.tokenize_error.clone())).unwrap_or_default();
            lines.push(format!(
                "{}, {}/{}: only {} accepts; {} refuses at {}",
                v.name,
                c.subset,
                c.file,
                engines[yes],
                engines[no],
                md(&clip(&why, 220))
            ));
        }
    }
    if !lines.is_empty() {
        let _ = writeln!(
            o,
            "Instances only one engine accepts (both compiled; {} in all, at most 30 listed):\n",
            lines.len()
        );
        for l in lines.iter().take(30) {
            let _ = writeln!(o, "- {l}");
        }
        let _ = writeln!(o);
    }
}
