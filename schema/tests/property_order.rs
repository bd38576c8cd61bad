//! `PropertyOrder::Any` and negated `required` (`not`, exclusive `oneOf`), checked by brute
//! force: every sequence of keys up to a length, written by hand (duplicates included,
//! which serde_json maps cannot hold), through the mask, against the `jsonschema` crate.

use std::sync::Arc;

use serde_json::{json, Value};
use stencil_mask::CompiledGrammar;
use stencil_schema::{
    compile_schema, validate, PropertyOrder, Registry, SchemaError, SchemaLimit, SchemaLimits, SchemaOptions,
};
use stencil_test_support::{corpus, fixtures};

fn any_order(options: SchemaOptions) -> SchemaOptions {
    SchemaOptions { property_order: PropertyOrder::Any, ..options }
}

fn engine(schema: &Value, options: &SchemaOptions) -> Arc<CompiledGrammar> {
    let c = compile_schema(schema, options).unwrap_or_else(|e| panic!("{schema}: {e}"));
    assert!(c.warnings.is_empty(), "{schema}: {:?}", c.warnings);
    let (vocab, _) = fixtures::smollm2();
    CompiledGrammar::new(&c.grammar, vocab).unwrap()
}

/// Every sequence of at most `max_len` keys from `keys` (each with its value text), as
/// compact JSON: the mask accepts it iff it has no repeated key and `jsonschema` says
/// valid. A repeated extra key (a key that no subschema declares: `x...`, `y...`) is
/// invisible to a grammar over unbounded key sets, as to serde_json: there only "accepted
/// ⇒ valid" is checked. Returns (sequences, accepted).
fn brute_force(schema: Value, keys: &[(&str, &str)], max_len: usize) -> (usize, usize) {
    let g = engine(&schema, &any_order(SchemaOptions::compact()));
    let (_, tok) = fixtures::smollm2();
    let mut seqs: Vec<Vec<usize>> = vec![vec![]];
    let mut frontier: Vec<Vec<usize>> = vec![vec![]];
    for _ in 0..max_len {
        let mut next = Vec::new();
        for s in &frontier {
            for k in 0..keys.len() {
                let mut t = s.clone();
                t.push(k);
                next.push(t);
            }
        }
        seqs.extend(next.iter().cloned());
        frontier = next;
    }
    let extra = |k: usize| keys[k].0.starts_with('x') || keys[k].0.starts_with('y');
    let mut accepted = 0;
    for s in &seqs {
        let members: Vec<String> = s.iter().map(|&k| format!("{:?}:{}", keys[k].0, keys[k].1)).collect();
        let text = format!("{{{}}}", members.join(","));
        let repeated = |k: &usize| s.iter().filter(|&j| j == k).count() > 1;
        let declared_repeated = s.iter().any(|k| !extra(*k) && repeated(k));
        let extra_repeated = s.iter().any(|k| extra(*k) && repeated(k));
        let valid = {
            let v: Value = serde_json::from_str(&text).unwrap();
            validate(&schema, &v, &Registry::new()).is_ok()
        };
        let got = corpus::mask_accepts(&g, &tok, &text);
        if extra_repeated && !declared_repeated {
            assert!(!got || valid, "{text} against {schema}");
        } else {
            assert_eq!(got, valid && !declared_repeated, "{text} against {schema}");
        }
        accepted += got as usize;
    }
    (seqs.len(), accepted)
}

#[test]
fn any_order_closed_object() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
        "required": ["a", "c"],
        "additionalProperties": false
    });
    let (n, ok) = brute_force(schema, &[("a", "1"), ("b", "\"s\""), ("c", "true"), ("x", "null")], 5);
    // a, c and optionally b, in any order: 2 + 6.
    assert_eq!(ok, 8, "of {n}");
}

#[test]
fn any_order_extras_anywhere_with_counts() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["b"],
        "additionalProperties": {"type": "null"},
        "minProperties": 2,
        "maxProperties": 3
    });
    let (n, ok) = brute_force(schema, &[("a", "1"), ("b", "\"s\""), ("x", "null"), ("y", "null"), ("x2", "null")], 4);
    assert!(ok > 20, "{ok} of {n}");
}

#[test]
fn any_order_extras_without_counts() {
    let schema = json!({
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a"]
    });
    brute_force(schema, &[("a", "1"), ("b", "\"s\""), ("x", "null"), ("y", "[]")], 5);
}

#[test]
fn any_order_patterns_and_dependencies() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {}},
        "patternProperties": {"^x": {"type": "null"}},
        "additionalProperties": false,
        "dependentRequired": {"a": ["c"]},
        "minProperties": 1
    });
    brute_force(schema, &[("a", "1"), ("b", "\"s\""), ("c", "0"), ("xa", "null"), ("y", "null")], 4);
}

