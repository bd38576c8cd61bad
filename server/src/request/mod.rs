//! From a request body to what the engine runs: the prompt, the sampling parameters, the
//! constraint, and how to answer.
//!
//! ```text
//!  body ──parse_chat / parse_completion──▶ api types ──prepare_chat / prepare_completion──▶ Prepared
//!  Prepared + model ──build──▶ GenerateRequest (prompt rendered, max_tokens set, grammar compiled)
//! ```
//!
//! Parsing and preparing are checked before any model work, and every refusal is a 400
//! naming the field; [`build`] then needs the model (to render and measure the prompt)
//! and compiles the constraint through the [`GrammarCache`](crate::constraint::GrammarCache).
//! The HTTP side ([`crate::router`]) only calls these and answers.

use serde::de::DeserializeOwned;
use serde_json::Value;
use stencil_runtime::sampling::{Presets, SamplingError, SamplingParams};
use stencil_runtime::{ChatMessage, ChatToolCall, Prompt, Speculation};
use stencil_tools::format::ReasoningMode;
use stencil_tools::{ToolChoice, ToolFormat};

use crate::api::{
    unknown_field, ChatCompletionRequest, CompletionRequest, MessageContent, PromptField, ResponseFormat,
    SamplingFields, CHAT_FIELDS, COMPLETION_FIELDS,
};
use crate::constraint::{ConstraintSpec, ToolSpec};
use crate::error::ApiError;

mod build;

pub use build::{build, Serving};

/// Limits a request is checked against.
#[derive(Clone, Debug)]
pub struct Limits {
    /// The most completions per request (`n`).
    pub max_n: usize,
    /// The largest `max_tokens`.
    pub max_tokens: u32,
}

/// A request checked and turned into the engine's terms.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// What the model is asked.
    pub prompt: Prompt,
    /// Sampling parameters; `max_tokens` is set once the prompt's length is known when the
    /// request did not give it ([`Prepared::max_tokens`] is `None`).
    pub params: SamplingParams,
    /// `max_tokens` as given.
    pub max_tokens: Option<u32>,
    /// The preset the parameters started from.
    pub preset: Option<String>,
    /// What constrains the output.
    pub constraint: ConstraintSpec,
    /// Completions to decode together.
    pub n: usize,
    /// Server-sent events.
    pub stream: bool,
    /// A usage chunk at the end of the stream.
    pub include_usage: bool,
    /// Token log-probabilities in the answer.
    pub logprobs: bool,
    /// With `logprobs`: the most likely alternatives per token (chat `top_logprobs`,
    /// completions' `logprobs: n`).
    pub top_logprobs: usize,
    /// Tool calling: the tools and the conversation with its calls and results (the prompt
    /// is then rendered by `stencil-tools`, and [`Prepared::prompt`] is not used).
    pub tools: Option<ToolRequest>,
    /// The `speculation` extension field.
    pub speculation: SpeculationChoice,
    /// `chat_template_kwargs`: more variables for the chat template.
    pub template_kwargs: serde_json::Map<String, Value>,
}

/// What a request's `speculation` field asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SpeculationChoice {
    /// Not given: the server's default ([`crate::ServerConfig::speculation`]).
    #[default]
    ServerDefault,
    /// `none`.
    Off,
    /// `prompt-lookup`.
    PromptLookup,
    /// `draft-model`: needs a server with a draft model.
    DraftModel,
}

impl SpeculationChoice {
    /// The field's value, or a 400 naming it.
    ///
    /// ```
    /// use stencil_server::request::SpeculationChoice;
    /// assert_eq!(SpeculationChoice::parse(Some("none")).unwrap(), SpeculationChoice::Off);
    /// assert!(SpeculationChoice::parse(Some("medusa")).is_err());
    /// ```
    ///
    /// # Errors
    ///
    /// A 400 for a value other than `prompt-lookup`, `draft-model` and `none`.
    pub fn parse(field: Option<&str>) -> Result<Self, ApiError> {
        Ok(match field {
            None => SpeculationChoice::ServerDefault,
            Some("none") => SpeculationChoice::Off,
            Some("prompt-lookup") => SpeculationChoice::PromptLookup,
            Some("draft-model") => SpeculationChoice::DraftModel,
            Some(other) => {
                return Err(ApiError::invalid(
                    format!("`speculation` must be \"prompt-lookup\", \"draft-model\" or \"none\", got {other:?}"),
                    Some("speculation"),
                ))
            }
        })
    }

