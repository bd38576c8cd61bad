//! Chat prompts rendered with the model's own template (`tokenizer.chat_template` in the
//! GGUF metadata), by `minijinja` with Python string methods, as Hugging Face renders it.

use minijinja::{Environment, Error, ErrorKind};
use serde::{Deserialize, Serialize};

use crate::error::{Result, RuntimeError};

/// One chat message, with what multi-turn tool use needs: an assistant's `tool_calls`
/// (and its `reasoning_content`), a tool result's `tool_call_id` and `name`.
///
/// ```
/// use serde_json::json;
/// use stencil_runtime::chat::{ChatMessage, ChatToolCall};
/// let m = ChatMessage::user("Hi");
/// assert_eq!(m.role, "user");
/// let call = ChatToolCall::new("a1b2c3d4e", "get_weather", json!({"city": "Oslo"}));
/// let asked = ChatMessage::assistant_calls("", vec![call]);
/// let answer = ChatMessage::tool_result("a1b2c3d4e", "get_weather", r#"{"temp_c": 3}"#);
/// assert_eq!((asked.tool_calls.len(), answer.role.as_str()), (1, "tool"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, `tool` (or any role the template knows).
    pub role: String,
    /// The text (empty for an assistant message that only calls tools).
    pub content: String,
    /// An assistant's tool calls, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ChatToolCall>,
    /// A tool result's call id (the [`ChatToolCall::id`] it answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// A tool result's tool name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// An assistant's reasoning (what it thought before `content` and `tool_calls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
}

/// One call of an assistant message: the call id, the tool's name and its arguments (a
/// JSON value; templates get it as an object or as its JSON text, whichever they render:
/// see [`ChatTemplate::render`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatToolCall {
    /// The call id (Mistral's templates want exactly 9 alphanumeric characters).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments.
    pub arguments: serde_json::Value,
}

impl ChatToolCall {
    /// A call from its parts.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: serde_json::Value) -> Self {
        ChatToolCall { id: id.into(), name: name.into(), arguments }
    }
}

impl ChatMessage {
    /// A message with any role.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage { role: role.into(), content: content.into(), ..ChatMessage::default() }
    }

    /// A `system` message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new("system", content)
    }

    /// A `user` message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new("user", content)
    }

    /// An `assistant` message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new("assistant", content)
    }

    /// An `assistant` message that calls tools (after `content`, which may be empty).
    pub fn assistant_calls(content: impl Into<String>, calls: Vec<ChatToolCall>) -> Self {
        ChatMessage { tool_calls: calls, ..Self::new("assistant", content) }
    }

    /// A `tool` message: the result of call `call_id` of tool `name`.
    pub fn tool_result(call_id: impl Into<String>, name: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage { tool_call_id: Some(call_id.into()), name: Some(name.into()), ..Self::new("tool", content) }
    }

    /// The message as a template sees it: OpenAI's shape (`tool_calls` as `[{"id", "type":
    /// "function", "function": {"name", "arguments"}}]`, the arguments as JSON text when
    /// `string_arguments`), `reasoning_content` also as `thinking` (gpt-oss's templates read
    /// that). Fields that are not set are left out (templates test `'tool_calls' in message`).
    fn template_view(&self, string_arguments: bool) -> serde_json::Value {
        use serde_json::{json, Value};
        let mut m = serde_json::Map::new();
        m.insert("role".into(), Value::String(self.role.clone()));
        m.insert("content".into(), Value::String(self.content.clone()));
        if !self.tool_calls.is_empty() {
            let calls = self
                .tool_calls
                .iter()
                .map(|c| {
                    let arguments =
                        if string_arguments { Value::String(c.arguments.to_string()) } else { c.arguments.clone() };
                    json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments}})
                })
                .collect();
            m.insert("tool_calls".into(), Value::Array(calls));
        }
        if let Some(id) = &self.tool_call_id {
            m.insert("tool_call_id".into(), Value::String(id.clone()));
        }
        if let Some(name) = &self.name {
            m.insert("name".into(), Value::String(name.clone()));
        }
        if let Some(r) = &self.reasoning_content {
            m.insert("reasoning_content".into(), Value::String(r.clone()));
            m.insert("thinking".into(), Value::String(r.clone()));
        }
        Value::Object(m)
    }
}

