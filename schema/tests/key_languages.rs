//! Keys by pattern, exactly (issue 29): keys matching no pattern under
//! `additionalProperties`, keys under the `patternProperties` of several subschemas (and
//! patterns with `propertyNames`), each key's value the conjunction of what applies to it.
//! Checked by brute force against the `jsonschema` crate: every object with keys from a
//! small alphabet and small values is accepted by the mask exactly when it validates.
//! Also: a grammar left with no value by a narrowing says so, and names the narrowing.

use std::sync::Arc;

use serde_json::{json, Map, Value};
use stencil_mask::{CompiledGrammar, Matcher};
use stencil_schema::{compile_schema, validate, Registry, SchemaError, SchemaOptions};
use stencil_test_support::toy;

/// Byte tokens: token `1 + b` is byte `b` (token 0 the EOS).
fn accepts(g: &Arc<CompiledGrammar>, text: &str) -> bool {
    let tokens: Vec<u32> = text.bytes().map(|b| 1 + b as u32).collect();
    let mut m = Matcher::new(g.clone());
    m.accept_tokens(&tokens).is_ok() && m.can_end()
}

/// The keys of length 0..=4 over {a, b, C}, `first` (declared names, in schema order)
/// in front.
fn keys(first: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = first.iter().map(|s| s.to_string()).collect();
    let mut frontier = vec![String::new()];
    let mut every = vec![String::new()];
    for _ in 0..4 {
        let next: Vec<String> = frontier.iter().flat_map(|s| ["a", "b", "C"].map(|c| format!("{s}{c}"))).collect();
        every.extend(next.iter().cloned());
        frontier = next;
    }
    all.extend(every.into_iter().filter(|k| !first.contains(&k.as_str())));
    all
}

/// The objects checked: none, one key (each key, each value), two keys (a third of the
/// keys pairwise, in key-list order, two value pairs).
fn objects(first: &[&str]) -> Vec<Value> {
    let ks = keys(first);
    let values = [json!(1), json!([])];
    let mut out = vec![json!({})];
    for k in &ks {
        for v in &values {
            out.push(Value::Object(Map::from_iter([(k.clone(), v.clone())])));
        }
    }
    let some: Vec<&String> =
        ks.iter().enumerate().filter(|(i, _)| i % 3 == 0 || *i < first.len()).map(|x| x.1).collect();
    for (i, a) in some.iter().enumerate() {
        for b in &some[i + 1..] {
            for (va, vb) in [(json!(1), json!(1)), (json!([]), json!(1))] {
                out.push(Value::Object(Map::from_iter([((*a).clone(), va), ((*b).clone(), vb)])));
            }
        }
    }
    out
}

/// Compiles `schema` strict and lenient (both must succeed, lenient without a warning) and
/// checks every object of [`objects`] against the `jsonschema` crate; returns how many
/// objects are valid (some must be invalid).
fn exact(schema: Value, first: &[&str]) -> usize {
    let vocab = toy::bytes(1);
    let strict = compile_schema(&schema, &SchemaOptions::compact()).unwrap_or_else(|e| panic!("{schema}: {e}"));
    let lenient = compile_schema(&schema, &SchemaOptions::compact().lenient()).unwrap();
    let warnings: Vec<String> = lenient.warnings.iter().map(|w| w.to_string()).collect();
    assert!(warnings.is_empty(), "{schema}: {warnings:?}");
    let g = CompiledGrammar::new(&strict.grammar, vocab).unwrap();
    let mut valid = 0;
    let all = objects(first);
    for o in &all {
        let ok = validate(&schema, o, &Registry::new()).is_ok();
        let text = serde_json::to_string(o).unwrap();
        assert_eq!(accepts(&g, &text), ok, "{text} against {schema}");
        valid += ok as usize;
    }
    assert!(valid < all.len(), "{schema}: every object is valid");
    valid
}