    /// The speculation to run: the server's `default` (with its settings when it is of the
    /// kind asked for), the method's defaults, or none.
    ///
    /// # Errors
    ///
    /// A 400 for `draft-model` on a server without a draft model (`has_draft` false).
    pub fn resolve(self, default: Option<&Speculation>, has_draft: bool) -> Result<Option<Speculation>, ApiError> {
        Ok(match (self, default) {
            (SpeculationChoice::ServerDefault, d) => d.cloned(),
            (SpeculationChoice::Off, _) => None,
            (SpeculationChoice::PromptLookup, Some(d @ Speculation::PromptLookup(_))) => Some(d.clone()),
            (SpeculationChoice::PromptLookup, _) => Some(Speculation::prompt_lookup()),
            (SpeculationChoice::DraftModel, _) if !has_draft => {
                return Err(unsupported(
                    "this server has no draft model (start it with --draft-model DRAFT.gguf)",
                    "speculation",
                ))
            }
            (SpeculationChoice::DraftModel, Some(d @ Speculation::DraftModel(_))) => Some(d.clone()),
            (SpeculationChoice::DraftModel, _) => Some(Speculation::draft_model()),
        })
    }
}

/// A chat request with tools, or with tool calls and results in its conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolRequest {
    /// The tools, `tool_choice`, `parallel_tool_calls`, the format and the reasoning
    /// budget: what the reply's grammar is compiled from.
    pub spec: ToolSpec,
    /// The conversation: assistant messages with their `tool_calls` (ids kept), `tool`
    /// messages with the call id they answer and the called tool's name.
    pub conversation: Vec<ChatMessage>,
}

/// Parses a request body: JSON, no unknown top-level field, every field of the right type;
/// the endpoint's own fields as `T`, and the [`SamplingFields`] both endpoints share.
///
/// # Errors
///
/// A 400 naming the field (`param`) and what is wrong with it.
pub fn parse_body<T: DeserializeOwned>(body: &[u8], fields: &[&str]) -> Result<(T, SamplingFields), ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("the request body is not valid JSON: {e}"), None))?;
    if !value.is_object() {
        return Err(ApiError::invalid("the request body must be a JSON object", None));
    }
    if let Some(field) = unknown_field(&value, fields) {
        return Err(ApiError::invalid(format!("unrecognized request argument supplied: {field}"), Some(field))
            .with_code("unknown_parameter"));
    }
    let sampling = typed(&value)?;
    Ok((typed(&value)?, sampling))
}

/// `value` as a `T`, or a 400 naming the first field that does not fit.
fn typed<T: DeserializeOwned>(value: &Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let param = (path != ".").then_some(path);
        let message = match &param {
            Some(p) => format!("invalid value for `{p}`: {}", e.inner()),
            None => format!("invalid request: {}", e.inner()),
        };
        ApiError::invalid(message, param.as_deref())
    })
}

/// Parses a `/v1/chat/completions` body.
///
/// # Errors
///
/// As [`parse_body`].
pub fn parse_chat(body: &[u8]) -> Result<ChatCompletionRequest, ApiError> {
    let (mut request, sampling): (ChatCompletionRequest, _) = parse_body(body, CHAT_FIELDS)?;
    request.sampling = sampling;
    Ok(request)
}

/// Parses a `/v1/completions` body.
///
/// # Errors
///
/// As [`parse_body`].
pub fn parse_completion(body: &[u8]) -> Result<CompletionRequest, ApiError> {
    let (mut request, sampling): (CompletionRequest, _) = parse_body(body, COMPLETION_FIELDS)?;
    request.sampling = sampling;
    Ok(request)
}

