//! Hermes 2/3 and Qwen 2.5/3: JSON calls in `<tool_call>` tags, reasoning in `<think>`.
//!
//! ```text
//! <think>
//! The user wants the weather in Paris.
//! </think>
//!
//! <tool_call>
//! {"name": "get_weather", "arguments": {"city": "Paris"}}
//! </tool_call>
//! ```
//!
//! A call is `<tool_call>\n{"name": "NAME", "arguments": ARGUMENTS}\n</tool_call>` (as the
//! Qwen templates render an assistant's calls), the name JSON-escaped; the trigger is
//! `<tool_call>`. Text may come before, between and after calls (`auto`).

use serde_json::Value;

use super::build::Builder;
use super::{envelope, FormatError};
use crate::call::ToolCall;
use crate::envelope::Envelope;

pub(super) fn build(b: &mut Builder, allowed: &[usize]) -> Result<Value, FormatError> {
    envelope::build(b, &Envelope::hermes(), allowed)
}

pub(super) fn write(content: &str, calls: &[ToolCall]) -> String {
    envelope::write(&Envelope::hermes(), content, calls)
}
