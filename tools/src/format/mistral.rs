//! Mistral: `[TOOL_CALLS]`, in two forms; reasoning (Magistral) in `[THINK]…[/THINK]`.
//!
//! **`mistral`** (Mistral Nemo, Small 3.1): one `[TOOL_CALLS]` and a JSON array of calls,
//! each `{"name": "NAME", "arguments": ARGUMENTS}`, optionally followed by the call id the
//! templates render (`, "id": "a1b2c3d4e"`, 9 letters or digits):
//!
//! ```text
//! [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {}}]
//! ```
//!
//! An optional space may follow `[TOOL_CALLS]` (the templates write `[TOOL_CALLS] [`), calls
//! are separated by `, `. Text may precede the block (`auto`), nothing follows it. Names are
//! JSON-escaped.
//!
//! **`mistral-args`** (Mistral Small 3.2, Devstral, Magistral, Ministral 3): each call is
//! `[TOOL_CALLS]NAME[ARGS]ARGUMENTS`, optionally with its id, `[TOOL_CALLS]NAME[CALL_ID]a1b2c3d4e[ARGS]…`:
//!
//! ```text
//! [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}
//! ```
//!
//! Names are written raw: they may not contain whitespace, `[` or `]`. The trigger of both is
//! `[TOOL_CALLS]`. A call id written by the model is checked by the grammar and otherwise
//! ignored (the caller gives each call its own 9-character id).

use serde_json::{json, Value};

use super::build::{text, Builder, Piece};
use super::{FormatError, Role};
use crate::call::ToolCall;
use crate::envelope::name_and_quote;

const TOOL_CALLS: &str = "[TOOL_CALLS]";
const ID: &str = "[a-zA-Z0-9]{9}";

pub(super) fn build_json(b: &mut Builder, allowed: &[usize]) -> Result<Value, FormatError> {
    let trigger = b.marker(TOOL_CALLS);
    let mut calls = Vec::new();
    for &i in allowed {
        let name = format!("{{\"name\": \"{}, \"arguments\": ", name_and_quote(b.name(i)));
        let id = json!({"type": "optional", "content": {"type": "sequence", "elements": [
            text(", \"id\": \""), {"type": "regex", "pattern": ID}, text("\"")]}});
        let unit =
            b.unit(&[], name, &[], vec![b.json_arguments(i), id], Some(Piece::Text("}".into())), Role::Call(i))?;
        calls.push(unit.node);
    }
    if calls.is_empty() {
        return Ok(b.calls_in_text(&[trigger], Vec::new(), true));
    }
    let list = json!({"type": "tags_with_separator", "tags": calls, "separator": ", ",
        "at_least_one": true, "stop_after_first": !b.spec.parallel});
    let content = json!({"type": "sequence", "elements": [{"type": "regex", "pattern": " ?\\["}, list]});
    let block = b.block(&trigger, content, &Piece::Text("]".into()), Role::Block)?;
    Ok(b.calls_in_text(&[trigger], vec![block], true))
}

pub(super) fn build_args(b: &mut Builder, allowed: &[usize]) -> Result<Value, FormatError> {
    let trigger = b.marker(TOOL_CALLS);
    let call_id = b.marker("[CALL_ID]");
    let args = b.marker("[ARGS]");
    let mut units = Vec::new();
    for &i in allowed {
        let id = json!({"type": "optional", "content": {"type": "sequence", "elements": [
            call_id.node(), {"type": "regex", "pattern": ID}]}});
        let content = vec![id, args.node(), b.json_arguments(i)];
        units.push(b.unit(std::slice::from_ref(&trigger), b.name(i).to_string(), &[], content, None, Role::Call(i))?);
    }
    Ok(b.calls_in_text(&[trigger], units, !b.spec.parallel))
}

pub(super) fn write_json(content: &str, calls: &[ToolCall]) -> String {
    if calls.is_empty() {
        return content.to_string();
    }
    let calls: Vec<String> = calls
        .iter()
        .map(|c| format!("{{\"name\": \"{}, \"arguments\": {}}}", name_and_quote(&c.name), c.arguments))
        .collect();
    format!("{content}{TOOL_CALLS}[{}]", calls.join(", "))
}

pub(super) fn write_args(content: &str, calls: &[ToolCall]) -> String {
    let mut out = content.to_string();
    for c in calls {
        out.push_str(&format!("{TOOL_CALLS}{}[ARGS]{}", c.name, c.arguments));
    }
    out
}