/// Checks a chat request and turns it into the engine's terms.
///
/// # Errors
///
/// A 400 for malformed messages, out-of-range fields, conflicting constraints, tools (not
/// supported yet), and alternatives per token (`top_logprobs` > 0).
pub fn prepare_chat(req: ChatCompletionRequest, limits: &Limits) -> Result<Prepared, ApiError> {
    let tools = match &req.tools {
        None => Value::Array(Vec::new()),
        Some(Value::Array(a)) => Value::Array(a.clone()),
        Some(_) => return Err(ApiError::invalid("`tools` must be an array of tools", Some("tools"))),
    };
    let has_tools = tools.as_array().is_some_and(|a| !a.is_empty());
    let choice = tool_choice(req.tool_choice.as_ref(), has_tools)?;
    if req.messages.is_empty() {
        return Err(ApiError::invalid("`messages` must hold at least one message", Some("messages")));
    }
    let mut turns = Vec::with_capacity(req.messages.len());
    // Tool call ids seen so far, with their tools' names.
    let mut call_names: Vec<(String, String)> = Vec::new();
    for (i, m) in req.messages.iter().enumerate() {
        let param = |field: &str| format!("messages[{i}].{field}");
        let role = match m.role.as_str() {
            "system" | "developer" => "system",
            "user" => "user",
            "assistant" => "assistant",
            "tool" => "tool",
            "function" => {
                return Err(unsupported(
                    &format!("messages[{i}]: `function` messages are deprecated; use `tool` messages"),
                    &param("role"),
                ))
            }
            other => {
                return Err(ApiError::invalid(
                    format!(
                        "messages[{i}]: unknown role `{other}` (expected system, developer, user, assistant or tool)"
                    ),
                    Some(&param("role")),
                )
                .with_code("invalid_message"))
            }
        };
        let content = match &m.content {
            Some(MessageContent::Text(t)) => t.clone(),
            Some(MessageContent::Parts(parts)) => {
                let mut text = String::new();
                for (j, part) in parts.iter().enumerate() {
                    match (part.kind.as_str(), &part.text) {
                        ("text", Some(t)) => text.push_str(t),
                        ("text", None) => {
                            return Err(ApiError::invalid(
                                format!("messages[{i}].content[{j}]: a text part needs `text`"),
                                Some(&format!("messages[{i}].content[{j}].text")),
                            ))
                        }
                        (kind, _) => {
                            return Err(ApiError::invalid(
                                format!("messages[{i}].content[{j}]: `{kind}` content is not supported (only text)"),
                                Some(&format!("messages[{i}].content[{j}].type")),
                            ))
                        }
                    }
                }
                text
            }
            None if role == "assistant" => String::new(),
            None => {
                return Err(ApiError::invalid(
                    format!("messages[{i}]: a `{}` message needs `content`", m.role),
                    Some(&param("content")),
                )
                .with_code("invalid_message"))
            }
        };
        if role == "tool" {
            let Some(id) = &m.tool_call_id else {
                return Err(ApiError::invalid(
                    format!("messages[{i}]: a `tool` message needs `tool_call_id`"),
                    Some(&param("tool_call_id")),
                )
                .with_code("invalid_message"));
            };
            let Some((_, name)) = call_names.iter().find(|(known, _)| known == id) else {
                return Err(ApiError::invalid(
                    format!("messages[{i}]: `tool_call_id` {id:?} answers no earlier assistant tool call"),
                    Some(&param("tool_call_id")),
                )
                .with_code("invalid_message"));
            };
            turns.push(ChatMessage::tool_result(id.clone(), name.clone(), content));
            continue;
        }
        let mut message = ChatMessage::new(role, content);
        message.reasoning_content = m.reasoning_content.clone().filter(|_| role == "assistant");
        match (&m.tool_calls, role) {
            (None, _) => {}
            (Some(calls), "assistant") => message.tool_calls = assistant_calls(calls, i, &mut call_names)?,
            (Some(_), _) => {
                return Err(ApiError::invalid(
                    format!("messages[{i}]: only assistant messages have `tool_calls`"),
                    Some(&param("tool_calls")),
                )
                .with_code("invalid_message"))
            }
        }
        turns.push(message);
    }
    let tool_turns = turns.iter().any(|m| !m.tool_calls.is_empty() || m.role == "tool");
    if let Some(name) = &req.tool_format {
        name.parse::<ToolFormat>().map_err(|e| ApiError::invalid(e.to_string(), Some("tool_format")))?;
    }
    let reasoning = match req.reasoning.as_deref() {
        None => None,
        Some("off") => Some(ReasoningMode::Off),
        Some("optional") => Some(ReasoningMode::Optional),
        Some("required") => Some(ReasoningMode::Required),
        Some(other) => {
            return Err(ApiError::invalid(
                format!("unknown reasoning {other:?} (expected off, optional or required)"),
                Some("reasoning"),
            ))
        }
    };
    // Reasoning without tools: a reply in the tool format's markers, without calls.
    let reasons =
        matches!(reasoning, Some(ReasoningMode::Optional | ReasoningMode::Required)) || req.reasoning_budget.is_some();
    let tool_request = (has_tools || tool_turns || reasons).then(|| ToolRequest {
        spec: ToolSpec {
            tools,
            choice,
            parallel: req.parallel_tool_calls.unwrap_or(true),
            format: req.tool_format.clone(),
            reasoning,
            reasoning_budget: req.reasoning_budget,
        },
        conversation: turns.clone(),
    });
    let plain = turns;
    let logprobs = req.logprobs.unwrap_or(false);
    let top_logprobs = alternatives(req.top_logprobs, "top_logprobs")?.unwrap_or(0);
    if top_logprobs > 0 && !logprobs {
        return Err(ApiError::invalid("`top_logprobs` needs `logprobs: true`", Some("top_logprobs")));
    }
    let max_tokens = req.max_completion_tokens.or(req.sampling.max_tokens);
    let param = if req.max_completion_tokens.is_some() { "max_completion_tokens" } else { "max_tokens" };
    let mut prepared =
        prepare(Prompt::Chat(plain), &req.sampling, req.response_format.as_ref(), max_tokens, param, logprobs, limits)?;
    prepared.top_logprobs = top_logprobs;
    if let Some(t) = &tool_request {
        if t.spec.choice != ToolChoice::None && has_tools && prepared.constraint != ConstraintSpec::None {
            return Err(ApiError::invalid(
                format!("{} cannot be combined with tools (unless tool_choice is none)", prepared.constraint.param()),
                Some(prepared.constraint.param()),
            ));
        }
    }
    prepared.tools = tool_request;
    prepared.template_kwargs = req.chat_template_kwargs.unwrap_or_default();
    Ok(prepared)
}

