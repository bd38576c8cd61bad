//! `anyOf`/`oneOf` branches that are strings with one `pattern` each are compiled as one
//! alternation of the patterns: checked by brute force over short strings (mask against
//! the `jsonschema` crate) and by the automaton's size, which is what the merge is for.

use serde_json::{json, Value};
use stencil_mask::{CompiledGrammar, Limits};
use stencil_schema::{compile_schema, validate, Registry, SchemaOptions};
use stencil_test_support::{corpus, fixtures};

/// Every string over `alphabet` of at most `max_len` characters, as a JSON string: the
/// mask accepts it iff `jsonschema` says valid. The automaton is built under
/// `max_states` (a limit that binds before minimization, on the subset construction).
/// Returns how many strings were accepted.
fn brute_force(schema: &Value, alphabet: &[char], max_len: usize, max_states: usize) -> usize {
    let compiled =
        compile_schema(schema, &SchemaOptions::compact().lenient()).unwrap_or_else(|e| panic!("{schema}: {e}"));
    let (vocab, tok) = fixtures::smollm2();
    let limits = Limits { max_automaton_states: max_states, ..Limits::default() };
    let g = CompiledGrammar::with_limits(&compiled.grammar, vocab, limits).unwrap_or_else(|e| panic!("{schema}: {e}"));
    let mut strings = vec![String::new()];
    let mut frontier = vec![String::new()];
    for _ in 0..max_len {
        frontier = frontier.iter().flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}"))).collect();
        strings.extend(frontier.iter().cloned());
    }
    let mut accepted = 0;
    for s in &strings {
        let valid = validate(schema, &Value::String(s.clone()), &Registry::new()).is_ok();
        let got = corpus::mask_accepts(&g, &tok, &Value::String(s.clone()).to_string());
        assert_eq!(got, valid, "{s:?} against {schema}");
        accepted += got as usize;
    }
    accepted
}

#[test]
fn unanchored_pattern_branches_are_one_search() {
    let words = ["NEW", "ON_APPROVAL", "ON_SIGNING", "ON_MODIFICATION", "EXECUTED", "CANCELED", "REJECTED"];
    let branches: Vec<Value> = words.iter().map(|w| json!({"pattern": w})).collect();
    for keyword in ["anyOf", "oneOf"] {
        let schema = json!({"type": "string", keyword: branches.clone()});
        // One search for seven words: about their letters plus the string's own states.
        // Seven separate searches, tracked side by side, made thousands before
        // minimization (to as few after it).
        assert!(brute_force(&schema, &['N', 'E', 'W', 'x'], 5, 1_000) > 0);
    }
}

#[test]
fn anchored_and_unanchored_branches_mix() {
    let schema = json!({"anyOf": [
        {"type": "string", "pattern": "ab"},
        {"type": "string", "pattern": "^cc$"},
        {"type": "string", "pattern": "b{2}"},
    ]});
    assert!(brute_force(&schema, &['a', 'b', 'c'], 5, 1_000) > 0);
}

/// A named group keeps its branch out of the alternation (two such groups could share a
/// name); the language stays the same.
#[test]
fn branches_with_named_groups_stay_apart() {
    let schema = json!({"anyOf": [
        {"type": "string", "pattern": "(?<w>ab)"},
        {"type": "string", "pattern": "(?<w>ba)"},
        {"type": "string", "pattern": "cc"},
    ]});
    assert!(brute_force(&schema, &['a', 'b', 'c'], 4, 1_000) > 0);
}
