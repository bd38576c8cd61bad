//! The catalogue of bad inputs (`fixtures/bad/`, see its README): every malformed or
//! hostile GBNF grammar and vocabulary gives its expected error text — the snapshot
//! `NAME.expected` next to the input `NAME`, compared exactly (`STENCIL_UPDATE=1`
//! rewrites them) — and none panics. Then inputs too big to commit, generated here: each
//! works fast or fails fast with a typed error naming the limit, and every limit of
//! [`Limits`] is hit once.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stencil_grammar::{parse_gbnf, parse_gbnf_bytes, GbnfError};
use stencil_mask::{
    bitmask, CompileError, CompiledGrammar, LimitKind, Limits, MatchError, Matcher, TokenKind, Vocabulary,
};
use stencil_test_support::snapshot::check_snapshots;
use stencil_test_support::toy;

fn bad_dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/bad").join(kind)
}

// ------------------------------------------------------------------------------ catalogue

#[test]
fn bad_grammars_give_their_expected_errors() {
    let vocab = toy::printable();
    check_snapshots(&bad_dir("gbnf"), ".gbnf", |path| {
        let bytes = std::fs::read(path).unwrap();
        let g = match parse_gbnf_bytes(&bytes) {
            Ok(g) => g,
            Err(e) => return format!("parse error: {e}"),
        };
        match CompiledGrammar::new(&g, vocab.clone()) {
            Ok(_) => format!("ok: parses and compiles ({} rules)", g.rules.len()),
            Err(e) => format!("compile error: {e}"),
        }
    });
}

fn kind_of(name: &str) -> TokenKind {
    match name {
        "normal" => TokenKind::Normal,
        "control" => TokenKind::Control,
        "byte" => TokenKind::Byte,
        "user-defined" => TokenKind::UserDefined,
        _ => TokenKind::Unused,
    }
}

