//! The wire types: requests and responses of the OpenAI API, as far as the server speaks it,
//! plus Stencil's extension fields (`grammar`, `regex`, `preset`, `repetition_penalty`,
//! `top_k`, `min_p`, `speculation`, `tool_format`, `reasoning_budget`).
//!
//! Requests refuse unknown fields (a misspelt `max_token` is a 400 naming it, not a silently
//! ignored setting: [`unknown_field`], since the two structs read from one object,
//! [`SamplingFields`] and the endpoint's own, cannot deny each other's fields); the fields OpenAI defines that change nothing
//! here (`user`, `store`, `metadata`, `service_tier`) are accepted and ignored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /v1/chat/completions`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ChatCompletionRequest {
    /// Any name: the server runs one model and answers with its id.
    #[serde(default)]
    pub model: Option<String>,
    /// The conversation.
    pub messages: Vec<RequestMessage>,
    /// The sampling fields shared with `/v1/completions` (read from the same object, see
    /// [`crate::request::parse_chat`]).
    #[serde(skip)]
    pub sampling: SamplingFields,
    /// Log-probabilities of the output tokens.
    #[serde(default)]
    pub logprobs: Option<bool>,
    /// Alternatives per token (not supported: only 0).
    #[serde(default)]
    pub top_logprobs: Option<u32>,
    /// `max_tokens`' newer name (wins when both are given).
    #[serde(default)]
    pub max_completion_tokens: Option<u32>,
    /// `text`, `json_object`, `json_schema` or `structural_tag`.
    #[serde(default)]
    pub response_format: Option<ResponseFormat>,
    /// The tools the model may call (OpenAI's function tools).
    #[serde(default)]
    pub tools: Option<Value>,
    /// `none`, `auto` (default), `required`, or `{"type": "function", "function": {"name"}}`.
    #[serde(default)]
    pub tool_choice: Option<Value>,
    /// Several calls in one reply (default true); false: one call, by the grammar.
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
    /// Stencil: the tool-call format of the reply (`hermes`, `qwen3-coder`, `llama3`,
    /// `mistral`, `harmony`, …: `stencil_tools::format::FORMAT_NAMES`); default the
    /// server's `--tool-format`, else the one recognized from the chat template, else the
    /// envelope.
    #[serde(default)]
    pub tool_format: Option<String>,
    /// Variables for the chat template (`enable_thinking`, `reasoning_effort`, …), as vLLM
    /// and SGLang take them.
    #[serde(default)]
    pub chat_template_kwargs: Option<serde_json::Map<String, Value>>,
    /// Stencil: reasoning before the reply, in the tool format's markers (`<think>`, …):
    /// `off`, `optional` or `required`; `response_format` and tools apply after it, and it
    /// comes back as `reasoning_content`. Default: with tools, as the chat template and
    /// the rendered prompt say (`<think>` opened by the prompt, closed, or mentioned by the
    /// template); without tools, none.
    #[serde(default)]
    pub reasoning: Option<String>,
    /// Stencil: the most tokens the reasoning may take (default the server's
    /// `--reasoning-budget`); the grammar then closes it. Without tools, asks for
    /// reasoning (optional unless `reasoning` says).
    #[serde(default)]
    pub reasoning_budget: Option<u32>,
}

/// `POST /v1/completions` (the legacy text completion).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CompletionRequest {
    /// Any name.
    #[serde(default)]
    pub model: Option<String>,
    /// The prompt: a string, or an array of one string.
    pub prompt: PromptField,
    /// The sampling fields shared with `/v1/chat/completions` (read from the same object).
    #[serde(skip)]
    pub sampling: SamplingFields,
    /// Log-probabilities: the legacy API's count of alternatives; only 0 is supported (the
    /// sampled tokens' log-probabilities, no alternatives).
    #[serde(default)]
    pub logprobs: Option<u32>,
    /// Echo the prompt (only false).
    #[serde(default)]
    pub echo: Option<bool>,
    /// Text after the completion (not supported).
    #[serde(default)]
    pub suffix: Option<String>,
    /// Server-side best-of (not supported; only 1).
    #[serde(default)]
    pub best_of: Option<u32>,
    /// An extension: constrain the completion as for chat.
    #[serde(default)]
    pub response_format: Option<ResponseFormat>,
}

