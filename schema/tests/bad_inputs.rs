//! The catalogue of bad schemas (`fixtures/bad/schema/`, see `fixtures/bad/README.md`):
//! each gives its expected outcome — the snapshot `NAME.json.expected` next to it, compared
//! exactly (`STENCIL_UPDATE=1` rewrites them) — and none panics. Then hostile
//! schemas too big to commit, generated here (huge enums, `maxLength: 100000`, deep `$ref`
//! chains, 500-tool tool sets, 4 MB schemas): each works fast or fails fast with a typed
//! error naming the limit and the JSON pointer; and every limit of [`SchemaLimits`] is hit.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use stencil_mask::{bitmask, CompiledGrammar, Matcher, Vocabulary};
use stencil_schema::{compile_schema, Mode, SchemaError, SchemaLimits, SchemaOptions};
use stencil_test_support::snapshot::check_snapshots;
use stencil_test_support::toy;

fn bad_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/bad/schema")
}

/// Parse, compile (strict, then lenient when strict refuses), then the engine.
fn outcome(bytes: &[u8], vocab: &Arc<Vocabulary>) -> String {
    let schema: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => return format!("invalid JSON: {e}"),
    };
    let mut out = String::new();
    for options in [SchemaOptions::default(), SchemaOptions::default().lenient()] {
        let mode = if options.mode == Mode::Strict { "strict" } else { "lenient" };
        let compiled = match compile_schema(&schema, &options) {
            Ok(c) => c,
            Err(e) => {
                out += &format!("{mode}: error: {e}\n");
                continue;
            }
        };
        out += &format!("{mode}: compiles ({} rules)\n", compiled.grammar.rules.len());
        for w in &compiled.warnings {
            out += &format!("  warning: {w}\n");
        }
        match CompiledGrammar::new(&compiled.grammar, vocab.clone()) {
            Ok(_) => out += "  engine: compiles\n",
            Err(e) => out += &format!("  engine: error: {e}\n"),
        }
        if options.mode == Mode::Strict {
            break; // lenient adds nothing when strict compiles
        }
    }
    out
}