#[test]
fn any_order_nested_objects() {
    let schema = json!({
        "type": "object",
        "properties": {
            "p": {"type": "object", "properties": {"u": {"const": 1}, "v": {"const": 2}}, "required": ["u", "v"], "additionalProperties": false},
            "q": {"type": "integer"}
        },
        "required": ["p", "q"],
        "additionalProperties": false
    });
    brute_force(schema, &[("p", r#"{"v":2,"u":1}"#), ("q", "3"), ("r", "4")], 3);
    brute_force(
        json!({"type": "object", "properties": {"p": {"type": "object", "properties": {"u": {}, "v": {}}, "additionalProperties": false}}}),
        &[("p", r#"{"v":2,"u":1}"#)],
        2,
    );
}

/// The indented style puts any order in the same layout.
#[test]
fn any_order_pretty() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "object", "properties": {"c": {}, "d": {}}}},
        "required": ["a", "b"],
        "additionalProperties": false
    });
    let g = engine(&schema, &any_order(SchemaOptions::pretty()));
    let (_, tok) = fixtures::smollm2();
    for text in ["{\n  \"b\": {\n    \"d\": 1,\n    \"c\": 2\n  },\n  \"a\": 1\n}", "{\n  \"a\": 1,\n  \"b\": {}\n}"] {
        assert!(corpus::mask_accepts(&g, &tok, text), "{text}");
    }
    assert!(!corpus::mask_accepts(&g, &tok, "{\n  \"b\": {},\n  \"a\": 1,\n  \"a\": 1\n}"));
    let g = engine(&schema, &any_order(SchemaOptions::default()));
    assert!(corpus::mask_accepts(&g, &tok, "{ \"b\" : { \"d\": 1 , \"c\": 2 },\n\"a\":1 }"));
}

fn wide(n: usize) -> Value {
    let props: serde_json::Map<String, Value> = (0..n).map(|i| (format!("p{i}"), json!({"type": "integer"}))).collect();
    json!({"type": "object", "properties": {"inner": {"type": "object", "properties": props, "required": ["p0"]}}})
}