/// The issue's first example: a key matching no pattern takes any value.
#[test]
fn keys_matching_no_pattern_under_additional_properties() {
    let schema =
        json!({"type": "object", "patternProperties": {"^[a-z]+$": {"type": "array"}}, "additionalProperties": true});
    assert!(exact(schema.clone(), &[]) > 0);
    let g = CompiledGrammar::new(&compile_schema(&schema, &SchemaOptions::compact()).unwrap().grammar, toy::bytes(1))
        .unwrap();
    assert!(accepts(&g, r#"{"camelCase":1}"#));
    assert!(!accepts(&g, r#"{"camel":1}"#));
    // additionalProperties a schema; no additionalProperties at all.
    exact(json!({"patternProperties": {"^a": {"type": "array"}}, "additionalProperties": {"type": "integer"}}), &[]);
    exact(json!({"patternProperties": {"b$": {"type": "integer"}}}), &[]);
    // A declared name among the keys of the complement and of the pattern.
    exact(
        json!({
            "properties": {"C": {"type": "array"}, "ab": {"type": "integer"}},
            "patternProperties": {"^a": {"type": "array"}},
            "additionalProperties": {"type": "integer"}
        }),
        &["C", "ab"],
    );
    // Declared names inside and outside a suffix pattern that forbids its keys, and
    // under a prefix one: the rest of the keys is the complement less the names.
    exact(
        json!({
            "properties": {"a": {"type": "integer"}, "bC": {"type": "array"}, "Cab": {}, "aCb": {"type": "integer"}},
            "patternProperties": {"b$": false, "^C": {"type": "array"}},
            "additionalProperties": {"type": "integer"}
        }),
        &["a", "bC", "Cab", "aCb"],
    );
    exact(
        json!({
            "properties": {"ba": {"type": "integer"}, "bab": {"type": "array"}},
            "patternProperties": {"^b": {"type": "integer"}},
            "additionalProperties": false
        }),
        &["ba", "bab"],
    );
    // A search for several words, less names that hold them (a DFA past what state
    // elimination turns back into a regex).
    exact(
        json!({
            "properties": {"ab": {"type": "integer"}, "abC": {}, "Ca": {"type": "integer"}},
            "patternProperties": {"ab|bC|Cb": {"type": "integer"}},
            "additionalProperties": false
        }),
        &["ab", "abC", "Ca"],
    );
}

/// The issue's second example and variants: patterns of several subschemas, and several
/// patterns of one.
#[test]
fn keys_under_patterns_of_several_subschemas() {
    let schema = json!({"allOf": [
        {"patternProperties": {"^.{1,3}$": false}},
        {"patternProperties": {"a": true}, "additionalProperties": false}
    ]});
    assert!(exact(schema, &[]) > 1);
    // The same as sibling keywords of one subschema.
    exact(json!({"patternProperties": {"^.{1,3}$": false, "a": true}, "additionalProperties": false}), &[]);
    // A key matching two patterns takes both schemas (here: none can).
    exact(json!({"patternProperties": {"b": {"type": "array"}, "^a": {"type": "integer"}}}), &[]);
    exact(
        json!({
            "properties": {"ab": {"type": "integer"}},
            "patternProperties": {"b": {"type": "array"}, "^a": {"type": "integer"}},
            "additionalProperties": false
        }),
        &["ab"],
    );
    // additionalProperties of one subschema, patterns of another.
    exact(
        json!({"allOf": [{"patternProperties": {"C": {"type": "integer"}}}, {"additionalProperties": {"type": "array"}}]}),
        &[],
    );
    exact(
        json!({"allOf": [
            {"patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": {"type": "array"}},
            {"patternProperties": {"b$": true}, "additionalProperties": false}
        ]}),
        &[],
    );
}

/// Patterns with propertyNames, and several propertyNames.
#[test]
fn keys_under_patterns_and_property_names() {
    exact(json!({"patternProperties": {"^a": {"type": "integer"}}, "propertyNames": {"maxLength": 2}}), &[]);
    exact(json!({"allOf": [{"propertyNames": {"pattern": "^[ab]*$"}}, {"propertyNames": {"minLength": 2}}]}), &[]);
    exact(
        json!({"allOf": [
            {"propertyNames": {"pattern": "C"}},
            {"patternProperties": {"^C": {"type": "array"}}, "additionalProperties": false}
        ]}),
        &[],
    );
}

/// The issue's third example: with `minProperties: 2` the schema admits
/// `{"aaaa": 1, "abab": 2}`, and compiles.
#[test]
fn min_properties_over_exact_keys() {
    let schema = json!({
        "allOf": [
            {"patternProperties": {"^.{1,3}$": false}},
            {"patternProperties": {"a": true}, "additionalProperties": false}
        ],
        "minProperties": 2
    });
    let c = compile_schema(&schema, &SchemaOptions::compact().lenient()).unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let g = CompiledGrammar::new(&c.grammar, toy::bytes(1)).unwrap();
    assert!(accepts(&g, r#"{"aaaa":1,"abab":2}"#));
    assert!(!accepts(&g, r#"{"aaaa":1}"#));
    assert!(!accepts(&g, r#"{"aaaa":1,"bbbb":2}"#));
    exact(schema, &[]);
}

/// `unevaluatedProperties` applies to the keys that neither its subschema nor what that
/// applies in place (`allOf`, `$ref`, `if`/`then`) evaluates; a sibling's keys do not count.
#[test]
fn unevaluated_properties_sees_in_place_subschemas() {
    let no_more = |inner: Value| json!({"allOf": [inner], "unevaluatedProperties": false});
    assert!(exact(no_more(json!({"properties": {"a": {"type": "integer"}}})), &["a"]) > 1);
    exact(no_more(json!({"additionalProperties": {"type": "integer"}})), &[]);
    exact(no_more(json!({"allOf": [{"patternProperties": {"^b": {"type": "array"}}}]})), &[]);
    // Through a reference, with a schema for the rest, and patterns it sees.
    exact(
        json!({
            "$ref": "#/$defs/c",
            "unevaluatedProperties": {"type": "array"},
            "$defs": {"c": {"properties": {"ab": {"type": "integer"}}, "patternProperties": {"^b": {"type": "integer"}}}}
        }),
        &["ab"],
    );
    // then: evaluated when the condition holds.
    exact(
        json!({"if": {"type": "object"}, "then": {"properties": {"b": {"type": "integer"}}}, "unevaluatedProperties": false}),
        &["b"],
    );
    // A sibling's properties are unevaluated for it: only `{}`.
    assert_eq!(exact(json!({"allOf": [{"properties": {"a": {}}}, {"unevaluatedProperties": false}]}), &["a"]), 1);
    // Keys two anyOf branches evaluate together are seen through one branch: a narrowing, said.
    let both = json!({"anyOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}], "unevaluatedProperties": false});
    let c = compile_schema(&both, &SchemaOptions::compact().lenient()).unwrap();
    assert!(c.warnings.iter().any(|w| w.keyword == "unevaluatedProperties" && w.narrows), "{:?}", c.warnings);
    assert!(compile_schema(&both, &SchemaOptions::compact()).is_err());
}

/// Never a false statement: when only a narrowing leaves no value, the error says so and
/// names it; "admits no value" is for schemas that admit none.
#[test]
fn no_value_left_by_a_narrowing_is_not_an_empty_schema() {
    // propertyNames of a form the key grammar does not build: extra keys are not generated,
    // and minProperties then leaves no object (`{"a": 1}` is valid).
    let schema = json!({"type": "object", "propertyNames": {"not": {"const": "x"}}, "minProperties": 1});
    assert!(validate(&schema, &json!({"a": 1}), &Registry::new()).is_ok());
    let e = compile_schema(&schema, &SchemaOptions::compact().lenient()).unwrap_err();
    let SchemaError::Narrowed { pointer, narrowings } = &e else { panic!("{e}") };
    assert_eq!(pointer, "");
    assert!(narrowings.iter().any(|n| n.keyword == "propertyNames" && n.narrows), "{narrowings:?}");
    let text = e.to_string();
    assert!(text.contains("once narrowed") && text.contains("`propertyNames` at #"), "{text}");
    assert!(!text.contains("admits no value:"), "{text}");
    // Strict mode: the narrowing itself is the error.
    let strict = compile_schema(&schema, &SchemaOptions::compact()).unwrap_err();
    assert!(matches!(strict, SchemaError::UnsupportedKeyword { ref keyword, .. } if keyword == "propertyNames"));
    // A schema that admits nothing still says so.
    let empty = json!({"type": "object", "required": ["a"], "properties": {"a": false}});
    for opts in [SchemaOptions::compact(), SchemaOptions::compact().lenient()] {
        let e = compile_schema(&empty, &opts).unwrap_err();
        assert!(matches!(e, SchemaError::Unsatisfiable { .. }), "{e}");
    }
    // Values cut at max_indent_depth are a narrowing too.
    let mut deep = json!({"type": "integer"});
    for _ in 0..4 {
        deep = json!({"type": "object", "properties": {"a": deep}, "required": ["a"]});
    }
    let mut opts = SchemaOptions::pretty();
    opts.max_indent_depth = 2;
    let e = compile_schema(&deep, &opts).unwrap_err();
    assert!(matches!(e, SchemaError::Narrowed { .. }), "{e}");
    assert!(e.to_string().contains("max_indent_depth"), "{e}");
}

/// Overlapping patterns (Github_hard/o82144: `.*`, `github`, `hipchat`) make keys of
/// several kinds, each with its conjunction of values; a kind that no value satisfies
/// has no keys at all.
#[test]
fn overlapping_patterns_are_exact() {
    let schemas = [
        json!({"patternProperties": {".*": {"type": ["integer", "array"]}, "a": {"type": "integer"}, "b": {"type": "array"}}}),
        // Keys with both `a` and `b` have no value: there are none.
        json!({"patternProperties": {"a": {"type": "integer"}, "b": {"type": "array"}}, "additionalProperties": false}),
    ];
    for schema in schemas {
        assert!(exact(schema, &[]) > 0);
    }
    let declared =
        json!({"properties": {"ab": {}}, "patternProperties": {"a": {"type": "integer"}, "C": {"type": "array"}}});
    assert!(exact(declared, &["ab"]) > 0);
}