/// `tool_choice`: `none`, `auto`, `required` or `{"type": "function", "function": {"name"}}`.
fn tool_choice(value: Option<&Value>, has_tools: bool) -> Result<ToolChoice, ApiError> {
    let bad = |message: String| ApiError::invalid(message, Some("tool_choice"));
    let choice = match value {
        None => ToolChoice::Auto,
        Some(Value::String(s)) => match s.as_str() {
            "none" => ToolChoice::None,
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            other => {
                return Err(bad(format!("unknown tool_choice {other:?} (expected none, auto, required or a function)")))
            }
        },
        Some(v @ Value::Object(o)) => {
            let name = o
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .filter(|_| o.get("type").and_then(Value::as_str) == Some("function"));
            match name {
                Some(n) => ToolChoice::Named(n.to_string()),
                None => {
                    return Err(bad(format!(
                        "tool_choice {v} is not {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}"
                    )))
                }
            }
        }
        Some(v) => return Err(bad(format!("tool_choice must be a string or an object, got {v}"))),
    };
    if !has_tools && matches!(choice, ToolChoice::Required | ToolChoice::Named(_)) {
        return Err(bad(format!("tool_choice {choice} needs `tools`")));
    }
    Ok(choice)
}

/// An assistant message's `tool_calls`, their ids recorded in `names` (a call without an
/// id gets a new one).
fn assistant_calls(calls: &Value, i: usize, names: &mut Vec<(String, String)>) -> Result<Vec<ChatToolCall>, ApiError> {
    let param = |j: usize, field: &str| format!("messages[{i}].tool_calls[{j}]{field}");
    let Some(items) = calls.as_array() else {
        return Err(ApiError::invalid(format!("messages[{i}].tool_calls must be an array"), Some(&param(0, ""))));
    };
    let mut out = Vec::with_capacity(items.len());
    for (j, call) in items.iter().enumerate() {
        let function = call.get("function");
        let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
        let arguments = function.and_then(|f| f.get("arguments"));
        let (Some(name), Some(arguments)) = (name, arguments) else {
            return Err(ApiError::invalid(
                format!("messages[{i}].tool_calls[{j}] needs `function.name` and `function.arguments`"),
                Some(&param(j, ".function")),
            ));
        };
        let arguments = match arguments {
            Value::String(text) => serde_json::from_str(text).map_err(|e| {
                ApiError::invalid(
                    format!("messages[{i}].tool_calls[{j}].function.arguments is not JSON: {e}"),
                    Some(&param(j, ".function.arguments")),
                )
            })?,
            other => other.clone(),
        };
        let id = call.get("id").and_then(Value::as_str).map_or_else(ToolFormat::new_call_id, str::to_string);
        names.push((id.clone(), name.to_string()));
        out.push(ChatToolCall::new(id, name, arguments));
    }
    Ok(out)
}

/// Checks a completion request and turns it into the engine's terms.
///
/// # Errors
///
/// As [`prepare_chat`]; also `echo`, `suffix`, `best_of` > 1, several prompts and
/// `logprobs` above [`MAX_TOP_LOGPROBS`].
pub fn prepare_completion(req: CompletionRequest, limits: &Limits) -> Result<Prepared, ApiError> {
    let prompt = match req.prompt {
        PromptField::One(p) => p,
        PromptField::Many(mut v) if v.len() == 1 => v.remove(0),
        PromptField::Many(_) => return Err(unsupported("only one prompt per request is supported", "prompt")),
    };
    if prompt.is_empty() {
        return Err(ApiError::invalid("`prompt` is empty", Some("prompt")));
    }
    if req.echo == Some(true) {
        return Err(unsupported("echo is not supported", "echo"));
    }
    if req.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(unsupported("suffix is not supported", "suffix"));
    }
    if req.best_of.is_some_and(|b| b > 1) {
        return Err(unsupported("best_of is not supported (use n)", "best_of"));
    }
    let top_logprobs = alternatives(req.logprobs, "logprobs")?;
    let max_tokens = req.sampling.max_tokens;
    let mut prepared = prepare(
        Prompt::Text(prompt),
        &req.sampling,
        req.response_format.as_ref(),
        max_tokens,
        "max_tokens",
        top_logprobs.is_some(),
        limits,
    )?;
    prepared.top_logprobs = top_logprobs.unwrap_or(0);
    Ok(prepared)
}

