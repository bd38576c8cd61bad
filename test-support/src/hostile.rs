//! Generators of hostile inputs too big to commit (issue #44): schemas and grammars whose
//! walks go deep — long and branching `$ref` chains, reference cycles, deep `$defs`,
//! `allOf` chains, `$dynamicRef` loops, huge enums of objects, GBNF rule chains and
//! nesting — each built at any size. Every class carries the size at which it first
//! crashed (stack overflow) or slowed Stencil before the fix, on a 2 MiB stack (a tokio
//! worker's, and a Rust test thread's), so that the tests and the fuzz seeds build it there
//! and at 10× and 100×.
//!
//! ```
//! use stencil_test_support::hostile::SCHEMAS;
//! let chain = SCHEMAS.iter().find(|c| c.name == "ref-chain").unwrap();
//! let text = (chain.build)(3);
//! let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
//! assert_eq!(schema["$defs"]["d2"]["$ref"], "#/$defs/d3");
//! ```

use std::fmt::Write;

/// A class of hostile input and how to build it.
#[derive(Clone, Copy, Debug)]
pub struct Class {
    /// A short name (used in test messages and fuzz seed names).
    pub name: &'static str,
    /// The smallest size that crashed the process (stack overflow on 2 MiB) or took about
    /// a second before the fix (measured; see `LIMITS.md`); for a class that did neither
    /// up to 100 times more, a size of the same order as the others'.
    pub first_bad: usize,
    /// The input of size `n`, as text (JSON for schemas, GBNF for grammars).
    pub build: fn(usize) -> String,
}

/// `{"$defs": {"d0": LINK(0), …, "dN": LAST}, "$ref": "#/$defs/d0"}`, where `link(i, next)`
/// writes `d{i}` given the reference `next` to `d{i+1}`.
fn chain(n: usize, link: impl Fn(usize, &str) -> String, last: &str) -> String {
    let mut s = String::with_capacity(n * 48 + 64);
    s.push_str("{\"$defs\": {");
    for i in 0..n {
        let next = format!("{{\"$ref\": \"#/$defs/d{}\"}}", i + 1);
        let _ = write!(s, "\"d{i}\": {}, ", link(i, &next));
    }
    let _ = write!(s, "\"d{n}\": {last}}}, \"$ref\": \"#/$defs/d0\"}}");
    s
}

fn ref_chain(n: usize) -> String {
    chain(n, |_, next| next.to_string(), "{\"type\": \"string\"}")
}

/// Each link refers to the next two: the paths multiply (Fibonacci).
fn ref_branching(n: usize) -> String {
    chain(
        n,
        |i, next| format!("{{\"anyOf\": [{next}, {{\"$ref\": \"#/$defs/d{}\"}}]}}", (i + 2).min(n)),
        "{\"type\": \"string\"}",
    )
}

fn cycle_all_of(n: usize) -> String {
    chain(
        n,
        |_, next| format!("{{\"allOf\": [{next}]}}"),
        "{\"allOf\": [{\"$ref\": \"#/$defs/d0\"}], \"type\": \"integer\"}",
    )
}

fn cycle_any_of(n: usize) -> String {
    chain(
        n,
        |_, next| format!("{{\"anyOf\": [{next}, {{\"type\": \"null\"}}]}}"),
        "{\"anyOf\": [{\"$ref\": \"#/$defs/d0\"}]}",
    )
}

fn cycle_items(n: usize) -> String {
    chain(
        n,
        |_, next| format!("{{\"type\": \"array\", \"items\": {next}}}"),
        "{\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/d0\"}}",
    )
}

/// Objects nested through references: `{"properties": {"x": {"$ref": next}}}`.
fn nested_objects(n: usize) -> String {
    chain(
        n,
        |_, next| format!("{{\"type\": \"object\", \"properties\": {{\"x\": {next}}}}}"),
        "{\"type\": \"integer\"}",
    )
}

/// `$defs` inside `$defs`, `n` deep, the root referring to the innermost (JSON text
/// nests two levels per `$defs`: serde_json refuses more than 128 levels, so 61 and more
/// are a parse error).
fn deep_defs(n: usize) -> String {
    let mut s = String::new();
    let mut pointer = String::from("#");
    for _ in 0..n {
        s.push_str("{\"$defs\": {\"a\": ");
        pointer.push_str("/$defs/a");
    }
    s.push_str("{\"type\": \"string\"}");
    for _ in 0..n {
        s.push_str("}}");
    }
    format!("{{\"$defs\": {{\"top\": {s}}}, \"$ref\": \"{}\"}}", pointer.replacen('#', "#/$defs/top", 1))
}

