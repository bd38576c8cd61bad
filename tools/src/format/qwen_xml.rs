//! Qwen3-Coder: XML calls, one `<parameter=NAME>` per argument (the structural tag's
//! `json_schema` in the `qwen_xml` style), reasoning in `<think>`.
//!
//! ```text
//! <tool_call>
//! <function=get_weather>
//! <parameter=city>
//! San Jose, CA
//! </parameter>
//! <parameter=days>
//! 3
//! </parameter>
//! </function>
//! </tool_call>
//! ```
//!
//! The parameters follow the schema's property order. A string property whose schema is
//! plain (`{"type": "string"}`, or with one `enum`, `const`, `pattern` or `format`) is
//! written raw: the format has no escaping, so its value cannot contain `</parameter>`,
//! which the grammar excludes; one newline after `<parameter=NAME>` and one before
//! `</parameter>` are the format's (as the template writes them), not the value's. Any other
//! value is JSON (a string with `maxLength` is a JSON string, quoted). The arguments read
//! back are a JSON object, its members in schema order. Tool names may not contain
//! whitespace, `<` or `>` ([`super::ToolFormat::check_names`]).

use serde_json::{Map, Value};

use super::build::{text, Builder};
use super::{FormatError, Role};
use crate::call::ToolCall;
use crate::set::ToolSet;

const CLOSE: &str = "</parameter>";

pub(super) fn build(b: &mut Builder, allowed: &[usize]) -> Result<Value, FormatError> {
    let open = b.marker("<tool_call>");
    let close = b.marker("</tool_call>");
    b.hold(CLOSE);
    let mut units = Vec::new();
    for &i in allowed {
        let args = serde_json::json!({"type": "json_schema", "style": "qwen_xml", "json_schema": b.parameters(i)});
        let name = format!("\n<function={}>\n", b.name(i));
        let content = vec![args, text("</function>\n")];
        units.push(b.unit(std::slice::from_ref(&open), name, &[], content, Some(close.clone()), Role::Call(i))?);
    }
    Ok(b.calls_in_text(&[open], units, !b.spec.parallel))
}

/// The parameters text of `arguments` for a tool whose schema is `schema`.
pub(super) fn write_parameters(name: &str, schema: &Value, arguments: &Value) -> Result<String, String> {
    let Value::Object(args) = arguments else { return Err("the arguments are not a JSON object".into()) };
    let empty = Map::new();
    let props = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    if let Some(k) = args.keys().find(|k| !props.contains_key(*k)) {
        return Err(format!("{k:?} is not a declared parameter of {name:?}"));
    }
    let mut out = String::new();
    for (key, sub) in props {
        let Some(v) = args.get(key) else { continue };
        let value = match v {
            Value::String(s) if stencil_structural::qwen_xml_raw(sub) => {
                if s.contains(CLOSE) {
                    return Err(format!("the raw string of {key:?} contains {CLOSE}"));
                }
                s.clone()
            }
            v => v.to_string(),
        };
        out.push_str(&format!("<parameter={key}>\n{value}\n{CLOSE}\n"));
    }
    Ok(out)
}

/// The arguments (a JSON object, members in schema order) of a tool whose schema is
/// `schema`, from the `qwen_xml` text captured for them: the complete parameters, and
/// whether the text ends after them (nothing of a further parameter begun).
///
/// The grammar has already checked the text: this only splits it (a raw value up to its
/// `</parameter>`; a JSON value as one JSON text) and undoes the format's newlines.
pub(super) fn read_parameters(schema: &Value, text: &str) -> (Map<String, Value>, bool) {
    let empty = Map::new();
    let props = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let mut out = Map::new();
    let mut rest = text.trim_start();
    while let Some(after) = rest.strip_prefix("<parameter=") {
        let Some(gt) = after.find('>') else { return (out, false) };
        let key = &after[..gt];
        let body = &after[gt + 1..];
        let raw = props.get(key).is_some_and(stencil_structural::qwen_xml_raw);
        let (value, after_value) = if raw {
            let Some(end) = body.find(CLOSE) else { return (out, false) };
            let v = &body[..end];
            let v = v.strip_prefix('\n').unwrap_or(v);
            let v = v.strip_suffix('\n').unwrap_or(v);
            (Value::String(v.to_string()), &body[end..])
        } else {
            // A JSON value (with whitespace around it) ends at the first `</parameter>` before
            // which it is whole: no JSON value is the start of another one (a number cannot
            // go on with `<`), and one that is a string may hold `</parameter>`. (serde_json's
            // stream reader refuses a number followed by `<`.)
            let whole = body
                .match_indices(CLOSE)
                .find_map(|(end, _)| serde_json::from_str::<Value>(&body[..end]).ok().map(|v| (v, &body[end..])));
            let Some(found) = whole else { return (out, false) };
            found
        };
        let Some(next) = after_value.strip_prefix(CLOSE) else { return (out, false) };
        out.insert(key.to_string(), value);
        rest = next.trim_start();
    }
    (out, rest.is_empty())
}

pub(super) fn write(tools: &ToolSet, content: &str, calls: &[ToolCall]) -> Result<String, FormatError> {
    let mut out = content.to_string();
    for (i, call) in calls.iter().enumerate() {
        let schema = tools.get(&call.name).map(|d| &d.parameters).ok_or_else(|| FormatError::Unwritable {
            format: "qwen3-coder",
            name: call.name.clone(),
            reason: "no tool of the set has that name".into(),
        })?;
        let params = write_parameters(&call.name, schema, &call.arguments)
            .map_err(|reason| FormatError::Unwritable { format: "qwen3-coder", name: call.name.clone(), reason })?;
        if i > 0 || !content.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("<tool_call>\n<function={}>\n{params}</function>\n</tool_call>", call.name));
    }
    Ok(out)
}