/// The fields both endpoints share: sampling, stopping, streaming, and Stencil's
/// constraints.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct SamplingFields {
    /// Softmax temperature (0: greedy). Default 1.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// Nucleus sampling. Default 1 (off).
    #[serde(default)]
    pub top_p: Option<f32>,
    /// Extension: keep the K most likely tokens (0: off).
    #[serde(default)]
    pub top_k: Option<u32>,
    /// Extension: drop tokens below P times the most likely one's probability.
    #[serde(default)]
    pub min_p: Option<f32>,
    /// The seed; sample `i` of `n` uses `seed + i`.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Stop strings (a string or up to 4 strings).
    #[serde(default)]
    pub stop: Option<StopField>,
    /// The most tokens to generate.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// OpenAI's presence penalty.
    #[serde(default)]
    pub presence_penalty: Option<f32>,
    /// OpenAI's frequency penalty.
    #[serde(default)]
    pub frequency_penalty: Option<f32>,
    /// Extension: the multiplicative repetition penalty (1: off).
    #[serde(default)]
    pub repetition_penalty: Option<f32>,
    /// Token id (as a string) → bias added to its logit.
    #[serde(default)]
    pub logit_bias: Option<BTreeMap<String, f32>>,
    /// Completions to generate (decoded together).
    #[serde(default)]
    pub n: Option<u32>,
    /// Server-sent events instead of one JSON response.
    #[serde(default)]
    pub stream: Option<bool>,
    /// `{"include_usage": true}`: a last chunk with the token counts.
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// Extension: a named sampling preset (`extractor-greedy`, `chat-nucleus`, `creative`;
    /// not `contrastive`, which is not served); the fields given override it.
    #[serde(default)]
    pub preset: Option<String>,
    /// Extension: a GBNF grammar the output must follow (start rule `root`).
    #[serde(default)]
    pub grammar: Option<String>,
    /// Extension: a regular expression the whole output must match.
    #[serde(default)]
    pub regex: Option<String>,
    /// Extension: speculative decoding, `prompt-lookup`, `draft-model` (when the server
    /// runs one) or `none`; default: the server's `--speculate` / `--draft-model`.
    #[serde(default)]
    pub speculation: Option<String>,
    /// Ignored (OpenAI's end-user id).
    #[serde(default)]
    pub user: Option<Value>,
    /// Ignored.
    #[serde(default)]
    pub store: Option<Value>,
    /// Ignored.
    #[serde(default)]
    pub metadata: Option<Value>,
    /// Ignored.
    #[serde(default)]
    pub service_tier: Option<Value>,
}

/// `stop`: one string or several.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum StopField {
    /// One stop string.
    One(String),
    /// Several.
    Many(Vec<String>),
}

impl StopField {
    /// The strings.
    pub fn into_vec(self) -> Vec<String> {
        match self {
            StopField::One(s) => vec![s],
            StopField::Many(v) => v,
        }
    }
}

/// `prompt` of `/v1/completions`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum PromptField {
    /// One prompt.
    One(String),
    /// Several prompts (only one is supported).
    Many(Vec<String>),
}

impl Default for PromptField {
    fn default() -> Self {
        PromptField::One(String::new())
    }
}

/// `stream_options`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StreamOptions {
    /// Send a last chunk with `usage` (and empty `choices`) before `[DONE]`.
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// `response_format`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ResponseFormat {
    /// Free text.
    Text,
    /// Any JSON object.
    JsonObject,
    /// JSON valid against a schema.
    JsonSchema {
        /// The schema and how to apply it.
        json_schema: JsonSchemaFormat,
    },
    /// A structural tag (`STRUCTURAL_TAGS.md`) as vLLM and SGLang take it: its `format`, or
    /// the legacy `structures` and `triggers`; checked by its own compiler.
    StructuralTag {
        /// The format (XGrammar 0.2's structural tag).
        #[serde(default)]
        format: Option<Value>,
        /// The legacy form's structures (`begin`, `schema`, `end`).
        #[serde(default)]
        structures: Option<Value>,
        /// The legacy form's triggers.
        #[serde(default)]
        triggers: Option<Value>,
    },
}

/// `response_format.json_schema`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JsonSchemaFormat {
    /// The schema's name (for people; not used).
    pub name: String,
    /// What the schema is for (not used).
    #[serde(default)]
    pub description: Option<String>,
    /// The JSON Schema (default: `{}`, any JSON value).
    #[serde(default)]
    pub schema: Option<Value>,
    /// True: refuse a schema with a keyword the mask cannot enforce. False (OpenAI's
    /// default): compile leniently and validate the output after the fact.
    #[serde(default)]
    pub strict: Option<bool>,
}

/// One message of the conversation.
#[derive(Clone, Debug, Deserialize)]
pub struct RequestMessage {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    /// A string, or an array of `{"type": "text", "text": ...}` parts.
    #[serde(default)]
    pub content: Option<MessageContent>,
    /// The participant's name (ignored).
    #[serde(default)]
    pub name: Option<String>,
    /// Calls an assistant made.
    #[serde(default)]
    pub tool_calls: Option<Value>,
    /// The call a `tool` message answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// An earlier assistant message's reasoning (for templates that render it).
    #[serde(default)]
    pub reasoning_content: Option<String>,
}

/// A message's `content`.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Content parts.
    Parts(Vec<ContentPart>),
}

