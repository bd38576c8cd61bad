//! The properties the fuzz targets check, on decoded inputs.
//!
//! This module depends only on Stencil's crates and `serde_json` (not on `arbitrary` or
//! libFuzzer): the fuzz crate re-exports it (`stencil_fuzz::checks`), and the normal test
//! suite replays the minimized crashes in `fixtures/fuzz-regressions/` through it
//! (`schema/tests/fuzz_regressions.rs`) without building the fuzz crate:
//! raw-byte targets (`gbnf_parse`, `ecma_pattern`) are replayed from the bytes,
//! structured ones (`schema_compile`, `matcher`) from the JSON form of the decoded input
//! ([`SchemaCase`], [`MatcherCase`]), which the fuzz targets print when
//! `STENCIL_FUZZ_PRINT=1`.
//!
//! Every check panics on a violated property; errors (typed, located) are fine, panics,
//! hangs and unbounded memory are not.

use std::sync::Arc;

use serde_json::{json, Value};
use stencil_grammar::reference::Recognizer;
use stencil_grammar::{CharClass, Expr, Grammar, RuleId, TokenName, TokenRef};
use stencil_mask::{bitmask, CompileError, CompiledGrammar, Limits, Matcher, Vocabulary};
use stencil_schema::{Registry, SchemaOptions, Whitespace};

use crate::toy;

/// Limits small enough that a fuzz input never runs long: hitting one is a typed error.
pub fn fuzz_limits() -> Limits {
    Limits {
        max_nfa_states: 50_000,
        max_automaton_states: 20_000,
        max_expression_depth: 128,
        max_items_per_step: 20_000,
        max_compile_time: std::time::Duration::from_secs(2),
        ..Limits::default()
    }
}

/// Runs `m` over `text` one byte-token at a time (`vocab` must hold every byte of `text`
/// as a single token, else nothing is checked) and asserts that it accepts it and can end.
fn assert_accepts_bytewise(m: &mut Matcher, vocab: &Vocabulary, text: &[u8], what: &str) {
    let ids: Option<Vec<u32>> =
        text.iter().map(|&b| (1..vocab.len() as u32).find(|&t| vocab.token_bytes(t) == [b])).collect();
    let Some(ids) = ids else { return };
    for (i, &t) in ids.iter().enumerate() {
        if let Err(e) = m.accept_token(t) {
            if matches!(e, stencil_mask::MatchError::LimitExceeded { .. }) {
                return;
            }
            panic!("{what}: the engine refuses byte {i} of a member {:?}: {e}", String::from_utf8_lossy(text));
        }
    }
    assert!(m.can_end(), "{what}: the engine cannot end after a member {:?}", String::from_utf8_lossy(text));
}

// ------------------------------------------------------------------------------ gbnf_parse

/// GBNF bytes: parsing never panics; an error displays; a grammar round-trips through the
/// printer, compiles (or fails with a typed error) against a small vocabulary, and its
/// random members are accepted by the engine.
pub fn check_gbnf(data: &[u8]) {
    let g = match stencil_grammar::parse_gbnf_bytes(data) {
        Ok(g) => g,
        Err(e) => {
            let text = e.to_string();
            assert!(!text.is_empty());
            if let Some((line, col)) = e.line_col() {
                assert!(line >= 1 && col >= 1, "{e:?}");
            }
            return;
        }
    };
    // print → parse gives the grammar back.
    let printed = stencil_grammar::to_gbnf(&g).expect("a parsed grammar prints");
    let options = stencil_grammar::ParseOptions {
        root: g.rule(g.root).name.clone(),
        max_source_bytes: usize::MAX,
        ..Default::default()
    };
    let again = stencil_grammar::parse_gbnf_with(&printed, &options)
        .unwrap_or_else(|e| panic!("printed grammar does not parse:\n{printed}\n{e}"));
    assert_eq!(again, g, "round trip changed the grammar; printed:\n{printed}");
    check_grammar_engine(&g, &toy::fuzz_random(b"ab{}\"0 ", 1), "gbnf");
}

/// Compiles `g` with [`fuzz_limits`]; when it compiles, runs a first mask, forced bytes,
/// and a few random members of the language (when the reference recognizer supports it).
pub fn check_grammar_engine(g: &Grammar, vocab: &Arc<Vocabulary>, what: &str) {
    let compiled = match CompiledGrammar::with_limits(g, vocab.clone(), fuzz_limits()) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let mut m = Matcher::new(compiled);
    let mut mask = bitmask::new_mask(vocab.mask_width());
    let _ = m.fill_mask(&mut mask);
    let _ = m.forced_tokens(16);
    for seed in 0..3 {
        if let Some(s) = stencil_grammar::random::random_string_in(g, seed, 64) {
            let mut m = m.fork();
            assert_accepts_bytewise(&mut m, vocab, &s, what);
        }
    }
}

