//! A Responses request read as the chat request it amounts to: `instructions` and `input`
//! become `messages` (function calls and their outputs included), `text.format` becomes
//! `response_format`, flat function tools become chat tools, `max_output_tokens` becomes
//! `max_completion_tokens`, `reasoning.effort` becomes Stencil's `reasoning`. The chat
//! path then checks and builds it as any chat request; what it refuses names the chat
//! field, which [`input_param`] maps back to the Responses one.

use serde_json::{json, Map, Value};

use crate::error::ApiError;

/// The top-level fields of a Responses request this server takes (OpenAI's, and the
/// Stencil extensions it shares with the chat route).
const FIELDS: &[&str] = &[
    "model",
    "input",
    "instructions",
    "text",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning",
    "max_output_tokens",
    "temperature",
    "top_p",
    "stream",
    "store",
    "previous_response_id",
    "metadata",
    "user",
    "service_tier",
    // Stencil's extensions, as on the chat route.
    "top_k",
    "min_p",
    "seed",
    "preset",
    "repetition_penalty",
    "speculation",
    "tool_format",
    "reasoning_budget",
    "chat_template_kwargs",
];

/// What the answer needs of the request besides the chat body: the fields a Response
/// object repeats.
#[derive(Clone, Debug, Default)]
pub struct Echo {
    /// `instructions`.
    pub instructions: Value,
    /// `tools` as given.
    pub tools: Value,
    /// `tool_choice` as given (default `auto`).
    pub tool_choice: Value,
    /// `parallel_tool_calls` (default true).
    pub parallel_tool_calls: bool,
    /// `text` as given (default `{"format": {"type": "text"}}`).
    pub text: Value,
    /// `max_output_tokens`.
    pub max_output_tokens: Value,
    /// `temperature`, `top_p`.
    pub temperature: Value,
    /// `top_p`.
    pub top_p: Value,
    /// `metadata` (default `{}`).
    pub metadata: Value,
    /// `reasoning` as given.
    pub reasoning: Value,
}

/// Reads a Responses body: the equivalent chat body, and what the answer echoes.
///
/// ```
/// use stencil_server::responses::to_chat;
/// let body = serde_json::json!({"input": "Hi", "instructions": "Be brief.", "max_output_tokens": 5});
/// let (chat, _) = to_chat(body.to_string().as_bytes()).unwrap();
/// assert_eq!(chat["messages"][0], serde_json::json!({"role": "system", "content": "Be brief."}));
/// assert_eq!(chat["messages"][1]["content"], "Hi");
/// assert_eq!(chat["max_completion_tokens"], 5);
/// ```
///
/// # Errors
///
/// A 400 naming the field: not JSON, an unknown field, `store: true` or
/// `previous_response_id` (this server keeps no responses), an input item or content part
/// or tool of a kind it does not take, a `text.format` it does not know.
pub fn to_chat(body: &[u8]) -> Result<(Value, Echo), ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("the request body is not valid JSON: {e}"), None))?;
    let Value::Object(req) = value else {
        return Err(ApiError::invalid("the request body must be a JSON object", None));
    };
    if let Some(field) = req.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ApiError::invalid(format!("unrecognized request argument supplied: {field}"), Some(field))
            .with_code("unknown_parameter"));
    }
    if req.get("store").is_some_and(|v| v == &Value::Bool(true)) {
        return Err(unsupported(
            "this server keeps no responses: `store: true` is not supported (send `store: false` or leave it out)",
            "store",
        ));
    }
    if req.get("previous_response_id").is_some_and(|v| !v.is_null()) {
        return Err(unsupported(
            "this server keeps no responses: send the conversation in `input` instead of `previous_response_id`",
            "previous_response_id",
        ));
    }
    let mut chat = Map::new();
    let mut messages = Vec::new();
    match req.get("instructions") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => messages.push(json!({"role": "system", "content": s})),
        Some(_) => return Err(ApiError::invalid("`instructions` must be a string", Some("instructions"))),
    }
    match req.get("input") {
        Some(Value::String(s)) => messages.push(json!({"role": "user", "content": s})),
        Some(Value::Array(items)) => input_items(items, &mut messages)?,
        Some(_) => return Err(ApiError::invalid("`input` must be a string or an array of items", Some("input"))),
        None => return Err(ApiError::invalid("`input` is required", Some("input"))),
    }
    chat.insert("messages".into(), Value::Array(messages));
    if let Some(format) = req.get("text").and_then(|t| t.get("format")) {
        if let Some(rf) = response_format(format)? {
            chat.insert("response_format".into(), rf);
        }
    }
    let tools = match req.get("tools") {
        None | Some(Value::Null) => Value::Array(Vec::new()),
        Some(Value::Array(tools)) => Value::Array(tools.iter().enumerate().map(chat_tool).collect::<Result<_, _>>()?),
        Some(_) => return Err(ApiError::invalid("`tools` must be an array", Some("tools"))),
    };
    if tools.as_array().is_some_and(|t| !t.is_empty()) {
        chat.insert("tools".into(), tools);
    }
    if let Some(choice) = req.get("tool_choice") {
        chat.insert("tool_choice".into(), tool_choice(choice)?);
    }
    if let Some(effort) = req.get("reasoning").and_then(|r| r.get("effort")).filter(|e| !e.is_null()) {
        let mode = match effort.as_str() {
            Some("none" | "minimal") => "off",
            Some("low" | "medium" | "high") => "required",
            _ => {
                return Err(ApiError::invalid(
                    format!("unknown reasoning.effort {effort} (expected none, minimal, low, medium or high)"),
                    Some("reasoning.effort"),
                ))
            }
        };
        chat.insert("reasoning".into(), Value::String(mode.into()));
    }
    for (from, to) in [
        ("model", "model"),
        ("parallel_tool_calls", "parallel_tool_calls"),
        ("max_output_tokens", "max_completion_tokens"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("stream", "stream"),
        ("user", "user"),
        ("metadata", "metadata"),
        ("service_tier", "service_tier"),
        ("top_k", "top_k"),
        ("min_p", "min_p"),
        ("seed", "seed"),
        ("preset", "preset"),
        ("repetition_penalty", "repetition_penalty"),
        ("speculation", "speculation"),
        ("tool_format", "tool_format"),
        ("reasoning_budget", "reasoning_budget"),
        ("chat_template_kwargs", "chat_template_kwargs"),
    ] {
        if let Some(v) = req.get(from).filter(|v| !v.is_null()) {
            chat.insert(to.into(), v.clone());
        }
    }
    let get = |k: &str| req.get(k).cloned().unwrap_or(Value::Null);
    let echo = Echo {
        instructions: get("instructions"),
        tools: req.get("tools").cloned().unwrap_or_else(|| json!([])),
        tool_choice: req.get("tool_choice").cloned().unwrap_or_else(|| json!("auto")),
        parallel_tool_calls: req.get("parallel_tool_calls").and_then(Value::as_bool).unwrap_or(true),
        text: req.get("text").cloned().unwrap_or_else(|| json!({"format": {"type": "text"}})),
        max_output_tokens: get("max_output_tokens"),
        temperature: get("temperature"),
        top_p: get("top_p"),
        metadata: req.get("metadata").cloned().unwrap_or_else(|| json!({})),
        reasoning: get("reasoning"),
    };
    Ok((Value::Object(chat), echo))
}

