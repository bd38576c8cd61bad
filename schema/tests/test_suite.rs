//! The official JSON-Schema-Test-Suite (draft2020-12 and draft7, optional tests and formats
//! included) through the mask: valid instances must be accepted, invalid ones rejected.
//!
//! Every check's result is compared with `tests/expected/<draft>.txt`: a check that passed
//! there and fails now is a regression (test failure); new passes print a note. Set
//! `STENCIL_UPDATE=1` to rewrite the file. An invalid instance accepted by the mask
//! whose schema compiled without a warning is a soundness bug: those fail the test unless
//! recorded in the expected file as `unsound`.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use serde_json::Value;
use stencil_mask::CompiledGrammar;
use stencil_schema::{compile_schema, validate, Draft, SchemaOptions};
use stencil_test_support::snapshot::update_requested;
use stencil_test_support::{corpus, fixtures};

#[derive(Default, Debug)]
struct Totals {
    checks: usize,
    passed: usize,
    valid: usize,
    valid_accepted: usize,
    invalid: usize,
    invalid_rejected: usize,
    /// Invalid, accepted by the mask, caught by post-hoc validation.
    invalid_caught_post_hoc: usize,
    /// Invalid, accepted by the mask, keyword listed as a lenient-mode warning.
    accepted_invalid_warned: usize,
    /// Invalid, accepted by the mask, no warning: soundness bugs.
    accepted_invalid_unwarned: usize,
    schemas: usize,
    schemas_compiled: usize,
    panics: usize,
    pretty_checked: usize,
    pretty_accepted: usize,
}

fn run(draft_dir: &str, draft: Draft) {
    let suite = corpus::suite_dir();
    let registry = corpus::suite_registry(&suite);
    let (vocab, tok) = fixtures::smollm2();
    let dir = suite.join("tests").join(draft_dir);
    let mut results: BTreeMap<String, String> = BTreeMap::new();
    let mut t = Totals::default();
    let mut unsound: Vec<String> = Vec::new();
    for rel in corpus::json_files(&dir) {
        let rel_s = rel.to_string_lossy().replace('\\', "/");
        let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(dir.join(&rel)).unwrap()).unwrap();
        for (ci, case) in cases.iter().enumerate() {
            let schema = &case["schema"];
            t.schemas += 1;
            let mut opts = SchemaOptions::compact().lenient();
            opts.registry = registry.clone();
            opts.default_draft = draft;
            let compiled = catch_unwind(AssertUnwindSafe(|| compile_schema(schema, &opts)));
            let compiled = match compiled {
                Ok(c) => c,
                Err(_) => {
                    t.panics += 1;
                    eprintln!("PANIC compiling {rel_s}#{ci}");
                    Err(stencil_schema::SchemaError::UnsupportedKeyword {
                        keyword: String::new(),
                        pointer: String::new(),
                        reason: "panic".into(),
                    })
                }
            };
            // A schema that admits no value, or a grammar left with none by a narrowing:
            // every instance is rejected (the engine has no grammar for the empty language,
            // so the compiler says so instead).
            let unsatisfiable = matches!(
                compiled,
                Err(stencil_schema::SchemaError::Unsatisfiable { .. } | stencil_schema::SchemaError::Narrowed { .. })
            );
            let (grammar, warnings) = match compiled {
                Ok(c) => match CompiledGrammar::new(&c.grammar, vocab.clone()) {
                    Ok(g) => (Some(g), c.warnings),
                    Err(e) => {
                        if std::env::var_os("STENCIL_VERBOSE").is_some() {
                            eprintln!("{rel_s}#{ci}: engine: {e}");
                        }
                        (None, c.warnings)
                    }
                },
                Err(e) => {
                    if std::env::var_os("STENCIL_VERBOSE").is_some() {
                        eprintln!("{rel_s}#{ci}: {e}");
                    }
                    (None, vec![])
                }
            };
            if grammar.is_some() {
                t.schemas_compiled += 1;
            }
            // Pretty-printed variant (valid instances only).
            let pretty_grammar = grammar.as_ref().and_then(|_| {
                let mut p = opts.clone();
                p.indent = Some(2);
                p.whitespace = stencil_schema::Whitespace::Compact;
                p.item_separator = ", ".into();
                p.key_separator = ": ".into();
                compile_schema(schema, &p).ok().and_then(|c| CompiledGrammar::new(&c.grammar, vocab.clone()).ok())
            });
            for (ti, test) in case["tests"].as_array().unwrap().iter().enumerate() {
                let valid = test["valid"].as_bool().unwrap();
                let data = &test["data"];
                let text = serde_json::to_string(data).unwrap();
                let accepted = grammar.as_ref().is_some_and(|g| corpus::mask_accepts(g, &tok, &text));
                t.checks += 1;
                let pass = accepted == valid && (grammar.is_some() || unsatisfiable);
                let mut status = if pass { "pass" } else { "fail" };
                if valid {
                    t.valid += 1;
                    if accepted {
                        t.valid_accepted += 1;
                    }
                    if let Some(pg) = &pretty_grammar {
                        t.pretty_checked += 1;
                        let pretty = serde_json::to_string_pretty(data).unwrap();
                        if corpus::mask_accepts(pg, &tok, &pretty) {
                            t.pretty_accepted += 1;
                        } else if std::env::var_os("STENCIL_VERBOSE").is_some() {
                            eprintln!("pretty rejected: {rel_s}#{ci}/{ti}: {pretty}");
                        }
                    }
                } else {
                    t.invalid += 1;
                    if !accepted && (grammar.is_some() || unsatisfiable) {
                        t.invalid_rejected += 1;
                    } else if grammar.is_some() {
                        if validate(schema, data, &registry).is_err() {
                            t.invalid_caught_post_hoc += 1;
                        }
                        if warnings.is_empty() {
                            t.accepted_invalid_unwarned += 1;
                            status = "unsound";
                            unsound.push(format!("{rel_s}#{ci}/{ti} {} : {text}", test["description"]));
                        } else {
                            t.accepted_invalid_warned += 1;
                        }
                    }
                }
                if pass {
                    t.passed += 1;
                }
                results.insert(format!("{rel_s}#{ci}/{ti}"), status.to_string());
            }
        }
    }
    report(draft_dir, &results, &t, &unsound);
}

