//! The text form of tool calls in a reply ([`Envelope`]), reading a reply back
//! ([`Envelope::parse`]), and [`ToolChoice`].
//!
//! # The envelope format
//!
//! A reply is either **plain text** or **one or more calls**. A call is the envelope's
//! `open` tag, a JSON object with exactly the members `name` and `arguments`, and the
//! `close` tag; calls follow each other separated by `separator`:
//!
//! ```text
//! <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>
//! <tool_call>{"name": "web_search", "arguments": {"query": "Paris museums"}}</tool_call>
//! ```
//!
//! That is [`Envelope::fallback`], used with the tool block of
//! [`prompt`](crate::prompt) when the model's chat template does not render tools.
//! [`Envelope::hermes`] (`<tool_call>\n{...}\n</tool_call>`) is the format of the
//! Hermes/Qwen templates, used when the template renders tools. Constrained decoding
//! writes calls exactly as shown (members in this order, `", "` and `": "` between them);
//! the arguments' JSON follows the tool's schema in the style of the set's
//! [`SchemaOptions`](stencil_schema::SchemaOptions). The name is a JSON string: a name
//! with `"` or `\` is written escaped (as serde_json escapes it, the only spelling
//! constrained decoding allows), and read back unescaped (any JSON escape), then compared
//! exactly with the tool names.
//!
//! When reading a reply, leading and trailing whitespace is ignored, the tags are matched
//! without their surrounding whitespace and any whitespace may separate calls. A reply
//! whose first non-blank text is not the open tag is plain text: nothing in it is read as
//! a call.

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use crate::call::{CallError, ToolCall};

/// How calls are written in a reply. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Envelope {
    /// Starts a call; its first character must not be whitespace.
    pub open: String,
    /// Ends a call.
    pub close: String,
    /// Between two calls of one reply.
    pub separator: String,
}

/// What a reply holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// Plain text (trimmed), no call.
    Text(String),
    /// One or more calls, in order (not yet checked against a tool set).
    Calls(Vec<ToolCall>),
}

/// Between the tool name and the arguments in a call's JSON object.
pub(crate) const CONNECTOR: &str = ", \"arguments\": ";

impl Envelope {
    /// `<tool_call>{"name": ..., "arguments": ...}</tool_call>`, one call per line: the
    /// format of the fallback prompt.
    pub fn fallback() -> Self {
        Envelope { open: "<tool_call>".into(), close: "</tool_call>".into(), separator: "\n".into() }
    }

    /// `<tool_call>\n{...}\n</tool_call>`: the Hermes/Qwen convention, for chat templates
    /// that render tools.
    pub fn hermes() -> Self {
        Envelope { open: "<tool_call>\n".into(), close: "\n</tool_call>".into(), separator: "\n".into() }
    }

    /// What a call's text starts with, up to the tool name: `open{"name": "`, after
    /// `separator` unless it is the reply's first call.
    pub(crate) fn head(&self, first: bool) -> String {
        let sep = if first { "" } else { self.separator.as_str() };
        format!("{sep}{}{{\"name\": \"", self.open)
    }

    /// What follows the arguments: `}close`.
    pub(crate) fn tail(&self) -> String {
        format!("}}{}", self.close)
    }

    /// The text of `calls`, as constrained decoding writes them (names JSON-escaped and
    /// arguments compact, as serde_json writes them).
    ///
    /// ```
    /// use stencil_tools::{Envelope, ToolCall};
    /// let call = ToolCall::new("get_weather", serde_json::json!({"city": "Paris"}));
    /// assert_eq!(
    ///     Envelope::fallback().write(&[call]),
    ///     r#"<tool_call>{"name": "get_weather", "arguments": {"city":"Paris"}}</tool_call>"#
    /// );
    /// ```
    pub fn write(&self, calls: &[ToolCall]) -> String {
        let mut out = String::new();
        for (i, call) in calls.iter().enumerate() {
            out.push_str(&self.head(i == 0));
            out.push_str(&name_and_quote(&call.name));
            out.push_str(CONNECTOR);
            out.push_str(&call.arguments.to_string());
            out.push_str(&self.tail());
        }
        out
    }