/// One content part.
#[derive(Clone, Debug, Deserialize)]
pub struct ContentPart {
    /// `text` (others, such as `image_url`, are refused).
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default)]
    pub text: Option<String>,
}

/// Token counts.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Usage {
    /// Tokens of the prompt (once, however many completions).
    pub prompt_tokens: usize,
    /// Tokens generated, over all completions.
    pub completion_tokens: usize,
    /// The sum.
    pub total_tokens: usize,
    /// With speculative decoding: how its drafts fared (absent without).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

/// `usage.completion_tokens_details`: speculative drafts, in the fields OpenAI reports for
/// its predicted outputs. Drafts are checked in the same forward pass as the sampled
/// token; the rejected ones are not part of `completion_tokens`.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct CompletionTokensDetails {
    /// Draft tokens accepted: part of the completion.
    pub accepted_prediction_tokens: usize,
    /// Draft tokens rejected at verification.
    pub rejected_prediction_tokens: usize,
}

/// A chat completion (`object: "chat.completion"`).
#[derive(Clone, Debug, Serialize)]
pub struct ChatCompletion {
    /// `chatcmpl-...`.
    pub id: String,
    /// `chat.completion`.
    pub object: &'static str,
    /// Unix seconds.
    pub created: u64,
    /// The model's id.
    pub model: String,
    /// One per completion.
    pub choices: Vec<ChatChoice>,
    /// Token counts.
    pub usage: Usage,
    /// Build and model, for reproducibility.
    pub system_fingerprint: String,
}

/// One chat completion choice.
#[derive(Clone, Debug, Serialize)]
pub struct ChatChoice {
    /// Its index in `choices`.
    pub index: usize,
    /// The reply.
    pub message: ResponseMessage,
    /// Token log-probabilities, when asked for.
    pub logprobs: Option<ChoiceLogprobs>,
    /// `stop`, `length` or `tool_calls`.
    pub finish_reason: &'static str,
    /// Extension: where the output fails its schema (only with `strict: false`, for keywords
    /// the mask leaves to validation); absent when valid.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub validation_errors: Vec<String>,
}

/// The assistant's message.
#[derive(Clone, Debug, Serialize)]
pub struct ResponseMessage {
    /// `assistant`.
    pub role: &'static str,
    /// The text (null when a reply with tools has only calls).
    pub content: Option<String>,
    /// The reasoning, apart from the content (a reply with tools whose format reasons).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Always null.
    pub refusal: Option<String>,
    /// The tool calls, when the reply has calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCallOut>>,
}

/// One tool call of a reply.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ToolCallOut {
    /// The call's id (9 letters and digits, as Mistral's templates want), for the `tool`
    /// message that answers it.
    pub id: String,
    /// `function`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The function and its arguments.
    pub function: FunctionCall,
}

/// A called function.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FunctionCall {
    /// The tool's name.
    pub name: String,
    /// The arguments, as a JSON string.
    pub arguments: String,
}

/// A piece of a tool call in a streamed delta: the first piece of a call has its id, type
/// and name; the next ones more of its arguments.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ToolCallDelta {
    /// The call's position in the reply.
    pub index: usize,
    /// Its id (first piece only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `function` (first piece only).
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    /// The function's name (first piece only) and more of its arguments' JSON text.
    pub function: FunctionDelta,
}

/// `function` of a [`ToolCallDelta`].
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FunctionDelta {
    /// The tool's name (first piece only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// More of the arguments' JSON text.
    pub arguments: String,
}

impl ToolCallDelta {
    /// The first piece of call `index`.
    pub fn start(index: usize, id: String, name: String) -> Self {
        ToolCallDelta {
            index,
            id: Some(id),
            kind: Some("function"),
            function: FunctionDelta { name: Some(name), arguments: String::new() },
        }
    }

    /// More arguments of call `index`.
    pub fn arguments(index: usize, text: String) -> Self {
        ToolCallDelta { index, id: None, kind: None, function: FunctionDelta { name: None, arguments: text } }
    }
}

/// `choices[i].logprobs` of a chat completion.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ChoiceLogprobs {
    /// One entry per output token.
    pub content: Vec<TokenLogprob>,
}

/// One output token's log-probability.
#[derive(Clone, Debug, Serialize)]
pub struct TokenLogprob {
    /// The token's text (lossy UTF-8 of its bytes).
    pub token: String,
    /// Its log-probability among the tokens the grammar allowed (after bias, penalties and
    /// temperature); 0 for a token the grammar forced (its only choice).
    pub logprob: f32,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// The `top_logprobs` most likely allowed tokens at this position (`token`, `logprob`,
    /// `bytes`), best first; a forced token's only one is itself, at 0.
    pub top_logprobs: Vec<Value>,
}

