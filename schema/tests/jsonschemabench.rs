//! The conformance run: JSONSchemaBench (a split of third-party schemas, not in the
//! repository) through the compiler, the mask and post-hoc validation.
//!
//! Not part of `cargo test` (`test = false` in Cargo.toml): `scripts/conformance.sh
//! --corpus DIR [--step N]` runs it over the subset folders in `DIR`
//! (`$STENCIL_JSONSCHEMABENCH`), every `N`th schema of each subset
//! (`$STENCIL_CONFORMANCE_STEP`, default 1: all), prints the counts and writes the table to
//! `$CARGO_TARGET_TMPDIR/jsonschemabench-summary.md`. Asserts: no panics, and no invalid
//! instance accepted by the mask of a schema compiled without warnings (soundness).
//!
//! Every valid instance the mask refuses is put in one category, and the run prints their
//! table: the fixed property order (the instance is accepted when the schema is compiled
//! with `PropertyOrder::Any`, lenient: exact up to its limit, widened beyond), a number
//! with an exponent (accepted once its numbers are written out, as bounded numbers are; in
//! either order), a narrowing (the compile's narrowing warnings, each named by keyword and
//! reason), or other (saying so when the `Any` compile failed). The column "valid
//! accepted, any order" counts what either compile accepts.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use stencil_mask::{CompiledGrammar, Limits};

const ENGINE_TIMEOUT: Duration = Duration::from_secs(20);
use stencil_schema::{compile_schema, validate, PropertyOrder, Registry, SchemaOptions, Unenforced};
use stencil_test_support::{corpus, fixtures};

#[derive(Default, Debug, Clone)]
struct Row {
    schemas: usize,
    strict_ok: usize,
    lenient_ok: usize,
    /// Lenient compiles that the engine also compiled.
    engine_ok: usize,
    valid: usize,
    valid_accepted: usize,
    /// Valid instances accepted by the schema-order or the `PropertyOrder::Any` compile.
    valid_accepted_any_order: usize,
    invalid: usize,
    invalid_rejected_by_mask: usize,
    invalid_flagged_post_hoc: usize,
    invalid_escaped: usize,
    unsound: usize,
    panics: usize,
    engine_timeouts: usize,
    max_compile: Duration,
}

/// The engine's compile, with tighter limits than the defaults and a wall-clock cap (a
/// thread left behind on timeout: the engine has no cancellation). `Err(true)`: a panic,
/// `Err(false)`: a timeout; `Ok(None)`: the engine refused the grammar.
fn engine_compile(
    g: &stencil_grammar::Grammar,
    vocab: &Arc<stencil_mask::Vocabulary>,
) -> Result<(Option<Arc<CompiledGrammar>>, Duration), bool> {
    let (tx, rx) = std::sync::mpsc::channel();
    let g = g.clone();
    let v = vocab.clone();
    std::thread::spawn(move || {
        let limits = Limits { max_nfa_states: 300_000, max_automaton_states: 100_000, ..Limits::default() };
        let t0 = Instant::now();
        let r = catch_unwind(AssertUnwindSafe(|| CompiledGrammar::with_limits(&g, v, limits)));
        let _ = tx.send(r.map(|r| (r, t0.elapsed())));
    });
    match rx.recv_timeout(ENGINE_TIMEOUT) {
        Err(_) => Err(false),
        Ok(Err(_)) => Err(true),
        Ok(Ok((r, took))) => Ok((r.ok(), took)),
    }
}

/// A narrowing's name in the refusal table: keyword and reason, the reason cut before its
/// particulars (names, counts in parentheses).
fn narrowing_name(u: &Unenforced) -> String {
    let reason = u.reason.split([':', '(']).next().unwrap_or("").trim_end();
    format!("`{}`: {reason}", u.keyword)
}

/// What the refusal table calls instances the `PropertyOrder::Any` compile accepts.
const FIXED_ORDER: &str = "fixed property order";

/// Why the valid instance `data` is refused (see the module docs). `engine`: the schema's
/// lenient grammar; `any_order`: its compile with `PropertyOrder::Any` (computed once per
/// schema, on the first refusal; `None` when it failed).
fn refusal_category(
    data: &Value,
    lenient: &stencil_schema::CompiledSchema,
    engine: &Arc<CompiledGrammar>,
    any_order: Option<&Arc<CompiledGrammar>>,
    tok: &stencil_mask::vocab::Tokenizer,
) -> String {
    let text = serde_json::to_string(data).unwrap();
    let plain = plain_numbers(data);
    let exponent = plain != text;
    if let Some(g) = any_order {
        if corpus::mask_accepts(g, tok, &text) {
            return FIXED_ORDER.into();
        }
        if exponent && corpus::mask_accepts(g, tok, &plain) {
            return format!("{EXPONENT}, {FIXED_ORDER}");
        }
    }
    if exponent && corpus::mask_accepts(engine, tok, &plain) {
        return EXPONENT.into();
    }
    let mut narrowings: Vec<String> = lenient.warnings.iter().filter(|w| w.narrows).map(narrowing_name).collect();
    narrowings.sort();
    narrowings.dedup();
    if !narrowings.is_empty() {
        return format!("narrowing: {}", narrowings.join(" + "));
    }
    if any_order.is_none() {
        return "other (the `PropertyOrder::Any` compile failed: the order is not checked)".into();
    }
    "other".into()
}

