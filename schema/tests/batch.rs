//! A [`SchemaBatch`] gives each schema the language `compile_schema` gives it alone: the
//! JSON-Schema-Test-Suite's draft 2020-12 schemas, all compiled by one batch into one
//! grammar (lenient mode; flexible whitespace, with the shared `ws`, "any value" and key
//! rules in play, and indented output, whose value rules are per depth, cut at
//! `max_indent_depth`), accept and reject each test instance as compiled alone, with the
//! same warnings and errors; the schemas that fail leave the batch usable for the next.

use std::collections::HashSet;

use serde_json::Value;
use stencil_grammar::llama_cpp::prune;
use stencil_grammar::Grammar;
use stencil_mask::CompiledGrammar;
use stencil_schema::{compile_schema, Draft, SchemaBatch, SchemaOptions, Whitespace};
use stencil_test_support::{corpus, fixtures};

#[test]
fn a_batch_compiles_each_schema_to_its_own_language() {
    check(SchemaOptions::default().lenient());
}

#[test]
fn a_batch_compiles_each_schema_to_its_own_language_indented() {
    let mut opts = SchemaOptions::default().lenient();
    opts.indent = Some(2);
    opts.whitespace = Whitespace::Compact;
    opts.item_separator = ", ".into();
    opts.key_separator = ": ".into();
    opts.max_indent_depth = 2;
    check(opts);
}

fn check(mut opts: SchemaOptions) {
    let suite = corpus::suite_dir();
    let (vocab, tok) = fixtures::smollm2();
    opts.registry = corpus::suite_registry(&suite);
    opts.default_draft = Draft::Draft202012;
    let mut batch = SchemaBatch::new(opts.clone(), "s-");
    let mut g = Grammar::new();
    let (mut schemas, mut failed, mut instances, mut rules_alone) = (0, 0, 0, 0);
    let dir = suite.join("tests").join("draft2020-12");
    for rel in corpus::json_files(&dir) {
        let cases: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(dir.join(&rel)).expect("readable")).expect("JSON");
        for (ci, case) in cases.iter().enumerate() {
            let at = format!("{}#{ci}", rel.display());
            let alone = compile_schema(&case["schema"], &opts);
            let batched = batch.compile(&case["schema"], &mut g);
            schemas += 1;
            let (alone, (root, warnings)) = match (alone, batched) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(a), Err(b)) => {
                    assert_eq!(a, b, "{at}: the same error");
                    failed += 1;
                    continue;
                }
                (a, b) => panic!("{at}: alone {:?}, in the batch {:?}", a.err(), b.err()),
            };
            assert_eq!(alone.warnings, warnings, "{at}: the same warnings");
            rules_alone += alone.grammar.rules.len();
            let engine = |g: &Grammar| CompiledGrammar::new(g, vocab.clone()).ok();
            let alone = engine(&alone.grammar);
            g.root = root;
            let batched = engine(&prune(&g));
            assert_eq!(alone.is_some(), batched.is_some(), "{at}: the engine compiles both or neither");
            let (Some(alone), Some(batched)) = (alone, batched) else { continue };
            for test in case["tests"].as_array().expect("tests") {
                let text = serde_json::to_string(&test["data"]).expect("JSON");
                let pretty = serde_json::to_string_pretty(&test["data"]).expect("JSON");
                for text in [text, pretty] {
                    instances += 1;
                    assert_eq!(
                        corpus::mask_accepts(&alone, &tok, &text),
                        corpus::mask_accepts(&batched, &tok, &text),
                        "{at}: {text}"
                    );
                }
            }
        }
    }
    let names: HashSet<&str> = g.rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names.len(), g.rules.len(), "rule names stay unique across restarts");
    // What the schemas share is written once.
    assert!(g.rules.len() * 10 < rules_alone * 9, "{} rules in the batch, {rules_alone} alone", g.rules.len());
    assert!(failed > 0 && instances > 2000, "{schemas} schemas, {failed} failed, {instances} instances");
    eprintln!(
        "{schemas} schemas ({failed} failed), {instances} instances; {} rules, {rules_alone} alone",
        g.rules.len()
    );
}

/// A value cut at `max_indent_depth` is cut again in the next schema of the batch, which
/// then says why it has no value as it would alone.
#[test]
fn a_cut_is_noted_in_every_schema_it_empties() {
    let opts =
        SchemaOptions { indent: Some(2), whitespace: Whitespace::Compact, max_indent_depth: 0, ..Default::default() };
    let schema = serde_json::json!({"type": "array", "minItems": 1});
    let alone = compile_schema(&schema, &opts).expect_err("no value above the cut");
    assert!(matches!(alone, stencil_schema::SchemaError::Narrowed { .. }), "{alone:?}");
    let mut batch = SchemaBatch::new(opts, "s-");
    let mut g = Grammar::new();
    // `[]` only: its items, any value one level down, are cut.
    batch.compile(&serde_json::json!({"type": "array"}), &mut g).expect("the empty array");
    assert_eq!(batch.compile(&schema, &mut g).expect_err("no value above the cut"), alone);
}
