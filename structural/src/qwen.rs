//! `json_schema` in the `qwen_xml` style: Qwen3-Coder's tool arguments, one
//! `<parameter=NAME>VALUE</parameter>` per property of the top-level object, in schema
//! order, whitespace between them. A string value (a property whose schema is a plain
//! `{"type": "string"}`) is raw text that cannot contain `</parameter>` (the grammar
//! excludes it: the format has no escaping); a string with `enum`/`const` is one of the raw
//! values, one with `pattern` or `format` raw text of that pattern; any other value is JSON
//! with optional whitespace around it.
//!
//! As XGrammar reads a schema in this style, properties beyond `properties` are not allowed
//! unless `additionalProperties` says so, which is not supported here (a located error).
//!
//! ```
//! use stencil_structural::{compile_json, CompileOptions};
//! let tag = serde_json::json!({"format": {"type": "json_schema", "style": "qwen_xml", "json_schema": {
//!     "type": "object",
//!     "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
//!     "required": ["city"]}}});
//! let compiled = compile_json(&tag, &CompileOptions::default())?;
//! let r = stencil_grammar::reference::Recognizer::new(&compiled.grammar).unwrap();
//! assert!(r.matches(b"<parameter=city>\nSan Jose, CA\n</parameter>\n<parameter=days>\n3\n</parameter>"));
//! assert!(r.matches(b"<parameter=city>a < b</parameter>"));
//! assert!(!r.matches(b"<parameter=city>a</parameter>b</parameter>"));
//! assert!(!r.matches(b"<parameter=days>3</parameter>"));
//! # Ok::<(), stencil_structural::StructuralError>(())
//! ```

use serde_json::{json, Map, Value};
use stencil_grammar::{CharClass, Expr, RuleId};
use stencil_schema::Whitespace;

use crate::compile::{regex, Builder};
use crate::error::{ErrorKind, StructuralError};
use crate::parse::field;
use crate::text::TextDfa;

const CLOSE: &str = "</parameter>";

pub(crate) fn compile(
    b: &mut Builder,
    schema: &Value,
    max_ws: Option<u32>,
    p: &str,
) -> Result<RuleId, StructuralError> {
    let sp = field(p, "json_schema");
    let Value::Object(o) = schema else {
        return Err(StructuralError::unsupported(&sp, "qwen_xml", "the schema must be an object schema"));
    };
    match o.get("additionalProperties") {
        None | Some(Value::Bool(false)) => {}
        Some(_) => {
            return Err(StructuralError::unsupported(
                &field(&sp, "additionalProperties"),
                "additionalProperties",
                "qwen_xml parameters are the declared properties only",
            ))
        }
    }
    let empty = Map::new();
    let props = o.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let required: Vec<&str> = o
        .get("required")
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let ws = match (b.schema_whitespace(max_ws), b.opts.schema.indent) {
        (Whitespace::Flexible { max_run }, None) => {
            Expr::repeat(Expr::Class(CharClass::new([(9, 10), (32, 32)])), 0, Some(max_run as u32))
        }
        _ => Expr::Empty,
    };
    let mut body = vec![ws.clone()];
    for (name, sub) in props {
        let pp = field(&field(&sp, "properties"), name);
        if name.is_empty() || name.contains(['>', '<']) {
            return Err(StructuralError::new(
                &pp,
                ErrorKind::Invalid(format!("the parameter name {name:?} cannot be written as <parameter={name}>")),
            ));
        }
        let value = match raw_string(sub) {
            Some(Raw::Text) => {
                let dfa = TextDfa::new(&[CLOSE.to_string()], &[]);
                let n = format!("xml-string{}", b.g.rules.len());
                let r = dfa.write(&mut b.g, &n, None, &mut |_, _| Expr::Empty).map_err(|_| {
                    StructuralError::invalid(&pp, "the string's automaton is too large")
                    // unreachable without a count
                })?;
                Expr::Rule(r)
            }
            Some(Raw::Values(v)) => Expr::Alt(v.iter().map(|s| Expr::literal(s)).collect()),
            Some(Raw::Pattern(pat)) => regex(&pat).map_err(|reason| {
                StructuralError::new(&field(&pp, "pattern"), ErrorKind::Regex { pattern: pat.clone(), reason })
            })?,
            Some(Raw::Format(f)) => match stencil_schema::format_regex(&f) {
                Some(r) => Expr::Regex(stencil_grammar::Regex::new(r)),
                None => {
                    return Err(StructuralError::unsupported(&field(&pp, "format"), &f, "an unknown string format"));
                }
            },
            None => {
                // JSON, with the root's definitions so that its `$ref`s resolve.
                let mut doc = json!({"allOf": [sub]});
                for k in ["$defs", "definitions"] {
                    if let Some(d) = o.get(k) {
                        doc[k] = d.clone();
                    }
                }
                let r = b.schema(&doc, max_ws, &pp)?;
                Expr::seq([ws.clone(), Expr::Rule(r), ws.clone()])
            }
        };
        let param = Expr::seq([Expr::literal(&format!("<parameter={name}>")), value, Expr::literal(CLOSE), ws.clone()]);
        body.push(if required.contains(&name.as_str()) { param } else { Expr::optional(param) });
    }
    for r in &required {
        if !props.contains_key(*r) {
            return Err(StructuralError::unsupported(
                &field(&sp, "required"),
                r,
                "a required parameter without a schema in `properties`",
            ));
        }
    }
    Ok(b.rule("qwen_xml", Expr::Seq(body), None))
}

/// Whether a property's value is written raw (not as JSON) in the `qwen_xml` style: a
/// string whose schema is only `type: "string"` with at most one of `enum`, `const`,
/// `pattern` or `format` (and annotations). What a reader of such arguments needs to turn
/// them into JSON.
///
/// ```
/// use serde_json::json;
/// assert!(stencil_structural::qwen_xml_raw(&json!({"type": "string", "description": "City"})));
/// assert!(!stencil_structural::qwen_xml_raw(&json!({"type": "string", "maxLength": 9})));
/// assert!(!stencil_structural::qwen_xml_raw(&json!({"type": "integer"})));
/// ```
pub fn qwen_xml_raw(property: &Value) -> bool {
    raw_string(property).is_some()
}

enum Raw {
    Text,
    Values(Vec<String>),
    Pattern(String),
    Format(String),
}

/// How a property's value is written raw, if it is a string (its schema only `type:
/// "string"` with at most one of `enum`, `const`, `pattern`, `format`, and annotations).
fn raw_string(sub: &Value) -> Option<Raw> {
    let o = sub.as_object()?;
    const ANNOTATIONS: [&str; 5] = ["type", "description", "title", "examples", "default"];
    let string_type = o.get("type").and_then(Value::as_str) == Some("string");
    let others: Vec<&str> = o.keys().map(String::as_str).filter(|k| !ANNOTATIONS.contains(k)).collect();
    let strings =
        |v: &Value| -> Option<Vec<String>> { v.as_array()?.iter().map(|x| x.as_str().map(str::to_string)).collect() };
    match others[..] {
        [] if string_type => Some(Raw::Text),
        ["enum"] => strings(&o["enum"]).map(Raw::Values),
        ["const"] => o["const"].as_str().map(|s| Raw::Values(vec![s.to_string()])),
        ["pattern"] if string_type => o["pattern"].as_str().map(|s| Raw::Pattern(s.to_string())),
        ["format"] if string_type => o["format"].as_str().map(|s| Raw::Format(s.to_string())),
        _ => None,
    }
}