// ---------------------------------------------------------------------------- ecma_pattern

/// An ECMA-262 pattern: translation never panics; a translation is valid `regex-syntax`
/// (up to its nesting limit), and as a schema's `pattern` it compiles, and every random
/// string of the grammar matches the pattern by the `jsonschema` crate's judgement.
pub fn check_pattern(pattern: &str) {
    let Ok(translated) = stencil_schema::translate_pattern(pattern) else { return };
    let schema = json!({"type": "string", "pattern": pattern});
    if regex_syntax_parse(&translated).is_err() {
        // An invalid pattern may translate to invalid syntax (`*` stays `*`): the schema
        // compiler must then refuse it with a typed, located error.
        match stencil_schema::compile_schema(&schema, &SchemaOptions::default()) {
            Err(stencil_schema::SchemaError::BadPattern { .. }) => return,
            other => panic!("pattern {pattern:?} translated to invalid syntax {translated:?}, yet compiles: {other:?}"),
        }
    }
    // Sampling the language (the reference's regex DFAs) dominates the cost of a long
    // pattern, not the code under test: sample short patterns only.
    check_schema_sampled(
        &SchemaCase { schema, options: CaseOptions::default() },
        if pattern.len() <= 64 { 2 } else { 0 },
    );
}

fn regex_syntax_parse(p: &str) -> Result<(), String> {
    regex_syntax::ParserBuilder::new().unicode(true).utf8(true).build().parse(p).map(|_| ()).map_err(|e| e.to_string())
}

// -------------------------------------------------------------------------- schema_compile

/// Compile options of a schema case.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaseOptions {
    /// `None`: flexible whitespace with runs of at most `max_run`.
    pub compact: bool,
    pub max_run: usize,
    pub indent: Option<usize>,
    pub lenient: bool,
}

impl CaseOptions {
    pub fn schema_options(&self) -> SchemaOptions {
        let mut o = if self.compact {
            SchemaOptions::compact()
        } else {
            SchemaOptions { whitespace: Whitespace::Flexible { max_run: self.max_run }, ..SchemaOptions::default() }
        };
        o.indent = self.indent;
        if self.lenient {
            o = o.lenient();
        }
        o
    }
    pub fn to_json(&self) -> Value {
        json!({"compact": self.compact, "max_run": self.max_run, "indent": self.indent, "lenient": self.lenient})
    }
    pub fn from_json(v: &Value) -> Self {
        CaseOptions {
            compact: v["compact"].as_bool().unwrap_or(false),
            max_run: v["max_run"].as_u64().unwrap_or(0) as usize,
            indent: v["indent"].as_u64().map(|n| n as usize),
            lenient: v["lenient"].as_bool().unwrap_or(false),
        }
    }
}

/// One schema-compiler input: a schema and how to compile it.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemaCase {
    pub schema: Value,
    pub options: CaseOptions,
}

impl SchemaCase {
    pub fn to_json(&self) -> Value {
        json!({"schema": self.schema, "options": self.options.to_json()})
    }
    pub fn from_json(v: &Value) -> Self {
        SchemaCase { schema: v["schema"].clone(), options: CaseOptions::from_json(&v["options"]) }
    }
}

/// A schema: compiling never panics; a compiled grammar compiles in the engine (or fails
/// with a typed error); random members of its language are JSON, are accepted by the
/// engine token by token, and — when nothing was left unenforced — are valid against the
/// schema by the `jsonschema` crate.
pub fn check_schema(case: &SchemaCase) {
    check_schema_sampled(case, 3)
}

