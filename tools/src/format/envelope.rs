//! The fallback format: Stencil's [`Envelope`] (`open{"name": …, "arguments": …}close`, calls
//! separated by `separator`), for models whose template has no tool format, with the tool
//! block of [`crate::prompt`] in the system prompt. With [`Envelope::fallback`]:
//!
//! ```text
//! <think>The user wants the weather.</think>
//! Let me look.
//! <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>
//! ```
//!
//! The trigger is the open tag without its surrounding whitespace; a call's name is
//! JSON-escaped (any name of the set can be written). Reasoning in `<think>…</think>`.

use serde_json::Value;

use super::build::{text, Builder};
use super::{FormatError, Role};
use crate::call::ToolCall;
use crate::envelope::{name_and_quote, Envelope, CONNECTOR};

/// The calls of `allowed` in `env`'s tags.
pub(super) fn build(b: &mut Builder, env: &Envelope, allowed: &[usize]) -> Result<Value, FormatError> {
    let trigger = env.open.trim();
    let rest_of_open = &env.open[env.open.find(trigger).unwrap_or(0) + trigger.len()..];
    let close = env.close.trim();
    let tail = format!("}}{}", &env.close[..env.close.find(close).unwrap_or(0)]);
    let open = b.marker(trigger);
    let close = b.marker(close);
    let mut units = Vec::new();
    for &i in allowed {
        let name = format!("{rest_of_open}{{\"name\": \"{}{CONNECTOR}", name_and_quote(b.name(i)));
        let content = vec![b.json_arguments(i), text(&tail)];
        units.push(b.unit(std::slice::from_ref(&open), name, &[], content, Some(close.clone()), Role::Call(i))?);
    }
    Ok(b.calls_in_text(&[open], units, !b.spec.parallel))
}

/// `content`, then the calls, each on its own line.
pub(super) fn write(env: &Envelope, content: &str, calls: &[ToolCall]) -> String {
    let mut out = content.to_string();
    for (i, call) in calls.iter().enumerate() {
        if i > 0 {
            out.push_str(&env.separator);
        } else if !content.is_empty() {
            out.push('\n');
        }
        out.push_str(&env.write(std::slice::from_ref(call)));
    }
    out
}