/// A model's Jinja chat template and the special-token texts it may use.
///
/// Besides minijinja's own, templates get Python's string methods, `raise_exception`,
/// `strftime_now(format)` (the current UTC date and time: `%Y %m %d %e %H %M %S %y %b %B
/// %a %A %j %%`), a `tojson` written as Hugging Face's (Python's `json.dumps`: `", "`
/// and `": "` between items, `indent=N`, non-ASCII and `<>&'` as they are) and Jinja2's
/// `iterable` test (`none` is not iterable: templates test `tools is iterable` where
/// Hugging Face passes `tools=None`).
///
/// ```
/// use stencil_runtime::chat::{ChatMessage, ChatTemplate};
/// let t = ChatTemplate::new(
///     "{% for m in messages %}<{{ m.role }}>{{ m.content.strip() }}</s>{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}",
///     "<s>", "</s>",
/// ).unwrap();
/// let text = t.render(&[ChatMessage::user(" Hi ")], true, None).unwrap();
/// assert_eq!(text, "<user>Hi</s><assistant>");
/// ```
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    bos_token: String,
    eos_token: String,
    /// Whether the template renders a call's arguments given as JSON text (probed once).
    string_arguments: std::sync::OnceLock<bool>,
}

impl ChatTemplate {
    /// Compiles `source`; `bos_token`/`eos_token` are the texts the template sees.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self> {
        let mut env = Environment::new();
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_function("strftime_now", |format: String| -> String {
            pyjson::strftime(&format, std::time::SystemTime::now())
        });
        env.add_filter("tojson", pyjson::tojson_filter);
        // minijinja iterates `none` (as nothing); Python's `iter(None)` fails.
        env.add_test("iterable", |v: minijinja::Value| !v.is_none() && !v.is_undefined() && v.try_iter().is_ok());
        env.add_template_owned("chat", source.to_string())
            .map_err(|e| RuntimeError::ChatTemplate(format!("does not compile: {e}")))?;
        Ok(ChatTemplate {
            env,
            source: source.to_string(),
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
            string_arguments: std::sync::OnceLock::new(),
        })
    }

    /// The template's source text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Renders `messages`; with `add_generation_prompt` the text ends where the assistant's
    /// reply begins. `tools` (OpenAI-style JSON definitions) are passed to templates that
    /// use them. An assistant's tool calls reach the template in OpenAI's shape, their
    /// arguments as JSON text when the template renders them so (DeepSeek's concatenate
    /// `arguments` as a string), else as an object (most apply `tojson` or iterate its
    /// items): see [`ChatTemplate::string_arguments`].
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        tools: Option<&serde_json::Value>,
    ) -> Result<String> {
        self.render_with(messages, add_generation_prompt, tools, &serde_json::Map::new())
    }

    /// [`render`](Self::render) with more variables for the template (`chat_template_kwargs`:
    /// `enable_thinking`, `reasoning_effort`, …); they do not replace `messages`, `tools`,
    /// `add_generation_prompt`, `bos_token` or `eos_token`.
    ///
    /// ```
    /// use stencil_runtime::chat::{ChatMessage, ChatTemplate};
    /// let t = ChatTemplate::new("{% if enable_thinking is false %}/no_think {% endif %}{{ messages[0].content }}", "", "").unwrap();
    /// let kwargs = serde_json::json!({"enable_thinking": false});
    /// let text = t.render_with(&[ChatMessage::user("Hi")], true, None, kwargs.as_object().unwrap()).unwrap();
    /// assert_eq!(text, "/no_think Hi");
    /// ```
    pub fn render_with(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        tools: Option<&serde_json::Value>,
        kwargs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<String> {
        let string_arguments = messages.iter().any(|m| !m.tool_calls.is_empty()) && self.string_arguments();
        self.render_view(messages, add_generation_prompt, tools, kwargs, string_arguments)
    }

    fn render_view(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        tools: Option<&serde_json::Value>,
        kwargs: &serde_json::Map<String, serde_json::Value>,
        string_arguments: bool,
    ) -> Result<String> {
        use serde_json::Value;
        let template = self.env.get_template("chat").map_err(|e| RuntimeError::ChatTemplate(e.to_string()))?;
        let mut ctx = kwargs.clone();
        let view: Vec<Value> = messages.iter().map(|m| m.template_view(string_arguments)).collect();
        ctx.insert("messages".into(), Value::Array(view));
        ctx.insert("add_generation_prompt".into(), Value::Bool(add_generation_prompt));
        ctx.insert("bos_token".into(), Value::String(self.bos_token.clone()));
        ctx.insert("eos_token".into(), Value::String(self.eos_token.clone()));
        ctx.insert("tools".into(), tools.cloned().unwrap_or(Value::Null));
        template
            .render(minijinja::Value::from_serialize(&ctx))
            .map_err(|e| RuntimeError::ChatTemplate(format!("does not render: {e}")))
    }

    /// Whether the template renders a call's arguments given as JSON text: true when a
    /// probe conversation (a user message, an assistant call whose arguments are the text
    /// `{"probe_argument":"probe value"}`, its result) renders with that text as it is;
    /// false when it escapes it (`tojson` of a string), fails, or leaves it out. Probed
    /// once per template.
    pub fn string_arguments(&self) -> bool {
        *self.string_arguments.get_or_init(|| {
            // As serde_json writes a call's arguments into the text.
            const ARGS: &str = r#"{"probe_argument":"probe value"}"#;
            let args: serde_json::Value = serde_json::from_str(ARGS).expect("valid JSON");
            let id = "pr0be1d42";
            let probe = [
                ChatMessage::user("probe question"),
                ChatMessage::assistant_calls("", vec![ChatToolCall::new(id, "probe_tool", args)]),
                ChatMessage::tool_result(id, "probe_tool", "probe result"),
            ];
            let tools = serde_json::json!([{"type": "function", "function": {"name": "probe_tool", "description": "A probe.",
                "parameters": {"type": "object", "properties": {"probe_argument": {"type": "string"}}}}}]);
            let rendered = self.render_view(&probe, true, Some(&tools), &serde_json::Map::new(), true);
            matches!(rendered, Ok(text) if text.contains(ARGS))
        })
    }
}