    /// Reads a reply: plain text, or calls in this envelope. Names and arguments are not
    /// checked against any tool set here ([`ToolSet::check`](crate::ToolSet::check) does).
    ///
    /// ```
    /// use stencil_tools::{Envelope, Reply};
    /// let env = Envelope::fallback();
    /// let reply = env.parse("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"b\", \"arguments\": {\"x\": 1}}</tool_call>\n")?;
    /// let Reply::Calls(calls) = reply else { panic!() };
    /// assert_eq!(calls[1].name, "b");
    /// assert_eq!(env.parse(" It is sunny. ")?, Reply::Text("It is sunny.".into()));
    /// assert!(env.parse("<tool_call>{\"name\": \"a\"}</tool_call>").is_err());
    /// # Ok::<(), stencil_tools::CallError>(())
    /// ```
    ///
    /// # Errors
    /// [`CallError::Malformed`] for a reply that starts like a call and then departs from
    /// the format.
    pub fn parse(&self, text: &str) -> Result<Reply, CallError> {
        let open = self.open.trim();
        let close = self.close.trim();
        let mut rest = text.trim_start();
        if open.is_empty() || !rest.starts_with(open) {
            return Ok(Reply::Text(text.trim().to_string()));
        }
        let malformed = |reason: String| CallError::Malformed { reason };
        let mut calls = Vec::new();
        while let Some(after_open) = rest.strip_prefix(open) {
            let n = calls.len() + 1;
            let mut values = serde_json::Deserializer::from_str(after_open).into_iter::<Value>();
            let value = match values.next() {
                Some(Ok(v)) => v,
                Some(Err(e)) => return Err(malformed(format!("call {n} is not JSON: {e}"))),
                None => return Err(malformed(format!("call {n} is empty"))),
            };
            let after_json = after_open[values.byte_offset()..].trim_start();
            calls.push(call_from_json(n, value)?);
            rest = after_json
                .strip_prefix(close)
                .ok_or_else(|| malformed(format!("call {n} does not end with {close}")))?
                .trim_start();
        }
        if !rest.is_empty() {
            return Err(malformed(format!("text after the last call: {:?}", truncate(rest, 40))));
        }
        Ok(Reply::Calls(calls))
    }
}

/// A tool name as it follows [`Envelope::head`] (which ends with the opening quote): the
/// name JSON-escaped as serde_json writes it (`"` and `\` get a backslash; tool names hold
/// no control characters), then the closing quote. No such text is a prefix of another
/// name's: the first unescaped quote ends it.
pub(crate) fn name_and_quote(name: &str) -> String {
    let quoted = Value::String(name.to_string()).to_string();
    quoted[1..].to_string()
}

/// The inverse of [`name_and_quote`]: the name from the text after the head, which must be
/// exactly an escaped name and its closing quote (JSON escapes are undone); `None` if it
/// is not.
pub(crate) fn read_name(after_head: &str) -> Option<String> {
    serde_json::from_str::<String>(&format!("\"{after_head}")).ok()
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn call_from_json(n: usize, value: Value) -> Result<ToolCall, CallError> {
    let malformed = |reason: &str| CallError::Malformed { reason: format!("call {n}: {reason}") };
    let Value::Object(mut obj) = value else {
        return Err(malformed("expected a JSON object {\"name\": ..., \"arguments\": ...}"));
    };
    let name = match obj.remove("name") {
        Some(Value::String(name)) => name,
        Some(_) => return Err(malformed("`name` must be a string")),
        None => return Err(malformed("missing `name`")),
    };
    let arguments = obj.remove("arguments").ok_or_else(|| malformed("missing `arguments`"))?;
    if let Some(key) = obj.keys().next() {
        return Err(malformed(&format!("unexpected member {key:?} (only `name` and `arguments`)")));
    }
    Ok(ToolCall { name, arguments })
}

/// Whether and which tool the model must call, as in the OpenAI API's `tool_choice`.
///
/// ```
/// use stencil_tools::ToolChoice;
/// assert_eq!("auto".parse::<ToolChoice>(), Ok(ToolChoice::Auto));
/// assert_eq!("get_weather".parse::<ToolChoice>(), Ok(ToolChoice::Named("get_weather".into())));
/// assert_eq!(ToolChoice::Required.to_string(), "required");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum ToolChoice {
    /// The model chooses: plain text, or calls.
    #[default]
    Auto,
    /// At least one call.
    Required,
    /// No call: plain text only (the prompt does not list the tools).
    None,
    /// Calls of this tool only (at least one).
    Named(String),
}