/// The chat route's `param` as the Responses field it came from.
///
/// ```
/// use stencil_server::responses::input_param;
/// assert_eq!(input_param("messages[2].content"), "input");
/// assert_eq!(input_param("max_completion_tokens"), "max_output_tokens");
/// assert_eq!(input_param("response_format.json_schema.schema"), "text.format.schema");
/// assert_eq!(input_param("tools"), "tools");
/// ```
pub fn input_param(param: &str) -> String {
    if param.starts_with("messages") {
        "input".into()
    } else if param == "max_completion_tokens" || param == "max_tokens" {
        "max_output_tokens".into()
    } else if let Some(rest) = param.strip_prefix("response_format") {
        format!("text.format{}", rest.replacen(".json_schema", "", 1))
    } else {
        param.into()
    }
}

/// `input` items as chat messages: messages (text parts), `function_call` (an assistant
/// call; consecutive ones are one assistant turn), `function_call_output` (a `tool`
/// message), `reasoning` (the next assistant message's `reasoning_content`).
fn input_items(items: &[Value], messages: &mut Vec<Value>) -> Result<(), ApiError> {
    let mut reasoning: Option<String> = None;
    for (i, item) in items.iter().enumerate() {
        let param = |f: &str| format!("input[{i}]{f}");
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("message");
        match kind {
            "message" => {
                let role = item.get("role").and_then(Value::as_str).ok_or_else(|| {
                    ApiError::invalid(format!("input[{i}]: a message needs `role`"), Some(&param(".role")))
                })?;
                let content = message_text(item.get("content"), i)?;
                let mut m = json!({"role": role, "content": content});
                if role == "assistant" {
                    if let Some(r) = reasoning.take() {
                        m["reasoning_content"] = Value::String(r);
                    }
                }
                messages.push(m);
            }
            "function_call" => {
                let field = |f: &str| {
                    item.get(f).and_then(Value::as_str).ok_or_else(|| {
                        ApiError::invalid(
                            format!("input[{i}]: a function_call needs `{f}`"),
                            Some(&param(&format!(".{f}"))),
                        )
                    })
                };
                let call = json!({"id": field("call_id")?, "type": "function",
                                  "function": {"name": field("name")?, "arguments": field("arguments")?}});
                match messages.last_mut() {
                    Some(last) if last["role"] == "assistant" && last.get("tool_calls").is_some() => {
                        last["tool_calls"].as_array_mut().expect("an array").push(call);
                    }
                    Some(last) if last["role"] == "assistant" && last.get("tool_calls").is_none() => {
                        last["tool_calls"] = json!([call]);
                    }
                    _ => {
                        let mut m = json!({"role": "assistant", "content": null, "tool_calls": [call]});
                        if let Some(r) = reasoning.take() {
                            m["reasoning_content"] = Value::String(r);
                        }
                        messages.push(m);
                    }
                }
            }
            "function_call_output" => {
                let id = item.get("call_id").and_then(Value::as_str).ok_or_else(|| {
                    ApiError::invalid(
                        format!("input[{i}]: a function_call_output needs `call_id`"),
                        Some(&param(".call_id")),
                    )
                })?;
                let output = match item.get("output") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => message_text(Some(other), i)?,
                    None => String::new(),
                };
                messages.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
            }
            "reasoning" => {
                let parts = item.get("content").or_else(|| item.get("summary")).and_then(Value::as_array);
                let text: String = parts.into_iter().flatten().filter_map(|p| p.get("text")?.as_str()).collect();
                reasoning = Some(text);
            }
            other => {
                return Err(unsupported(
                    &format!(
                        "input[{i}]: `{other}` items are not supported (message, function_call, \
                         function_call_output, reasoning)"
                    ),
                    &param(".type"),
                ))
            }
        }
    }
    Ok(())
}