/// [`check_schema`] with `samples` random members of the language.
pub fn check_schema_sampled(case: &SchemaCase, samples: u64) {
    let options = case.options.schema_options();
    let compiled = match stencil_schema::compile_schema(&case.schema, &options) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let g = &compiled.grammar;
    let vocab = toy::json_text();
    let engine = match CompiledGrammar::with_limits(g, vocab.clone(), fuzz_limits()) {
        Ok(c) => Some(c),
        Err(CompileError::LimitExceeded { .. }) => None,
        Err(e) => panic!("a compiled schema's grammar does not compile: {e}\n{g:?}"),
    };
    let validator = stencil_schema::Validator::new(&case.schema, &Registry::new()).ok();
    for seed in 0..samples {
        let Some(text) = stencil_grammar::random::random_string_in(g, seed, 400) else { continue };
        // The syntax first: skipping values checks it without reading numbers into f64
        // (`7265E+717` is JSON, but neither serde_json's values nor the validator hold it).
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&text) {
            panic!("the grammar produced text that is not JSON: {:?}: {e}", String::from_utf8_lossy(&text));
        }
        if let Some(engine) = &engine {
            let mut m = Matcher::new(engine.clone());
            assert_accepts_bytewise(&mut m, &vocab, &text, "schema");
        }
        let Ok(value) = serde_json::from_slice::<Value>(&text) else { continue };
        if let (true, Some(v)) = (compiled.warnings.is_empty(), &validator) {
            if let Err(issues) = v.validate(&value) {
                panic!(
                    "unsound: the grammar produced {:?}, invalid against the schema: {issues:?}",
                    String::from_utf8_lossy(&text)
                );
            }
        }
    }
}

// --------------------------------------------------------------------------------- matcher

/// One step of a matcher case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Accept the `n`-th allowed token (modulo their number; EOS included).
    Accept(u16),
    /// Try the `n`-th token the oracle refuses: it must be refused, leaving no trace.
    Reject(u16),
    /// Roll back `n` tokens (modulo the number accepted, plus one).
    Rollback(u8),
    /// Keep a fork of the matcher here; at the end it must still be where it was.
    Fork,
    /// Compare `forced_bytes(n)` and `forced_tokens(n)` with the oracle.
    Forced(u8),
}

/// A matcher input: a grammar (no token terminals), the seed of a [`toy::fuzz_random`] over
/// [`MATCHER_ALPHABET`], and the steps.
#[derive(Clone, Debug, PartialEq)]
pub struct MatcherCase {
    pub grammar: Grammar,
    pub vocab_seed: u64,
    pub ops: Vec<Op>,
}

/// The bytes of the matcher targets' grammars and vocabularies.
pub const MATCHER_ALPHABET: &[u8] = b"ab{}\"0";

fn brute_force_mask(r: &Recognizer, vocab: &Vocabulary, text: &[u8]) -> Vec<u32> {
    (0..vocab.len() as u32)
        .filter(|&t| {
            if vocab.is_eos(t) {
                r.matches(text)
            } else {
                let mut s = text.to_vec();
                s.extend_from_slice(vocab.token_bytes(t));
                r.is_prefix(&s)
            }
        })
        .collect()
}

fn engine_mask(m: &mut Matcher) -> Vec<u32> {
    let mut mask = bitmask::new_mask(m.grammar().vocab().mask_width());
    m.fill_mask(&mut mask).expect("fill_mask within the limits");
    bitmask::allowed(&mask).collect()
}