/// What a vocabulary allows for `root ::= "a" | "b"` at the start and after `a`.
fn summarize(vocab: Vocabulary) -> String {
    let vocab = Arc::new(vocab);
    let g = parse_gbnf(r#"root ::= "a" | "b""#).unwrap();
    let head = format!("ok: {} tokens, mask width {}, EOS {:?}", vocab.len(), vocab.mask_width(), vocab.eos_ids());
    let compiled = match CompiledGrammar::new(&g, vocab.clone()) {
        Ok(c) => c,
        Err(e) => return format!("{head}\ncompile error: {e}"),
    };
    let mut m = Matcher::new(compiled);
    let mut mask = bitmask::new_mask(vocab.mask_width());
    m.fill_mask(&mut mask).unwrap();
    let first: Vec<u32> = bitmask::allowed(&mask).collect();
    let mut out = format!("{head}\nroot ::= \"a\" | \"b\" allows {first:?}");
    if let Some(&t) = first.first() {
        m.accept_token(t).unwrap();
        m.fill_mask(&mut mask).unwrap();
        out += &format!(", then after token {t}: {:?}", bitmask::allowed(&mask).collect::<Vec<_>>());
    }
    out
}

#[test]
fn bad_vocabularies_give_their_expected_errors() {
    // Through the library API: a JSON description of `Vocabulary::new`'s arguments.
    check_snapshots(&bad_dir("vocab"), ".vocab.json", |path| {
        let spec: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let tokens = spec["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t[0].as_str().unwrap().as_bytes().to_vec(), kind_of(t[1].as_str().unwrap())))
            .collect();
        let eos = spec["eos"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
        let vocab = Vocabulary::new(tokens, eos).and_then(|v| match spec["mask_width"].as_u64() {
            Some(w) => v.with_mask_width(w as usize),
            None => Ok(v),
        });
        match vocab {
            Ok(v) => summarize(v),
            Err(e) => format!("error: {e}"),
        }
    });
    check_snapshots(&bad_dir("vocab"), ".gguf", |path| {
        match Vocabulary::from_gguf_bytes(&std::fs::read(path).unwrap()) {
            Ok(v) => summarize(v),
            Err(e) => format!("error: {e}"),
        }
    });
    check_snapshots(&bad_dir("vocab"), ".tokenizer.json", |path| {
        match Vocabulary::from_tokenizer_json_str(&std::fs::read_to_string(path).unwrap(), None) {
            Ok(v) => summarize(v),
            Err(e) => format!("error: {e}"),
        }
    });
}

// ------------------------------------------------------------------- generated, hostile

/// Runs `f`, asserting it returns within `limit` (generous: the machine may be busy; the
/// point is that nothing hangs).
fn timed<T>(what: &str, limit: Duration, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let r = f();
    let took = start.elapsed();
    assert!(took < limit, "{what} took {took:?}, more than {limit:?}");
    r
}

fn compile(src: &str) -> Result<Arc<CompiledGrammar>, CompileError> {
    CompiledGrammar::new(&parse_gbnf(src).unwrap(), toy::printable())
}

fn limit_of(e: &CompileError) -> LimitKind {
    match e {
        CompileError::LimitExceeded { limit, .. } => *limit,
        other => panic!("not a limit: {other}"),
    }
}

#[test]
fn sixty_thousand_nested_parentheses_fail_fast_with_a_located_error() {
    for (open, close) in [("(", ")"), ("(", ")*"), ("(", ")?")] {
        let src = format!("root ::= {}\"x\"{}", open.repeat(60_000), close.repeat(60_000));
        let err = timed("60k parentheses", Duration::from_secs(5), || parse_gbnf(&src)).unwrap_err();
        assert!(matches!(err, GbnfError::NestingTooDeep { limit: 256, line: 1, .. }), "{err}");
        assert!(err.to_string().starts_with("nesting deeper than 256 levels at line 1, column"), "{err}");
    }
    // Unbalanced, and inside a string (not nesting at all).
    let err = parse_gbnf(&format!("root ::= {}", "(".repeat(60_000))).unwrap_err();
    assert!(matches!(err, GbnfError::NestingTooDeep { .. }), "{err}");
    let g = parse_gbnf(&format!("root ::= \"{}\"", "(".repeat(60_000))).unwrap();
    assert_eq!(g.rules.len(), 1);
}

#[test]
fn a_grammar_over_the_size_limit_is_refused_before_parsing() {
    let src = format!("root ::= \"{}\"", "a".repeat(4 << 20));
    let err = timed("4 MiB grammar", Duration::from_secs(2), || parse_gbnf(&src)).unwrap_err();
    assert_eq!(err.to_string(), format!("grammar is {} bytes, more than the limit of 4194304", src.len()));
}

#[test]
fn a_chain_of_a_hundred_thousand_rules_neither_overflows_nor_hangs() {
    // Each rule calls the next: recursion on the call graph would overflow the stack, and
    // fixed-point loops over all rules would be quadratic.
    let n = 100_000;
    let mut src = String::from("root ::= r0\n");
    for i in 0..n {
        src += &format!("r{i} ::= \"a\" r{} | \"c\" r{i}\n", i + 1);
    }
    src += &format!("r{n} ::= \"b\"\n");
    let c = timed("100k rule chain", Duration::from_secs(30), || compile(&src)).unwrap();
    let mut m = Matcher::new(c);
    let mut mask = bitmask::new_mask(m.grammar().vocab().mask_width());
    m.fill_mask(&mut mask).unwrap();
    let allowed: Vec<u32> = bitmask::allowed(&mask).collect();
    assert_eq!(allowed.len(), 2, "a or c: {allowed:?}");
    // Left-corner chains make prediction closures quadratic: bounded by memory.
    let mut src = String::from("root ::= r0\n");
    for i in 0..n {
        src += &format!("r{i} ::= r{} \"a\" | r{i} \"b\"\n", i + 1);
    }
    src += &format!("r{n} ::= \"b\"\n");
    match timed("100k left-corner chain", Duration::from_secs(30), || compile(&src)) {
        Ok(_) => {}
        Err(e) => assert_eq!(limit_of(&e), LimitKind::AutomatonMemory, "{e}"),
    }
}

/// Issue #44: a chain of renames `rI ::= rI+1` of small rules was inlined whole: 2,000 of
/// them failed at `max_expression_depth`, and from 16,300 the fusion pass overflowed a 2 MiB
/// stack (a tokio worker's). Inlining now nests at most 32 expansions.
#[test]
fn a_chain_of_renames_compiles_on_a_small_stack() {
    for n in [2_000, 20_000, 200_000] {
        let mut src = String::from("root ::= r0\n");
        for i in 0..n {
            src += &format!("r{i} ::= r{}\n", i + 1);
        }
        src += &format!("r{n} ::= \"x\"\n");
        let options = stencil_grammar::ParseOptions { max_source_bytes: usize::MAX, ..Default::default() };
        let g = stencil_grammar::parse_gbnf_with(&src, &options).unwrap();
        let worker = std::thread::Builder::new().stack_size(2 << 20);
        let allowed = worker
            .spawn(move || {
                let c = timed("a chain of renames", Duration::from_secs(30), || {
                    CompiledGrammar::new(&g, toy::json_bytes())
                })
                .unwrap_or_else(|e| panic!("{n} renames: {e}"));
                let mut m = Matcher::new(c);
                let mut mask = bitmask::new_mask(m.grammar().vocab().mask_width());
                m.fill_mask(&mut mask).unwrap();
                bitmask::allowed(&mask).count()
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(allowed, 1, "{n} renames: only `x`");
    }
}

#[test]
fn huge_repetitions_fail_before_any_work() {
    for (src, limit) in [
        (r#"root ::= "a"{0,4000000000}"#, LimitKind::Repetition),
        (r#"root ::= ((("a"{1000}){1000}){1000}){1000}"#, LimitKind::NfaStates),
    ] {
        let e = timed(src, Duration::from_secs(1), || compile(src)).unwrap_err();
        assert_eq!(limit_of(&e), limit, "{src}: {e}");
        assert!(e.to_string().contains("rule `root`"), "{e}");
    }
}

/// Long counted repetitions of a big body are split into rules (about √n copies each):
/// they compile quickly, small, and keep their exact counts.
#[test]
fn long_repetitions_compile_small_and_exact() {
    for src in
        [r#"root ::= (("a"{1000}){1000}){1000}"#, r#"root ::= ("abcdefghijklmnopqrstuvwxyz0123" [a-z]){0,100000}"#]
    {
        let c = timed(src, Duration::from_secs(2), || compile(src)).unwrap();
        assert!(c.stats().states < 200_000, "{src}: {:?}", c.stats());
    }
    // A JSON string's characters (the schema compiler's shape, as a regex), counted:
    // exact at every count around the block boundaries (blocks of k = ⌈√max⌉).
    let ch = r#"(?:[^"\\\x00-\x1f]|\\[nt"\\]|\\u00[01][0-9a-f])"#;
    for (min, max) in [(0u32, 20_000u32), (340, 20_000), (10_000, 19_999), (19_321, 19_322), (15_000, 15_000)] {
        let mut g = parse_gbnf("root ::= \"\\\"\" body \"\\\"\"\nbody ::= \"x\"\n").unwrap();
        g.rules[1].body = stencil_grammar::Expr::Regex(format!("{ch}{{{min},{max}}}").into());
        let c = CompiledGrammar::new(&g, toy::printable()).unwrap();
        assert!(c.stats().states < 20_000, "{min},{max}: {:?}", c.stats());
        let k = (max as f64).sqrt().ceil() as u32;
        let mut counts = vec![0, 1];
        for b in [k, 2 * k, (max / k) * k] {
            counts.extend([b - 1, b, b + 1]);
        }
        counts.extend([min.saturating_sub(1), min, min + 1, max - 1, max, max + 1]);
        for n in counts {
            let text = format!("\"{}{}\"", "\\n".repeat(n as usize / 2), "x".repeat(n as usize - n as usize / 2));
            let mut m = Matcher::new(c.clone());
            let ok = text.bytes().all(|b| m.accept_token(b as u32 - 0x20 + 2).is_ok()) && m.can_end();
            assert_eq!(ok, (min..=max).contains(&n), "{min},{max}: {n} characters");
        }
    }
}

/// A wide Unicode class counted (Github_hard/o79409: a 600-range `pattern` class,
/// `{1,200}`) is stamped from its minimal automaton: its Thompson expansion (about 700
/// states a character) no longer counts against `max_nfa_states`, and the count stays exact.
#[test]
fn a_counted_wide_unicode_class_is_stamped() {
    let ranges: String = (0..600).map(|i| format!("\\u{{{:x}}}", 0x800 + 61 * i)).collect();
    let mut g = parse_gbnf("root ::= \"\\\"\" body \"\\\"\"\nbody ::= \"x\"\n").unwrap();
    g.rules[1].body = stencil_grammar::Expr::Regex(format!("[a-z{ranges}]{{1,200}}").into());
    let limits = Limits { max_nfa_states: 60_000, ..Limits::default() };
    let c = timed("a counted wide class", Duration::from_secs(2), || {
        CompiledGrammar::with_limits(&g, toy::printable(), limits)
    })
    .unwrap();
    for n in [0, 1, 2, 199, 200, 201] {
        let text = format!("\"{}\"", "q".repeat(n));
        let mut m = Matcher::new(c.clone());
        let ok = text.bytes().all(|b| m.accept_token(b as u32 - 0x20 + 2).is_ok()) && m.can_end();
        assert_eq!(ok, (1..=200).contains(&n), "{n} characters");
    }
}

#[test]
fn a_wide_alternation_works() {
    let src = format!("root ::= {}", (0..100_000).map(|i| format!("\"w{i}\"")).collect::<Vec<_>>().join(" | "));
    let c = timed("100k alternatives", Duration::from_secs(20), || compile(&src)).unwrap();
    let mut m = Matcher::new(c);
    for b in "w99999".bytes() {
        m.accept_token(b as u32 - 0x20 + 2).unwrap();
    }
    assert!(m.can_end());
}

#[test]
fn an_ambiguous_grammar_fails_a_step_with_a_typed_error() {
    // Every split of "aaa..." among 4,000 nullable calls: each step's sets stay under
    // max_items_per_step, but after one "a" a mask would take minutes without
    // max_step_work (every call may have taken it).
    let src = format!("root ::= {}\nx ::= \"a\" x | \"\"\n", vec!["(x x)"; 2000].join(" "));
    let c = timed("compile", Duration::from_secs(20), || compile(&src)).unwrap();
    let mut m = Matcher::new(c);
    let mut mask = bitmask::new_mask(m.grammar().vocab().mask_width());
    timed("first mask", Duration::from_secs(20), || m.fill_mask(&mut mask)).unwrap();
    m.accept_token(b'a' as u32 - 0x20 + 2).unwrap();
    let r = timed("mask after \"a\"", Duration::from_secs(20), || m.fill_mask(&mut mask));
    assert_eq!(r, Err(MatchError::LimitExceeded { limit: LimitKind::StepWork }));
    assert_eq!(r.unwrap_err().to_string(), "limit max_step_work exceeded while matching");
}

/// Every limit of [`Limits`], set low, is hit with its name in the message.
#[test]
fn every_engine_limit_is_hit_with_its_name() {
    let vocab = toy::printable();
    let with =
        |src: &str, limits: Limits| CompiledGrammar::with_limits(&parse_gbnf(src).unwrap(), vocab.clone(), limits);
    let cases: Vec<(&str, Limits, &str)> = vec![
        (
            r#"root ::= [a-z]{100}"#,
            Limits { max_nfa_states: 50, ..Limits::default() },
            "limit max_nfa_states (50) exceeded while compiling rule `root`",
        ),
        (
            r#"root ::= [a-z]{0,100}"#,
            Limits { max_automaton_states: 50, ..Limits::default() },
            "limit max_automaton_states (50) exceeded while compiling rule `root`",
        ),
        (
            r#"root ::= [a-z]{0,100}"#,
            Limits { max_automaton_bytes: 1000, ..Limits::default() },
            "limit max_automaton_bytes (1000) exceeded while compiling rule `root`",
        ),
        (
            r#"root ::= "a"{0,20}"#,
            Limits { max_repetition: 10, ..Limits::default() },
            "limit max_repetition (10) exceeded while compiling rule `root`",
        ),
        (
            r#"root ::= "a" ("b" | "c")"#,
            Limits { max_expression_depth: 0, ..Limits::default() },
            "limit max_expression_depth (0) exceeded while compiling rule `root`",
        ),
        (
            r#"root ::= [a-z]{0,5000}"#,
            Limits { max_compile_time: Duration::ZERO, ..Limits::default() },
            "limit max_compile_time (0) exceeded while compiling rule `root`",
        ),
    ];
    for (src, limits, message) in cases {
        let err = with(src, limits).unwrap_err();
        assert_eq!(err.to_string(), message, "{src}");
    }
    // The per-step limits, at mask time.
    let src = "root ::= x x x x x x x x\nx ::= \"a\" x | \"a\" | \"\"\n";
    for (limits, limit) in [
        (Limits { max_items_per_step: 3, ..Limits::default() }, LimitKind::ItemsPerStep),
        (Limits { max_step_work: 10, ..Limits::default() }, LimitKind::StepWork),
    ] {
        let mut m = Matcher::new(with(src, limits).unwrap());
        let mut mask = bitmask::new_mask(vocab.mask_width());
        let err = m.fill_mask(&mut mask).unwrap_err();
        assert_eq!(err, MatchError::LimitExceeded { limit });
        assert_eq!(err.to_string(), format!("limit {limit} exceeded while matching"));
    }
}
