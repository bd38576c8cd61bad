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

mod lark;
mod llg;
mod timer;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use stencil_grammar::parse_gbnf;
use stencil_mask::bitmask;
use stencil_mask::{CompiledGrammar, Matcher, Vocabulary};
use timer::{percentile, time, Sample};

const USAGE: &str = "\
stencil-bench [options]
  --out PATH          write the Markdown report here (default: print it)
  --vocab NAMES       smollm2,gemma3 (default both)
  --grammars NAMES    grammar names to run (default all), e.g. json,c
  --seqs N            token sequences per grammar (default 4)
  --max-tokens N      longest sequence (default 150)
  --compile-reps N    compile repetitions (default 5)
  --seed N            random-walk seed (default 1)
  --lark-mode MODE    rules (default) or terminals (llguidance's gbnf_to_lark.py)
  --dump-lark DIR     also write each grammar's Lark text there
";

struct Args {
    out: Option<PathBuf>,
    vocabs: Vec<String>,
    grammars: Option<Vec<String>>,
    seqs: usize,
    max_tokens: usize,
    compile_reps: usize,
    seed: u64,
    mode: lark::Mode,
    dump_lark: Option<PathBuf>,
}

fn parse_args() -> Args {
    let mut a = Args {
        out: None,
        vocabs: vec!["smollm2".into(), "gemma3".into()],
        grammars: None,
        seqs: 4,
        max_tokens: 150,
        compile_reps: 5,
        seed: 1,
        mode: lark::Mode::Rules,
        dump_lark: None,
    };
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
            "--lark-mode" => {
                a.mode = match val().as_str() {
                    "rules" => lark::Mode::Rules,
                    "terminals" => lark::Mode::Terminals,
                    m => die(&format!("unknown --lark-mode {m}")),
                }
            }
            "--dump-lark" => a.dump_lark = Some(val().into()),
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            f => die(&format!("unknown option {f}\n{USAGE}")),
        }
    }
    a.compile_reps = a.compile_reps.max(1);
    a.max_tokens = a.max_tokens.max(12);
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
                notes.push(format!("`{rel}` is byte-identical to `{}`, so it is measured once, as `{}`.", same.path, same.name));
                continue;
            }
            let stem = p.file_stem().unwrap().to_string_lossy().to_string();
            out.push(Source { name: format!("{prefix}{stem}"), path: rel, text });
        }
    }
    out
}

/// SplitMix64: a tiny, fixed, seedable generator (sequences are reproducible).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// Seeded random walks over Stencil's masks. Each step picks an allowed non-EOS token
/// (half the time among the ≤2-byte ones, which walks the grammar's structure more than
/// long string tokens do); past a per-sequence target length it prefers punctuation-only
/// tokens and takes EOS as soon as the grammar allows it.
fn random_walks(g: &Arc<CompiledGrammar>, vocab: &Vocabulary, n: usize, max_len: usize, seed: u64) -> Result<Vec<Vec<u32>>, String> {
    let mut mask = bitmask::new_mask(vocab.mask_width());
    let eos = vocab.eos_ids()[0];
    let mut out = Vec::new();
    for k in 0..n {
        let mut rng = Rng(seed ^ (k as u64).wrapping_mul(0xA076_1D64_78BD_642F));
        let target = 8 + rng.below(max_len - 8);
        let mut m = Matcher::new(g.clone());
        let mut seq = Vec::new();
        while seq.len() < max_len {
            m.fill_mask(&mut mask).map_err(|e| format!("walk {k}, step {}: {e}", seq.len()))?;
            let allowed: Vec<u32> = bitmask::allowed(&mask).filter(|&t| !vocab.is_eos(t)).collect();
            let finishing = seq.len() >= target;
            if m.can_end() && (allowed.is_empty() || finishing) {
                m.accept_token(eos).map_err(|e| format!("walk {k}: EOS: {e}"))?;
                seq.push(eos);
                break;
            }
            if allowed.is_empty() {
                break;
            }
            let pool: Vec<u32> = if finishing && rng.chance(70) {
                allowed.iter().copied().filter(|&t| is_punct(vocab.token_bytes(t))).collect()
            } else if rng.chance(50) {
                allowed.iter().copied().filter(|&t| vocab.token_bytes(t).len() <= 2).collect()
            } else {
                Vec::new()
            };
            let pool = if pool.is_empty() { &allowed } else { &pool };
            let t = pool[rng.below(pool.len())];
            m.accept_token(t).map_err(|e| format!("walk {k}: token {t} from its own mask: {e}"))?;
            seq.push(t);
        }
        out.push(seq);
    }
    Ok(out)
}

