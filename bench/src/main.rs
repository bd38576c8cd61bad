//! `stencil-bench`: Stencil side by side with llguidance on llama.cpp's GBNF grammars and
//! two real vocabularies. Writes a Markdown report (see `scripts/bench.sh`).
//!
//! Per grammar and vocabulary:
//! 1. compile time of each engine (p50 over repetitions);
//! 2. token sequences made by a seeded random walk over Stencil's masks, replayed in
//!    llguidance (disagreements counted);
//! 3. per-token full-mask time of each engine, single thread, "cold" (fresh compiled
//!    grammar, caches filled during the replay) and "warm" (a second replay);
//! 4. mask agreement at every step.

mod decode;
mod lark;
mod llg;
mod scaling;
mod schema;
mod speculation;
mod timer;
mod tools;
mod watermark;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use stencil_grammar::parse_gbnf;
use stencil_grammar::random::SplitMix64;
use stencil_grammar::reference::Recognizer;
use stencil_mask::bitmask;
use stencil_mask::walk::{Style, WalkOptions, Walker};
use stencil_mask::{CompiledGrammar, Matcher, Vocabulary};
use timer::{percentile, time, Sample};

const USAGE: &str = "\
stencil-bench [options]
  --out PATH          write the Markdown report here (default: print it)
  --vocab NAMES       smollm2,gemma3 (default both)
  --grammars NAMES    grammar names to run (default all), e.g. json,c
  --seqs N            token sequences per grammar (default 8)
  --max-tokens N      longest sequence (default 150)
  --compile-reps N    compile repetitions (default 5)
  --seed N            random-walk seed (default 1)
  --lark-modes MODES  how llguidance gets the grammar, comma-separated (default
                      terminals,rules): terminals = llguidance's gbnf_to_lark.py
                      (text-only rules become lexemes), rules = one Lark rule per GBNF rule
  --dump-lark DIR     also write each grammar's Lark text there
  --parts PARTS       gbnf,schema,decode,speculation,tools,scaling,watermark (default all seven);
                      decode = tokens/s on llama.cpp with both real models: free, Stencil's
                      masks, llama.cpp's GBNF sampler; speculation = plain constrained decoding
                      vs prompt lookup (and the draft model) on copy-heavy extractions; tools = the tool-calling evaluation (SmolLM2); scaling =
                      N samples decoded together vs N sequential generations (both models),
                      greedy vs self-consistency on fixtures/scaling (SmolLM2); watermark =
                      detection rates with and without the watermark (both models)
Watermark part:
  --watermark-prompts N
                      the first N prompts of fixtures/watermark/prompts.txt (default all)
Scaling part:
  --scaling-reps N    runs per throughput measurement, median reported (default 1)
  --scaling-questions N
                      the first N questions of fixtures/scaling/arithmetic.jsonl (default all)
JSON Schema part (JSONSchemaBench dev split, both engines' native JSON Schema compilers):
  --corpus DIR        JSONSchemaBench's dev split, one folder per subset (default
                      ../shared/corpus/jsonschemabench relative to the repository root)
  --schemas-per-subset N
                      the first N files per subset (sorted) with a valid instance (default 25)
  --subsets NAMES     subsets to run (default all), e.g. Github_easy,Kubernetes
  --schema-timeout S  seconds per engine and schema (compile + replays) before the
                      worker is killed and the schema counted as a timeout (default 15)
  --schema-mem-gib N  address-space limit of the worker process, GiB (default 8; 0: none)
";

struct Args {
    out: Option<PathBuf>,
    vocabs: Vec<String>,
    grammars: Option<Vec<String>>,
    seqs: usize,
    max_tokens: usize,
    compile_reps: usize,
    seed: u64,
    modes: Vec<lark::Mode>,
    dump_lark: Option<PathBuf>,
    gbnf: bool,
    schema: Option<schema::SchemaArgs>,
    decode: bool,
    speculation: bool,
    tools: bool,
    scaling: Option<scaling::ScalingArgs>,
    watermark: Option<watermark::WatermarkArgs>,
}

fn parse_args() -> Args {
    let mut a = Args {
        out: None,
        vocabs: vec!["smollm2".into(), "gemma3".into()],
        grammars: None,
        seqs: 8,
        max_tokens: 150,
        compile_reps: 5,
        seed: 1,
        modes: vec![lark::Mode::Terminals, lark::Mode::Rules],
        dump_lark: None,
        gbnf: true,
        schema: None,
        decode: true,
        speculation: true,
        tools: true,
        scaling: None,
        watermark: None,
    };
    let mut sa = schema::SchemaArgs::new(&repo_root());
    let mut schema_part = true;
    let mut sc = scaling::ScalingArgs::default();
    let mut scaling_part = true;
    let mut wm = watermark::WatermarkArgs::default();
    let mut watermark_part = true;
    let mut it = std::env::args().skip(1);
    let list = |s: String| s.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect::<Vec<_>>();
    while let Some(flag) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| die(&format!("{flag} needs a value\n{USAGE}")));
        match flag.as_str() {
            "--out" => a.out = Some(val().into()),
            "--vocab" => a.vocabs = list(val()),
            "--grammars" => a.grammars = Some(list(val())),
            "--seqs" => a.seqs = val().parse().unwrap_or_else(|_| die("--seqs: not a number")),
            "--max-tokens" => a.max_tokens = val().parse().unwrap_or_else(|_| die("--max-tokens: not a number")),
            "--compile-reps" => a.compile_reps = val().parse().unwrap_or_else(|_| die("--compile-reps: not a number")),
            "--seed" => a.seed = val().parse().unwrap_or_else(|_| die("--seed: not a number")),
            "--lark-modes" => {
                a.modes = list(val())
                    .iter()
                    .map(|m| match m.as_str() {
                        "rules" => lark::Mode::Rules,
                        "terminals" => lark::Mode::Terminals,
                        m => die(&format!("unknown Lark mode {m}")),
                    })
                    .collect()
            }
            "--dump-lark" => a.dump_lark = Some(val().into()),
            "--parts" => {
                let parts = list(val());
                if let Some(p) = parts.iter().find(|p| {
                    !matches!(
                        p.as_str(),
                        "gbnf" | "schema" | "decode" | "speculation" | "tools" | "scaling" | "watermark"
                    )
                }) {
                    die(&format!("unknown part {p} (gbnf, schema, decode, speculation, tools, scaling, watermark)"));
                }
                a.gbnf = parts.iter().any(|p| p == "gbnf");
                a.decode = parts.iter().any(|p| p == "decode");
                a.speculation = parts.iter().any(|p| p == "speculation");
                a.tools = parts.iter().any(|p| p == "tools");
                schema_part = parts.iter().any(|p| p == "schema");
                scaling_part = parts.iter().any(|p| p == "scaling");
                watermark_part = parts.iter().any(|p| p == "watermark");
            }
            "--scaling-reps" => sc.repetitions = val().parse().unwrap_or_else(|_| die("--scaling-reps: not a number")),
            "--scaling-questions" => {
                sc.questions = Some(val().parse().unwrap_or_else(|_| die("--scaling-questions: not a number")))
            }
            "--watermark-prompts" => {
                wm.prompts = Some(val().parse().unwrap_or_else(|_| die("--watermark-prompts: not a number")))
            }
            "--corpus" => {
                let v = val();
                sa.corpus = PathBuf::from(&v);
                sa.corpus_label = v;
            }
            "--schemas-per-subset" => {
                sa.per_subset = val().parse().unwrap_or_else(|_| die("--schemas-per-subset: not a number"))
            }
            "--subsets" => sa.subsets = Some(list(val())),
            "--schema-timeout" => {
                let s: f64 = val().parse().unwrap_or_else(|_| die("--schema-timeout: not a number"));
                sa.timeout = std::time::Duration::from_secs_f64(s.max(0.1));
            }
            "--schema-mem-gib" => sa.mem_gib = val().parse().unwrap_or_else(|_| die("--schema-mem-gib: not a number")),
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            f => die(&format!("unknown option {f}\n{USAGE}")),
        }
    }
    a.compile_reps = a.compile_reps.max(1);
    a.max_tokens = a.max_tokens.max(12);
    if schema_part {
        a.schema = Some(sa);
    }
    if scaling_part {
        a.scaling = Some(sc);
    }
    if watermark_part {
        a.watermark = Some(wm);
    }
    a
}