/// A streamed chunk (`object: "chat.completion.chunk"`).
#[derive(Clone, Debug, Serialize)]
pub struct ChatCompletionChunk {
    /// The completion's id (the same in every chunk).
    pub id: String,
    /// `chat.completion.chunk`.
    pub object: &'static str,
    /// Unix seconds.
    pub created: u64,
    /// The model's id.
    pub model: String,
    /// Build and model.
    pub system_fingerprint: String,
    /// The deltas (empty in the usage chunk).
    pub choices: Vec<ChunkChoice>,
    /// Null, except in the last chunk under `stream_options.include_usage`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// One choice's delta.
#[derive(Clone, Debug, Serialize)]
pub struct ChunkChoice {
    /// Which completion.
    pub index: usize,
    /// What is new.
    pub delta: Delta,
    /// Token log-probabilities (all of a completion's, in its finish chunk).
    pub logprobs: Option<ChoiceLogprobs>,
    /// Set in the completion's last chunk.
    pub finish_reason: Option<&'static str>,
}

/// A delta: the role first, then content.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Delta {
    /// `assistant`, in the first chunk only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    /// New text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// New reasoning text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Pieces of tool calls, as they are decoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
}

/// A text completion (`object: "text_completion"`), whole or one streamed chunk.
#[derive(Clone, Debug, Serialize)]
pub struct Completion {
    /// `cmpl-...`.
    pub id: String,
    /// `text_completion`.
    pub object: &'static str,
    /// Unix seconds.
    pub created: u64,
    /// The model's id.
    pub model: String,
    /// One per completion.
    pub choices: Vec<CompletionChoice>,
    /// Token counts (absent in streamed chunks but the usage chunk).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Build and model.
    pub system_fingerprint: String,
}

/// One text completion choice.
#[derive(Clone, Debug, Serialize)]
pub struct CompletionChoice {
    /// The text (a streamed chunk: the new text).
    pub text: String,
    /// Its index.
    pub index: usize,
    /// The legacy log-probabilities object, when asked for.
    pub logprobs: Option<LegacyLogprobs>,
    /// `stop` or `length` (null in streamed chunks before the last).
    pub finish_reason: Option<&'static str>,
    /// Extension: where the output fails its schema (see [`ChatChoice::validation_errors`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub validation_errors: Vec<String>,
}

/// The legacy completions' log-probabilities.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LegacyLogprobs {
    /// Token texts.
    pub tokens: Vec<String>,
    /// Their log-probabilities.
    pub token_logprobs: Vec<f32>,
    /// Per token, the alternatives as `{text: logprob}` (with `logprobs: n` > 0), else null.
    pub top_logprobs: Vec<Option<Value>>,
    /// Each token's offset in the text, in bytes.
    pub text_offset: Vec<usize>,
}

/// `GET /v1/models`.
#[derive(Clone, Debug, Serialize)]
pub struct ModelList {
    /// `list`.
    pub object: &'static str,
    /// The one model served.
    pub data: Vec<ModelCard>,
}

/// One model.
#[derive(Clone, Debug, Serialize)]
pub struct ModelCard {
    /// Its id (the GGUF file's stem).
    pub id: String,
    /// `model`.
    pub object: &'static str,
    /// When the server loaded it (Unix seconds).
    pub created: u64,
    /// `stencil`.
    pub owned_by: &'static str,
}

/// The top-level fields of `/v1/chat/completions` requests.
pub const CHAT_FIELDS: &[&str] = &[
    "model",
    "messages",
    "logprobs",
    "top_logprobs",
    "max_completion_tokens",
    "response_format",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "tool_format",
    "chat_template_kwargs",
    "reasoning",
    "reasoning_budget",
];

/// The top-level fields of `/v1/completions` requests.
pub const COMPLETION_FIELDS: &[&str] = &["model", "prompt", "logprobs", "echo", "suffix", "best_of", "response_format"];

/// The fields of [`SamplingFields`], which both endpoints take.
pub const SAMPLING_FIELDS: &[&str] = &[
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "stop",
    "max_tokens",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "logit_bias",
    "n",
    "stream",
    "stream_options",
    "preset",
    "grammar",
    "regex",
    "speculation",
    "user",
    "store",
    "metadata",
    "service_tier",
];

/// The first top-level key of `body` that is neither in `fields` nor a sampling field.
///
/// ```
/// use stencil_server::api::{unknown_field, CHAT_FIELDS};
/// let body = serde_json::json!({"messages": [], "max_token": 5});
/// assert_eq!(unknown_field(&body, CHAT_FIELDS), Some("max_token"));
/// ```
pub fn unknown_field<'a>(body: &'a Value, fields: &[&str]) -> Option<&'a str> {
    body.as_object()?.keys().map(String::as_str).find(|k| !fields.contains(k) && !SAMPLING_FIELDS.contains(k))
}