/// The most alternatives per token a request may ask for (`top_logprobs`, or the legacy
/// `logprobs`), as OpenAI's API allows.
pub const MAX_TOP_LOGPROBS: usize = 20;

/// The alternatives per token a request asks for in `param`, at most [`MAX_TOP_LOGPROBS`].
fn alternatives(k: Option<u32>, param: &str) -> Result<Option<usize>, ApiError> {
    match k {
        Some(k) if k as usize > MAX_TOP_LOGPROBS => {
            Err(ApiError::invalid(format!("`{param}` must be at most {MAX_TOP_LOGPROBS}, got {k}"), Some(param)))
        }
        k => Ok(k.map(|k| k as usize)),
    }
}

fn prepare(
    prompt: Prompt,
    s: &SamplingFields,
    response_format: Option<&ResponseFormat>,
    max_tokens: Option<u32>,
    max_tokens_param: &str,
    logprobs: bool,
    limits: &Limits,
) -> Result<Prepared, ApiError> {
    let n = s.n.unwrap_or(1) as usize;
    if n == 0 || n > limits.max_n {
        return Err(ApiError::invalid(
            format!("`n` must be between 1 and {} (the server's --parallel), got {n}", limits.max_n),
            Some("n"),
        ));
    }
    if let Some(m) = max_tokens {
        if m == 0 || m > limits.max_tokens {
            return Err(ApiError::invalid(
                format!("`{max_tokens_param}` must be between 1 and {}, got {m}", limits.max_tokens),
                Some(max_tokens_param),
            ));
        }
    }
    let stream = s.stream.unwrap_or(false);
    if s.stream_options.is_some() && !stream {
        return Err(ApiError::invalid("`stream_options` is only allowed with `stream: true`", Some("stream_options")));
    }
    let include_usage = s.stream_options.as_ref().and_then(|o| o.include_usage).unwrap_or(false);
    let speculation = SpeculationChoice::parse(s.speculation.as_deref())?;

    let mut params = match &s.preset {
        Some(name) => {
            Presets::builtin().get(name).map_err(|e| ApiError::invalid(e.to_string(), Some("preset")))?.clone()
        }
        None => SamplingParams::default(),
    };
    if params.contrastive().is_some() {
        // Its sessions would need hidden states for every request; not served yet.
        return Err(ApiError::invalid(
            "contrastive search is not served; use `stencil generate --penalty-alpha` or another preset",
            Some("preset"),
        ));
    }
    macro_rules! set {
        ($($field:ident),*) => { $( if let Some(v) = s.$field { params.$field = v; } )* };
    }
    set!(temperature, top_p, top_k, min_p, presence_penalty, frequency_penalty, repetition_penalty);
    if s.seed.is_some() {
        params.seed = s.seed;
    }
    if let Some(m) = max_tokens {
        params.max_tokens = m;
    }
    if let Some(stop) = &s.stop {
        let stop = stop.clone().into_vec();
        if stop.len() > 4 {
            return Err(ApiError::invalid(format!("`stop` holds at most 4 strings, got {}", stop.len()), Some("stop")));
        }
        params.stop = stop;
    }
    if let Some(bias) = &s.logit_bias {
        for (id, &b) in bias {
            let token = id.trim().parse::<u32>().map_err(|_| {
                ApiError::invalid(format!("`logit_bias` keys are token ids, got {id:?}"), Some("logit_bias"))
            })?;
            if !(-100.0..=100.0).contains(&b) {
                return Err(ApiError::invalid(
                    format!("`logit_bias` values must be between -100 and 100, got {b} for token {token}"),
                    Some("logit_bias"),
                ));
            }
            params.logit_bias.insert(token, b);
        }
    }
    params.validate().map_err(|e| match &e {
        SamplingError::InvalidParam { field, .. } => {
            let field = if field.starts_with("stop[") { "stop" } else { field.split('[').next().unwrap_or(field) };
            ApiError::invalid(e.to_string(), Some(field))
        }
        _ => ApiError::invalid(e.to_string(), None),
    })?;

    let mut constraints = Vec::new();
    match response_format {
        None | Some(ResponseFormat::Text) => {}
        Some(ResponseFormat::JsonObject) => constraints.push(ConstraintSpec::JsonObject),
        Some(ResponseFormat::JsonSchema { json_schema }) => constraints.push(ConstraintSpec::Schema {
            schema: json_schema.schema.clone().unwrap_or_else(|| Value::Object(Default::default())),
            strict: json_schema.strict.unwrap_or(false),
        }),
        Some(ResponseFormat::StructuralTag { format, structures, triggers }) => {
            let mut tag = serde_json::Map::new();
            tag.insert("type".into(), "structural_tag".into());
            for (key, value) in [("format", format), ("structures", structures), ("triggers", triggers)] {
                if let Some(v) = value {
                    tag.insert(key.into(), v.clone());
                }
            }
            constraints.push(ConstraintSpec::StructuralTag(Value::Object(tag)));
        }
    }
    if let Some(g) = &s.grammar {
        constraints.push(ConstraintSpec::Gbnf(g.clone()));
    }
    if let Some(r) = &s.regex {
        constraints.push(ConstraintSpec::Regex(r.clone()));
    }
    if constraints.len() > 1 {
        let names: Vec<&str> = constraints.iter().map(ConstraintSpec::param).collect();
        return Err(ApiError::invalid(
            format!(
                "give at most one constraint: response_format (json_object, json_schema or structural_tag), grammar or regex; got {}",
                names.join(", ")
            ),
            Some(names[1]),
        ));
    }
    Ok(Prepared {
        prompt,
        params,
        max_tokens,
        preset: s.preset.clone(),
        constraint: constraints.pop().unwrap_or(ConstraintSpec::None),
        n,
        stream,
        include_usage,
        logprobs,
        top_logprobs: 0,
        tools: None,
        speculation,
        template_kwargs: serde_json::Map::new(),
    })
}