fn die(msg: &str) -> ! {
    eprintln!("stencil-bench: {msg}");
    std::process::exit(2)
}

/// The workspace root (this crate lives in `bench/`).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

struct Source {
    name: String,
    /// Path relative to the repository root.
    path: String,
    text: String,
}

/// fixtures/gbnf/*.gbnf, then bench/grammars/*.gbnf unless identical to one already listed.
fn grammar_sources(notes: &mut Vec<String>) -> Vec<Source> {
    let root = repo_root();
    let mut out: Vec<Source> = Vec::new();
    for (dir, prefix) in [("fixtures/gbnf", ""), ("bench/grammars", "bench-")] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| die(&format!("{dir}: {e}")))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "gbnf"))
            .collect();
        files.sort();
        for p in files {
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| die(&format!("{}: {e}", p.display())));
            let file = p.file_name().unwrap().to_string_lossy().to_string();
            let rel = format!("{dir}/{file}");
            if let Some(same) = out.iter().find(|s| s.text == text) {
                notes.push(format!(
                    "`{rel}` is byte-identical to `{}`, so it is measured once, as `{}`.",
                    same.path, same.name
                ));
                continue;
            }
            let stem = p.file_stem().unwrap().to_string_lossy().to_string();
            out.push(Source { name: format!("{prefix}{stem}"), path: rel, text });
        }
    }
    out
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// Seeded random walks over Stencil's masks ([`stencil_mask::walk`], in the
/// [`Style::TargetLength`] style: short tokens half the time, then punctuation and the end
/// past a per-sequence target length), each ending with EOS when the grammar may end.
fn random_walks(
    g: &Arc<CompiledGrammar>,
    vocab: &Vocabulary,
    n: usize,
    max_len: usize,
    seed: u64,
) -> Result<Vec<Vec<u32>>, String> {
    let eos = vocab.eos_ids()[0];
    let mut walker = Walker::new(g.vocab().clone());
    let options = WalkOptions { max_tokens: max_len, style: Style::TargetLength };
    let mut out = Vec::new();
    for k in 0..n {
        let mut rng = SplitMix64::new(seed ^ (k as u64).wrapping_mul(0xA076_1D64_78BD_642F));
        let walk = walker.walk(g, &mut rng, &options).map_err(|e| format!("walk {k}: {e}"))?;
        let mut seq = walk.tokens;
        if walk.complete {
            seq.push(eos);
        }
        out.push(seq);
    }
    Ok(out)
}

/// Per-step mask times of one engine in one phase.
#[derive(Default)]
struct Steps {
    samples: Vec<Sample>,
    /// Set when the replay stopped early.
    error: Option<String>,
}

#[derive(Clone, Copy, Default)]
struct Summary {
    n: usize,
    p50: u64,
    p99: u64,
    max: u64,
}

fn summarize(samples: &[Sample], cpu: bool) -> Summary {
    let mut v: Vec<u64> = samples.iter().map(|s| if cpu { s.cpu_ns } else { s.wall_ns }).collect();
    v.sort_unstable();
    Summary { n: v.len(), p50: percentile(&v, 50.0), p99: percentile(&v, 99.0), max: v.last().copied().unwrap_or(0) }
}

fn p50_compile(samples: &[Sample]) -> u64 {
    let mut v: Vec<u64> = samples.iter().map(|s| s.cpu_ns).collect();
    v.sort_unstable();
    percentile(&v, 50.0)
}

#[derive(Default)]
struct Agreement {
    steps: usize,
    /// Steps whose masks differ in any bit.
    differ: usize,
    /// Steps whose masks differ outside the EOS ids.
    differ_text: usize,
    /// Walk tokens that llguidance refused (its mask lacks them or `consume_token` fails).
    refused: usize,
    /// Differing steps, classified with the reference recognizer (a sample of up to three
    /// tokens per side and step): a token only one engine allows is either valid (the
    /// other engine misses it) or invalid (this engine over-allows it).
    stencil_misses: usize,
    stencil_extra: usize,
    llg_misses: usize,
    llg_extra: usize,
    /// No oracle (the reference recognizer refused the grammar).
    oracle: bool,
    examples: Vec<String>,
}

/// One llguidance configuration (Lark mode) on one grammar.
#[derive(Default)]
struct LlgRun {
    error: Option<String>,
    compile: Vec<Sample>,
    cold: Steps,
    warm: Steps,
    agreement: Agreement,
}

#[derive(Default)]
struct GrammarResult {
    name: String,
    path: String,
    error: Option<String>,
    seqs: usize,
    tokens: usize,
    ended: usize,
    lark_ns: u64,
    stencil_compile: Vec<Sample>,
    stencil_cold: Steps,
    stencil_warm: Steps,
    llg: Vec<LlgRun>,
}

fn replay_stencil(g: &Arc<CompiledGrammar>, seqs: &[Vec<u32>], out: &mut Steps) {
    let mut mask = bitmask::new_mask(g.vocab().mask_width());
    for (k, seq) in seqs.iter().enumerate() {
        let mut m = Matcher::new(g.clone());
        for (i, &t) in seq.iter().enumerate() {
            let (r, s) = time(|| m.fill_mask(&mut mask));
            if let Err(e) = r {
                out.error.get_or_insert(format!("seq {k} step {i}: fill_mask: {e}"));
                break;
            }
            out.samples.push(s);
            if let Err(e) = m.accept_token(t) {
                out.error.get_or_insert(format!("seq {k} step {i}: accept_token({t}): {e}"));
                break;
            }
        }
    }
}

/// llguidance stops by itself once the grammar can only end; EOS is then not consumed.
fn llg_done(m: &llguidance::Matcher, vocab: &Vocabulary, t: u32) -> bool {
    vocab.is_eos(t) && m.is_stopped()
}

fn replay_llg(m0: &llguidance::Matcher, vocab: &Vocabulary, seqs: &[Vec<u32>], out: &mut Steps) {
    for (k, seq) in seqs.iter().enumerate() {
        let mut m = m0.clone();
        for (i, &t) in seq.iter().enumerate() {
            let (r, s) = time(|| m.compute_mask_or_eos());
            match r {
                Ok(mask) => drop(mask),
                Err(e) => {
                    out.error.get_or_insert(format!("seq {k} step {i}: compute_mask: {}", first_line(&e.to_string())));
                    break;
                }
            }
            out.samples.push(s);
            if llg_done(&m, vocab, t) {
                break;
            }
            if let Err(e) = m.consume_token(t) {
                out.error
                    .get_or_insert(format!("seq {k} step {i}: consume_token({t}): {}", first_line(&e.to_string())));
                break;
            }
        }
    }
}

