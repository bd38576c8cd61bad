//! The prompt side of tool calling: the tool definitions go into the model's chat template
//! when it renders tools ([`PromptStyle::Template`]), else into a system message in a
//! documented format ([`PromptStyle::Fallback`], [`tool_instructions`]).
//!
//! # The fallback tool block
//!
//! With [`PromptStyle::Fallback`], this block is appended to the first system message (or
//! becomes the first message, a system message, when there is none):
//!
//! ```text
//! # Tools
//!
//! You can call these tools. Each line is one tool: its name, what it does, and the JSON Schema of its arguments.
//! {"name": "get_weather", "description": "Current weather in a city.", "parameters": {...}}
//!
//! To call a tool, reply with one line per call and nothing else, in this form:
//! <tool_call>{"name": "<tool name>", "arguments": <the arguments as a JSON object>}</tool_call>
//! Make exactly one call.
//! If no tool fits the request, reply in plain text instead.
//! ```
//!
//! The last two lines depend on the [`ToolChoice`] and on how many calls a reply may hold
//! (see [`tool_instructions`]). With [`ToolChoice::None`] the block is left out: the model
//! is not told about tools it may not call.
//!
//! Tool results go back to the model as [`result_message`]s: in the fallback style a user
//! message `<tool_response>{"name": ..., "content": ...}</tool_response>`, in the template
//! style a message with role `tool` (which templates that render tools render as the
//! result of the call before it).

use serde_json::{json, Value};
use stencil_runtime::chat::ChatTemplate;
use stencil_runtime::{ChatMessage, Model, RuntimeError};

use crate::envelope::{Envelope, ToolChoice};
use crate::format::{ReplyParts, ToolFormat};
use crate::set::ToolSet;

/// How tool definitions reach the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptStyle {
    /// Through the chat template's `tools` variable; calls in the [`Envelope::hermes`]
    /// format by default.
    Template,
    /// In a system message (the [module documentation](self)'s tool block); calls in the
    /// [`Envelope::fallback`] format by default. Also used for models without a chat
    /// template, whose messages are written as plain text (see [`render_messages`]).
    Fallback,
}

impl PromptStyle {
    /// [`PromptStyle::Template`] when the model's template renders tools (see
    /// [`template_renders_tools`]), else [`PromptStyle::Fallback`].
    pub fn detect(model: &Model) -> PromptStyle {
        match model.chat_template() {
            Some(t) if template_renders_tools(t) => PromptStyle::Template,
            _ => PromptStyle::Fallback,
        }
    }

    /// The envelope this style uses unless told otherwise.
    pub fn default_envelope(self) -> Envelope {
        match self {
            PromptStyle::Template => Envelope::hermes(),
            PromptStyle::Fallback => Envelope::fallback(),
        }
    }
}

/// Whether `template` uses the `tools` it is given: true when rendering a conversation
/// with a probe tool differs from rendering it without (a template that fails either way
/// does not).
///
/// ```
/// use stencil_runtime::chat::ChatTemplate;
/// use stencil_tools::prompt::template_renders_tools;
/// let plain = ChatTemplate::new("{% for m in messages %}{{ m.content }}{% endfor %}", "", "").unwrap();
/// assert!(!template_renders_tools(&plain));
/// let with_tools = ChatTemplate::new(
///     "{% if tools %}{{ tools | tojson }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}", "", "",
/// ).unwrap();
/// assert!(template_renders_tools(&with_tools));
/// ```
pub fn template_renders_tools(template: &ChatTemplate) -> bool {
    let messages = [ChatMessage::system("You are helpful."), ChatMessage::user("Hello")];
    let probe = json!([{
        "type": "function",
        "function": {"name": "probe_tool", "description": "A probe.", "parameters": {"type": "object", "properties": {}}}
    }]);
    match (template.render(&messages, true, None), template.render(&messages, true, Some(&probe))) {
        (Ok(without), Ok(with)) => without != with,
        _ => false,
    }
}