fn unsupported(message: &str, param: &str) -> ApiError {
    ApiError::invalid(message, Some(param)).with_code("unsupported_parameter")
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits { max_n: 4, max_tokens: 1000 };

    fn chat(body: Value) -> Result<Prepared, ApiError> {
        prepare_chat(parse_chat(body.to_string().as_bytes())?, &LIMITS)
    }

    fn err(body: Value) -> ApiError {
        chat(body).expect_err("an error")
    }

    fn user(text: &str) -> Value {
        serde_json::json!([{"role": "user", "content": text}])
    }

    #[test]
    fn a_plain_request_maps_to_the_engine() {
        let p = chat(serde_json::json!({
            "model": "x", "messages": [{"role": "developer", "content": "Be brief."},
                                        {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            "temperature": 0, "seed": 7, "max_completion_tokens": 12, "stop": "\n", "n": 2,
            "logit_bias": {"42": -100}, "top_k": 5, "repetition_penalty": 1.1,
            "stream": true, "stream_options": {"include_usage": true}, "user": "ignored"
        }))
        .unwrap();
        assert_eq!(p.prompt, Prompt::Chat(vec![ChatMessage::system("Be brief."), ChatMessage::user("Hi")]));
        assert_eq!((p.params.temperature, p.params.seed, p.params.max_tokens), (0.0, Some(7), 12));
        assert_eq!(p.params.stop, ["\n"]);
        assert_eq!(p.params.logit_bias.get(&42), Some(&-100.0));
        assert_eq!((p.params.top_k, p.params.repetition_penalty), (5, 1.1));
        assert_eq!((p.n, p.stream, p.include_usage, p.logprobs), (2, true, true, false));
        assert_eq!(p.constraint, ConstraintSpec::None);
    }

    #[test]
    fn response_formats() {
        let p = chat(serde_json::json!({"messages": user("x"), "response_format": {"type": "json_object"}})).unwrap();
        assert_eq!(p.constraint, ConstraintSpec::JsonObject);
        let p = chat(serde_json::json!({"messages": user("x"), "response_format":
            {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "integer"}, "strict": true}}}))
        .unwrap();
        assert_eq!(
            p.constraint,
            ConstraintSpec::Schema { schema: serde_json::json!({"type": "integer"}), strict: true }
        );
        let p = chat(serde_json::json!({"messages": user("x"), "response_format": {"type": "text"}, "regex": "a+"}))
            .unwrap();
        assert_eq!(p.constraint, ConstraintSpec::Regex("a+".into()));
        let p = chat(serde_json::json!({"messages": user("x"), "grammar": "root ::= \"a\""})).unwrap();
        assert_eq!(p.constraint, ConstraintSpec::Gbnf("root ::= \"a\"".into()));
        let e = err(serde_json::json!({"messages": user("x"), "grammar": "root ::= \"a\"", "regex": "a"}));
        assert_eq!(e.param.as_deref(), Some("regex"));
        let e = err(serde_json::json!({"messages": user("x"), "response_format": {"type": "xml"}}));
        assert_eq!(e.param.as_deref(), Some("response_format.type"));
        assert!(e.message.contains("xml"), "{}", e.message);
    }

    #[test]
    fn bad_inputs_name_the_field() {
        let cases = [
            (serde_json::json!({"messages": user("x"), "max_token": 3}), "max_token"),
            (serde_json::json!({"messages": user("x"), "temperature": "hot"}), "temperature"),
            (serde_json::json!({"messages": user("x"), "temperature": -1}), "temperature"),
            (serde_json::json!({"messages": user("x"), "top_p": 0}), "top_p"),
            (serde_json::json!({"messages": user("x"), "n": 9}), "n"),
            (serde_json::json!({"messages": user("x"), "n": 0}), "n"),
            (serde_json::json!({"messages": user("x"), "max_tokens": 0}), "max_tokens"),
            (serde_json::json!({"messages": user("x"), "max_completion_tokens": 5000}), "max_completion_tokens"),
            (serde_json::json!({"messages": user("x"), "stop": ["a", "b", "c", "d", "e"]}), "stop"),
            (serde_json::json!({"messages": user("x"), "stop": [""]}), "stop"),
            (serde_json::json!({"messages": user("x"), "logit_bias": {"x": 1}}), "logit_bias"),
            (serde_json::json!({"messages": user("x"), "logit_bias": {"3": 500}}), "logit_bias"),
            (serde_json::json!({"messages": user("x"), "preset": "nope"}), "preset"),
            (serde_json::json!({"messages": user("x"), "stream_options": {"include_usage": true}}), "stream_options"),
            (serde_json::json!({"messages": user("x"), "top_logprobs": 3}), "top_logprobs"),
            (serde_json::json!({"messages": user("x"), "logprobs": true, "top_logprobs": 21}), "top_logprobs"),
            (serde_json::json!({"messages": user("x"), "tools": {"type": "function"}}), "tools"),
            (serde_json::json!({"messages": user("x"), "tool_choice": "required"}), "tool_choice"),
            (serde_json::json!({"messages": user("x"), "tool_choice": {"type": "function"}}), "tool_choice"),
            (serde_json::json!({"messages": user("x"), "tools": [{}], "tool_choice": "sometimes"}), "tool_choice"),
            (
                serde_json::json!({"messages": user("x"), "tools": [{}], "response_format": {"type": "json_object"}}),
                "response_format",
            ),
            (serde_json::json!({"messages": []}), "messages"),
            (serde_json::json!({"messages": [{"role": "wizard", "content": "x"}]}), "messages[0].role"),
            (serde_json::json!({"messages": [{"role": "user"}]}), "messages[0].content"),
            (serde_json::json!({"messages": [{"role": "user", "content": 5}]}), "messages[0].content"),
            (
                serde_json::json!({"messages": [{"role": "tool", "content": "x", "tool_call_id": "a"}]}),
                "messages[0].tool_call_id",
            ),
            (serde_json::json!({"messages": [{"role": "tool", "content": "x"}]}), "messages[0].tool_call_id"),
            (
                serde_json::json!({"messages": [{"role": "assistant", "tool_calls": [{"id": "a",
                    "function": {"name": "f", "arguments": "{"}}]}]}),
                "messages[0].tool_calls[0].function.arguments",
            ),
            (
                serde_json::json!({"messages": [{"role": "user", "content": "x", "tool_calls": []}]}),
                "messages[0].tool_calls",
            ),
            (
                serde_json::json!({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}),
                "messages[0].content[0].type",
            ),
        ];
        for (body, param) in cases {
            let e = err(body.clone());
            assert_eq!(e.status.as_u16(), 400, "{body}");
            assert_eq!(e.param.as_deref(), Some(param), "{body}: {}", e.message);
            assert!(!e.message.is_empty());
        }
        let e = parse_chat(b"{\"messages\": [").unwrap_err();
        assert!(e.message.contains("not valid JSON"), "{}", e.message);
        assert!(parse_chat(b"[1]").unwrap_err().message.contains("object"));
        let e = parse_chat(b"{}").unwrap_err();
        assert!(e.message.contains("messages"), "{}", e.message);
    }

    #[test]
    fn completions() {
        let limits = LIMITS;
        let parse = |v: Value| prepare_completion(parse_completion(v.to_string().as_bytes())?, &limits);
        let p = parse(serde_json::json!({"prompt": ["Once"], "max_tokens": 4, "logprobs": 0})).unwrap();
        assert_eq!((p.prompt, p.params.max_tokens, p.logprobs), (Prompt::Text("Once".into()), 4, true));
        let p = parse(serde_json::json!({"prompt": "Once", "logprobs": 3})).unwrap();
        assert_eq!((p.logprobs, p.top_logprobs), (true, 3));
        for (body, param) in [
            (serde_json::json!({"prompt": ["a", "b"]}), "prompt"),
            (serde_json::json!({"prompt": "a", "echo": true}), "echo"),
            (serde_json::json!({"prompt": "a", "logprobs": 21}), "logprobs"),
            (serde_json::json!({"prompt": "a", "messages": []}), "messages"),
            (serde_json::json!({"prompt": ""}), "prompt"),
        ] {
            assert_eq!(parse(body.clone()).unwrap_err().param.as_deref(), Some(param), "{body}");
        }
    }

    #[test]
    fn tool_conversations() {
        let p = chat(serde_json::json!({
            "messages": [
                {"role": "user", "content": "Weather in Oslo?"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp_c\": 3}"},
            ],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "parallel_tool_calls": false,
        }))
        .unwrap();
        let t = p.tools.unwrap();
        assert_eq!((t.spec.choice, t.spec.parallel), (ToolChoice::Named("get_weather".into()), false));
        assert_eq!(
            t.conversation,
            [
                ChatMessage::user("Weather in Oslo?"),
                ChatMessage::assistant_calls(
                    "",
                    vec![ChatToolCall::new("call_1", "get_weather", serde_json::json!({"city": "Oslo"}))]
                ),
                ChatMessage::tool_result("call_1", "get_weather", "{\"temp_c\": 3}"),
            ]
        );
        let p = chat(serde_json::json!({"messages": user("x"), "tools": []})).unwrap();
        assert!(p.tools.is_none());
    }

    #[test]
    fn speculation_is_the_servers_unless_the_request_chooses() {
        let lookup =
            Speculation::PromptLookup(stencil_runtime::speculate::PromptLookup { max_draft: 3, ..Default::default() });
        let draft = Speculation::DraftModel(stencil_runtime::speculate::DraftModel { max_draft: 2 });
        let choice = |field: Value| chat(serde_json::json!({"messages": user("x"), "speculation": field}));
        let p = chat(serde_json::json!({"messages": user("x")})).unwrap();
        assert_eq!(p.speculation, SpeculationChoice::ServerDefault);
        assert_eq!(p.speculation.resolve(Some(&lookup), false).unwrap(), Some(lookup.clone()));
        assert_eq!(p.speculation.resolve(None, true).unwrap(), None);
        let off = choice("none".into()).unwrap().speculation;
        assert_eq!(off.resolve(Some(&lookup), false).unwrap(), None);
        let asked = choice("prompt-lookup".into()).unwrap().speculation;
        assert_eq!(asked.resolve(Some(&lookup), false).unwrap(), Some(lookup.clone()), "the server's settings");
        assert_eq!(asked.resolve(Some(&draft), true).unwrap(), Some(Speculation::prompt_lookup()));
        let asked = choice("draft-model".into()).unwrap().speculation;
        assert_eq!(asked.resolve(Some(&draft), true).unwrap(), Some(draft));
        assert_eq!(asked.resolve(None, true).unwrap(), Some(Speculation::draft_model()));
        let e = asked.resolve(Some(&lookup), false).unwrap_err();
        assert_eq!((e.param.as_deref(), e.code.as_deref()), (Some("speculation"), Some("unsupported_parameter")));
        assert!(e.message.contains("--draft-model"), "{}", e.message);
        for bad in [serde_json::json!("ngram"), serde_json::json!(true)] {
            let e = choice(bad).unwrap_err();
            assert_eq!(e.param.as_deref(), Some("speculation"), "{}", e.message);
        }
    }

    #[test]
    fn presets_then_fields() {
        let p = chat(serde_json::json!({"messages": user("x"), "preset": "chat-nucleus", "top_p": 0.5})).unwrap();
        assert_eq!((p.params.temperature, p.params.top_p, p.preset.as_deref()), (0.7, 0.5, Some("chat-nucleus")));
        let p = chat(serde_json::json!({"messages": user("x")})).unwrap();
        assert_eq!((p.params.temperature, p.max_tokens), (1.0, None));
        let err = chat(serde_json::json!({"messages": user("x"), "preset": "contrastive"})).unwrap_err();
        assert!(err.to_string().contains("contrastive search is not served"), "{err}");
    }
}