#[test]
fn any_order_limit_strict_error() {
    let default = SchemaLimits::default().max_any_order_properties;
    assert_eq!(default, 8);
    assert!(compile_schema(&wide(default), &any_order(SchemaOptions::compact())).is_ok());
    match compile_schema(&wide(default + 1), &any_order(SchemaOptions::compact())) {
        Err(SchemaError::TooLarge { limit, value, pointer, reason }) => {
            assert_eq!((limit, value), (SchemaLimit::AnyOrderProperties, 8));
            assert_eq!(pointer, "/properties/inner");
            assert!(reason.contains("max_any_order_properties"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // A smaller limit.
    let options = SchemaOptions {
        limits: SchemaLimits { max_any_order_properties: 2, ..Default::default() },
        ..any_order(SchemaOptions::compact())
    };
    assert!(matches!(compile_schema(&wide(3), &options), Err(SchemaError::TooLarge { .. })));
    // Counting many extras.
    let counted = json!({"type": "object", "properties": {"a": {}}, "maxProperties": 100});
    match compile_schema(&counted, &any_order(SchemaOptions::compact())) {
        Err(SchemaError::TooLarge { limit, pointer, reason, .. }) => {
            assert_eq!(limit, SchemaLimit::AnyOrderProperties);
            assert_eq!(pointer, "");
            assert!(reason.contains("maxProperties"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // Schema order has no such limit.
    assert!(compile_schema(&wide(default + 1), &SchemaOptions::compact()).is_ok());
}

/// Beyond the limit, lenient mode widens the object (a warning, not a narrowing): every
/// valid key sequence is accepted, and what is accepted beyond the valid ones is only the
/// documented widening (an untracked name repeated). Brute force over five of ten
/// declared names, against the `jsonschema` crate.
#[test]
fn any_order_beyond_limit_lenient_widens() {
    let props: serde_json::Map<String, Value> =
        (0..10).map(|i| (format!("p{i}"), json!({"type": "integer"}))).collect();
    let schema =
        json!({"type": "object", "properties": props, "required": ["p0", "p1"], "additionalProperties": false});
    let c = compile_schema(&schema, &any_order(SchemaOptions::compact().lenient())).unwrap();
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    let w = &c.warnings[0];
    assert!(!w.narrows, "{w}");
    assert_eq!(w.pointer, "");
    assert!(w.reason.contains("max_any_order_properties") && w.reason.contains("widened"), "{w}");
    let (vocab, tok) = fixtures::smollm2();
    let g = CompiledGrammar::new(&c.grammar, vocab).unwrap();
    let keys = ["p0", "p1", "p2", "p3", "p9", "q"];
    let mut frontier: Vec<Vec<usize>> = vec![vec![]];
    let (mut valid_seen, mut widened_seen) = (0, 0);
    for _ in 0..4 {
        let mut next = Vec::new();
        for s in &frontier {
            for k in 0..keys.len() {
                let mut t = s.clone();
                t.push(k);
                let members: Vec<String> = t.iter().map(|&k| format!("{:?}:{k}", keys[k])).collect();
                let text = format!("{{{}}}", members.join(","));
                let repeated = |name: &str| t.iter().filter(|&&j| keys[j] == name).count() > 1;
                let valid = !keys.iter().any(|n| repeated(n))
                    && validate(&schema, &serde_json::from_str(&text).unwrap(), &Registry::new()).is_ok();
                let got = corpus::mask_accepts(&g, &tok, &text);
                if valid {
                    valid_seen += 1;
                    assert!(got, "valid, refused: {text}");
                } else if got {
                    widened_seen += 1;
                    let untracked_repeat = ["p2", "p3", "p9"].iter().any(|n| repeated(n));
                    assert!(untracked_repeat, "accepted beyond the documented widening: {text}");
                    assert!(validate(&schema, &serde_json::from_str(&text).unwrap(), &Registry::new()).is_ok());
                }
                next.push(t);
            }
        }
        frontier = next;
    }
    assert!(valid_seen > 20 && widened_seen > 0, "{valid_seen} valid, {widened_seen} widened");
    // The required names are tracked: never missing, never twice.
    assert!(!corpus::mask_accepts(&g, &tok, r#"{"p2":1,"p1":2}"#));
    assert!(!corpus::mask_accepts(&g, &tok, r#"{"p0":1,"p1":2,"p0":1}"#));
    assert!(corpus::mask_accepts(&g, &tok, r#"{"p9":1,"p1":2,"p5":3,"p0":4}"#));
    // Counted extras beyond the cap: names all tracked, the count left to post-hoc validation.
    let counted = json!({"type": "object", "properties": {"a": {}}, "required": ["a"], "maxProperties": 20});
    let c = compile_schema(&counted, &any_order(SchemaOptions::compact().lenient())).unwrap();
    assert!(c.warnings.iter().all(|w| !w.narrows) && c.warnings.len() == 1, "{:?}", c.warnings);
    let g = CompiledGrammar::new(&c.grammar, fixtures::smollm2().0).unwrap();
    assert!(corpus::mask_accepts(&g, &tok, r#"{"x":1,"a":2,"y":3}"#));
    assert!(!corpus::mask_accepts(&g, &tok, r#"{"x":1,"a":2,"a":3}"#));
    assert!(!corpus::mask_accepts(&g, &tok, r#"{"x":1}"#));
}

/// JSON-Schema-Test-Suite oneOf.json#8: branches that differ by `required` are exclusive.
#[test]
fn one_of_required_branches_are_exclusive() {
    let schema = json!({"type": "object", "oneOf": [{"required": ["foo", "bar"]}, {"required": ["foo", "baz"]}]});
    let (n, ok) = brute_force(schema, &[("foo", "1"), ("bar", "2"), ("baz", "3"), ("x", "4")], 4);
    assert!(ok > 0, "{ok} of {n}");
    // Without `type`: non-objects match both branches, so no value is valid but objects.
    let schema =
        json!({"oneOf": [{"required": ["a"]}, {"required": ["b"], "description": "b"}, {"required": ["a", "c"]}]});
    brute_force(schema.clone(), &[("a", "1"), ("b", "2"), ("c", "3"), ("x", "4")], 4);
    let g = engine(&schema, &SchemaOptions::compact());
    let (_, tok) = fixtures::smollm2();
    for text in ["1", "null", "[]", "\"a\""] {
        assert!(!corpus::mask_accepts(&g, &tok, text), "{text}");
    }
    // Schema order: the same exclusivity.
    assert!(corpus::mask_accepts(&g, &tok, r#"{"b":2,"x":4}"#));
    assert!(!corpus::mask_accepts(&g, &tok, r#"{"a":1,"b":2}"#));
    // A branch that another contains: never valid together.
    brute_force(
        json!({"oneOf": [{"required": ["a"]}, {"required": ["a", "b"]}]}),
        &[("a", "1"), ("b", "2"), ("x", "3")],
        3,
    );
}

#[test]
fn not_required() {
    brute_force(json!({"not": {"required": ["a", "b"]}}), &[("a", "1"), ("b", "2"), ("x", "3")], 4);
    brute_force(
        json!({"properties": {"a": {"type": "integer"}}, "required": ["a"], "not": {"required": ["a", "b"]}, "additionalProperties": {"type": "integer"}}),
        &[("a", "1"), ("b", "2"), ("x", "3"), ("y", "\"x\"")],
        4,
    );
    let g = engine(&json!({"not": {"required": ["a"]}}), &SchemaOptions::compact());
    let (_, tok) = fixtures::smollm2();
    assert!(corpus::mask_accepts(&g, &tok, r#"{"b":1}"#));
    assert!(!corpus::mask_accepts(&g, &tok, r#"{"a":1}"#));
    assert!(!corpus::mask_accepts(&g, &tok, "1"));
    // An enum filtered by the negation.
    let g = engine(&json!({"enum": [{"a": 1}, {"b": 1}, 3], "not": {"required": ["a"]}}), &SchemaOptions::compact());
    assert!(corpus::mask_accepts(&g, &tok, r#"{"b":1}"#));
    assert!(!corpus::mask_accepts(&g, &tok, r#"{"a":1}"#));
    assert!(!corpus::mask_accepts(&g, &tok, "3"));
}
