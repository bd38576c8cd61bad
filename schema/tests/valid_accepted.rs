//! Valid instances that compiles used to refuse (minimal forms of JSONSchemaBench cases),
//! and `pattern` anchors checked against the `jsonschema` crate by brute force.

use std::sync::Arc;

use serde_json::{json, Value};
use stencil_mask::CompiledGrammar;
use stencil_schema::{compile_schema, validate, Registry, SchemaError, SchemaOptions};
use stencil_test_support::{corpus, fixtures};

fn engine(schema: &Value) -> (Arc<CompiledGrammar>, Vec<String>) {
    let c = compile_schema(schema, &SchemaOptions::compact().lenient()).unwrap();
    let (vocab, _) = fixtures::smollm2();
    let g = CompiledGrammar::new(&c.grammar, vocab).unwrap();
    (g, c.warnings.iter().map(|w| w.to_string()).collect())
}

/// Each text: (accepted by the mask?) must equal `valid`, and `valid` must agree with the
/// `jsonschema` crate.
fn check(schema: Value, cases: &[(&str, bool)]) {
    let (g, _) = engine(&schema);
    let (_, tok) = fixtures::smollm2();
    for &(text, valid) in cases {
        let v: Value = serde_json::from_str(text).unwrap();
        // Duplicate keys are invisible to serde_json: only check texts without them.
        if serde_json::to_string(&v).unwrap().len() == text.len() {
            assert_eq!(validate(&schema, &v, &Registry::new()).is_ok(), valid, "{text} against {schema}");
        }
        assert_eq!(corpus::mask_accepts(&g, &tok, text), valid, "{text} against {schema}");
    }
}