fn show_bytes(b: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(b))
}

fn show_tokens(vocab: &Vocabulary, ids: &[u32]) -> String {
    let mut s: Vec<String> = ids.iter().take(5).map(|&t| format!("{t} {}", show_bytes(vocab.token_bytes(t)))).collect();
    if ids.len() > 5 {
        s.push(format!("… {} in all", ids.len()));
    }
    s.join(", ")
}

/// Up to three tokens of a list (first, middle, last).
fn sample3(ids: &[u32]) -> Vec<u32> {
    let mut v = vec![];
    if !ids.is_empty() {
        v.push(ids[0]);
        v.push(ids[ids.len() / 2]);
        v.push(ids[ids.len() - 1]);
        v.dedup();
    }
    v
}

/// Is `text` followed by token `t` a viable prefix (EOS: a complete match)? `None` for
/// control tokens the oracle cannot judge.
fn oracle_allows(rec: &Recognizer, vocab: &Vocabulary, text: &[u8], t: u32) -> Option<bool> {
    if vocab.is_eos(t) {
        return Some(rec.matches(text));
    }
    if !vocab.is_text(t) {
        return None;
    }
    let mut s = text.to_vec();
    s.extend_from_slice(vocab.token_bytes(t));
    Some(rec.is_prefix(&s))
}

/// Both engines in lockstep over the walks: compare masks and llguidance's acceptance.
fn check_agreement(
    g: &Arc<CompiledGrammar>,
    m0: &llguidance::Matcher,
    seqs: &[Vec<u32>],
    rec: Option<&Recognizer>,
    name: &str,
) -> Agreement {
    let vocab = g.vocab().clone();
    let mut a = Agreement { oracle: rec.is_some(), ..Default::default() };
    let mut smask = bitmask::new_mask(vocab.mask_width());
    let n_words = bitmask::words(vocab.len());
    let mut eos_mask = bitmask::new_mask(vocab.mask_width());
    vocab.eos_ids().iter().for_each(|&e| bitmask::set(&mut eos_mask, e));
    for (k, seq) in seqs.iter().enumerate() {
        let mut sm = Matcher::new(g.clone());
        let mut lm = m0.clone();
        let mut text: Vec<u8> = Vec::new();
        for (i, &t) in seq.iter().enumerate() {
            if sm.fill_mask(&mut smask).is_err() {
                break;
            }
            let lmask = match lm.compute_mask_or_eos() {
                Ok(m) => m,
                Err(e) => {
                    a.refused += 1;
                    push_example(
                        &mut a,
                        format!(
                            "{name}: walk {k} step {i}: llguidance mask error after {}: {}",
                            show_tail(&text),
                            first_line(&e.to_string())
                        ),
                    );
                    break;
                }
            };
            a.steps += 1;
            let lwords = lmask.as_slice();
            let (mut only_s, mut only_l, mut differ_text) = (Vec::new(), Vec::new(), false);
            for w in 0..n_words {
                let sw = smask[w];
                let lw = lwords.get(w).copied().unwrap_or(0);
                if sw != lw {
                    if (sw ^ lw) & !eos_mask[w] != 0 {
                        differ_text = true;
                    }
                    let mut d = sw ^ lw;
                    while d != 0 {
                        let bit = d.trailing_zeros();
                        d &= d - 1;
                        let id = w as u32 * 32 + bit;
                        if sw >> bit & 1 == 1 {
                            only_s.push(id);
                        } else {
                            only_l.push(id);
                        }
                    }
                }
            }
            let differ = !only_s.is_empty() || !only_l.is_empty();
            a.differ += differ as usize;
            a.differ_text += differ_text as usize;
            if differ {
                let mut verdict = String::new();
                if let Some(rec) = rec {
                    let judge = |ids: &[u32]| -> (bool, bool) {
                        let mut valid = false;
                        let mut invalid = false;
                        for t in sample3(ids) {
                            match oracle_allows(rec, &vocab, &text, t) {
                                Some(true) => valid = true,
                                Some(false) => invalid = true,
                                None => {}
                            }
                        }
                        (valid, invalid)
                    };
                    let (l_valid, l_invalid) = judge(&only_l);
                    let (s_valid, s_invalid) = judge(&only_s);
                    a.stencil_misses += l_valid as usize;
                    a.llg_extra += l_invalid as usize;
                    a.llg_misses += s_valid as usize;
                    a.stencil_extra += s_invalid as usize;
                    let mut parts = Vec::new();
                    if l_valid {
                        parts.push("Stencil misses valid tokens");
                    }
                    if l_invalid {
                        parts.push("llguidance allows invalid tokens");
                    }
                    if s_valid {
                        parts.push("llguidance misses valid tokens");
                    }
                    if s_invalid {
                        parts.push("Stencil allows invalid tokens");
                    }
                    verdict = format!(" → oracle: {}", parts.join("; "));
                }
                push_example(
                    &mut a,
                    format!(
                        "{name}: walk {k} step {i}, after {}: only Stencil allows [{}]; only llguidance allows [{}]{verdict}",
                        show_tail(&text),
                        show_tokens(&vocab, &only_s),
                        show_tokens(&vocab, &only_l)
                    ),
                );
            }
            if llg_done(&lm, &vocab, t) {
                break;
            }
            let in_mask = lmask.is_allowed(t);
            if let Err(e) = lm.consume_token(t) {
                a.refused += 1;
                push_example(
                    &mut a,
                    format!(
                        "{name}: walk {k} step {i}: llguidance refuses token {t} {} (in its mask: {in_mask}): {}",
                        show_bytes(vocab.token_bytes(t)),
                        first_line(&e.to_string())
                    ),
                );
                break;
            } else if !in_mask {
                a.refused += 1;
                push_example(
                    &mut a,
                    format!(
                        "{name}: walk {k} step {i}: token {t} {} missing from llguidance's mask but consumed",
                        show_bytes(vocab.token_bytes(t))
                    ),
                );
            }
            if sm.accept_token(t).is_err() {
                break;
            }
            if vocab.is_text(t) {
                text.extend_from_slice(vocab.token_bytes(t));
            }
        }
    }
    a
}

fn show_tail(text: &[u8]) -> String {
    let start = text.len().saturating_sub(40);
    let pre = if start > 0 { "…" } else { "" };
    format!("{pre}{}", show_bytes(&text[start..]))
}

fn push_example(a: &mut Agreement, s: String) {
    if a.examples.len() < 4 {
        a.examples.push(s);
    }
}

struct VocabResult {
    name: &'static str,
    size: usize,
    eos: Vec<u32>,
    stencil_setup: Sample,
    llg_setup: Sample,
    grammars: Vec<GrammarResult>,
}

fn run_vocab(name: &'static str, vocab: Arc<Vocabulary>, sources: &[Source], args: &Args) -> VocabResult {
    eprintln!("== {name}: {} tokens, EOS {:?}", vocab.len(), vocab.eos_ids());
    // Per-vocabulary setup, outside the per-grammar compile times: Stencil's shared token
    // trie (built by the first compile), llguidance's TokEnv and ParserFactory (slicer).
    let (_, stencil_setup) = time(|| {
        let g = parse_gbnf("root ::= \"a\"").expect("trivial grammar");
        CompiledGrammar::new(&g, vocab.clone()).expect("trivial grammar compiles")
    });
    let ((env, factory), llg_setup) = time(|| {
        let env = llg::tok_env(&vocab);
        let f = llg::factory(&env).unwrap_or_else(|e| die(&format!("llguidance factory: {e}")));
        (env, f)
    });
    drop(env);
    let mut grammars = Vec::new();
    for src in sources {
        eprintln!("-- {name} / {}", src.name);
        grammars.push(run_grammar(src, &vocab, &factory, args));
    }
    VocabResult { name, size: vocab.len(), eos: vocab.eos_ids().to_vec(), stencil_setup, llg_setup, grammars }
}