/// The fallback tool block for `tools` (see the [module documentation](self)): the tools,
/// one JSON line each, and how to call them in `envelope`'s format; `max_calls` is how many
/// calls a reply may hold. Empty for [`ToolChoice::None`]. Tool names appear as JSON
/// strings (escaped, as the model must write them in a call).
///
/// ```
/// use stencil_tools::{prompt::tool_instructions, Envelope, ToolChoice, ToolSet};
/// let tools = ToolSet::from_openai_json(r#"[{"type": "function", "function": {"name": "now"}}]"#)?;
/// let text = tool_instructions(&tools, &Envelope::fallback(), &ToolChoice::Required, 1);
/// assert!(text.contains(r#"{"name": "now", "description": "", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}"#));
/// assert!(text.contains("You must call a tool."));
/// # Ok::<(), stencil_tools::ToolSetError>(())
/// ```
pub fn tool_instructions(tools: &ToolSet, envelope: &Envelope, choice: &ToolChoice, max_calls: usize) -> String {
    format_instructions(tools, &ToolFormat::Envelope(envelope.clone()), choice, max_calls)
}

/// [`tool_instructions`] for any [`ToolFormat`]: for the envelope exactly that block; for
/// another format, how to call a tool is its [`ToolFormat::example`]:
///
/// ```text
/// To call a tool, reply in this form, with the tool's name for TOOL_NAME and its arguments:
/// [TOOL_CALLS]TOOL_NAME[ARGS]{"ARGUMENT": "VALUE"}
/// ```
///
/// ```
/// use stencil_tools::{format::ToolFormat, prompt::format_instructions, ToolChoice, ToolSet};
/// let tools = ToolSet::from_openai_json(r#"[{"type": "function", "function": {"name": "now"}}]"#)?;
/// let text = format_instructions(&tools, &ToolFormat::QwenXml, &ToolChoice::Required, 1);
/// assert!(text.contains("<tool_call>\n<function=TOOL_NAME>\n<parameter=ARGUMENT>\nVALUE\n</parameter>\n</function>\n</tool_call>"), "{text}");
/// # Ok::<(), stencil_tools::ToolSetError>(())
/// ```
pub fn format_instructions(tools: &ToolSet, format: &ToolFormat, choice: &ToolChoice, max_calls: usize) -> String {
    if *choice == ToolChoice::None {
        return String::new();
    }
    let mut text = String::from(
        "# Tools\n\nYou can call these tools. Each line is one tool: its name, what it does, and the JSON Schema of its arguments.\n",
    );
    for def in tools.entries().iter().map(|e| &e.definition) {
        let line = json!({"name": def.name, "description": def.description, "parameters": def.parameters});
        text.push_str(&spaced_json(&line));
        text.push('\n');
    }
    match format {
        ToolFormat::Envelope(envelope) => {
            text.push_str("\nTo call a tool, reply with one line per call and nothing else, in this form:\n");
            text.push_str(&format!(
                "{}{{\"name\": \"<tool name>\", \"arguments\": <the arguments as a JSON object>}}{}\n",
                envelope.open.trim(),
                envelope.close.trim()
            ));
        }
        format => {
            text.push_str(
                "\nTo call a tool, reply in this form, with the tool's name for TOOL_NAME and its arguments:\n",
            );
            text.push_str(&format.example());
            text.push('\n');
        }
    }
    text.push_str(&if max_calls > 1 {
        format!("You may make up to {max_calls} calls, one per line.\n")
    } else {
        "Make exactly one call.\n".to_string()
    });
    text.push_str(&match choice {
        ToolChoice::Auto => "If no tool fits the request, reply in plain text instead.".to_string(),
        ToolChoice::Required => "You must call a tool.".to_string(),
        ToolChoice::Named(name) => format!("You must call the tool {}.", Value::String(name.clone())),
        ToolChoice::None => unreachable!("handled above"),
    });
    text
}

/// JSON on one line with a space after `:` and `,`, as models mostly see it written.
fn spaced_json(value: &Value) -> String {
    match value {
        Value::Array(items) => format!("[{}]", items.iter().map(spaced_json).collect::<Vec<_>>().join(", ")),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), spaced_json(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        v => v.to_string(),
    }
}