/// Handwritten/dep7, dep8: a declared (required) name that `patternProperties` also
/// matches used to drop the pattern from the extra properties.
#[test]
fn pattern_properties_sharing_a_declared_name() {
    let schema = json!({
        "type": "object",
        "patternProperties": {"^[a-e]$": true},
        "additionalProperties": false,
        "required": ["a"],
        "maxProperties": 2
    });
    check(
        schema,
        &[
            (r#"{"a":true,"b":true}"#, true),
            (r#"{"a":1}"#, true),
            (r#"{"a":true,"f":true}"#, false),
            (r#"{"a":true,"b":true,"c":true}"#, false),
            (r#"{"a":true,"a":true}"#, false),
            (r#"{"b":true}"#, false),
        ],
    );
}

/// WashingtonPost/wp_108: `patternProperties` `.*` next to a declared name.
#[test]
fn universal_pattern_next_to_a_declared_name() {
    let schema = json!({
        "patternProperties": {".*": {"type": "string"}},
        "properties": {"basic": {"type": "string"}},
        "required": ["basic"]
    });
    let (_, warnings) = engine(&schema);
    assert!(warnings.is_empty(), "{warnings:?}");
    check(
        schema,
        &[
            (r#"{"basic":"Hello, World!","extra":"x"}"#, true),
            (r#"{"basic":"a","basi":"b","basics":"c","":"d"}"#, true),
            (r#"{"basic":"a","extra":1}"#, false),
            (r#"{"basic":"a","basic":"b"}"#, false),
        ],
    );
}

/// `propertyNames` whose language holds a declared name used to forbid every extra name.
#[test]
fn property_names_sharing_a_declared_name() {
    let schema = json!({
        "type": "object",
        "properties": {"ab": {"type": "integer"}},
        "propertyNames": {"pattern": "^a"}
    });
    check(
        schema,
        &[
            (r#"{"ab":1,"a":"x"}"#, true),
            (r#"{"ac":null}"#, true),
            (r#"{"ab":1,"ab":2}"#, false),
            (r#"{"b":1}"#, false),
        ],
    );
}

/// JsonSchemaStore/KSP-AVC: `required` names that `properties` lacks come in the document
/// order of `required` (they used to come sorted).
#[test]
fn required_names_in_document_order() {
    let schema = json!({
        "type": "object",
        "properties": {"USERNAME ": {"type": "string"}},
        "required": ["USERNAME", "REPOSITORY"]
    });
    check(
        schema,
        &[
            (r#"{"USERNAME":"u","REPOSITORY":"r"}"#, true),
            (r#"{"USERNAME ":"x","USERNAME":"u","REPOSITORY":"r","ALLOW":true}"#, true),
            (r#"{"USERNAME":"u"}"#, false),
        ],
    );
}

/// Github_ultra/o46322: a whole number written with a zero fraction (`6000.0`, serde_json's
/// form of a whole f64) under `multipleOf: 1`, and friends.
#[test]
fn whole_numbers_with_a_zero_fraction() {
    check(
        json!({"type": "number", "minimum": 0, "maximum": 99999999, "multipleOf": 1}),
        &[("6000.0", true), ("6000", true), ("6000.00", true), ("6000.5", false), ("-1.0", false)],
    );
    check(json!({"type": "number", "multipleOf": 1}), &[("6000.0", true), ("-3.000", true), ("6000.5", false)]);
    check(json!({"type": "number", "multipleOf": 5}), &[("10.0", true), ("10.5", false), ("11.0", false)]);
    check(
        json!({"type": "number", "multipleOf": 0.01}),
        &[("1.50", true), ("1.5", true), ("1.505", false), ("2.0100", true)],
    );
    check(json!({"type": "integer"}), &[("1.0", true), ("-7.00", true), ("1.5", false)]);
    check(json!({"type": "integer", "minimum": 1, "maximum": 3}), &[("2.0", true), ("4.0", false)]);
    check(json!({"type": "integer", "multipleOf": 3}), &[("9.0", true), ("10.0", false)]);
    // Draft 4: a float is not an integer even without a fractional part.
    let d4 = json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"});
    let (g, _) = engine(&d4);
    let (_, tok) = fixtures::smollm2();
    assert!(corpus::mask_accepts(&g, &tok, "1"));
    assert!(!corpus::mask_accepts(&g, &tok, "1.0"));
}

/// Extra properties are generated exactly, or said, never silently left out
/// (Handwritten/notnames9: `propertyNames` and `patternProperties` together; keys matching
/// no pattern, allowed by the absent additionalProperties; issue 29).
#[test]
fn extra_properties_exact_or_said() {
    let both =
        json!({"type": "object", "propertyNames": {"pattern": "^a"}, "patternProperties": {"7": {"type": "object"}}});
    let c = compile_schema(&both, &SchemaOptions::compact()).unwrap();
    assert!(c.warnings.is_empty());
    check(both, &[(r#"{"a7":{}}"#, true), (r#"{"a7":1}"#, false), (r#"{"ab":1}"#, true), (r#"{"b":1}"#, false)]);
    let unmatched = json!({"type": "object", "patternProperties": {"^x-": {"type": "string"}}});
    assert!(compile_schema(&unmatched, &SchemaOptions::compact()).is_ok());
    check(unmatched, &[(r#"{"y":1}"#, true), (r#"{"x-a":1}"#, false), (r#"{"x-a":"s"}"#, true)]);
    // A key language past the limits: left out, and said.
    let big = json!({"type": "object", "patternProperties": {"^a{1,30000}$": {"type": "string"}}});
    let c = compile_schema(&big, &SchemaOptions::compact().lenient()).unwrap();
    assert!(c.warnings.iter().any(|w| w.keyword == "additionalProperties" && w.narrows), "{:?}", c.warnings);
    assert!(matches!(compile_schema(&big, &SchemaOptions::compact()), Err(SchemaError::UnsupportedKeyword { .. })));
    // With additionalProperties false nothing is left out.
    let closed =
        json!({"type": "object", "patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": false});
    assert!(compile_schema(&closed, &SchemaOptions::compact()).is_ok());
}

/// All strings of length ≤ `n` over `alphabet`.
fn strings(alphabet: &[char], n: usize) -> Vec<String> {
    let mut all = vec![String::new()];
    let mut frontier = vec![String::new()];
    for _ in 0..n {
        let mut next = Vec::new();
        for s in &frontier {
            for &c in alphabet {
                next.push(format!("{s}{c}"));
            }
        }
        all.extend(next.iter().cloned());
        frontier = next;
    }
    all
}

/// JsonSchemaStore/accelerator, Github_ultra/o21136: `^`/`$` at the edges of alternatives
/// and of leading/trailing groups; the grammar's language against the `jsonschema` crate.
#[test]
fn anchored_alternatives_brute_force() {
    let (vocab, tok) = fixtures::smollm2();
    let patterns = [
        r"^$|^\d{1,2}(?:\.\d)?$",
        r"^$|^[a-z][a-z0-9A-Z]*$",
        r"^a|b$",
        r"^(a|b)$",
        r"(^a|b)c",
        r"a(b$|c)",
        r"^(?:a$|b)",
        r"(?:^|x)a",
        r"a(?:$|\.)",
        r"^$",
        r"^|a",
        r"1|^(a1|b)+$",
    ];
    let alphabet = ['a', 'b', 'c', '1', '.', 'x', 'A'];
    let all = strings(&alphabet, 4);
    for p in patterns {
        let schema = json!({"type": "string", "pattern": p});
        let c = compile_schema(&schema, &SchemaOptions::compact()).unwrap_or_else(|e| panic!("{p}: {e}"));
        let g = CompiledGrammar::new(&c.grammar, vocab.clone()).unwrap();
        for s in &all {
            let v = Value::String(s.clone());
            let want = validate(&schema, &v, &Registry::new()).is_ok();
            let got = corpus::mask_accepts(&g, &tok, &serde_json::to_string(&v).unwrap());
            assert_eq!(got, want, "pattern {p:?} on {s:?}");
        }
    }
}

/// Anchors anywhere else are still refused, with the pointer.
#[test]
fn inner_anchors_still_refused() {
    for p in [r"a^b", r"a(^b|c)", r"(a$|b)c", r"(^a)*", r"a?^b"] {
        let schema = json!({"properties": {"x": {"type": "string", "pattern": p}}});
        match compile_schema(&schema, &SchemaOptions::compact().lenient()) {
            Err(SchemaError::BadPattern { pointer, .. }) => assert_eq!(pointer, "/properties/x", "{p}"),
            other => panic!("{p}: {other:?}"),
        }
    }
}

/// Extra properties are "any key but the declared ones": every short key over a small
/// alphabet (escaped and non-ASCII characters included), against the `jsonschema` crate,
/// for declared names that are plain ASCII and for names that are not.
#[test]
fn extra_keys_are_exactly_the_undeclared_ones() {
    let alphabet = ["a", "b", "é", "\"", "\n"];
    let mut keys = vec![String::new()];
    for _ in 0..3 {
        let longer: Vec<String> = keys.iter().flat_map(|k| alphabet.iter().map(move |c| format!("{k}{c}"))).collect();
        keys.extend(longer);
    }
    keys.sort();
    keys.dedup();
    for declared in [vec!["a", "ab", "b"], vec!["a", "aé", "b\"", ""]] {
        let properties: serde_json::Map<String, Value> =
            declared.iter().map(|k| (k.to_string(), json!({"type": "integer"}))).collect();
        let schema = json!({"type": "object", "properties": properties, "additionalProperties": {"type": "string"}});
        let (g, _) = engine(&schema);
        let (_, tok) = fixtures::smollm2();
        for key in &keys {
            let text = serde_json::to_string(&json!({ key.as_str(): "x" })).unwrap();
            let valid = validate(&schema, &serde_json::from_str(&text).unwrap(), &Registry::new()).is_ok();
            assert_eq!(valid, !declared.contains(&key.as_str()), "{text}");
            assert_eq!(corpus::mask_accepts(&g, &tok, &text), valid, "{text} against {schema}");
        }
    }
}

/// Github_hard/o39233 (found by the full JSONSchemaBench run): `propertyNames` given as a
/// `$ref` to an `enum` of names was read as "any name" (`$ref` counted as an annotation).
#[test]
fn property_names_through_a_ref_to_an_enum() {
    let schema = json!({
        "type": "object",
        "additionalProperties": {"type": "integer"},
        "propertyNames": {"$ref": "#/$defs/name"},
        "$defs": {"name": {"type": "string", "enum": ["$ref", "id", "x-long-name"], "maxLength": 4}}
    });
    check(
        schema,
        &[
            (r#"{"$ref":1}"#, true),
            (r#"{"id":2,"$ref":3}"#, true),
            (r#"{}"#, true),
            (r#"{"unknown":1}"#, false),
            (r#"{"x-long-name":1}"#, false),
            (r#"{"$ref":"x"}"#, false),
        ],
    );
    let (_, warnings) =
        engine(&json!({"type": "object", "propertyNames": {"$ref": "#/$defs/n"}, "$defs": {"n": {"enum": [1]}}}));
    assert!(warnings.iter().any(|w| w.contains("propertyNames")), "{warnings:?}");
}