fn run_grammar(
    src: &Source,
    vocab: &Arc<Vocabulary>,
    factory: &llguidance::ParserFactory,
    args: &Args,
) -> GrammarResult {
    let mut r = GrammarResult { name: src.name.clone(), path: src.path.clone(), ..Default::default() };
    let grammar = match parse_gbnf(&src.text) {
        Ok(g) => g,
        Err(e) => {
            r.error = Some(format!("Stencil parse error: {e}"));
            return r;
        }
    };

    // 1. Stencil compile time.
    for _ in 0..args.compile_reps {
        let (res, s) = time(|| {
            parse_gbnf(&src.text)
                .map_err(|e| e.to_string())
                .and_then(|g| CompiledGrammar::new(&g, vocab.clone()).map_err(|e| e.to_string()))
        });
        if let Err(e) = res {
            r.error = Some(format!("Stencil compile error: {e}"));
            return r;
        }
        r.stencil_compile.push(s);
    }

    // 2. Token sequences from Stencil's masks (on a compiled grammar of their own).
    let walk_g = CompiledGrammar::new(&grammar, vocab.clone()).expect("compiled above");
    let seed = args.seed ^ fnv(&src.name);
    let seqs = match random_walks(&walk_g, vocab, args.seqs, args.max_tokens, seed) {
        Ok(s) => s,
        Err(e) => {
            r.error = Some(format!("Stencil random walk failed: {e}"));
            return r;
        }
    };
    drop(walk_g);
    r.seqs = seqs.len();
    r.tokens = seqs.iter().map(|s| s.len()).sum();
    r.ended = seqs.iter().filter(|s| s.last().is_some_and(|&t| vocab.is_eos(t))).count();

    // 3. Stencil mask times: a fresh compiled grammar (cold), then again (warm).
    let g = CompiledGrammar::new(&grammar, vocab.clone()).expect("compiled above");
    replay_stencil(&g, &seqs, &mut r.stencil_cold);
    replay_stencil(&g, &seqs, &mut r.stencil_warm);

    let rec = Recognizer::new(&grammar).ok();
    for &mode in &args.modes {
        let mut run = LlgRun::default();
        let (lark, lark_time) = time(|| lark::to_lark(&grammar, mode));
        r.lark_ns = r.lark_ns.max(lark_time.cpu_ns);
        let lark = match lark {
            Ok(l) => l,
            Err(e) => {
                run.error = Some(format!("no Lark form: {e}"));
                r.llg.push(run);
                continue;
            }
        };
        if let Some(dir) = &args.dump_lark {
            let _ = std::fs::create_dir_all(dir);
            let _ = std::fs::write(dir.join(format!("{}.{}.lark", src.name, mode.name())), &lark);
        }
        // 1. llguidance compile time.
        for _ in 0..args.compile_reps {
            let (res, s) = time(|| llg::compile(factory, &lark));
            if let Err(e) = res {
                run.error = Some(format!("llguidance compile error: {}", first_line(&e.to_string())));
                break;
            }
            run.compile.push(s);
        }
        if run.error.is_some() {
            run.compile.clear();
            r.llg.push(run);
            continue;
        }
        // 3. Mask times; 4. agreement (untimed).
        let m0 = llg::compile(factory, &lark).expect("compiled above");
        replay_llg(&m0, vocab, &seqs, &mut run.cold);
        replay_llg(&m0, vocab, &seqs, &mut run.warm);
        run.agreement = check_agreement(&g, &m0, &seqs, rec.as_ref(), &format!("{} ({})", src.name, mode.name()));
        r.llg.push(run);
    }
    r
}

fn first_line(s: &str) -> String {
    let l = s.lines().next().unwrap_or("").trim();
    if l.chars().count() > 200 {
        format!("{}…", l.chars().take(200).collect::<String>())
    } else {
        l.to_string()
    }
}

// ---------------------------------------------------------------------------------------
// Report

fn us(ns: u64) -> String {
    let v = ns as f64 / 1000.0;
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

fn ms(ns: u64) -> String {
    let v = ns as f64 / 1e6;
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

fn ratio(llg: u64, stencil: u64) -> String {
    if stencil == 0 || llg == 0 {
        "–".into()
    } else {
        format!("{:.2}×", llg as f64 / stencil as f64)
    }
}

fn civil_date(secs: u64) -> String {
    // Days since 1970-01-01 → (y, m, d), Howard Hinnant's algorithm.
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    let rem = secs % 86_400;
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", rem / 3600, rem / 60 % 60)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|x| x.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

const DECODE_TITLE: &str = "## Decoding on llama.cpp";
const SPECULATION_TITLE: &str = "## Speculative decoding";
const TOOLS_TITLE: &str = "## Tool calling";
const SCALING_TITLE: &str = "## Inference-time scaling";
const WATERMARK_TITLE: &str = "## Watermark detection";
/// Written by `scripts/bench.sh` from `scripts/bench-python.sh`'s report; always kept here.
const PYTHON_TITLE: &str = "## Through Python";
/// Written by `scripts/bench.sh` from `scripts/bench-server.sh`'s report; always kept here.
const SERVER_TITLE: &str = "## Serving";
/// Written by `scripts/bench.sh` from `mask_digest`'s output (`--parts tail`); always kept here.
const TAIL_TITLE: &str = "## Whole dev split";

/// A section of a report, from its title (a prefix of its heading) to the next `## `
/// heading or the end.
fn previous_section<'a>(report: &'a str, title: &str) -> Option<&'a str> {
    let start = report.find(&format!("\n{title}"))? + 1;
    let body = start + title.len();
    let end = report[body..].find("\n## ").map_or(report.len(), |e| body + e + 1);
    Some(&report[start..end])
}

/// How a report that kept the GBNF and JSON Schema sections says so (one header bullet, that
/// run's `Run` lines nested under it).
const MASKS_KEPT: &str =
    "- Kept from the previous report (not rerun by this `--parts`): the GBNF and JSON Schema sections";

/// The GBNF and JSON Schema parts of a report: from its first section to the first of the
/// other parts' sections (or the end), with a header bullet saying when and at which commit
/// they ran and with which settings (that report's `Run` lines; a report that kept them
/// already passes its bullet on).
fn previous_mask_sections(report: &str) -> Option<(String, &str)> {
    let start = report.find("\n## ")? + 1;
    let end = [
        DECODE_TITLE,
        SPECULATION_TITLE,
        TOOLS_TITLE,
        SCALING_TITLE,
        WATERMARK_TITLE,
        PYTHON_TITLE,
        SERVER_TITLE,
        TAIL_TITLE,
    ]
    .iter()
    .filter_map(|t| report.find(&format!("\n{t}")).map(|i| i + 1))
    .filter(|&i| i >= start)
    .min()
    .unwrap_or(report.len());
    if end <= start {
        return None;
    }
    let sections = &report[start..end];
    let lines: Vec<&str> = report[..start].lines().collect();
    let bullet = match lines.iter().position(|l| l.starts_with(MASKS_KEPT)) {
        Some(i) => {
            let nested = lines[i + 1..].iter().take_while(|l| l.starts_with("  - "));
            std::iter::once(&lines[i]).chain(nested).map(|l| format!("{l}\n")).collect()
        }
        None => {
            let field = |p: &str| lines.iter().find_map(|l| l.strip_prefix(p)).map(str::trim);
            let headings: Vec<&str> = sections.lines().filter_map(|l| l.strip_prefix("## ")).collect();
            let span = match (headings.first(), headings.last()) {
                (Some(a), Some(b)) if a != b => format!(" (*{a}* to *{b}*)"),
                (Some(a), _) => format!(" (*{a}*)"),
                _ => String::new(),
            };
            let mut b = format!(
                "{MASKS_KEPT}{span}, run of {}, Stencil commit {}:\n",
                field("- Date: ").unwrap_or("an unknown date"),
                field("- Stencil: commit ").unwrap_or("unknown")
            );
            for l in lines.iter().filter(|l| l.starts_with("- Run: ") || l.starts_with("- JSON Schema run: ")) {
                b += &format!("  {l}\n");
            }
            b
        }
    };
    Some((bullet, sections))
}

/// `section` with a line under its heading saying when and at which commit it ran.
fn with_provenance(section: &str, title: &str) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let commit = std::env::var("STENCIL_BENCH_COMMIT").unwrap_or_else(|_| "unknown".into());
    let line = format!("*Run of {}, Stencil commit {commit}.*\n\n", civil_date(now));
    match section.strip_prefix(title).and_then(|rest| rest.find("\n\n").map(|i| title.len() + i + 2)) {
        Some(at) => format!("{}{line}{}", &section[..at], &section[at..]),
        None => format!("{section}{line}"),
    }
}

