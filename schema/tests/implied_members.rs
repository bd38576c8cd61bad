//! Members of a conjunction that the others imply (`{"$ref": "#", "type": "object"}` beside
//! `#`, a Draft 7 `$ref`'s ignored siblings) are dropped, so equal conjunctions share one
//! rule; members that narrow the value stay.

use serde_json::{json, Value};
use stencil_mask::CompiledGrammar;
use stencil_schema::{compile_schema, validate, Registry, SchemaOptions};
use stencil_test_support::{corpus, fixtures};

fn rules(schema: &Value) -> usize {
    compile_schema(schema, &SchemaOptions::compact()).unwrap_or_else(|e| panic!("{schema}: {e}")).grammar.rules.len()
}

/// The mask accepts each instance iff `jsonschema` says valid; returns how many it accepted.
fn agrees(schema: &Value, instances: &[Value]) -> usize {
    let compiled = compile_schema(schema, &SchemaOptions::compact()).unwrap_or_else(|e| panic!("{schema}: {e}"));
    let (vocab, tok) = fixtures::smollm2();
    let g = CompiledGrammar::new(&compiled.grammar, vocab).unwrap_or_else(|e| panic!("{schema}: {e}"));
    let mut accepted = 0;
    for x in instances {
        let valid = validate(schema, x, &Registry::new()).is_ok();
        let got = corpus::mask_accepts(&g, &tok, &x.to_string());
        assert_eq!(got, valid, "{x} against {schema}");
        accepted += got as usize;
    }
    accepted
}

/// A recursive object whose properties are each the whole object again.
fn recursive(n: usize, property: Value) -> Value {
    let properties: serde_json::Map<String, Value> = (0..n).map(|i| (format!("p{i}"), property.clone())).collect();
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

#[test]
fn a_ref_with_an_implied_type_shares_the_referenced_rule() {
    for property in [json!({"$ref": "#"}), json!({"$ref": "#", "type": "object", "description": "again"})] {
        // Each property `p` was a conjunction {p, #} with a copy of the whole object: n
        // copies of n properties (577 rules at 16). Shared, each property adds its key
        // and value rules (49 at 16).
        let (small, big) = (rules(&recursive(4, property.clone())), rules(&recursive(16, property.clone())));
        assert!(big - small <= 3 * 12, "{property}: {small} rules with 4 properties, {big} with 16");
    }
    let schema = recursive(3, json!({"$ref": "#", "type": "object"}));
    let instances =
        [json!({}), json!({"p0": {}}), json!({"p1": {"p2": {"p0": {}}}}), json!({"p0": 1}), json!({"p3": {}})];
    assert_eq!(agrees(&schema, &instances), 3);
}

#[test]
fn a_sibling_type_that_narrows_the_target_is_kept() {
    let schema = json!({
        "$defs": {"x": {"type": ["string", "null"]}},
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/x", "type": "string"}, "b": {"$ref": "#/$defs/x"}},
        "additionalProperties": false
    });
    let instances = [json!({"a": "s"}), json!({"a": null}), json!({"b": null}), json!({"a": 1}), json!({"b": "s"})];
    assert_eq!(agrees(&schema, &instances), 3);
}

#[test]
fn draft_7_ignores_the_siblings_of_a_ref() {
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"x": {"type": ["string", "null"]}},
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/x", "type": "string"}},
        "additionalProperties": false
    });
    let instances = [json!({"a": "s"}), json!({"a": null}), json!({"a": 1})];
    assert_eq!(agrees(&schema, &instances), 2);
}