/// The masks, acceptance, rollback, forks and forced bytes of the engine agree with the
/// brute-force oracle (the reference recognizer over every token) at every step.
pub fn check_matcher(case: &MatcherCase) {
    let g = &case.grammar;
    let Ok(r) = Recognizer::new(g) else { return };
    let vocab = toy::fuzz_random(MATCHER_ALPHABET, case.vocab_seed);
    let compiled = match CompiledGrammar::with_limits(g, vocab.clone(), fuzz_limits()) {
        Ok(c) => c,
        Err(CompileError::EmptyLanguage { .. }) => {
            assert!(!r.is_productive(g.root), "the engine says the language is empty, the oracle does not\n{g:?}");
            return;
        }
        Err(CompileError::LimitExceeded { .. }) => return,
        Err(e) => panic!("unexpected compile error {e}\n{g:?}"),
    };
    assert!(r.is_productive(g.root), "the engine compiled a grammar whose language is empty\n{g:?}");
    let mut m = Matcher::new(compiled);
    let mut text: Vec<u8> = Vec::new();
    let mut lens: Vec<usize> = Vec::new();
    let mut ended = false;
    let mut forks: Vec<(Matcher, Vec<u8>, bool)> = Vec::new();
    let ctx = |text: &[u8], step: usize| format!("step {step} after {:?}\n{g:?}", String::from_utf8_lossy(text));
    for (step, &op) in case.ops.iter().enumerate() {
        let expected = if ended { Vec::new() } else { brute_force_mask(&r, &vocab, &text) };
        let got = engine_mask(&mut m);
        assert_eq!(got, expected, "mask differs at {}", ctx(&text, step));
        assert_eq!(m.can_end(), !ended && r.matches(&text), "can_end differs at {}", ctx(&text, step));
        if m.must_end() {
            assert!(
                expected.iter().all(|&t| vocab.is_eos(t)),
                "must_end but text tokens allowed at {}",
                ctx(&text, step)
            );
        }
        match op {
            Op::Accept(n) => {
                if expected.is_empty() {
                    continue;
                }
                let t = expected[n as usize % expected.len()];
                m.accept_token(t).unwrap_or_else(|e| panic!("allowed token {t} refused ({e}) at {}", ctx(&text, step)));
                lens.push(text.len());
                if vocab.is_eos(t) {
                    ended = true;
                } else {
                    text.extend_from_slice(vocab.token_bytes(t));
                }
            }
            Op::Reject(n) => {
                let refused: Vec<u32> = (0..vocab.len() as u32).filter(|t| !expected.contains(t)).collect();
                if refused.is_empty() {
                    continue;
                }
                let t = refused[n as usize % refused.len()];
                assert!(m.accept_token(t).is_err(), "token {t} accepted but not allowed at {}", ctx(&text, step));
            }
            Op::Rollback(n) => {
                let n = n as usize % (lens.len() + 1);
                m.rollback(n).expect("rollback within the accepted tokens");
                for _ in 0..n {
                    text.truncate(lens.pop().expect("a length per token"));
                }
                if n > 0 {
                    ended = false;
                }
            }
            Op::Fork => forks.push((m.fork(), text.clone(), ended)),
            Op::Forced(n) => {
                let limit = n as usize % 9;
                let forced = m.forced_bytes(limit);
                assert!(forced.len() <= limit);
                for j in 0..forced.len() {
                    let mut prefix = text.clone();
                    prefix.extend_from_slice(&forced[..j]);
                    assert!(
                        !ended && !r.matches(&prefix),
                        "forced byte {j} where the text can end at {}",
                        ctx(&text, step)
                    );
                    for b in 0..=255u8 {
                        let mut s = prefix.clone();
                        s.push(b);
                        assert_eq!(
                            r.is_prefix(&s),
                            b == forced[j],
                            "forced byte {j} is {:?}, but byte {b:#x} {} at {}",
                            forced[j] as char,
                            if b == forced[j] { "is not viable" } else { "is viable too" },
                            ctx(&text, step)
                        );
                    }
                }
                let tokens = m.forced_tokens(limit);
                let spelled: Vec<u8> = tokens.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
                assert!(forced.starts_with(&spelled), "forced tokens {spelled:?} do not spell forced bytes {forced:?}");
            }
        }
    }
    for (mut f, text, ended) in forks {
        let expected = if ended { Vec::new() } else { brute_force_mask(&r, &vocab, &text) };
        assert_eq!(engine_mask(&mut f), expected, "a fork moved: {}", ctx(&text, usize::MAX));
    }
}

// --------------------------------------------------------------- grammars and cases as JSON

/// The IR as JSON (every expression a one-key object), for regression fixtures.
pub fn expr_to_json(e: &Expr) -> Value {
    match e {
        Expr::Empty => json!("empty"),
        Expr::Literal(b) => match std::str::from_utf8(b) {
            Ok(s) => json!({"lit": s}),
            Err(_) => json!({"bytes": b}),
        },
        Expr::Class(c) => json!({"class": c.ranges, "negated": c.negated}),
        Expr::AnyChar => json!("any"),
        Expr::Regex(p) => json!({"regex": p.as_str()}),
        Expr::Rule(r) => json!({"rule": r.0}),
        Expr::Token(t) => match &t.token {
            TokenName::Id(id) => json!({"token_id": id, "negated": t.negated}),
            TokenName::Text(s) => json!({"token_text": s, "negated": t.negated}),
        },
        Expr::Seq(v) => json!({"seq": v.iter().map(expr_to_json).collect::<Vec<_>>()}),
        Expr::Alt(v) => json!({"alt": v.iter().map(expr_to_json).collect::<Vec<_>>()}),
        Expr::Repeat { expr, min, max } => json!({"repeat": expr_to_json(expr), "min": min, "max": max}),
    }
}