mod pyjson {
    //! Python's `json.dumps` as Hugging Face's `tojson` calls it, and `strftime`.

    use minijinja::value::Kwargs;
    use minijinja::{Error, ErrorKind, Value};

    /// `value | tojson` / `tojson(indent=N)`.
    pub(super) fn tojson_filter(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
        let indent: Option<usize> = kwargs.get("indent")?;
        kwargs.assert_all_used()?;
        let json = serde_json::to_value(value).map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))?;
        let mut out = String::new();
        write(&json, indent, 0, &mut out);
        Ok(Value::from_safe_string(out))
    }

    /// `json.dumps(value, ensure_ascii=False, indent=indent)`: `", "` and `": "` without an
    /// indent, `","` and `": "` with one.
    pub(super) fn write(v: &serde_json::Value, indent: Option<usize>, level: usize, out: &mut String) {
        use serde_json::Value as J;
        let newline = |out: &mut String, level: usize| {
            if let Some(n) = indent {
                out.push('\n');
                out.push_str(&" ".repeat(n * level));
            }
        };
        let sep = if indent.is_some() { "," } else { ", " };
        match v {
            J::Array(items) if !items.is_empty() => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(sep);
                    }
                    newline(out, level + 1);
                    write(item, indent, level + 1, out);
                }
                newline(out, level);
                out.push(']');
            }
            J::Object(map) if !map.is_empty() => {
                out.push('{');
                for (i, (k, item)) in map.iter().enumerate() {
                    if i > 0 {
                        out.push_str(sep);
                    }
                    newline(out, level + 1);
                    out.push_str(&J::String(k.clone()).to_string());
                    out.push_str(": ");
                    write(item, indent, level + 1, out);
                }
                newline(out, level);
                out.push('}');
            }
            other => out.push_str(&other.to_string()),
        }
    }

    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

    /// `time.strftime(format)` at `now` (UTC) for `%Y %m %d %e %H %M %S %y %b %B %a %A %j
    /// %%`; any other directive is written as it is.
    pub(super) fn strftime(format: &str, now: std::time::SystemTime) -> String {
        let secs = now.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let days = (secs / 86_400) as i64;
        let (y, m, d) = civil(days);
        let rem = secs % 86_400;
        let (hh, mm, ss) = (rem / 3600, rem / 60 % 60, rem % 60);
        let weekday = (days + 3).rem_euclid(7) as usize; // 1970-01-01 was a Thursday.
        let yday = days - days_from_civil(y, 1, 1) + 1;
        let mut out = String::new();
        let mut chars = format.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('Y') => out.push_str(&y.to_string()),
                Some('y') => out.push_str(&format!("{:02}", y.rem_euclid(100))),
                Some('m') => out.push_str(&format!("{m:02}")),
                Some('d') => out.push_str(&format!("{d:02}")),
                Some('e') => out.push_str(&format!("{d:2}")),
                Some('H') => out.push_str(&format!("{hh:02}")),
                Some('M') => out.push_str(&format!("{mm:02}")),
                Some('S') => out.push_str(&format!("{ss:02}")),
                Some('j') => out.push_str(&format!("{yday:03}")),
                Some('b') => out.push_str(&MONTHS[m as usize - 1][..3]),
                Some('B') => out.push_str(MONTHS[m as usize - 1]),
                Some('a') => out.push_str(&DAYS[weekday][..3]),
                Some('A') => out.push_str(DAYS[weekday]),
                Some('%') => out.push('%'),
                Some(other) => {
                    out.push('%');
                    out.push(other);
                }
                None => out.push('%'),
            }
        }
        out
    }

    /// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar.
    fn civil(days: i64) -> (i64, u32, u32) {
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let y = yoe + era * 400 + i64::from(m <= 2);
        (y, m, d)
    }

    fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y.rem_euclid(400);
        let m = i64::from(m);
        let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    #[cfg(test)]
    mod tests {
        use std::time::{Duration, UNIX_EPOCH};

        use super::*;

        #[test]
        fn dates_are_python_strftime() {
            // 2024-07-26 13:05:09 UTC, a Friday, day 208.
            let t =
                UNIX_EPOCH + Duration::from_secs(days_from_civil(2024, 7, 26) as u64 * 86_400 + 13 * 3600 + 5 * 60 + 9);
            assert_eq!(strftime("%d %b %Y", t), "26 Jul 2024");
            assert_eq!(
                strftime("%Y-%m-%d %H:%M:%S %a %A %B %j %y %e %% %Q", t),
                "2024-07-26 13:05:09 Fri Friday July 208 24 26 % %Q"
            );
            for days in [-1000_i64, 0, 59, 60, 365, 10_957, 19_000, 60_000] {
                let (y, m, d) = civil(days);
                assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
            }
            assert_eq!(civil(0), (1970, 1, 1));
            assert_eq!(civil(11_016), (2000, 2, 29));
        }

        #[test]
        fn json_is_written_as_python_writes_it() {
            let v = serde_json::json!({"a": [1, "é<>&'", {}], "b": {"c": null, "d": []}});
            let mut out = String::new();
            write(&v, None, 0, &mut out);
            assert_eq!(out, r#"{"a": [1, "é<>&'", {}], "b": {"c": null, "d": []}}"#);
            let mut out = String::new();
            write(&serde_json::json!({"a": [1, 2], "b": {}}), Some(2), 0, &mut out);
            assert_eq!(out, "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2-135M-Instruct's template, as its GGUF carries it.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn smollm2_template_renders_chatml() {
        let t = ChatTemplate::new(SMOLLM2, "<|im_start|>", "<|im_end|>").unwrap();
        let text = t.render(&[ChatMessage::user("Hello")], true, None).unwrap();
        assert_eq!(
            text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
             <|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
        );
        let with_system = t.render(&[ChatMessage::system("Be brief."), ChatMessage::user("Hi")], false, None).unwrap();
        assert_eq!(with_system, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    }

    #[test]
    fn none_is_not_iterable_as_in_jinja2() {
        let source = "{% if tools is iterable and tools | length > 0 %}tools{% else %}none{% endif %} \
                      {{ messages is iterable }} {{ 'ab' is iterable }} {{ 3 is iterable }} {{ nothing is iterable }}";
        let t = ChatTemplate::new(source, "", "").unwrap();
        let text = t.render(&[ChatMessage::user("Hi")], true, None).unwrap();
        assert_eq!(text, "none True True False False");
        let tools = serde_json::json!([{"type": "function", "function": {"name": "f"}}]);
        assert!(t.render(&[], true, Some(&tools)).unwrap().starts_with("tools "));
    }

    #[test]
    fn raise_exception_is_an_error_not_a_panic() {
        let t = ChatTemplate::new("{{ raise_exception('roles must alternate') }}", "", "").unwrap();
        let err = t.render(&[], true, None).unwrap_err().to_string();
        assert!(err.contains("roles must alternate"), "{err}");
    }

    #[test]
    fn tool_calls_reach_templates_as_objects_or_as_text() {
        use serde_json::json;
        // Hermes-style: `tojson` of the arguments wants an object.
        let object = ChatTemplate::new(
            "{% for m in messages %}{% for c in m.tool_calls %}<call>{{ c.function.name }} {{ c.function.arguments | tojson }} {{ c.id }}</call>{% endfor %}{% if m.role == 'tool' %}<result {{ m.tool_call_id }} {{ m.name }}>{{ m.content }}{% endif %}{% endfor %}",
            "",
            "",
        )
        .unwrap();
        // DeepSeek-style: concatenation wants text.
        let text = ChatTemplate::new(
            "{% for m in messages %}{% if m.tool_calls is defined %}{% for c in m.tool_calls %}<call>{{ c.function.name + ' ' + c.function.arguments }}</call>{% endfor %}{% endif %}{% endfor %}",
            "",
            "",
        )
        .unwrap();
        assert!(!object.string_arguments());
        assert!(text.string_arguments());
        let call = ChatToolCall::new("abcDEF123", "get_weather", json!({"city": "Oslo", "days": [1, 2]}));
        let messages = [
            ChatMessage::user("Weather?"),
            ChatMessage::assistant_calls("", vec![call]),
            ChatMessage::tool_result("abcDEF123", "get_weather", "sunny"),
        ];
        assert_eq!(
            object.render(&messages, false, None).unwrap(),
            r#"<call>get_weather {"city": "Oslo", "days": [1, 2]} abcDEF123</call><result abcDEF123 get_weather>sunny"#
        );
        assert_eq!(
            text.render(&messages, false, None).unwrap(),
            r#"<call>get_weather {"city":"Oslo","days":[1,2]}</call>"#
        );
        // Fields that are not set are not there at all.
        let keys = ChatTemplate::new(
            "{% for m in messages %}{{ 'tool_calls' in m }} {{ m.name is defined }};{% endfor %}",
            "",
            "",
        )
        .unwrap();
        // (Booleans print as Jinja2 prints them.)
        assert_eq!(keys.render(&messages, false, None).unwrap(), "False False;True False;False True;");
        // Reasoning is there as `reasoning_content` and as `thinking`.
        let thinking =
            ChatTemplate::new("{{ messages[0].reasoning_content }}|{{ messages[0].thinking }}", "", "").unwrap();
        let m = ChatMessage { reasoning_content: Some("hm".into()), ..ChatMessage::assistant("x") };
        assert_eq!(thinking.render(&[m], false, None).unwrap(), "hm|hm");
    }

    #[test]
    fn strftime_now_and_python_tojson_are_available() {
        let t = ChatTemplate::new(
            "{{ strftime_now('%Y') | length }} {{ messages[0] | tojson }} {{ {'a': [1]} | tojson(indent=2) }}",
            "",
            "",
        )
        .unwrap();
        let text = t.render(&[ChatMessage::user("<é>")], false, None).unwrap();
        assert_eq!(text, "4 {\"role\": \"user\", \"content\": \"<é>\"} {\n  \"a\": [\n    1\n  ]\n}");
    }

    #[test]
    fn bad_template_is_an_error() {
        assert!(ChatTemplate::new("{% for %}", "", "").is_err());
    }
}