/// A message's text: a string, or text parts (`input_text`, `output_text`, `text`).
fn message_text(content: Option<&Value>, i: usize) -> Result<String, ApiError> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for (j, part) in parts.iter().enumerate() {
                match (part.get("type").and_then(Value::as_str), part.get("text").and_then(Value::as_str)) {
                    (Some("input_text" | "output_text" | "text"), Some(t)) => text.push_str(t),
                    (kind, _) => {
                        return Err(unsupported(
                            &format!(
                                "input[{i}].content[{j}]: `{}` content is not supported (only text)",
                                kind.unwrap_or("?")
                            ),
                            &format!("input[{i}].content[{j}].type"),
                        ))
                    }
                }
            }
            Ok(text)
        }
        Some(_) => Err(ApiError::invalid(
            format!("input[{i}].content must be a string or an array of parts"),
            Some(&format!("input[{i}].content")),
        )),
    }
}

/// `text.format` as the chat `response_format` (`None` for plain text).
fn response_format(format: &Value) -> Result<Option<Value>, ApiError> {
    Ok(match format.get("type").and_then(Value::as_str) {
        Some("text") => None,
        Some("json_object") => Some(json!({"type": "json_object"})),
        Some("json_schema") => {
            let mut schema = Map::new();
            for key in ["name", "description", "schema", "strict"] {
                if let Some(v) = format.get(key) {
                    schema.insert(key.into(), v.clone());
                }
            }
            schema.entry("name").or_insert_with(|| json!("response"));
            Some(json!({"type": "json_schema", "json_schema": schema}))
        }
        _ => {
            return Err(ApiError::invalid(
                format!("unknown text.format {format} (expected text, json_object or json_schema)"),
                Some("text.format.type"),
            ))
        }
    })
}

/// A Responses function tool (`{"type": "function", "name", "description", "parameters"}`)
/// as a chat tool.
fn chat_tool((i, tool): (usize, &Value)) -> Result<Value, ApiError> {
    match tool.get("type").and_then(Value::as_str) {
        Some("function") => {
            let mut function = Map::new();
            for key in ["name", "description", "parameters", "strict"] {
                if let Some(v) = tool.get(key).filter(|v| !v.is_null()) {
                    function.insert(key.into(), v.clone());
                }
            }
            Ok(json!({"type": "function", "function": function}))
        }
        other => Err(unsupported(
            &format!("tools[{i}]: `{}` tools are not supported (only function tools)", other.unwrap_or("?")),
            &format!("tools[{i}].type"),
        )),
    }
}

/// `tool_choice`: the same strings; `{"type": "function", "name"}` as the chat object.
fn tool_choice(choice: &Value) -> Result<Value, ApiError> {
    match choice {
        Value::String(_) => Ok(choice.clone()),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            let name = o.get("name").cloned().unwrap_or(Value::Null);
            Ok(json!({"type": "function", "function": {"name": name}}))
        }
        _ => Err(unsupported(
            &format!("tool_choice {choice} is not supported (none, auto, required or a function)"),
            "tool_choice",
        )),
    }
}

fn unsupported(message: &str, param: &str) -> ApiError {
    ApiError::invalid(message, Some(param)).with_code("unsupported_parameter")
}