/// The messages with the fallback tool block added: appended to the first system message,
/// or inserted as the first message.
pub fn with_tool_block(messages: &[ChatMessage], block: &str) -> Vec<ChatMessage> {
    let mut out = messages.to_vec();
    if block.is_empty() {
        return out;
    }
    match out.first_mut() {
        Some(first) if first.role == "system" => {
            first.content = format!("{}\n\n{block}", first.content);
        }
        _ => out.insert(0, ChatMessage::system(block)),
    }
    out
}

/// The prompt text, ending where the assistant's reply starts: through `model`'s chat
/// template (with `tools` in OpenAI form for [`PromptStyle::Template`], unless the choice is
/// `none`), or, for a model without a template, as plain text: system messages as they are,
/// the others as `User: ...`/`Assistant: ...`/`Tool: ...` paragraphs, then `Assistant:`.
///
/// # Errors
/// The template's rendering errors.
#[allow(clippy::too_many_arguments)]
pub fn render_messages(
    model: &Model,
    style: PromptStyle,
    tools: &ToolSet,
    format: &ToolFormat,
    messages: &[ChatMessage],
    choice: &ToolChoice,
    max_calls: usize,
    template_kwargs: &serde_json::Map<String, Value>,
) -> Result<String, RuntimeError> {
    let openai = tools.to_openai_json();
    let (messages, template_tools) = match style {
        PromptStyle::Template => {
            (messages.to_vec(), (*choice != ToolChoice::None && !tools.is_empty()).then_some(&openai))
        }
        PromptStyle::Fallback => {
            (with_tool_block(messages, &format_instructions(tools, format, choice, max_calls)), None)
        }
    };
    match model.chat_template() {
        Some(template) => template.render_with(&messages, true, template_tools, template_kwargs),
        None => Ok(plain_text(&messages)),
    }
}

/// Whether `template` renders an assistant's `tool_calls`: a conversation whose assistant
/// calls a probe tool (and gets its result) renders with the probe's name (a template that
/// fails does not).
///
/// ```
/// use stencil_runtime::chat::ChatTemplate;
/// use stencil_tools::prompt::template_renders_calls;
/// let plain = ChatTemplate::new("{% for m in messages %}{{ m.content }}{% endfor %}", "", "").unwrap();
/// assert!(!template_renders_calls(&plain));
/// let calls = ChatTemplate::new("{% for m in messages %}{{ m.content }}{% for c in m.tool_calls %}{{ c.function.name }}{% endfor %}{% endfor %}", "", "").unwrap();
/// assert!(template_renders_calls(&calls));
/// ```
pub fn template_renders_calls(template: &ChatTemplate) -> bool {
    use stencil_runtime::ChatToolCall;
    let id = "pr0be1d42";
    let messages = [
        ChatMessage::user("Hello"),
        ChatMessage::assistant_calls("", vec![ChatToolCall::new(id, "probe_tool_name", json!({}))]),
        ChatMessage::tool_result(id, "probe_tool_name", "done"),
    ];
    matches!(template.render(&messages, true, None), Ok(text) if text.contains("probe_tool_name"))
}

/// `messages` for a template that does not render `tool_calls`: an assistant's calls are
/// written in `format` after its content (with the envelope's text when the format cannot
/// write them), and `tool` results become [`result_message`]s of the fallback style.
pub fn flatten_tool_messages(messages: &[ChatMessage], format: &ToolFormat, tools: &ToolSet) -> Vec<ChatMessage> {
    messages
        .iter()
        .map(|m| {
            if !m.tool_calls.is_empty() {
                let calls: Vec<crate::ToolCall> =
                    m.tool_calls.iter().map(|c| crate::ToolCall::new(c.name.clone(), c.arguments.clone())).collect();
                let parts = ReplyParts { content: Some(m.content.clone()), ..ReplyParts::default() };
                let text = format
                    .write(tools, &parts, &calls)
                    .unwrap_or_else(|_| format!("{}{}", m.content, Envelope::fallback().write(&calls)));
                ChatMessage::assistant(text)
            } else if m.role == "tool" {
                let content = serde_json::from_str(&m.content).unwrap_or_else(|_| Value::String(m.content.clone()));
                result_message(PromptStyle::Fallback, m.name.as_deref().unwrap_or(""), &content)
            } else {
                m.clone()
            }
        })
        .collect()
}