/// The inverse of [`expr_to_json`].
pub fn expr_from_json(v: &Value) -> Expr {
    let list = |v: &Value| v.as_array().expect("a list").iter().map(expr_from_json).collect::<Vec<_>>();
    let num = |v: &Value| v.as_u64().expect("a number") as u32;
    if let Some(s) = v.as_str() {
        return match s {
            "empty" => Expr::Empty,
            "any" => Expr::AnyChar,
            other => panic!("unknown expression {other:?}"),
        };
    }
    let o = v.as_object().expect("an expression object");
    if let Some(s) = o.get("lit") {
        Expr::literal(s.as_str().expect("text"))
    } else if let Some(b) = o.get("bytes") {
        Expr::Literal(b.as_array().expect("bytes").iter().map(|x| x.as_u64().expect("a byte") as u8).collect())
    } else if let Some(c) = o.get("class") {
        let ranges = c.as_array().expect("ranges").iter().map(|r| (num(&r[0]), num(&r[1]))).collect();
        Expr::Class(CharClass { ranges, negated: o["negated"].as_bool().unwrap_or(false) })
    } else if let Some(p) = o.get("regex") {
        Expr::Regex(p.as_str().expect("a pattern").into())
    } else if let Some(r) = o.get("rule") {
        Expr::Rule(RuleId(num(r)))
    } else if let Some(id) = o.get("token_id") {
        Expr::Token(TokenRef { token: TokenName::Id(num(id)), negated: o["negated"].as_bool().unwrap_or(false) })
    } else if let Some(s) = o.get("token_text") {
        let token = TokenName::Text(s.as_str().expect("text").to_string());
        Expr::Token(TokenRef { token, negated: o["negated"].as_bool().unwrap_or(false) })
    } else if let Some(v) = o.get("seq") {
        Expr::Seq(list(v))
    } else if let Some(v) = o.get("alt") {
        Expr::Alt(list(v))
    } else if let Some(e) = o.get("repeat") {
        Expr::repeat(expr_from_json(e), num(&o["min"]), o["max"].as_u64().map(|n| n as u32))
    } else {
        panic!("unknown expression {v}")
    }
}

pub fn grammar_to_json(g: &Grammar) -> Value {
    let rules: Vec<Value> = g.rules.iter().map(|r| json!({"name": r.name, "body": expr_to_json(&r.body)})).collect();
    json!({"root": g.root.0, "rules": rules})
}

pub fn grammar_from_json(v: &Value) -> Grammar {
    let mut g = Grammar::new();
    for r in v["rules"].as_array().expect("rules") {
        g.add_rule(r["name"].as_str().expect("a name"), expr_from_json(&r["body"]));
    }
    g.root = RuleId(v["root"].as_u64().unwrap_or(0) as u32);
    g
}

fn op_to_json(op: &Op) -> Value {
    match *op {
        Op::Accept(n) => json!({"accept": n}),
        Op::Reject(n) => json!({"reject": n}),
        Op::Rollback(n) => json!({"rollback": n}),
        Op::Fork => json!("fork"),
        Op::Forced(n) => json!({"forced": n}),
    }
}

fn op_from_json(v: &Value) -> Op {
    if v.as_str() == Some("fork") {
        return Op::Fork;
    }
    let (k, n) = v.as_object().and_then(|o| o.iter().next()).expect("an op");
    let n = n.as_u64().expect("a count");
    match k.as_str() {
        "accept" => Op::Accept(n as u16),
        "reject" => Op::Reject(n as u16),
        "rollback" => Op::Rollback(n as u8),
        "forced" => Op::Forced(n as u8),
        other => panic!("unknown op {other:?}"),
    }
}

impl MatcherCase {
    pub fn to_json(&self) -> Value {
        json!({
            "grammar": grammar_to_json(&self.grammar),
            "vocab_seed": self.vocab_seed,
            "ops": self.ops.iter().map(op_to_json).collect::<Vec<_>>(),
        })
    }
    pub fn from_json(v: &Value) -> Self {
        MatcherCase {
            grammar: grammar_from_json(&v["grammar"]),
            vocab_seed: v["vocab_seed"].as_u64().unwrap_or(0),
            ops: v["ops"].as_array().expect("ops").iter().map(op_from_json).collect(),
        }
    }
}

// ------------------------------------------------------------------------------------ replay

/// Replays one regression fixture of `target` (the directory name under
/// `fixtures/fuzz-regressions/`).
pub fn replay(target: &str, bytes: &[u8]) {
    match target {
        "gbnf_parse" => check_gbnf(bytes),
        "ecma_pattern" => {
            if let Ok(p) = std::str::from_utf8(bytes) {
                check_pattern(p)
            }
        }
        "schema_compile" => {
            let v: Value = serde_json::from_slice(bytes).expect("a schema case is JSON");
            check_schema(&SchemaCase::from_json(&v))
        }
        "matcher" => {
            let v: Value = serde_json::from_slice(bytes).expect("a matcher case is JSON");
            check_matcher(&MatcherCase::from_json(&v))
        }
        other => panic!("unknown fuzz target {other:?}"),
    }
}