#[test]
fn bad_schemas_give_their_expected_outcomes() {
    let vocab = toy::json_bytes();
    let checked = check_snapshots(&bad_dir(), ".json", |input| outcome(&std::fs::read(input).unwrap(), &vocab));
    assert!(checked >= 20, "{checked} bad schemas");
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

/// Compiles the schema and the grammar, and takes a first mask.
fn works(what: &str, schema: &Value, limit: Duration) {
    let vocab = toy::json_bytes();
    timed(what, limit, || {
        let compiled = compile_schema(schema, &SchemaOptions::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
        let engine = CompiledGrammar::new(&compiled.grammar, vocab.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
        let mut m = Matcher::new(engine);
        let mut mask = bitmask::new_mask(vocab.mask_width());
        m.fill_mask(&mut mask).unwrap();
        assert!(bitmask::allowed(&mask).count() > 0);
    });
}

fn too_large(schema: &Value, options: &SchemaOptions) -> (String, String) {
    match timed("a schema over a limit", Duration::from_secs(5), || compile_schema(schema, options)) {
        Err(SchemaError::TooLarge { limit, pointer, reason, .. }) => {
            assert!(reason.contains(&format!("limit {limit})")), "{reason} names {limit}");
            (pointer, reason)
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

#[test]
fn a_huge_enum_works_fast() {
    let values: Vec<Value> = (0..20_000).map(|i| json!(format!("value-{i}"))).collect();
    works("20,000-value enum", &json!({"enum": values}), Duration::from_secs(20));
    let values: Vec<Value> = (0..5_000).map(|i| json!(i)).chain((0..5_000).map(|i| json!(format!("{i}")))).collect();
    works("10,000-value mixed enum", &json!({"type": ["integer", "string"], "enum": values}), Duration::from_secs(20));
}

#[test]
fn max_length_100000_fails_fast_in_strict_mode_and_is_left_to_validation_in_lenient_mode() {
    let schema = json!({"type": "object", "properties": {"body": {"type": "string", "maxLength": 100_000}}});
    let (pointer, reason) = too_large(&schema, &SchemaOptions::default());
    assert_eq!(pointer, "/properties/body");
    assert_eq!(reason, "`maxLength` 100000 is above 10000 (limit max_repetition)");
    let compiled = compile_schema(&schema, &SchemaOptions::default().lenient()).unwrap();
    assert_eq!(compiled.warnings.len(), 1);
    assert_eq!(
        compiled.warnings[0].to_string(),
        "`maxLength` at #/properties/body is not enforced: counts above 10000 (limit max_repetition)"
    );
    let engine = timed("lenient maxLength", Duration::from_secs(10), || {
        CompiledGrammar::new(&compiled.grammar, toy::json_bytes())
    });
    assert!(engine.is_ok());
    // Within the limit, the engine either compiles it or fails fast with its own limit.
    for n in [1_000, 10_000] {
        let schema = json!({"type": "string", "maxLength": n});
        let compiled = compile_schema(&schema, &SchemaOptions::default()).unwrap();
        let r = timed("maxLength within the limit", Duration::from_secs(20), || {
            CompiledGrammar::new(&compiled.grammar, toy::json_bytes())
        });
        if let Err(e) = r {
            assert!(matches!(e, stencil_mask::CompileError::LimitExceeded { .. }), "{e}");
        }
    }
    let (_, reason) = too_large(&json!({"type": "array", "minItems": 100_000}), &SchemaOptions::default());
    assert!(reason.contains("`minItems` 100000"), "{reason}");
}

/// `$defs/d0` → `d1` → ... → `d{n}`, each wrapping the next in an object (`nest`) or a plain
/// `$ref` (not `nest`).
fn ref_chain(n: usize, nest: bool) -> Value {
    let mut defs = Map::new();
    for i in 0..n {
        let next = json!({"$ref": format!("#/$defs/d{}", i + 1)});
        defs.insert(format!("d{i}"), if nest { json!({"type": "object", "properties": {"x": next}}) } else { next });
    }
    defs.insert(format!("d{n}"), json!({"type": "integer"}));
    json!({"$defs": defs, "$ref": "#/$defs/d0"})
}

#[test]
fn deep_ref_chains_work_or_fail_fast_without_overflowing_the_stack() {
    works("a chain of 2,000 $refs", &ref_chain(2_000, false), Duration::from_secs(10));
    works("100 nested objects through $refs", &ref_chain(100, true), Duration::from_secs(10));
    // Each object is a level of the walk (its `$ref` is followed within the level).
    let (pointer, reason) = too_large(&ref_chain(5_000, true), &SchemaOptions::default());
    assert_eq!(pointer, "/$defs/d4095");
    assert_eq!(reason, "subschemas and the references between them nest deeper than 4096 levels (limit max_depth)");
    // A recursive schema is not deep: each subschema is compiled once.
    let tree = json!({"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}});
    works("a recursive schema", &tree, Duration::from_secs(10));
}

fn tool(i: usize) -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"const": format!("tool_{i}")},
            "arguments": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
                "required": ["query"],
                "additionalProperties": false
            }
        },
        "required": ["name", "arguments"],
        "additionalProperties": false
    })
}

#[test]
fn five_hundred_tools_work() {
    let tools: Vec<Value> = (0..500).map(tool).collect();
    works("500 tools (anyOf)", &json!({"anyOf": tools}), Duration::from_secs(30));
    works("500 tools (oneOf, discriminated by name)", &json!({"oneOf": tools}), Duration::from_secs(30));
}

#[test]
fn a_four_megabyte_schema_works_or_fails_fast() {
    // 40,000 properties of about 100 bytes each.
    let mut props = Map::new();
    for i in 0..40_000 {
        props.insert(
            format!("property_number_{i}"),
            json!({"type": "string", "description": "some text to make the schema bigger", "maxLength": 20}),
        );
    }
    let schema = json!({"type": "object", "properties": props});
    assert!(serde_json::to_string(&schema).unwrap().len() > 4_000_000);
    timed("a 4 MB schema", Duration::from_secs(60), || {
        let compiled = compile_schema(&schema, &SchemaOptions::default()).unwrap();
        if let Err(e) = CompiledGrammar::new(&compiled.grammar, toy::json_bytes()) {
            assert!(matches!(e, stencil_mask::CompileError::LimitExceeded { .. }), "{e}");
        }
    });
}

/// Every limit of [`SchemaLimits`], set low, is hit with its name and the pointer.
#[test]
fn every_schema_limit_is_hit_with_its_name() {
    let with = |limits: SchemaLimits| SchemaOptions { limits, ..SchemaOptions::default() };
    let tools: Vec<Value> = (0..10).map(tool).collect();
    let cases: Vec<(Value, SchemaLimits, &str, &str)> = vec![
        (ref_chain(10, true), SchemaLimits { max_depth: 3, ..Default::default() }, "/$defs/d2", "max_depth"),
        (json!({"anyOf": tools}), SchemaLimits { max_branches: 5, ..Default::default() }, "", "max_branches"),
        (
            ref_chain(10, true),
            SchemaLimits { max_rules: 5, ..Default::default() },
            "/$defs/d3/properties/x",
            "max_rules",
        ),
        (
            json!({"type": "string", "minLength": 11}),
            SchemaLimits { max_repetition: 10, ..Default::default() },
            "",
            "max_repetition",
        ),
        (
            ref_chain(10, true),
            SchemaLimits { max_compile_time: Duration::ZERO, ..Default::default() },
            "",
            "max_compile_time",
        ),
    ];
    for (schema, limits, at, name) in cases {
        let (pointer, reason) = too_large(&schema, &with(limits));
        assert_eq!(pointer, at, "{name}: {reason}");
        assert!(reason.ends_with(&format!("(limit {name})")), "{name}: {reason}");
    }
}