/// What the refusal table calls instances accepted once their numbers are written out.
const EXPONENT: &str = "a number with an exponent (bounded numbers are written without)";

/// `value` as compact JSON with every number written without an exponent, as Stencil
/// writes bounded numbers: `1e-6` as `0.000001`.
fn plain_numbers(value: &Value) -> String {
    let join = |items: Vec<String>| items.join(",");
    match value {
        Value::Number(n) if n.to_string().contains(['e', 'E']) => n.as_f64().map_or(n.to_string(), |f| f.to_string()),
        Value::Array(a) => format!("[{}]", join(a.iter().map(plain_numbers).collect())),
        Value::Object(m) => {
            let members = m.iter().map(|(k, v)| format!("{}:{}", Value::String(k.clone()), plain_numbers(v)));
            format!("{{{}}}", join(members.collect()))
        }
        _ => value.to_string(),
    }
}

#[test]
fn jsonschemabench() {
    let step: usize = match std::env::var("STENCIL_CONFORMANCE_STEP") {
        Ok(s) => s.parse().ok().filter(|&n| n > 0).expect("STENCIL_CONFORMANCE_STEP: a whole number >= 1"),
        Err(_) => 1,
    };
    let root = corpus::jsonschemabench_dir();
    let (vocab, tok) = fixtures::smollm2();
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    // The slowest compiles (the schema's, strict and lenient, mean of the two, plus the
    // engine's of the lenient grammar), to keep the tail visible.
    let mut slow: Vec<(Duration, Duration, String)> = Vec::new();
    let mut unsound = Vec::new();
    // Valid instances refused, by category (see the module docs).
    let mut refused: BTreeMap<String, usize> = BTreeMap::new();
    let mut subsets: Vec<_> =
        std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    subsets.sort();
    let registry = Registry::new();
    for sub in subsets {
        let name = sub.file_name().unwrap().to_string_lossy().to_string();
        let row = rows.entry(name.clone()).or_default();
        let files = corpus::json_files(&sub);
        for (i, rel) in files.iter().enumerate() {
            if i % step != 0 {
                continue;
            }
            let text = std::fs::read_to_string(sub.join(rel)).unwrap();
            let Ok(doc) = serde_json::from_str::<Value>(&text) else { continue };
            let schema = &doc["schema"];
            row.schemas += 1;
            let t0 = Instant::now();
            let strict = catch_unwind(AssertUnwindSafe(|| compile_schema(schema, &SchemaOptions::compact())));
            let lenient =
                catch_unwind(AssertUnwindSafe(|| compile_schema(schema, &SchemaOptions::compact().lenient())));
            let schema_compile = t0.elapsed() / 2;
            row.max_compile = row.max_compile.max(schema_compile);
            let (Ok(strict), Ok(lenient)) = (strict, lenient) else {
                row.panics += 1;
                eprintln!("PANIC compiling {name}/{}", rel.display());
                continue;
            };
            if strict.is_ok() {
                row.strict_ok += 1;
            }
            let Ok(lenient) = lenient else {
                if std::env::var_os("STENCIL_VERBOSE").is_some() {
                    eprintln!("{name}/{}: {}", rel.display(), lenient.unwrap_err());
                }
                continue;
            };
            row.lenient_ok += 1;
            if std::env::var_os("STENCIL_VERBOSE").is_some() {
                eprintln!("engine compile {name}/{} ({} rules)", rel.display(), lenient.grammar.rules.len());
            }
            let engine = match engine_compile(&lenient.grammar, &vocab) {
                Ok((Some(e), took)) => {
                    slow.push((schema_compile, took, format!("{name}/{}", rel.display())));
                    e
                }
                Ok((None, _)) => {
                    if std::env::var_os("STENCIL_VERBOSE").is_some() {
                        eprintln!("{name}/{}: the engine refused the grammar", rel.display());
                    }
                    continue;
                }
                Err(false) => {
                    row.engine_timeouts += 1;
                    eprintln!("engine compile timed out: {name}/{}", rel.display());
                    continue;
                }
                Err(true) => {
                    row.panics += 1;
                    eprintln!("PANIC in the engine for {name}/{}", rel.display());
                    continue;
                }
            };
            // The `PropertyOrder::Any` compile, for the refusal table (on the first refusal).
            let mut any_order: Option<Option<Arc<CompiledGrammar>>> = None;
            row.engine_ok += 1;
            for test in doc["tests"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
                let data = &test["data"];
                let valid = test["valid"].as_bool().unwrap_or(true);
                let text = serde_json::to_string(data).unwrap();
                let accepted = corpus::mask_accepts(&engine, &tok, &text);
                if valid {
                    row.valid += 1;
                    if accepted {
                        row.valid_accepted += 1;
                        row.valid_accepted_any_order += 1;
                    } else {
                        if any_order.is_none() {
                            let opts = SchemaOptions {
                                property_order: PropertyOrder::Any,
                                ..SchemaOptions::compact().lenient()
                            };
                            any_order = Some(match catch_unwind(AssertUnwindSafe(|| compile_schema(schema, &opts))) {
                                Ok(Ok(c)) => engine_compile(&c.grammar, &vocab).ok().and_then(|(e, _)| e),
                                _ => None,
                            });
                        }
                        let any_grammar = any_order.as_ref().and_then(Option::as_ref);
                        let category = refusal_category(data, &lenient, &engine, any_grammar, &tok);
                        if category == FIXED_ORDER {
                            row.valid_accepted_any_order += 1;
                        }
                        if std::env::var_os("STENCIL_VERBOSE").is_some() {
                            eprintln!(
                                "valid rejected ({category}): {name}/{}: {}",
                                rel.display(),
                                &text[..text.len().min(200)]
                            );
                        }
                        *refused.entry(category).or_default() += 1;
                    }
                } else {
                    row.invalid += 1;
                    if !accepted {
                        row.invalid_rejected_by_mask += 1;
                    } else if validate(schema, data, &registry).is_err() {
                        row.invalid_flagged_post_hoc += 1;
                        if lenient.warnings.is_empty() {
                            row.unsound += 1;
                            unsound.push(format!("{name}/{}: {}", rel.display(), &text[..text.len().min(200)]));
                        }
                    } else {
                        row.invalid_escaped += 1;
                    }
                }
            }
        }
    }
    let mut table = String::from(
        "| subset | schemas | strict compile | lenient compile | engine compile | valid accepted | valid accepted, any order | invalid rejected by mask | invalid flagged post hoc | invalid escaping both | unsound | engine timeouts | max compile ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut total = Row::default();
    for (name, r) in &rows {
        writeln!(table, "{}", fmt_row(name, r)).unwrap();
        total.schemas += r.schemas;
        total.strict_ok += r.strict_ok;
        total.lenient_ok += r.lenient_ok;
        total.engine_ok += r.engine_ok;
        total.valid += r.valid;
        total.valid_accepted += r.valid_accepted;
        total.valid_accepted_any_order += r.valid_accepted_any_order;
        total.invalid += r.invalid;
        total.invalid_rejected_by_mask += r.invalid_rejected_by_mask;
        total.invalid_flagged_post_hoc += r.invalid_flagged_post_hoc;
        total.invalid_escaped += r.invalid_escaped;
        total.unsound += r.unsound;
        total.panics += r.panics;
        total.engine_timeouts += r.engine_timeouts;
        total.max_compile = total.max_compile.max(r.max_compile);
    }
    writeln!(table, "{}", fmt_row("**all**", &total)).unwrap();
    let sample = if step == 1 { "every schema".to_string() } else { format!("every {step}th schema") };
    println!("JSONSchemaBench at {} ({sample}):\n{table}", root.display());
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("jsonschemabench-summary.md");
    std::fs::write(&out, &table).unwrap();
    println!("wrote {}", out.display());
    let mut refusals = String::from("| why a valid instance is refused | instances |\n|---|---|\n");
    let mut by_count: Vec<(&String, &usize)> = refused.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (why, n) in by_count {
        writeln!(refusals, "| {why} | {n} |").unwrap();
    }
    writeln!(refusals, "| **all** | {} |", refused.values().sum::<usize>()).unwrap();
    println!("Valid instances refused, by category:\n{refusals}");
    slow.sort_by(|a, b| (b.0 + b.1).cmp(&(a.0 + a.1)).then(a.2.cmp(&b.2)));
    let slowest: Vec<String> =
        slow.iter().take(8).map(|(s, e, f)| format!("{f} {} + {} ms", s.as_millis(), e.as_millis())).collect();
    println!("Slowest compiles (schema + engine; the schema's the mean of strict and lenient): {}", slowest.join(", "));
    std::fs::write(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("jsonschemabench-refusals.md"), &refusals)
        .unwrap();
    for u in &unsound {
        println!("UNSOUND {u}");
    }
    assert_eq!(total.panics, 0, "panics");
    assert!(unsound.is_empty(), "{} invalid instances accepted without a warning", unsound.len());
}

fn pct(a: usize, b: usize) -> String {
    if b == 0 {
        "–".into()
    } else {
        format!("{a}/{b} ({:.0}%)", 100.0 * a as f64 / b as f64)
    }
}

fn fmt_row(name: &str, r: &Row) -> String {
    format!(
        "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        r.schemas,
        pct(r.strict_ok, r.schemas),
        pct(r.lenient_ok, r.schemas),
        pct(r.engine_ok, r.schemas),
        pct(r.valid_accepted, r.valid),
        pct(r.valid_accepted_any_order, r.valid),
        pct(r.invalid_rejected_by_mask, r.invalid),
        r.invalid_flagged_post_hoc,
        r.invalid_escaped,
        r.unsound,
        r.engine_timeouts,
        r.max_compile.as_millis()
    )
}