fn report(draft_dir: &str, results: &BTreeMap<String, String>, t: &Totals, unsound: &[String]) {
    println!("== JSON-Schema-Test-Suite {draft_dir} ==\n{t:#?}");
    println!(
        "{draft_dir}: {} of {} checks pass ({} schemas, {} compiled); accepted invalid: {} warned, {} unwarned; panics {}",
        t.passed, t.checks, t.schemas, t.schemas_compiled, t.accepted_invalid_warned, t.accepted_invalid_unwarned, t.panics
    );
    for u in unsound {
        println!("UNSOUND {u}");
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/expected/{draft_dir}.txt"));
    let text: String = results.iter().map(|(k, v)| format!("{k}: {v}\n")).collect();
    if update_requested() {
        std::fs::write(&path, &text).unwrap();
        println!("wrote {}", path.display());
        return;
    }
    let old = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} is missing: run with STENCIL_UPDATE=1", path.display()));
    let old: BTreeMap<&str, &str> = old.lines().filter_map(|l| l.rsplit_once(": ")).collect();
    let mut regressions = Vec::new();
    let mut improvements = 0;
    for (k, v) in results {
        match old.get(k.as_str()) {
            Some(&"pass") if v != "pass" => regressions.push(format!("{k}: was pass, now {v}")),
            Some(&"fail") if v == "unsound" => regressions.push(format!("{k}: was fail, now unsound")),
            Some(o) if *o != "pass" && v == "pass" => improvements += 1,
            None => improvements += 1,
            _ => {}
        }
    }
    if improvements > 0 {
        println!("NOTE: {improvements} checks improved: update the file with STENCIL_UPDATE=1");
    }
    assert_eq!(t.panics, 0, "panics while compiling");
    assert!(regressions.is_empty(), "{} regressions:\n{}", regressions.len(), regressions.join("\n"));
}

#[test]
fn draft2020_12() {
    run("draft2020-12", Draft::Draft202012);
}

#[test]
fn draft7() {
    run("draft7", Draft::Draft7);
}
