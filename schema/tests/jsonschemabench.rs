//! The conformance run: JSONSchemaBench (a split of third-party schemas, not in the
//! repository) through the compiler, the mask and post-hoc validation.
//!
//! Not part of `cargo test` (`test = false` in Cargo.toml): `scripts/conformance.sh
//! --corpus DIR [--step N]` runs it over the subset folders in `DIR`
//! (`$STENCIL_JSONSCHEMABENCH`), every `N`th schema of each subset
//! (`$STENCIL_CONFORMANCE_STEP`, default 1: all), prints the counts and writes the table to
//! `$CARGO_TARGET_TMPDIR/jsonschemabench-summary.md`. Asserts: no panics, and no invalid
//! instance accepted by the mask of a schema compiled without warnings (soundness).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use serde_json::Value;
use stencil_mask::{CompiledGrammar, Limits};

const ENGINE_TIMEOUT: Duration = Duration::from_secs(20);
use stencil_schema::{compile_schema, validate, Registry, SchemaOptions};
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
    invalid: usize,
    invalid_rejected_by_mask: usize,
    invalid_flagged_post_hoc: usize,
    invalid_escaped: usize,
    unsound: usize,
    panics: usize,
    engine_timeouts: usize,
    max_compile: Duration,
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
    let mut unsound = Vec::new();
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
            row.max_compile = row.max_compile.max(t0.elapsed() / 2);
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
            // The engine's compile, with tighter limits than the defaults and a wall-clock
            // cap (a thread left behind on timeout: the engine has no cancellation).
            let (tx, rx) = std::sync::mpsc::channel();
            let g = lenient.grammar.clone();
            let v = vocab.clone();
            std::thread::spawn(move || {
                let limits = Limits { max_nfa_states: 300_000, max_automaton_states: 100_000, ..Limits::default() };
                let r = catch_unwind(AssertUnwindSafe(|| CompiledGrammar::with_limits(&g, v, limits)));
                let _ = tx.send(r);
            });
            let engine = match rx.recv_timeout(ENGINE_TIMEOUT) {
                Ok(r) => r,
                Err(_) => {
                    row.engine_timeouts += 1;
                    eprintln!("engine compile timed out: {name}/{}", rel.display());
                    continue;
                }
            };
            let Ok(engine) = engine else {
                row.panics += 1;
                eprintln!("PANIC in the engine for {name}/{}", rel.display());
                continue;
            };
            let Ok(engine) = engine else {
                if std::env::var_os("STENCIL_VERBOSE").is_some() {
                    eprintln!("{name}/{}: engine: {}", rel.display(), engine.unwrap_err());
                }
                continue;
            };
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
                    } else if std::env::var_os("STENCIL_VERBOSE").is_some() {
                        eprintln!("valid rejected: {name}/{}: {}", rel.display(), &text[..text.len().min(200)]);
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
        "| subset | schemas | strict compile | lenient compile | engine compile | valid accepted | invalid rejected by mask | invalid flagged post hoc | invalid escaping both | unsound | engine timeouts | max compile ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
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
        "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        r.schemas,
        pct(r.strict_ok, r.schemas),
        pct(r.lenient_ok, r.schemas),
        pct(r.engine_ok, r.schemas),
        pct(r.valid_accepted, r.valid),
        pct(r.invalid_rejected_by_mask, r.invalid),
        r.invalid_flagged_post_hoc,
        r.invalid_escaped,
        r.unsound,
        r.engine_timeouts,
        r.max_compile.as_millis()
    )
}