fn is_punct(b: &[u8]) -> bool {
    !b.is_empty() && b.iter().all(|c| c.is_ascii_punctuation())
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
    /// Tokens of the walks that llguidance refused (its mask lacks them or consume fails).
    refused: usize,
    examples: Vec<String>,
}

#[derive(Default)]
struct GrammarResult {
    name: String,
    path: String,
    error: Option<String>,
    llg_error: Option<String>,
    seqs: usize,
    tokens: usize,
    lark_ns: u64,
    stencil_compile: Vec<Sample>,
    llg_compile: Vec<Sample>,
    stencil_cold: Steps,
    stencil_warm: Steps,
    llg_cold: Steps,
    llg_warm: Steps,
    agreement: Agreement,
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

fn replay_llg(m0: &llguidance::Matcher, seqs: &[Vec<u32>], out: &mut Steps) {
    for (k, seq) in seqs.iter().enumerate() {
        let mut m = m0.clone();
        for (i, &t) in seq.iter().enumerate() {
            let (r, s) = time(|| m.compute_mask_or_eos());
            match r {
                Ok(mask) => drop(mask),
                Err(e) => {
                    out.error.get_or_insert(format!("seq {k} step {i}: compute_mask: {e}"));
                    break;
                }
            }
            out.samples.push(s);
            if let Err(e) = m.consume_token(t) {
                out.error.get_or_insert(format!("seq {k} step {i}: consume_token({t}): {e}"));
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

/// Both engines in lockstep over the walks: compare masks and llguidance's acceptance.
fn check_agreement(g: &Arc<CompiledGrammar>, m0: &llguidance::Matcher, seqs: &[Vec<u32>], name: &str) -> Agreement {
    let vocab = g.vocab().clone();
    let mut a = Agreement::default();
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
                    push_example(&mut a, format!("{name}: walk {k} step {i}: llguidance mask error after {}: {e}", show_tail(&text)));
                    break;
                }
            };
            a.steps += 1;
            let lwords = lmask.as_slice();
            let (mut only_s, mut only_l, mut differ, mut differ_text) = (Vec::new(), Vec::new(), false, false);
            for w in 0..n_words {
                let sw = smask[w];
                let lw = lwords.get(w).copied().unwrap_or(0);
                if sw != lw {
                    differ = true;
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
            a.differ += differ as usize;
            a.differ_text += differ_text as usize;
            if differ {
                push_example(
                    &mut a,
                    format!(
                        "{name}: walk {k} step {i}, after {}: only Stencil allows [{}]; only llguidance allows [{}]",
                        show_tail(&text),
                        show_tokens(&vocab, &only_s),
                        show_tokens(&vocab, &only_l)
                    ),
                );
            }
            let in_mask = lmask.is_allowed(t);
            if let Err(e) = lm.consume_token(t) {
                a.refused += 1;
                push_example(&mut a, format!("{name}: walk {k} step {i}: llguidance refuses token {t} {} (in its mask: {in_mask}): {e}", show_bytes(vocab.token_bytes(t))));
                break;
            } else if !in_mask {
                a.refused += 1;
                push_example(&mut a, format!("{name}: walk {k} step {i}: token {t} {} missing from llguidance's mask but consumed", show_bytes(vocab.token_bytes(t))));
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
    if a.examples.len() < 5 {
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

fn run_grammar(src: &Source, vocab: &Arc<Vocabulary>, factory: &llguidance::ParserFactory, args: &Args) -> GrammarResult {
    let mut r = GrammarResult { name: src.name.clone(), path: src.path.clone(), ..Default::default() };
    let grammar = match parse_gbnf(&src.text) {
        Ok(g) => g,
        Err(e) => {
            r.error = Some(format!("Stencil parse error: {e}"));
            return r;
        }
    };
    let (lark, lark_time) = time(|| lark::to_lark(&grammar, args.mode));
    r.lark_ns = lark_time.cpu_ns;
    if let (Some(dir), Ok(text)) = (&args.dump_lark, &lark) {
        let _ = std::fs::create_dir_all(dir);
        let _ = std::fs::write(dir.join(format!("{}.lark", src.name)), text);
    }

    // 1. Compile times.
    for _ in 0..args.compile_reps {
        let (res, s) = time(|| parse_gbnf(&src.text).map_err(|e| e.to_string()).and_then(|g| CompiledGrammar::new(&g, vocab.clone()).map_err(|e| e.to_string())));
        if let Err(e) = res {
            r.error = Some(format!("Stencil compile error: {e}"));
            return r;
        }
        r.stencil_compile.push(s);
    }
    let lark = match lark {
        Ok(l) => Some(l),
        Err(e) => {
            r.llg_error = Some(format!("no Lark form: {e}"));
            None
        }
    };
    if let Some(lark) = &lark {
        for _ in 0..args.compile_reps {
            let (res, s) = time(|| llg::compile(factory, lark));
            if let Err(e) = res {
                r.llg_error = Some(format!("llguidance compile error: {}", first_line(&e.to_string())));
                break;
            }
            r.llg_compile.push(s);
        }
        if r.llg_error.is_some() {
            r.llg_compile.clear();
        }
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

    // 3. Mask times: each engine on a fresh compiled grammar (cold), then again (warm).
    let g = CompiledGrammar::new(&grammar, vocab.clone()).expect("compiled above");
    replay_stencil(&g, &seqs, &mut r.stencil_cold);
    replay_stencil(&g, &seqs, &mut r.stencil_warm);
    let m0 = match (&lark, &r.llg_error) {
        (Some(l), None) => llg::compile(factory, l).ok(),
        _ => None,
    };
    if let Some(m0) = &m0 {
        replay_llg(m0, &seqs, &mut r.llg_cold);
        replay_llg(m0, &seqs, &mut r.llg_warm);
        // 4. Agreement (untimed).
        r.agreement = check_agreement(&g, m0, &seqs, &src.name);
    }
    r
}

fn first_line(s: &str) -> String {
    let l = s.lines().next().unwrap_or("").trim();
    if l.len() > 200 {
        format!("{}…", &l[..l.char_indices().take_while(|(i, _)| *i < 200).last().map(|(i, _)| i).unwrap_or(0)])
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
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|x| x.trim().to_string()))
        .unwrap_or_else(|| "unknown".into())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")).unwrap_or_default()
}

fn report(results: &[VocabResult], args: &Args, notes: &[String], overhead: Sample, load_start: &str, total_s: f64) -> String {
    let mut o = String::new();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let _ = writeln!(o, "# Benchmarks: Stencil vs llguidance\n");
    let _ = writeln!(o, "Generated by `scripts/bench.sh` (`cargo run --release -p stencil-bench`); do not edit by hand.\n");
    let _ = writeln!(o, "- Date: {}", civil_date(now));
    let _ = writeln!(o, "- Machine: {cores} cores, {}; load average {load_start} at start, {} at end", cpu_model(), load_average());
    if let Ok(v) = std::env::var("STENCIL_BENCH_RUSTC") {
        let _ = writeln!(o, "- Toolchain: {v}, release profile");
    }
    let _ = writeln!(o, "- Engines: Stencil (this workspace) and llguidance {} (crates `llguidance` + `toktrie`, default features less rayon and JSON-Schema `$ref` resolution)", llguidance_version());
    let _ = writeln!(
        o,
        "- Run: {} sequences per grammar, at most {} tokens each, seed {}, {} compile repetitions, Lark mode `{}`; {:.0} s in all",
        args.seqs,
        args.max_tokens,
        args.seed,
        args.compile_reps,
        args.mode.name(),
        total_s
    );
    let _ = writeln!(o);

    let _ = writeln!(o, "## Method\n");
    let _ = writeln!(
        o,
        "\
- **Grammars**: llama.cpp's example grammars (`fixtures/gbnf/*.gbnf`) and `bench/grammars/*.gbnf`.
  Stencil parses the GBNF; llguidance has no GBNF reader in Rust, so the bench prints Lark from
  Stencil's parsed IR (`bench/src/lark.rs`): in mode `rules` every GBNF rule is a Lark rule and
  every literal, class and `.` its own lexeme (GBNF's character-level meaning); mode `terminals`
  does what llguidance's `gbnf_to_lark.py` does (text-only rules become greedy lexemes).
- **Vocabularies**: `fixtures/vocab/` (SmolLM2-135M, 49,152 tokens; Gemma 3 270M, 262,144 tokens)
  as Stencil loads them. llguidance gets a `TokTrie` over the very same token bytes and EOS ids;
  control and unused tokens carry toktrie's 0xFF special-token prefix, byte-fallback tokens are
  their byte.
- **Compile**: Stencil = `parse_gbnf` + `CompiledGrammar::new`; llguidance = `TopLevelGrammar::from_lark`
  + `ParserFactory::create_parser` + `Matcher::new` (the Lark printing is not counted; it took at
  most {lark} ms). Per-vocabulary setup (Stencil's token trie; llguidance's `TokEnv` and
  `ParserFactory` with its default slicer) is done once beforehand and reported separately. p50 of
  the repetitions, thread CPU time.
- **Sequences**: a seeded random walk over Stencil's masks (half the steps pick among ≤2-byte
  tokens; after a random target length, punctuation is preferred and EOS is taken once allowed).
  The same token ids are fed to both engines.
- **Mask time**: only the full next-token bitmask call is timed, on one thread: Stencil
  `Matcher::fill_mask` into a reused buffer; llguidance `Matcher::compute_mask_or_eos` (it returns a
  fresh `SimpleVob`; its allocation is inside the timing, its drop is not). llguidance's
  fast-forward is off (its `TokEnv` reports a non-canonical tokenizer, so `compute_mask` always
  builds the whole mask instead of a one-token forced mask) and it runs without rayon.
  *Cold*: a freshly compiled grammar (one per engine), caches filled lazily during the first replay
  of all sequences (Stencil's per-state token-mask cache; llguidance's lazily built lexer DFA, shared
  by matcher clones). *Warm*: the same sequences replayed again on that compiled grammar.
  Times are thread CPU time (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`); one empty timing costs
  {oc} µs CPU ({ow} µs wall) and is included in every sample. Percentiles are nearest-rank over all
  steps of all sequences; *max* is the single slowest step. Ratio = llguidance / Stencil in the same
  phase (above 1 means Stencil is faster).
- **Agreement**: both engines in lockstep over every sequence; at each step the two masks are compared
  bit for bit (all ids, and outside the EOS ids), and llguidance must accept the walk's token.",
        lark = ms(results.iter().flat_map(|v| v.grammars.iter().map(|g| g.lark_ns)).max().unwrap_or(0)),
        oc = us(overhead.cpu_ns),
        ow = us(overhead.wall_ns),
    );
    let _ = writeln!(o);

    for v in results {
        let _ = writeln!(o, "## {} ({} tokens, EOS {:?})\n", v.name, v.size, v.eos);
        let _ = writeln!(
            o,
            "Per-vocabulary setup: Stencil token trie {} ms; llguidance TokEnv + ParserFactory {} ms (CPU).\n",
            ms(v.stencil_setup.cpu_ns),
            ms(v.llg_setup.cpu_ns)
        );
        let _ = writeln!(o, "| grammar | engine | compile p50 ms | mask p50 µs | p99 µs | max µs | ratio p50 / p99 | steps |");
        let _ = writeln!(o, "|---|---|---:|---:|---:|---:|---:|---:|");
        let mut pooled: [Vec<Sample>; 4] = Default::default();
        for g in &v.grammars {
            if let Some(e) = &g.error {
                let _ = writeln!(o, "| {} | – | – | – | – | – | – | {} |", g.name, e.replace('|', "\\|"));
                continue;
            }
            let phases = [(&g.stencil_cold, "Stencil cold"), (&g.stencil_warm, "Stencil warm"), (&g.llg_cold, "llguidance cold"), (&g.llg_warm, "llguidance warm")];
            let sums: Vec<Summary> = phases.iter().map(|(s, _)| summarize(&s.samples, true)).collect();
            for (i, (steps, label)) in phases.iter().enumerate() {
                let is_llg = i >= 2;
                let compile = if is_llg {
                    if g.llg_compile.is_empty() { "–".into() } else { ms(p50_compile(&g.llg_compile)) }
                } else {
                    ms(p50_compile(&g.stencil_compile))
                };
                if is_llg && g.llg_error.is_some() {
                    if i == 2 {
                        let _ = writeln!(o, "| {} | llguidance | – | – | – | – | – | {} |", g.name, g.llg_error.as_deref().unwrap_or("").replace('|', "\\|"));
                    }
                    continue;
                }
                let s = sums[i];
                let rat = if is_llg {
                    String::new()
                } else {
                    let l = sums[i + 2];
                    format!("{} / {}", ratio(l.p50, s.p50), ratio(l.p99, s.p99))
                };
                let compile = if i % 2 == 0 { compile } else { String::new() };
                let err = steps.error.as_ref().map(|e| format!(" (stopped: {})", e.replace('|', "\\|"))).unwrap_or_default();
                let _ = writeln!(o, "| {} | {} | {} | {} | {} | {} | {} | {}{} |", g.name, label, compile, us(s.p50), us(s.p99), us(s.max), rat, s.n, err);
                pooled[i].extend_from_slice(&steps.samples);
            }
        }
        let sums: Vec<Summary> = pooled.iter().map(|s| summarize(s, true)).collect();
        let labels = ["Stencil cold", "Stencil warm", "llguidance cold", "llguidance warm"];
        for i in 0..4 {
            let rat = if i < 2 { format!("{} / {}", ratio(sums[i + 2].p50, sums[i].p50), ratio(sums[i + 2].p99, sums[i].p99)) } else { String::new() };
            let _ = writeln!(o, "| **all** | {} |  | {} | {} | {} | {} | {} |", labels[i], us(sums[i].p50), us(sums[i].p99), us(sums[i].max), rat, sums[i].n);
        }
        let _ = writeln!(o);
        let walls: Vec<Summary> = pooled.iter().map(|s| summarize(s, false)).collect();
        let _ = writeln!(
            o,
            "Wall-clock cross-check, all grammars (p50 / p99 µs): Stencil cold {} / {}, warm {} / {}; llguidance cold {} / {}, warm {} / {}.\n",
            us(walls[0].p50),
            us(walls[0].p99),
            us(walls[1].p50),
            us(walls[1].p99),
            us(walls[2].p50),
            us(walls[2].p99),
            us(walls[3].p50),
            us(walls[3].p99)
        );
        // Agreement.
        let _ = writeln!(o, "Agreement (lockstep over the same sequences):\n");
        let _ = writeln!(o, "| grammar | sequences | tokens | steps compared | masks differ | differ outside EOS | tokens llguidance refused |");
        let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|");
        let mut examples = Vec::new();
        for g in &v.grammars {
            if g.error.is_some() || g.llg_error.is_some() {
                let _ = writeln!(o, "| {} | {} | {} | – | – | – | – |", g.name, g.seqs, g.tokens);
                continue;
            }
            let a = &g.agreement;
            let _ = writeln!(o, "| {} | {} | {} | {} | {} | {} | {} |", g.name, g.seqs, g.tokens, a.steps, a.differ, a.differ_text, a.refused);
            examples.extend(a.examples.iter().take(3).cloned());
        }
        let _ = writeln!(o);
        if !examples.is_empty() {
            let _ = writeln!(o, "First disagreements:\n");
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
    o
}

fn llguidance_version() -> &'static str {
    "1.9.1"
}

fn main() {
    let args = parse_args();
    let t0 = std::time::Instant::now();
    let load_start = load_average();
    let mut notes = Vec::new();
    let mut sources = grammar_sources(&mut notes);
    if let Some(names) = &args.grammars {
        sources.retain(|s| names.contains(&s.name));
    }
    let overhead = timer::overhead();
    let mut results = Vec::new();
    for v in &args.vocabs {
        let (name, vocab) = match v.as_str() {
            "smollm2" => ("SmolLM2-135M", stencil_mask::vocab::fixtures::smollm2().0),
            "gemma3" => ("Gemma 3 270M", stencil_mask::vocab::fixtures::gemma3().0),
            other => die(&format!("unknown vocabulary {other} (smollm2, gemma3)")),
        };
        results.push(run_vocab(name, vocab, &sources, &args));
    }
    let md = report(&results, &args, &notes, overhead, &load_start, t0.elapsed().as_secs_f64());
    match &args.out {
        Some(p) => {
            std::fs::write(p, &md).unwrap_or_else(|e| die(&format!("{}: {e}", p.display())));
            eprintln!("wrote {}", p.display());
        }
        None => print!("{md}"),
    }
}