fn plain_text(messages: &[ChatMessage]) -> String {
    let mut out = String::new();
    for m in messages {
        let mut role = m.role.clone();
        if let Some(first) = role.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        if m.role == "system" {
            out.push_str(&format!("{}\n\n", m.content));
        } else {
            out.push_str(&format!("{role}: {}\n\n", m.content));
        }
    }
    out.push_str("Assistant:");
    out
}

/// The message that gives a tool's result back to the model (see the [module
/// documentation](self)).
///
/// ```
/// use stencil_tools::prompt::{result_message, PromptStyle};
/// let m = result_message(PromptStyle::Fallback, "get_weather", &serde_json::json!({"temp_c": 21}));
/// assert_eq!(m.role, "user");
/// assert_eq!(m.content, r#"<tool_response>{"name": "get_weather", "content": {"temp_c": 21}}</tool_response>"#);
/// ```
pub fn result_message(style: PromptStyle, tool: &str, content: &Value) -> ChatMessage {
    match style {
        PromptStyle::Template => ChatMessage::new("tool", content.to_string()),
        PromptStyle::Fallback => ChatMessage::user(format!(
            "<tool_response>{}</tool_response>",
            spaced_json(&json!({"name": tool, "content": content}))
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_goes_into_the_first_system_message() {
        let m = with_tool_block(&[ChatMessage::system("Be brief."), ChatMessage::user("Hi")], "TOOLS");
        assert_eq!(m[0].content, "Be brief.\n\nTOOLS");
        let m = with_tool_block(&[ChatMessage::user("Hi")], "TOOLS");
        assert_eq!((m[0].role.as_str(), m.len()), ("system", 2));
        assert_eq!(with_tool_block(&[ChatMessage::user("Hi")], "").len(), 1);
    }

    #[test]
    fn plain_text_for_models_without_a_template() {
        let text = plain_text(&[ChatMessage::system("S"), ChatMessage::user("U"), ChatMessage::new("tool", "T")]);
        assert_eq!(text, "S\n\nUser: U\n\nTool: T\n\nAssistant:");
    }

    #[test]
    fn instructions_follow_the_choice() {
        let tools = ToolSet::from_openai_json(r#"[{"type": "function", "function": {"name": "a"}}]"#).unwrap();
        let env = Envelope::fallback();
        assert!(tool_instructions(&tools, &env, &ToolChoice::Auto, 3).contains("up to 3 calls"));
        assert!(tool_instructions(&tools, &env, &ToolChoice::Auto, 1).contains("plain text instead"));
        assert!(tool_instructions(&tools, &env, &ToolChoice::Named("a".into()), 1).contains("call the tool \"a\""));
        assert_eq!(tool_instructions(&tools, &env, &ToolChoice::None, 1), "");
        // Names are JSON strings wherever they appear.
        let odd = ToolSet::from_openai_json(
            r#"[{"type": "function", "function": {"name": "fs/read_file"}},
                {"type": "function", "function": {"name": "say \"hi\" \\ now"}}]"#,
        )
        .unwrap();
        let text = tool_instructions(&odd, &env, &ToolChoice::Named("say \"hi\" \\ now".into()), 1);
        assert!(text.contains(r#"{"name": "fs/read_file", "description": """#), "{text}");
        assert!(text.contains(r#"{"name": "say \"hi\" \\ now", "description": """#), "{text}");
        assert!(text.ends_with(r#"You must call the tool "say \"hi\" \\ now"."#), "{text}");
        let m = result_message(PromptStyle::Fallback, "mcp:weather.get", &json!("sunny"));
        assert_eq!(m.content, r#"<tool_response>{"name": "mcp:weather.get", "content": "sunny"}</tool_response>"#);
        let m = result_message(PromptStyle::Fallback, "q\"", &json!(1));
        assert_eq!(m.content, r#"<tool_response>{"name": "q\"", "content": 1}</tool_response>"#);
        assert!(tool_instructions(&tools, &Envelope::hermes(), &ToolChoice::Auto, 1).contains(
            "<tool_call>{\"name\": \"<tool name>\", \"arguments\": <the arguments as a JSON object>}</tool_call>"
        ));
    }
}
