//! DeepSeek V3.1: all calls in one block, reasoning in `<think>…</think>`.
//!
//! ```text
//! <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//! ```
//!
//! Calls follow each other in the block without a separator, as DeepSeek's template
//! (llama.cpp's `models/templates/deepseek-ai-DeepSeek-V3.1.jinja`) renders them; text may
//! precede the block (`auto`), nothing follows it (the model ends its turn). The template's
//! generation prompt ends with `<think>` (thinking: the reply starts inside the reasoning,
//! [`super::ReasoningMode::Open`]) or `</think>` (no reasoning). The trigger is
//! `<｜tool▁calls▁begin｜>`. Names are written raw: no `<` nor `｜`.

use serde_json::{json, Value};

use super::build::{or, Builder};
use super::{FormatError, Role};
use crate::call::ToolCall;

const CALLS_BEGIN: &str = "<｜tool▁calls▁begin｜>";
const CALLS_END: &str = "<｜tool▁calls▁end｜>";
const CALL_BEGIN: &str = "<｜tool▁call▁begin｜>";
const SEP: &str = "<｜tool▁sep｜>";
const CALL_END: &str = "<｜tool▁call▁end｜>";

pub(super) fn build(b: &mut Builder, allowed: &[usize]) -> Result<Value, FormatError> {
    let begin = b.marker(CALLS_BEGIN);
    let end = b.marker(CALLS_END);
    let call_begin = b.marker(CALL_BEGIN);
    let sep = b.marker(SEP);
    let call_end = b.marker(CALL_END);
    let mut calls = Vec::new();
    for &i in allowed {
        let unit = b.unit(
            std::slice::from_ref(&call_begin),
            b.name(i).to_string(),
            std::slice::from_ref(&sep),
            vec![b.json_arguments(i)],
            Some(call_end.clone()),
            Role::Call(i),
        )?;
        calls.push(unit.node);
    }
    if calls.is_empty() {
        return Ok(b.calls_in_text(&[begin], Vec::new(), true));
    }
    let one = or(calls);
    let content = if b.spec.parallel { json!({"type": "plus", "content": one}) } else { one };
    let block = b.block(&begin, content, &end, Role::Block)?;
    Ok(b.calls_in_text(&[begin], vec![block], true))
}

pub(super) fn write(content: &str, calls: &[ToolCall]) -> String {
    if calls.is_empty() {
        return content.to_string();
    }
    let calls: String = calls.iter().map(|c| format!("{CALL_BEGIN}{}{SEP}{}{CALL_END}", c.name, c.arguments)).collect();
    format!("{content}{CALLS_BEGIN}{calls}{CALLS_END}")
}