impl FromStr for ToolChoice {
    type Err = String;

    /// `auto`, `required`, `none`, or any other non-empty text: a tool name.
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "none" => ToolChoice::None,
            "" => return Err("expected auto, required, none or a tool name".into()),
            name => ToolChoice::Named(name.to_string()),
        })
    }
}

impl fmt::Display for ToolChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolChoice::Auto => f.write_str("auto"),
            ToolChoice::Required => f.write_str("required"),
            ToolChoice::None => f.write_str("none"),
            ToolChoice::Named(name) => f.write_str(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn write_then_parse_round_trips() {
        for env in [Envelope::fallback(), Envelope::hermes()] {
            let calls = vec![ToolCall::new("a", json!({"x": [1, 2]})), ToolCall::new("b-2", json!({}))];
            let text = env.write(&calls);
            assert_eq!(env.parse(&text).unwrap(), Reply::Calls(calls), "{text}");
        }
    }

    #[test]
    fn names_are_escaped_when_written_and_unescaped_when_read() {
        let names = ["github.create_issue", "fs/read_file", "mcp:weather.get", "say \"hi\"", "C:\\dir\\", "天気 x"];
        for env in [Envelope::fallback(), Envelope::hermes()] {
            let calls: Vec<ToolCall> = names.iter().map(|n| ToolCall::new(*n, json!({"k": "v"}))).collect();
            let text = env.write(&calls);
            assert_eq!(env.parse(&text).unwrap(), Reply::Calls(calls), "{text}");
        }
        assert_eq!(name_and_quote("a.b/c:d"), "a.b/c:d\"");
        assert_eq!(name_and_quote("say \"hi\""), "say \\\"hi\\\"\"");
        assert_eq!(name_and_quote("C:\\"), "C:\\\\\"");
        let written = Envelope::fallback().write(&[ToolCall::new("q\"", json!({}))]);
        assert_eq!(written, r#"<tool_call>{"name": "q\"", "arguments": {}}</tool_call>"#);
        for name in names {
            assert_eq!(read_name(&name_and_quote(name)).as_deref(), Some(name));
        }
        // The closing quote is required, and nothing may follow it.
        assert_eq!(read_name("a"), None);
        assert_eq!(read_name("a\"b"), None);
        assert_eq!(read_name("a\\\""), None, "an escaped quote does not close the name");
        // Any JSON escape is undone (unconstrained replies may use them).
        assert_eq!(read_name("fs\\/read\\u005ffile\"").as_deref(), Some("fs/read_file"));
    }

    #[test]
    fn malformed_replies_say_what_is_wrong() {
        let env = Envelope::fallback();
        for (text, needle) in [
            ("<tool_call>", "is empty"),
            ("<tool_call>{\"name\": \"a\", \"arguments\": {", "not JSON"),
            ("<tool_call>[1]</tool_call>", "expected a JSON object"),
            ("<tool_call>{\"name\": 1, \"arguments\": {}}</tool_call>", "must be a string"),
            ("<tool_call>{\"arguments\": {}}</tool_call>", "missing `name`"),
            ("<tool_call>{\"name\": \"a\", \"arguments\": {}, \"id\": 1}</tool_call>", "unexpected member"),
            ("<tool_call>{\"name\": \"a\", \"arguments\": {}}", "does not end with"),
            ("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call> done", "text after the last call"),
        ] {
            let err = env.parse(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn text_is_text_even_when_a_call_follows() {
        let env = Envelope::fallback();
        let text = "Sure. <tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>";
        assert_eq!(env.parse(text).unwrap(), Reply::Text(text.into()));
    }

    #[test]
    fn choice_round_trips() {
        for s in ["auto", "required", "none", "web_search"] {
            assert_eq!(s.parse::<ToolChoice>().unwrap().to_string(), s);
        }
        assert!("".parse::<ToolChoice>().is_err());
    }
}