fn report(
    results: &[VocabResult],
    schema_results: Option<&schema::SchemaResults>,
    args: &Args,
    notes: &[String],
    overhead: Sample,
    load_start: &str,
    total_s: f64,
) -> String {
    let mut o = String::new();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let modes: Vec<&str> = args.modes.iter().map(|m| m.name()).collect();
    let _ = writeln!(o, "# Benchmarks: Stencil vs llguidance\n");
    let _ =
        writeln!(o, "Generated by `scripts/bench.sh` (`cargo run --release -p stencil-bench`); do not edit by hand.\n");
    let _ = writeln!(o, "- Date: {}", civil_date(now));
    let _ = writeln!(
        o,
        "- Machine: {cores} cores, {}; load average {load_start} at start, {} at end",
        cpu_model(),
        load_average()
    );
    if let Ok(v) = std::env::var("STENCIL_BENCH_RUSTC") {
        let _ = writeln!(o, "- Toolchain: {v}, release profile");
    }
    if let Ok(v) = std::env::var("STENCIL_BENCH_COMMIT") {
        let _ = writeln!(o, "- Stencil: commit {v}");
    }
    let _ = writeln!(
        o,
        "- llguidance {} (crates `llguidance` + `toktrie` from crates.io; default features less rayon and JSON-Schema `$ref` resolution)",
        llguidance_version()
    );
    if args.gbnf {
        let _ = writeln!(
            o,
            "- Run: {} sequences per grammar, at most {} tokens each, seed {}, {} compile repetitions, Lark modes {}; {:.0} s in all",
            args.seqs,
            args.max_tokens,
            args.seed,
            args.compile_reps,
            modes.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", "),
            total_s
        );
    } else {
        let _ = writeln!(o, "- Run: {:.0} s in all", total_s);
    }
    if let Some(sr) = schema_results {
        let _ = writeln!(
            o,
            "- JSON Schema run: the first {} schemas with a valid instance per subset of `{}`, {} s limit per engine and schema; {:.0} s",
            sr.per_subset,
            sr.corpus_label,
            sr.timeout.as_secs_f64(),
            sr.seconds
        );
    }
    let _ = writeln!(o);

    if results.is_empty() {
        if schema_results.is_some() {
            let _ = writeln!(o, "## Summary\n");
        }
    } else {
        summary_section(&mut o, results, args);
    }
    if let Some(sr) = schema_results {
        schema::summary(&mut o, sr);
    }
    if !results.is_empty() {
        let _ = writeln!(o, "## Method\n");
        let _ = writeln!(
            o,
            "\
- **Grammars**: llama.cpp's example grammars (`fixtures/gbnf/*.gbnf`) and `bench/grammars/*.gbnf`.
  Stencil parses the GBNF. llguidance has no GBNF reader in Rust (its converter is a Python script),
  so the bench prints llguidance's Lark dialect from Stencil's parsed IR (`bench/src/lark.rs`), in two
  modes. `terminals` does what llguidance's own `gbnf_to_lark.py` does: every rule but the root whose
  body is text only (literals, classes, `.`, other such rules) becomes a terminal, i.e. one greedy
  lexeme; this is how llguidance is normally fed GBNF, and its fast path. `rules` keeps every GBNF
  rule a Lark rule, so every literal, class and `.` is its own lexeme: closer to GBNF's
  character-level meaning, but llguidance's lexer is still greedy over multi-character literals.
  The `{{m,n}}` repetitions are kept as such in both.
- **Vocabularies**: `fixtures/vocab/` (SmolLM2-135M, 49,152 tokens; Gemma 3 270M, 262,144 tokens)
  as Stencil loads them. llguidance gets a `TokTrie` over the very same token bytes and EOS ids;
  control and unused tokens carry toktrie's 0xFF special-token prefix (never grammar text),
  byte-fallback tokens are their one byte. Users build llguidance's tokenizer from the model's
  Hugging Face tokenizer instead (`llguidance.hf.from_tokenizer`); the two set-ups give llguidance
  the same mask times on the same steps (`scripts/bench-python.sh --engines
  llguidance,llguidance-bytes`, 2026-12-04, 40 schemas: Gemma warm p99 2,410 vs 2,275 µs, cold
  p99 2,258 vs 2,267 µs; SmolLM2 423 vs 421 and 424 vs 417 µs), so the ratios here are not an
  artefact of the set-up.
- **Compile**: Stencil = `parse_gbnf` + `CompiledGrammar::new`; llguidance = `TopLevelGrammar::from_lark`
  + `ParserFactory::create_parser` + `Matcher::new` (printing the Lark is not counted; it took at
  most {lark} ms). Per-vocabulary setup (Stencil's token trie; llguidance's `TokEnv` and
  `ParserFactory` with its default slicer) is done once beforehand and reported separately. p50 of
  the repetitions, thread CPU time.
- **Sequences**: a seeded random walk over Stencil's masks (half the steps pick among ≤2-byte
  tokens; after a random target length, punctuation is preferred and EOS is taken once allowed;
  otherwise the walk stops at the length cap). The same token ids are fed to both engines.
- **Mask time**: only the full next-token bitmask call is timed, on one thread: Stencil
  `Matcher::fill_mask` into a reused buffer; llguidance `Matcher::compute_mask_or_eos` (it returns a
  fresh `SimpleVob`; its allocation is inside the timing, its drop is not). llguidance's
  fast-forward is off (its `TokEnv` reports a non-canonical tokenizer, so `compute_mask` always
  builds the whole mask instead of a one-token forced mask) and it runs without rayon; its
  `ParserLimits` are the defaults. Once llguidance has stopped by itself (the grammar can only end)
  the final EOS is not fed to it.
  *Cold*: a freshly compiled grammar (one per engine), caches filled lazily during the first replay
  of all sequences (Stencil's per-state token-mask cache; llguidance's lazily built lexer DFA, shared
  by matcher clones). *Warm*: the same sequences replayed again on that compiled grammar.
  Times are thread CPU time (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`); one empty timing costs
  {oc} µs CPU ({ow} µs wall) and is included in every sample. Percentiles are nearest-rank over all
  steps of all sequences; *max* is the single slowest step; *1st mask* is the cold phase's first step
  (the first mask of a freshly compiled grammar, so compile + 1st mask is the time to first mask). Ratio = llguidance / Stencil in the same
  phase: above 1 means Stencil is faster.
- **Agreement**: both engines in lockstep over every sequence; at each step the two masks are compared
  bit for bit (all ids, and outside the EOS ids), and llguidance must accept the walk's token. Where
  the masks differ, up to three tokens allowed by only one engine are judged by Stencil's reference
  recognizer (`stencil_grammar::reference`, a slow, independent oracle over the grammar IR: is the
  text so far plus the token a prefix of the language; for EOS, is the text complete): a valid one
  means the other engine misses it, an invalid one means this engine over-allows.",
            lark = ms(results.iter().flat_map(|v| v.grammars.iter().map(|g| g.lark_ns)).max().unwrap_or(0)),
            oc = us(overhead.cpu_ns),
            ow = us(overhead.wall_ns),
        );
    }
    let _ = writeln!(o);

    if let Some(v) = results.first() {
        let list: Vec<String> = v.grammars.iter().map(|g| format!("`{}` (`{}`)", g.name, g.path)).collect();
        let _ = writeln!(o, "Grammars: {}.\n", list.join(", "));
    }
    let phase_labels = ["cold", "warm"];
    for v in results {
        let _ = writeln!(o, "## {} ({} tokens, EOS ids {:?})\n", v.name, v.size, v.eos);
        let _ = writeln!(
            o,
            "Per-vocabulary setup (CPU): Stencil token trie {} ms; llguidance TokEnv + ParserFactory {} ms.\n",
            ms(v.stencil_setup.cpu_ns),
            ms(v.llg_setup.cpu_ns)
        );
        let _ = writeln!(o, "| grammar | engine | compile p50 ms | 1st mask µs | mask p50 µs | p99 µs | max µs | ratio p50 / p99 | steps |");
        let _ = writeln!(o, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
        let pooled = pool(v, args.modes.len());
        for g in &v.grammars {
            if let Some(e) = &g.error {
                let _ = writeln!(o, "| {} | – | – | – | – | – | – | – | {} |", g.name, cell(e));
                continue;
            }
            let st = [summarize(&g.stencil_cold.samples, true), summarize(&g.stencil_warm.samples, true)];
            for (p, steps) in [&g.stencil_cold, &g.stencil_warm].into_iter().enumerate() {
                let s = st[p];
                let compile = if p == 0 { ms(p50_compile(&g.stencil_compile)) } else { String::new() };
                let _ = writeln!(
                    o,
                    "| {} | Stencil {} | {} | {} | {} | {} | {} |  | {}{} |",
                    g.name,
                    phase_labels[p],
                    compile,
                    first_mask(steps, p),
                    us(s.p50),
                    us(s.p99),
                    us(s.max),
                    s.n,
                    stopped(steps)
                );
            }
            for (mi, run) in g.llg.iter().enumerate() {
                let label = format!("llguidance `{}`", args.modes[mi].name());
                if let Some(e) = &run.error {
                    let _ = writeln!(o, "| {} | {label} | – | – | – | – | – | – | {} |", g.name, cell(e));
                    continue;
                }
                for (p, steps) in [&run.cold, &run.warm].into_iter().enumerate() {
                    let s = summarize(&steps.samples, true);
                    let compile = if p == 0 { ms(p50_compile(&run.compile)) } else { String::new() };
                    let _ = writeln!(
                        o,
                        "| {} | {label} {} | {} | {} | {} | {} | {} | {} / {} | {}{} |",
                        g.name,
                        phase_labels[p],
                        compile,
                        first_mask(steps, p),
                        us(s.p50),
                        us(s.p99),
                        us(s.max),
                        ratio(s.p50, st[p].p50),
                        ratio(s.p99, st[p].p99),
                        s.n,
                        stopped(steps)
                    );
                }
            }
        }
        let sums: Vec<Summary> = pooled.iter().map(|s| summarize(s, true)).collect();
        for i in 0..pooled.len() {
            let (label, rat) = if i < 2 {
                (format!("Stencil {}", phase_labels[i]), String::new())
            } else {
                let p = (i - 2) % 2;
                (
                    format!("llguidance `{}` {}", args.modes[(i - 2) / 2].name(), phase_labels[p]),
                    format!("{} / {}", ratio(sums[i].p50, sums[p].p50), ratio(sums[i].p99, sums[p].p99)),
                )
            };
            let _ = writeln!(
                o,
                "| **all** | {label} |  |  | {} | {} | {} | {rat} | {} |",
                us(sums[i].p50),
                us(sums[i].p99),
                us(sums[i].max),
                sums[i].n
            );
        }
        let _ = writeln!(o);
        let walls: Vec<Summary> = pooled.iter().map(|s| summarize(s, false)).collect();
        let mut wall_parts = vec![
            format!("Stencil cold {} / {}", us(walls[0].p50), us(walls[0].p99)),
            format!("warm {} / {}", us(walls[1].p50), us(walls[1].p99)),
        ];
        for (mi, m) in args.modes.iter().enumerate() {
            let (c, w) = (walls[2 + 2 * mi], walls[3 + 2 * mi]);
            wall_parts.push(format!(
                "llguidance `{}` cold {} / {}, warm {} / {}",
                m.name(),
                us(c.p50),
                us(c.p99),
                us(w.p50),
                us(w.p99)
            ));
        }
        let _ = writeln!(o, "Wall-clock cross-check, all grammars pooled (p50 / p99 µs): {}.\n", wall_parts.join("; "));

        // Agreement.
        let _ = writeln!(o, "Agreement (lockstep over the same sequences; oracle columns count differing steps):\n");
        let _ = writeln!(
            o,
            "| grammar | llguidance mode | sequences (ended) | tokens | steps compared | masks differ | differ outside EOS | walk tokens llguidance refused | Stencil misses valid | Stencil allows invalid | llguidance misses valid | llguidance allows invalid |"
        );
        let _ = writeln!(o, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        let mut examples = Vec::new();
        for g in &v.grammars {
            if g.error.is_some() {
                continue;
            }
            for (mi, run) in g.llg.iter().enumerate() {
                let mode = args.modes[mi].name();
                if run.error.is_some() {
                    let _ = writeln!(
                        o,
                        "| {} | `{mode}` | {} ({}) | {} | – | – | – | – | – | – | – | – |",
                        g.name, g.seqs, g.ended, g.tokens
                    );
                    continue;
                }
                let a = &run.agreement;
                let or = |n: usize| {
                    if a.oracle {
                        n.to_string()
                    } else {
                        "n/a".into()
                    }
                };
                let _ = writeln!(
                    o,
                    "| {} | `{mode}` | {} ({}) | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    g.name,
                    g.seqs,
                    g.ended,
                    g.tokens,
                    a.steps,
                    a.differ,
                    a.differ_text,
                    a.refused,
                    or(a.stencil_misses),
                    or(a.stencil_extra),
                    or(a.llg_misses),
                    or(a.llg_extra)
                );
                examples.extend(a.examples.iter().take(2).cloned());
            }
        }
        let _ = writeln!(o);
        if !examples.is_empty() {
            let _ = writeln!(o, "First disagreements (per grammar and mode, at most two):\n");
            for e in examples {
                let _ = writeln!(o, "- {}", e.replace('|', "\\|"));
            }
            let _ = writeln!(o);
        }
    }
    if !notes.is_empty() {
        let _ = writeln!(o, "## Notes\n");
        for n in notes {
            let _ = writeln!(o, "- {n}");
        }
        let _ = writeln!(o);
    }
    if let Some(sr) = schema_results {
        schema::section(&mut o, sr);
    }
    o
}

/// The cold phase's first step: the first mask of a freshly compiled grammar.
fn first_mask(steps: &Steps, phase: usize) -> String {
    match (phase, steps.samples.first()) {
        (0, Some(s)) => us(s.cpu_ns),
        _ => String::new(),
    }
}

/// All steps of all grammars: [Stencil cold, Stencil warm, then per Lark mode cold, warm].
fn pool(v: &VocabResult, n_modes: usize) -> Vec<Vec<Sample>> {
    let mut pooled: Vec<Vec<Sample>> = vec![Vec::new(); 2 + 2 * n_modes];
    for g in v.grammars.iter().filter(|g| g.error.is_none()) {
        pooled[0].extend_from_slice(&g.stencil_cold.samples);
        pooled[1].extend_from_slice(&g.stencil_warm.samples);
        for (mi, run) in g.llg.iter().enumerate().filter(|(_, r)| r.error.is_none()) {
            pooled[2 + 2 * mi].extend_from_slice(&run.cold.samples);
            pooled[3 + 2 * mi].extend_from_slice(&run.warm.samples);
        }
    }
    pooled
}

fn summary_section(o: &mut String, results: &[VocabResult], args: &Args) {
    let _ = writeln!(o, "## Summary\n");
    let _ = writeln!(o, "All grammars pooled, thread CPU µs per mask, Stencil vs llguidance (ratio = llguidance / Stencil; above 1: Stencil faster):\n");
    let _ = writeln!(o, "| vocabulary | llguidance mode | phase | Stencil p50 | llguidance p50 | ratio p50 | Stencil p99 | llguidance p99 | ratio p99 |");
    let _ = writeln!(o, "|---|---|---|---:|---:|---:|---:|---:|---:|");
    for v in results {
        let sums: Vec<Summary> = pool(v, args.modes.len()).iter().map(|s| summarize(s, true)).collect();
        for (mi, m) in args.modes.iter().enumerate() {
            for (p, phase) in ["cold", "warm"].iter().enumerate() {
                let (st, l) = (sums[p], sums[2 + 2 * mi + p]);
                let _ = writeln!(
                    o,
                    "| {} | `{}` | {phase} | {} | {} | {} | {} | {} | {} |",
                    v.name,
                    m.name(),
                    us(st.p50),
                    us(l.p50),
                    ratio(l.p50, st.p50),
                    us(st.p99),
                    us(l.p99),
                    ratio(l.p99, st.p99)
                );
            }
        }
    }
    let _ = writeln!(o);
    // The goal: faster at p50 and p99 on the largest vocabulary, against llguidance as it is
    // normally fed GBNF (the first Lark mode).
    if let (Some(v), Some(m)) = (results.iter().max_by_key(|v| v.size), args.modes.first()) {
        let sums: Vec<Summary> = pool(v, args.modes.len()).iter().map(|s| summarize(s, true)).collect();
        for (p, phase) in ["cold", "warm"].iter().enumerate() {
            let (st, l) = (sums[p], sums[2 + p]);
            let verdict = |a: u64, b: u64| {
                if a < b {
                    "faster"
                } else if a == b {
                    "tied"
                } else {
                    "slower"
                }
            };
            let _ = writeln!(
                o,
                "- {} ({} tokens), {phase}, against llguidance `{}`: Stencil is **{}** at p50 ({} vs {} µs) and **{}** at p99 ({} vs {} µs).",
                v.name,
                v.size,
                m.name(),
                verdict(st.p50, l.p50),
                us(st.p50),
                us(l.p50),
                verdict(st.p99, l.p99),
                us(st.p99),
                us(l.p99)
            );
        }
        let _ = writeln!(o);
    }
}

fn cell(s: &str) -> String {
    first_line(s).replace('|', "\\|")
}

fn stopped(steps: &Steps) -> String {
    steps.error.as_ref().map(|e| format!(" (stopped: {})", cell(e))).unwrap_or_default()
}

/// What the tables cannot say by themselves: how llguidance was driven, and why its masks
/// can differ from GBNF's meaning.
const STATIC_NOTES: &[&str] = &[
    "llguidance's lexer is greedy: a lexeme that can go on never ends early, and the parser \
     never re-splits the text. GBNF is character-level, so where a lexeme can swallow text that \
     the rest of the grammar needs, llguidance refuses valid continuations (the oracle columns \
     count them as \"llguidance misses valid\"). Seen here: in `terminals` mode arithmetic's \
     `ws ::= [ \\t\\n]*` becomes one greedy lexeme that eats the `\"\\n\"` ending each line, \
     so the line can never end; in `rules` mode c.gbnf's keyword literals win over identifier \
     characters, so after `{` identifiers starting like a keyword (`ing`, `res`, `form`) are \
     refused. Both follow from llguidance's documented design, not from the Lark printing.",
    "llguidance API friction: (1) no GBNF reader in Rust (the converter is Python), hence \
     `bench/src/lark.rs`; (2) `Matcher::compute_mask` returns a freshly allocated `SimpleVob`, \
     there is no fill-this-buffer call in the Rust `Matcher`; (3) fast-forward is not a switch \
     but follows `TokenizerEnv::tokenize_is_canonical()`: with a canonical tokenizer \
     `compute_mask` returns a one-token mask whenever the grammar forces bytes, so a full mask \
     needs a non-canonical `TokEnv`; (4) once the grammar can only end, llguidance stops by \
     itself and `consume_token(EOS)` then fails, so callers must check `is_stopped()` first; \
     (5) special tokens must carry a 0xFF prefix byte in the `TokTrie`; (6) llguidance keeps \
     a per-(lexer state, Earley row) mask cache, so inside one long lexeme (a JSON string) \
     consecutive masks are copies of one cached mask (32 KB on Gemma); Stencil's p50 step is \
     likewise zeroing the mask and OR-ing cached per-state masks into it.",
    "The machine is shared with other work (see the load averages): thread CPU time leaves out \
     time spent waiting for a core but not cache and memory interference, so single-step \
     maxima (and cold p99 on few samples) move between runs; p50 and warm p99 are steadier.",
];

fn llguidance_version() -> &'static str {
    "1.9.1"
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--schema-worker") {
        schema::worker_main(argv.get(2).cloned().unwrap_or_else(|| die("--schema-worker needs a vocabulary")));
    }
    let args = parse_args();
    let t0 = std::time::Instant::now();
    let load_start = load_average();
    let mut notes = Vec::new();
    let mut sources = grammar_sources(&mut notes);
    notes.extend(STATIC_NOTES.iter().map(|n| n.to_string()));
    if let Some(names) = &args.grammars {
        sources.retain(|s| names.contains(&s.name));
    }
    let overhead = timer::overhead();
    let mut results = Vec::new();
    for v in args.vocabs.iter().filter(|_| args.gbnf) {
        let (name, vocab) = match v.as_str() {
            "smollm2" => ("SmolLM2-135M", stencil_test_support::fixtures::smollm2().0),
            "gemma3" => ("Gemma 3 270M", stencil_test_support::fixtures::gemma3().0),
            other => die(&format!("unknown vocabulary {other} (smollm2, gemma3)")),
        };
        results.push(run_vocab(name, vocab, &sources, &args));
    }
    let schema_results = args.schema.as_ref().map(|sa| schema::run(sa, &args.vocabs));
    let decode_section = args.decode.then(|| decode::run(&repo_root(), &decode::DecodeArgs::default()));
    let speculation_section =
        args.speculation.then(|| speculation::run(&repo_root(), &speculation::SpeculationArgs::default()));
    let tools_section = args.tools.then(|| tools::run(&repo_root()));
    let scaling_section = args.scaling.as_ref().map(|sc| scaling::run(&repo_root(), sc));
    let watermark_section = args.watermark.as_ref().map(|w| watermark::run(&repo_root(), w));
    if !args.gbnf {
        notes.clear();
    }
    let mut md =
        report(&results, schema_results.as_ref(), &args, &notes, overhead, &load_start, t0.elapsed().as_secs_f64());
    // The parts not rerun keep their sections from the previous report, which say when
    // they ran; the header says which were kept.
    let previous = args.out.as_ref().and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
    let mut kept = Vec::new();
    // Neither mask part rerun: their sections (and header lines) are kept too. The report
    // is then its header alone.
    let mut kept_masks = None;
    if !args.gbnf && args.schema.is_none() {
        if let Some((bullet, sections)) = previous_mask_sections(&previous) {
            md.truncate(md.trim_end().len());
            md.push_str("\n\n");
            md.push_str(sections);
            kept_masks = Some(bullet);
        }
    }
    for (section, title) in [
        (decode_section, DECODE_TITLE),
        (speculation_section, SPECULATION_TITLE),
        (tools_section, TOOLS_TITLE),
        (scaling_section, SCALING_TITLE),
        (watermark_section, WATERMARK_TITLE),
        (None, PYTHON_TITLE),
        (None, SERVER_TITLE),
        (None, TAIL_TITLE),
    ] {
        match section {
            Some(s) => md.push_str(&with_provenance(&s, title)),
            None => {
                if let Some(old) = previous_section(&previous, title) {
                    md.push_str(old);
                    kept.push(title.trim_start_matches("## "));
                }
            }
        }
    }
    let mut note = kept_masks.unwrap_or_default();
    if !kept.is_empty() {
        note += &format!(
            "- Kept from the previous report (not rerun by this `--parts`): {}; each says when it ran\n",
            kept.iter().map(|t| format!("*{t}*")).collect::<Vec<_>>().join(", ")
        );
    }
    if !note.is_empty() {
        let at = md.find("\n\n## ").map_or(md.len(), |i| i + 1);
        md.insert_str(at, &note);
    }
    match &args.out {
        Some(p) => {
            std::fs::write(p, &md).unwrap_or_else(|e| die(&format!("{}: {e}", p.display())));
            eprintln!("wrote {}", p.display());
        }
        None => print!("{md}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_kept_with_their_provenance() {
        let fresh = with_provenance("## Tool calling: x\n\nintro\n\n| t |\n", TOOLS_TITLE);
        let lines: Vec<&str> = fresh.lines().collect();
        assert_eq!(lines[0], "## Tool calling: x");
        assert!(lines[2].starts_with("*Run of ") && lines[2].ends_with(".*"), "{fresh}");
        assert_eq!(lines[4], "intro");
        let report = format!("# B\n\n## Summary\n\ns\n\n{DECODE_TITLE}: d\n\nrows\n\n{fresh}");
        assert_eq!(previous_section(&report, DECODE_TITLE), Some(format!("{DECODE_TITLE}: d\n\nrows\n\n").as_str()));
        assert_eq!(previous_section(&report, TOOLS_TITLE), Some(fresh.as_str()));
        assert_eq!(previous_section("# B\n", TOOLS_TITLE), None);
    }

    #[test]
    fn mask_sections_are_kept_with_their_run_lines() {
        let report = format!(
            "# B\n\n- Date: D\n- Stencil: commit C\n- Run: R\n- JSON Schema run: J\n\n## Summary\n\ns\n\n\
             ## JSON Schema: x\n\n### sub\n\nj\n\n{DECODE_TITLE}: d\n\nrows\n\n{SCALING_TITLE}: s\n"
        );
        let (bullet, sections) = previous_mask_sections(&report).expect("kept");
        assert_eq!(sections, "## Summary\n\ns\n\n## JSON Schema: x\n\n### sub\n\nj\n\n");
        assert_eq!(
            bullet,
            format!("{MASKS_KEPT} (*Summary* to *JSON Schema: x*), run of D, Stencil commit C:\n  - Run: R\n  - JSON Schema run: J\n")
        );
        // A report that kept them passes the same bullet on.
        let again =
            format!("# B\n\n- Date: E\n- Run: 9 s in all\n{bullet}- Kept … *x*\n\n{sections}{DECODE_TITLE}: d\n");
        assert_eq!(previous_mask_sections(&again), Some((bullet.clone(), sections)));
        // The Python part's section (written by scripts/bench.sh) is not a mask section.
        let with_python = format!("# B\n\n- Run: R\n\n## Summary\n\ns\n\n{PYTHON_TITLE}: p\n\nrows\n");
        assert_eq!(previous_mask_sections(&with_python).map(|(_, s)| s), Some("## Summary\n\ns\n\n"));
        assert_eq!(previous_section(&with_python, PYTHON_TITLE), Some(format!("{PYTHON_TITLE}: p\n\nrows\n").as_str()));
        // Nor is the serving part's (also written by scripts/bench.sh), alone or after it.
        let with_server = format!("{with_python}\n{SERVER_TITLE}: v\n\nrows\n");
        assert_eq!(previous_mask_sections(&with_server).map(|(_, s)| s), Some("## Summary\n\ns\n\n"));
        assert_eq!(
            previous_section(&with_server, PYTHON_TITLE),
            Some(format!("{PYTHON_TITLE}: p\n\nrows\n\n").as_str())
        );
        assert_eq!(previous_section(&with_server, SERVER_TITLE), Some(format!("{SERVER_TITLE}: v\n\nrows\n").as_str()));
        // Nor is the tail part's (also written by scripts/bench.sh).
        let with_tail = format!("{with_server}\n{TAIL_TITLE}: t\n\nrows\n");
        assert_eq!(previous_mask_sections(&with_tail).map(|(_, s)| s), Some("## Summary\n\ns\n\n"));
        assert_eq!(previous_section(&with_tail, TAIL_TITLE), Some(format!("{TAIL_TITLE}: t\n\nrows\n").as_str()));
        let only_server = format!("# B\n\n- Run: R\n\n## Summary\n\ns\n\n{SERVER_TITLE}: v\n");
        assert_eq!(previous_mask_sections(&only_server).map(|(_, s)| s), Some("## Summary\n\ns\n\n"));
        // Only the other parts' sections: nothing to keep.
        assert_eq!(previous_mask_sections(&format!("# B\n\n- Run: 1 s\n\n{DECODE_TITLE}: d\n")), None);
    }
}