fn all_of_chain(n: usize) -> String {
    chain(n, |_, next| format!("{{\"allOf\": [{next}, {{\"minLength\": 1}}]}}"), "{\"type\": \"string\"}")
}

/// `$dynamicRef`s from anchor to anchor, the last back to the first.
fn dynamic_ref_loop(n: usize) -> String {
    let mut s = String::from("{\"$defs\": {");
    for i in 0..n {
        let _ = write!(s, "\"d{i}\": {{\"$dynamicAnchor\": \"a{i}\", \"$dynamicRef\": \"#a{}\"}}, ", i + 1);
    }
    let _ = write!(s, "\"d{n}\": {{\"$dynamicAnchor\": \"a{n}\", \"$dynamicRef\": \"#a0\", \"type\": \"string\"}}}}, \"$dynamicRef\": \"#a0\"}}");
    s
}

fn enum_of_objects(n: usize) -> String {
    let mut s = String::from("{\"enum\": [");
    for i in 0..n {
        let sep = if i + 1 < n { ", " } else { "" };
        let _ = write!(s, "{{\"id\": {i}, \"name\": \"n{i}\", \"tags\": [{i}, \"x\"]}}{sep}");
    }
    s.push_str("]}");
    s
}

/// A `pattern` of `n` nested groups (a JSON string: no nesting limit of serde_json's).
fn deep_pattern(n: usize) -> String {
    format!("{{\"type\": \"string\", \"pattern\": \"^{}a{}$\"}}", "(".repeat(n), ")".repeat(n))
}

/// The schema classes (JSON text).
pub const SCHEMAS: &[Class] = &[
    Class { name: "ref-chain", first_bad: 2_700, build: ref_chain },
    Class { name: "ref-branching", first_bad: 1_000, build: ref_branching },
    Class { name: "cycle-allOf", first_bad: 1_340, build: cycle_all_of },
    Class { name: "cycle-anyOf", first_bad: 1_340, build: cycle_any_of },
    Class { name: "cycle-items", first_bad: 1_340, build: cycle_items },
    Class { name: "nested-objects", first_bad: 1_340, build: nested_objects },
    Class { name: "deep-defs", first_bad: 60, build: deep_defs },
    Class { name: "allOf-chain", first_bad: 1_340, build: all_of_chain },
    Class { name: "dynamicRef-loop", first_bad: 2_670, build: dynamic_ref_loop },
    Class { name: "enum-of-objects", first_bad: 1_000, build: enum_of_objects },
    Class { name: "deep-pattern", first_bad: 1_000, build: deep_pattern },
];

/// `root ::= r0`, `rI ::= BODY(I, "rI+1")`, `rN ::= "x"`.
fn rules(n: usize, body: impl Fn(&str) -> String) -> String {
    let mut s = String::from("root ::= r0\n");
    for i in 0..n {
        let _ = writeln!(s, "r{i} ::= {}", body(&format!("r{}", i + 1)));
    }
    let _ = writeln!(s, "r{n} ::= \"x\"");
    s
}

/// The grammar classes (GBNF text).
pub const GRAMMARS: &[Class] = &[
    Class { name: "rule-chain", first_bad: 16_000, build: |n| rules(n, |next| next.to_string()) },
    Class { name: "rule-nesting", first_bad: 2_000, build: |n| rules(n, |next| format!("\"(\" {next} \")\"")) },
    Class { name: "rule-left-nesting", first_bad: 2_000, build: |n| rules(n, |next| format!("{next} \"a\" | \"b\"")) },
    Class { name: "rule-optional-chain", first_bad: 2_000, build: |n| rules(n, |next| format!("\"a\" {next}?")) },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_class_is_json_and_grows() {
        for c in SCHEMAS {
            let small: serde_json::Value =
                serde_json::from_str(&(c.build)(3)).unwrap_or_else(|e| panic!("{}: {e}", c.name));
            assert!(small.is_object(), "{}", c.name);
            assert!((c.build)(30).len() > (c.build)(3).len(), "{}", c.name);
        }
        for c in GRAMMARS {
            assert!(stencil_grammar::parse_gbnf(&(c.build)(3)).is_ok(), "{}", c.name);
        }
    }
}
