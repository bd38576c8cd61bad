//! Decoding tool calls on a [`Session`]: [`ToolCaller`].
//!
//! # Multi-stage decoding ([`Strategy::MultiStage`], the default)
//!
//! ```text
//! stage 1  <tool_call>{"name": "get_weather"          name from the closed set (or plain text)
//! stage 2                                 , "arguments": {"city": "Paris"}      the tool's schema
//!          }</tool_call>                                                         appended
//! stage 1' \n<tool_call>{"name": "web_search"  or end     next call (parallel calls only)
//! ```
//!
//! 1. **Name.** The reply's opening is decoded with a grammar whose language is the call's
//!    head (forced: `<tool_call>{"name": "`) then one of the allowed names and its closing
//!    quote — or, with [`ToolChoice::Auto`], plain text that does not open a call. With a
//!    named tool (or a single tool and `required`), there is nothing to choose and stage 1
//!    is skipped.
//! 2. **Arguments.** The prompt plus the text so far plus `, "arguments": ` is decoded with
//!    the grammar of that tool's argument schema only; then `}</tool_call>` is appended.
//! 3. **Next call.** With parallel calls, while fewer than `max_calls` calls were made, a
//!    grammar allows either the end of the reply (EOS) or the separator, the head and a
//!    name; then stage 2 again.
//!
//! Each stage is one [`Session::generate`] whose prompt is the whole text so far, so the
//! KV cache keeps everything before the new part: only the new tokens are evaluated.
//!
//! # Single grammar ([`Strategy::SingleGrammar`])
//!
//! One generation with one grammar for the whole reply: up to `max_calls` calls, each an
//! alternative per tool (`name", "arguments": ` then the tool's argument grammar, embedded),
//! or plain text for `auto`. The same language as the stages, decided in one pass.
//!
//! # Unconstrained ([`Strategy::Unconstrained`])
//!
//! The same prompt, free decoding, the reply read with [`Envelope::parse`] (or, with a
//! [`ToolFormat`] other than the envelope, by that format's captures): the baseline.
//!
//! # A model family's format ([`ToolCaller::with_format`], [`Strategy::Structural`])
//!
//! With a [`ToolFormat`] other than the envelope (recognized from the chat template by
//! [`ToolCaller::new`], or chosen), the reply is decoded under **one** grammar: the format's
//! structural tag for the tool choice, parallel calls and reasoning
//! ([`crate::format::CallSpec`]), whose reasoning budget the decode loop counts
//! ([`CallOptions::reasoning_budget`]); the reply (its tokens' text, control tokens
//! included) is then read by the same tag's captures into content, reasoning and calls
//! ([`ToolTurn`]). The multi-stage and single-grammar strategies are the envelope's: with
//! another format they decode this way too. [`Strategy::Structural`] decodes the envelope
//! this way (its structural definition, [`crate::format`]'s `envelope`).
//!
//! Whatever the strategy, every call is then checked ([`ToolSet::check`]: a known name,
//! arguments valid against the schema) and the reply against the tool choice. A failure
//! is retried `retries` times by appending the reply and a user message with
//! [`CallError::feedback`] to the conversation; after that it is
//! [`ToolError::InvalidCall`].
//! The reply is parsed back into `ToolCall`s and each is validated with `jsonschema`; an
//! invalid reply is possible only unconstrained, cut short, or with keywords left to
//! validation (a schema compiled leniently).
//!
//! `CallOptions::speculation` applies to every generation of a reply: arguments often
//! copy the user's words, which prompt lookup drafts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use stencil_mask::{CompileError, CompiledGrammar, Vocabulary};
use stencil_runtime::sampling::SamplingParams;
use stencil_runtime::{
    ChatMessage, GenerateRequest, Generation, GenerationRecord, Model, Prompt, RuntimeError, Session, Speculation,
    StopReason,
};
use thiserror::Error;

use crate::call::{CallError, ToolCall};
use crate::envelope::{name_and_quote, read_name, Envelope, Reply, ToolChoice, CONNECTOR};
use crate::format::{CallSpec, CompiledFormat, FormatError, ParsedReply, ReasoningMode, ToolFormat};
use crate::grammar::{self, Opening};
use crate::prompt::{render_messages, result_message, template_renders_calls, PromptStyle};
use crate::set::ToolSet;
use crate::tool::Tools;

/// How calls are decoded. See the [module documentation](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Strategy {
    /// Name first, then arguments, each with its own grammar.
    #[default]
    MultiStage,
    /// One grammar for the whole reply.
    SingleGrammar,
    /// No grammar: the reply is parsed and validated afterwards (the baseline).
    Unconstrained,
    /// One structural grammar of the caller's [`ToolFormat`] (what every format but the
    /// envelope uses for the two strategies above).
    Structural,
}

impl std::str::FromStr for Strategy {
    type Err = String;

    /// `multi-stage`, `single-grammar`, `unconstrained` or `structural`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "multi-stage" => Ok(Strategy::MultiStage),
            "single-grammar" => Ok(Strategy::SingleGrammar),
            "unconstrained" => Ok(Strategy::Unconstrained),
            "structural" => Ok(Strategy::Structural),
            _ => Err(format!(
                "unknown strategy {s:?}: expected multi-stage, single-grammar, unconstrained or structural"
            )),
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Strategy::MultiStage => "multi-stage",
            Strategy::SingleGrammar => "single-grammar",
            Strategy::Unconstrained => "unconstrained",
            Strategy::Structural => "structural",
        })
    }
}

/// How to decode one reply.
///
/// ```
/// use stencil_tools::{CallOptions, Strategy, ToolChoice};
/// let options = CallOptions { choice: ToolChoice::Required, parallel: true, ..CallOptions::default() };
/// assert_eq!(options.max_calls(), 4);
/// assert_eq!(CallOptions::default().max_calls(), 1);
/// assert_eq!(CallOptions::default().strategy, Strategy::MultiStage);
/// ```
#[derive(Clone, Debug)]
pub struct CallOptions {
    /// Whether and which tool to call (default [`ToolChoice::Auto`]).
    pub choice: ToolChoice,
    /// Allow several calls in one reply (default false: at most one).
    pub parallel: bool,
    /// With `parallel`, the most calls in one reply (default 4).
    pub max_parallel_calls: usize,
    /// How calls are decoded (default [`Strategy::MultiStage`]).
    pub strategy: Strategy,
    /// Sampling for every generation of the reply (default greedy). `max_tokens` bounds
    /// each generation (each stage). Stop strings apply to plain text and to unconstrained
    /// decoding only: a grammar-constrained call is never cut by them.
    pub params: SamplingParams,
    /// How many times an invalid reply is retried with feedback (default 0).
    pub retries: usize,
    /// Speculative decoding for every generation of the reply (default none). A draft
    /// model must be attached to the session ([`Session::attach_draft`]).
    pub speculation: Option<Speculation>,
    /// Reasoning before the answer, with a [`ToolFormat`]'s grammar (default `None`: what
    /// [`ToolFormat::reasoning_for`] says of the template and the prompt).
    pub reasoning: Option<ReasoningMode>,
    /// Tokens the reasoning may take before its end is forced (default `None`: no bound).
    pub reasoning_budget: Option<u32>,
    /// More variables for the chat template (`chat_template_kwargs`: `enable_thinking`,
    /// …; default none).
    pub template_kwargs: serde_json::Map<String, Value>,
    /// Under [`ToolChoice::None`], with a format's grammar: the answer after the reasoning
    /// as a structural-tag format (a `response_format`'s `json_schema`, `regex` or
    /// `grammar`), read back as the content; `None`: free text.
    pub answer: Option<Value>,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            choice: ToolChoice::Auto,
            parallel: false,
            max_parallel_calls: 4,
            strategy: Strategy::MultiStage,
            params: SamplingParams::greedy(),
            retries: 0,
            speculation: None,
            reasoning: None,
            reasoning_budget: None,
            template_kwargs: serde_json::Map::new(),
            answer: None,
        }
    }
}

impl CallOptions {
    /// The most calls a reply may hold: `max_parallel_calls` (at least 1) with `parallel`,
    /// else 1.
    pub fn max_calls(&self) -> usize {
        if self.parallel {
            self.max_parallel_calls.max(1)
        } else {
            1
        }
    }
}

/// A decoded reply: validated calls, text, reasoning.
#[derive(Clone, Debug)]
pub struct ToolTurn {
    /// The calls, in order; each names a tool of the set and its arguments validate.
    pub calls: Vec<ToolCall>,
    /// Each call's id, in order (9 letters and digits: [`ToolFormat::new_call_id`]).
    pub call_ids: Vec<String>,
    /// The text for the user: with the envelope's multi-stage, single-grammar and
    /// unconstrained decoding, the plain-text reply when the model called nothing; with a
    /// format's grammar, any text beside the calls too (trimmed, `None` when empty).
    pub content: Option<String>,
    /// The reasoning, when the reply has some (a format's grammar only).
    pub reasoning: Option<String>,
    /// The reply as the model wrote it (the envelope text for calls): what goes into the
    /// conversation as the assistant's message.
    pub text: String,
    /// How many replies were decoded (1 + the retries used).
    pub attempts: usize,
    /// The record of every generation, in order (stages and retries).
    pub records: Vec<GenerationRecord>,
    /// Whether the chat template renders an assistant's `tool_calls`.
    structured: bool,
}

impl ToolTurn {
    /// Every call as `T` (validated against `T`'s schemas, then deserialized).
    ///
    /// # Errors
    /// The first call that does not parse, as [`ToolCall::parse`].
    pub fn parse<T: Tools>(&self) -> Result<Vec<T>, CallError> {
        self.calls.iter().map(ToolCall::parse).collect()
    }

    /// The reply as an assistant message, for the conversation: its content, calls (with
    /// their ids) and reasoning when the chat template renders `tool_calls`; else the reply
    /// as the model wrote it.
    pub fn assistant_message(&self) -> ChatMessage {
        if !self.structured || self.calls.is_empty() {
            return ChatMessage::assistant(if self.structured {
                self.content.clone().unwrap_or_default()
            } else {
                self.text.clone()
            });
        }
        let calls = self
            .calls
            .iter()
            .zip(&self.call_ids)
            .map(|(c, id)| stencil_runtime::ChatToolCall::new(id.clone(), c.name.clone(), c.arguments.clone()))
            .collect();
        ChatMessage {
            reasoning_content: self.reasoning.clone(),
            ..ChatMessage::assistant_calls(self.content.clone().unwrap_or_default(), calls)
        }
    }

    /// Tokens generated over all the reply's generations.
    pub fn generated_tokens(&self) -> usize {
        self.records.iter().map(|r| r.generated_tokens).sum()
    }
}

/// Why no valid reply could be decoded.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The model failed (prompt too long for the context, llama.cpp errors, ...).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// [`ToolChoice::Named`] names a tool outside the set.
    #[error("tool_choice names {0:?}, which is not in the tool set")]
    UnknownTool(String),
    /// `required` or a named tool with an empty set.
    #[error("tool_choice {0} needs at least one tool")]
    NoTools(ToolChoice),
    /// A grammar of the tool set does not compile for the model's vocabulary.
    #[error("the grammar {what} does not compile: {source}")]
    Grammar {
        /// Which grammar.
        what: String,
        /// The engine's error.
        source: Box<CompileError>,
    },
    /// An [`Envelope`] whose tags are blank.
    #[error("the envelope's open and close tags must not be blank")]
    BlankEnvelope,
    /// The tool format cannot be used for the set or the request (a tool name it cannot
    /// carry, a schema its style cannot write).
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The reply is not a valid call (after the retries).
    #[error("{error} (after {attempts} attempt{})", if *.attempts == 1 { "" } else { "s" })]
    InvalidCall {
        /// What is wrong with the last reply.
        error: CallError,
        /// The last reply.
        text: String,
        /// Replies decoded (1 + retries).
        attempts: usize,
        /// The record of every generation.
        records: Vec<GenerationRecord>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum GrammarKey {
    Opening(Opening, Vec<String>),
    Arguments(String),
    Whole(Opening, Vec<String>, usize),
}

/// Decodes tool calls for one [`ToolSet`] on sessions of one model: renders the prompt,
/// runs the [strategy](Strategy), validates, retries. Grammars are compiled on first use
/// and kept, so their mask caches serve every later call.
///
/// ```no_run
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use stencil_runtime::{ChatMessage, Model, ModelOptions, SessionOptions};
/// use stencil_tools::{CallOptions, Tool, ToolCaller, ToolChoice, ToolSet};
///
/// /// Current weather in a city.
/// #[derive(Tool, JsonSchema, Deserialize)]
/// struct GetWeather { city: String }
///
/// let model = Model::load("smollm2-135m-instruct.q4_1.gguf", &ModelOptions::default())?;
/// let mut session = model.session(&SessionOptions::default())?;
/// let caller = ToolCaller::new(&model, ToolSet::from_tools::<GetWeather>()?);
/// let options = CallOptions { choice: ToolChoice::Required, ..CallOptions::default() };
/// let turn = caller.call(&mut session, &[ChatMessage::user("Weather in Oslo?")], &options)?;
/// let weather: Vec<GetWeather> = turn.parse()?;
/// println!("{}", weather[0].city);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ToolCaller {
    tools: ToolSet,
    style: PromptStyle,
    envelope: Envelope,
    format: ToolFormat,
    /// Whether the model's template renders an assistant's `tool_calls` and `tool` results.
    template_calls: bool,
    /// The chat template's source (empty without one): what reasoning it has.
    template: String,
    vocab: Arc<Vocabulary>,
    grammars: Mutex<HashMap<GrammarKey, Arc<CompiledGrammar>>>,
    formats: Mutex<HashMap<FormatKey, FormatGrammar>>,
}

impl std::fmt::Debug for ToolCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCaller")
            .field("tools", &self.tools.names().collect::<Vec<_>>())
            .field("style", &self.style)
            .field("format", &self.format.name())
            .field("envelope", &self.envelope)
            .finish_non_exhaustive()
    }
}

/// What a format's grammar is compiled for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct FormatKey {
    choice: ToolChoice,
    parallel: bool,
    reasoning: ReasoningMode,
    budget: Option<u32>,
    /// The answer's format, as JSON text.
    answer: Option<String>,
}

/// A [`ToolFormat`] compiled for one request shape, and its grammar for the model's
/// vocabulary ([`ToolCaller::format_grammar`]): what a server's own decode loop needs.
#[derive(Clone, Debug)]
pub struct FormatGrammar {
    /// The compiled format: its structural tag, captures ([`CompiledFormat::read`]) and
    /// streaming ([`CompiledFormat::stream`]).
    pub format: Arc<CompiledFormat>,
    /// Its grammar, compiled for the model's vocabulary.
    pub grammar: Arc<CompiledGrammar>,
    /// The reasoning it was compiled for.
    pub reasoning: ReasoningMode,
}

impl FormatGrammar {
    /// `request` constrained by this grammar, its reasoning budget counted.
    pub fn constrain(&self, mut request: GenerateRequest) -> GenerateRequest {
        request.grammar = Some(self.grammar.clone());
        request.constraint_label = format!("tool-format-{}", self.format.format().name());
        request.structural_tag = Some(self.format.compiled_tag().clone());
        request
    }
}

/// A reply, read: what the checks look at.
#[derive(Clone, Debug, Default)]
struct Decoded {
    content: Option<String>,
    reasoning: Option<String>,
    calls: Vec<ToolCall>,
}

impl From<Reply> for Decoded {
    fn from(reply: Reply) -> Self {
        match reply {
            Reply::Text(t) => Decoded { content: Some(t), ..Decoded::default() },
            Reply::Calls(calls) => Decoded { calls, ..Decoded::default() },
        }
    }
}

/// What one decoding attempt gave.
struct Attempt {
    text: String,
    result: Result<Decoded, CallError>,
}

impl ToolCaller {
    /// A caller for `model`: the prompt style is [`PromptStyle::detect`]ed, the format
    /// [`ToolFormat::detect`]ed from the chat template (else the style's envelope).
    pub fn new(model: &Model, tools: ToolSet) -> Self {
        let style = PromptStyle::detect(model);
        let template = model.chat_template();
        let format = template
            .and_then(|t| ToolFormat::detect(t.source()))
            .filter(|f| f.check_names(&tools).is_ok())
            .unwrap_or_else(|| ToolFormat::Envelope(style.default_envelope()));
        ToolCaller {
            tools,
            style,
            envelope: style.default_envelope(),
            format,
            template_calls: template.is_some_and(template_renders_calls),
            template: template.map(|t| t.source().to_string()).unwrap_or_default(),
            vocab: model.vocab().clone(),
            grammars: Mutex::new(HashMap::new()),
            formats: Mutex::new(HashMap::new()),
        }
    }

    /// Uses `style` (and its default envelope, as the format) instead of the detected one.
    pub fn with_style(mut self, style: PromptStyle) -> Self {
        self.style = style;
        self.envelope = style.default_envelope();
        self.format = ToolFormat::Envelope(self.envelope.clone());
        self.grammars = Mutex::new(HashMap::new());
        self.formats = Mutex::new(HashMap::new());
        self
    }

    /// Uses `envelope` for calls (as the format).
    ///
    /// # Errors
    /// [`ToolError::BlankEnvelope`] when a tag is blank.
    pub fn with_envelope(mut self, envelope: Envelope) -> Result<Self, ToolError> {
        if envelope.open.trim().is_empty() || envelope.close.trim().is_empty() {
            return Err(ToolError::BlankEnvelope);
        }
        self.format = ToolFormat::Envelope(envelope.clone());
        self.envelope = envelope;
        self.grammars = Mutex::new(HashMap::new());
        self.formats = Mutex::new(HashMap::new());
        Ok(self)
    }

    /// Uses `format` for calls (an envelope format also becomes the envelope).
    ///
    /// # Errors
    /// [`ToolError::Format`] when the format cannot carry a tool name of the set;
    /// [`ToolError::BlankEnvelope`].
    pub fn with_format(self, format: ToolFormat) -> Result<Self, ToolError> {
        format.check_names(&self.tools)?;
        let mut this = match &format {
            ToolFormat::Envelope(env) => self.with_envelope(env.clone())?,
            _ => self,
        };
        this.format = format;
        this.formats = Mutex::new(HashMap::new());
        Ok(this)
    }

    /// The tool set.
    pub fn tools(&self) -> &ToolSet {
        &self.tools
    }

    /// The prompt style.
    pub fn style(&self) -> PromptStyle {
        self.style
    }

    /// The envelope of the multi-stage, single-grammar and unconstrained strategies.
    pub fn envelope(&self) -> &Envelope {
        &self.envelope
    }

    /// The format calls are written in.
    pub fn format(&self) -> &ToolFormat {
        &self.format
    }

    /// Whether the chat template renders an assistant's `tool_calls` (then
    /// [`ToolTurn::assistant_message`] carries them, and tool results are `tool` messages).
    pub fn template_renders_calls(&self) -> bool {
        self.template_calls
    }

    /// The prompt text for `messages` (tools rendered per the style, in the format's
    /// syntax for the fallback block), as the model sees it. With a template that does not
    /// render `tool_calls`, an assistant's calls are written in the format after its
    /// content, and `tool` results become [`result_message`]s.
    ///
    /// # Errors
    /// The chat template's errors.
    pub fn render(&self, model: &Model, messages: &[ChatMessage], options: &CallOptions) -> Result<String, ToolError> {
        let messages = if self.template_calls {
            messages.to_vec()
        } else {
            crate::prompt::flatten_tool_messages(messages, &self.format, &self.tools)
        };
        Ok(render_messages(
            model,
            self.style,
            &self.tools,
            &self.format,
            &messages,
            &options.choice,
            options.max_calls(),
            &options.template_kwargs,
        )?)
    }

    /// The message giving a tool's result back to the model, in this caller's style
    /// ([`result_message`]).
    pub fn result_message(&self, tool: &str, content: &Value) -> ChatMessage {
        result_message(self.style, tool, content)
    }

    /// The message giving the result of call `call_id` (a [`ToolTurn::call_ids`] entry) of
    /// `tool` back to the model: a `tool` message with the call id and the tool's name when
    /// the template renders tool calls, else [`ToolCaller::result_message`].
    pub fn tool_result(&self, call_id: &str, tool: &str, content: &Value) -> ChatMessage {
        if self.template_calls {
            let text = match content {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            ChatMessage::tool_result(call_id, tool, text)
        } else {
            self.result_message(tool, content)
        }
    }

    /// The single grammar of a whole reply for `options` (what [`Strategy::SingleGrammar`]
    /// decodes with), for inspection (for example printed with
    /// `stencil_grammar::to_gbnf`).
    ///
    /// # Errors
    /// [`ToolError::UnknownTool`], [`ToolError::NoTools`].
    pub fn reply_grammar(&self, options: &CallOptions) -> Result<stencil_grammar::Grammar, ToolError> {
        let (opening, allowed) = self.plan(&options.choice)?;
        Ok(grammar::whole_reply(&self.tools, &self.envelope, &allowed, opening, options.max_calls()))
    }

    /// The format's grammar for `options` and a reply to `prompt` (whose end says whether
    /// the template opened the reasoning, unless `options.reasoning` says): compiled once
    /// per tool choice, parallel calls and reasoning, and kept. Constrain a request with
    /// [`FormatGrammar::constrain`], read its reply with [`CompiledFormat::read_ended`] or
    /// stream it with [`CompiledFormat::stream`], over the text of all its tokens
    /// ([`crate::format::reply_bytes`]).
    ///
    /// # Errors
    /// [`ToolError::Format`]: the format cannot carry the set or the choice (a named tool
    /// outside the set, `required` without tools); [`ToolError::Grammar`].
    pub fn format_grammar(&self, options: &CallOptions, prompt: &str) -> Result<FormatGrammar, ToolError> {
        let reasoning = options.reasoning.unwrap_or_else(|| self.format.reasoning_for(&self.template, prompt));
        let key = FormatKey {
            choice: options.choice.clone(),
            parallel: options.parallel,
            reasoning,
            budget: options.reasoning_budget,
            answer: options.answer.as_ref().map(Value::to_string),
        };
        let mut cache = self.formats.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(g) = cache.get(&key) {
            return Ok(g.clone());
        }
        let spec = CallSpec {
            tools: &self.tools,
            choice: key.choice.clone(),
            parallel: key.parallel,
            reasoning,
            reasoning_budget: key.budget,
            vocab: Some(self.vocab.clone()),
            answer: options.answer.clone(),
        };
        let format = Arc::new(self.format.compile(&spec)?);
        let grammar = CompiledGrammar::new(&format.compiled_tag().grammar, self.vocab.clone()).map_err(|e| {
            ToolError::Grammar { what: format!("the {} tool format", self.format.name()), source: Box::new(e) }
        })?;
        let g = FormatGrammar { format, grammar, reasoning };
        cache.insert(key, g.clone());
        Ok(g)
    }

    /// Decodes the assistant's reply to `messages`: calls (validated), text, reasoning.
    ///
    /// # Errors
    /// [`ToolError::InvalidCall`] when the reply is invalid after the retries (only possible
    /// with unconstrained decoding, a cut reply, or keywords left to validation);
    /// [`ToolError::UnknownTool`], [`ToolError::NoTools`] for a tool choice the set cannot
    /// meet; [`ToolError::Format`]; runtime and grammar errors.
    pub fn call(
        &self,
        session: &mut Session<'_>,
        messages: &[ChatMessage],
        options: &CallOptions,
    ) -> Result<ToolTurn, ToolError> {
        let (opening, allowed) = self.plan(&options.choice)?;
        let envelope = matches!(self.format, ToolFormat::Envelope(_));
        let max_calls = match (envelope, options.strategy) {
            (true, Strategy::MultiStage | Strategy::SingleGrammar | Strategy::Unconstrained) => options.max_calls(),
            _ if options.parallel => usize::MAX,
            _ => 1,
        };
        let mut conversation = messages.to_vec();
        let mut records = Vec::new();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let model = session.model().ok_or(RuntimeError::NoTokenizer)?;
            let prompt = self.render(model, &conversation, options)?;
            let attempt = match (envelope, options.strategy) {
                (true, Strategy::MultiStage) => {
                    self.multi_stage(session, &prompt, &allowed, opening, options, &mut records)?
                }
                (true, Strategy::SingleGrammar) => {
                    self.single_grammar(session, &prompt, &allowed, opening, options, &mut records)?
                }
                (true, Strategy::Unconstrained) => self.unconstrained(session, &prompt, options, &mut records)?,
                (false, Strategy::Unconstrained) => {
                    self.unconstrained_format(session, &prompt, options, &mut records)?
                }
                _ => self.structural(session, &prompt, options, &mut records)?,
            };
            let checked = attempt.result.and_then(|reply| self.check_reply(reply, &options.choice, max_calls));
            match checked {
                Ok(decoded) => {
                    let call_ids = decoded.calls.iter().map(|_| ToolFormat::new_call_id()).collect();
                    return Ok(ToolTurn {
                        calls: decoded.calls,
                        call_ids,
                        content: decoded.content,
                        reasoning: decoded.reasoning,
                        text: attempt.text,
                        attempts,
                        records,
                        structured: self.template_calls,
                    });
                }
                Err(error) if attempts <= options.retries => {
                    conversation.push(ChatMessage::assistant(attempt.text));
                    conversation.push(ChatMessage::user(error.feedback()));
                }
                Err(error) => return Err(ToolError::InvalidCall { error, text: attempt.text, attempts, records }),
            }
        }
    }

    /// What the first stage allows, and the tool names allowed.
    fn plan(&self, choice: &ToolChoice) -> Result<(Opening, Vec<&str>), ToolError> {
        let all: Vec<&str> = self.tools.names().collect();
        Ok(match choice {
            ToolChoice::None => (Opening::Text, all),
            ToolChoice::Auto if all.is_empty() => (Opening::Text, all),
            ToolChoice::Auto => (Opening::CallOrText, all),
            ToolChoice::Required if all.is_empty() => return Err(ToolError::NoTools(choice.clone())),
            ToolChoice::Required => (Opening::Call, all),
            ToolChoice::Named(name) => match all.iter().find(|n| *n == name) {
                Some(n) => (Opening::Call, vec![*n]),
                None => return Err(ToolError::UnknownTool(name.clone())),
            },
        })
    }

    /// One generation under the format's grammar, read by its captures.
    fn structural(
        &self,
        session: &mut Session<'_>,
        prompt: &str,
        options: &CallOptions,
        records: &mut Vec<GenerationRecord>,
    ) -> Result<Attempt, ToolError> {
        let g = self.format_grammar(options, prompt)?;
        let request = g.constrain(request(prompt.to_string(), &without_stops(&options.params), options));
        let out = generate(session, request, records)?;
        Ok(self.read_format(&g.format, &out, &options.choice))
    }

    /// Free decoding, the reply read by the format's captures (any tool choice, parallel
    /// calls and optional reasoning: the checks judge the reply).
    fn unconstrained_format(
        &self,
        session: &mut Session<'_>,
        prompt: &str,
        options: &CallOptions,
        records: &mut Vec<GenerationRecord>,
    ) -> Result<Attempt, ToolError> {
        let reading = CallOptions {
            choice: ToolChoice::Auto,
            parallel: true,
            reasoning: Some(match self.format.reasoning_for(&self.template, prompt) {
                ReasoningMode::Open => ReasoningMode::Open,
                _ => ReasoningMode::Optional,
            }),
            reasoning_budget: None,
            ..options.clone()
        };
        let g = self.format_grammar(&reading, prompt)?;
        let out = generate(session, request(prompt.to_string(), &options.params, options), records)?;
        Ok(self.read_format(&g.format, &out, &options.choice))
    }

    /// Reads a generation by a format: a reply cut inside a call (or the reasoning, or
    /// before a required call) is [`CallError::Truncated`], one the format does not allow
    /// [`CallError::Malformed`].
    fn read_format(&self, format: &CompiledFormat, out: &Generation, choice: &ToolChoice) -> Attempt {
        let bytes = crate::format::reply_bytes(&self.vocab, &out.tokens);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let result = match format.read_ended(&bytes, out.stop_reason == StopReason::Eos) {
            Err(e) => Err(CallError::Malformed { reason: e.to_string() }),
            Ok(parsed) => decoded(parsed, choice),
        };
        Attempt { text, result }
    }

    /// Checks names and arguments against the set, and the reply against the choice.
    fn check_reply(&self, reply: Decoded, choice: &ToolChoice, max_calls: usize) -> Result<Decoded, CallError> {
        if reply.calls.is_empty() && matches!(choice, ToolChoice::Required | ToolChoice::Named(_)) {
            return Err(CallError::NoCall);
        }
        let calls = &reply.calls;
        for call in calls {
            self.tools.check(call)?;
            let allowed = match choice {
                ToolChoice::None => false,
                ToolChoice::Named(name) => call.name == *name,
                ToolChoice::Auto | ToolChoice::Required => true,
            };
            if !allowed {
                return Err(CallError::NotAllowed { name: call.name.clone(), choice: choice.to_string() });
            }
        }
        if calls.len() > max_calls {
            return Err(CallError::TooManyCalls { count: calls.len(), max: max_calls });
        }
        Ok(reply)
    }

    fn compiled(
        &self,
        key: GrammarKey,
        build: impl FnOnce() -> stencil_grammar::Grammar,
    ) -> Result<Arc<CompiledGrammar>, ToolError> {
        let mut cache = self.grammars.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(g) = cache.get(&key) {
            return Ok(g.clone());
        }
        let compiled = CompiledGrammar::new(&build(), self.vocab.clone())
            .map_err(|e| ToolError::Grammar { what: format!("{key:?}"), source: Box::new(e) })?;
        cache.insert(key, compiled.clone());
        Ok(compiled)
    }

    fn opening_grammar(&self, opening: Opening, allowed: &[&str]) -> Result<Arc<CompiledGrammar>, ToolError> {
        let key = GrammarKey::Opening(opening, allowed.iter().map(|s| s.to_string()).collect());
        self.compiled(key, || grammar::opening(&self.envelope, allowed, opening))
    }

    fn arguments_grammar(&self, name: &str) -> Result<Arc<CompiledGrammar>, ToolError> {
        let entry = self.tools.entry_named(name).ok_or_else(|| ToolError::UnknownTool(name.to_string()))?;
        self.compiled(GrammarKey::Arguments(name.to_string()), || entry.grammar.clone())
    }

    fn multi_stage(
        &self,
        session: &mut Session<'_>,
        prompt: &str,
        allowed: &[&str],
        opening: Opening,
        options: &CallOptions,
        records: &mut Vec<GenerationRecord>,
    ) -> Result<Attempt, ToolError> {
        let call_params = without_stops(&options.params);
        let mut text = String::new();
        // Stage 1: plain text or the first call's name.
        let mut name = if opening == Opening::Call && allowed.len() == 1 {
            // Nothing to choose: the head and the name are written, not decoded.
            text.push_str(&self.envelope.head(true));
            text.push_str(&name_and_quote(allowed[0]));
            allowed[0].to_string()
        } else {
            let params = if opening == Opening::Call { &call_params } else { &options.params };
            let g = self.opening_grammar(opening, allowed)?;
            let out = generate(
                session,
                request(format!("{prompt}{text}"), params, options).with_grammar(g, "tool-name"),
                records,
            )?;
            let head = self.envelope.head(true);
            match out.text.strip_prefix(&head) {
                Some(rest) if !cut(&out) => {
                    text.push_str(&out.text);
                    match decoded_name(rest, allowed) {
                        Ok(name) => name,
                        Err(error) => return Ok(Attempt { text, result: Err(error) }),
                    }
                }
                Some(_) => return Ok(truncated(out.text, "in the tool name")),
                None if opening == Opening::Call || (cut(&out) && head.starts_with(out.text.trim_start())) => {
                    return Ok(truncated(out.text, "before the tool name"));
                }
                None => {
                    let content = out.text.trim().to_string();
                    return Ok(Attempt { text: out.text, result: Ok(Reply::Text(content).into()) });
                }
            }
        };
        let mut calls = Vec::new();
        loop {
            // Stage 2: the arguments of `name`.
            text.push_str(CONNECTOR);
            let g = self.arguments_grammar(&name)?;
            let out = generate(
                session,
                request(format!("{prompt}{text}"), &call_params, options).with_grammar(g, "tool-arguments"),
                records,
            )?;
            if cut(&out) {
                text.push_str(&out.text);
                return Ok(truncated(text, &format!("in the arguments of {name:?}")));
            }
            let args_text = out.text.trim();
            let arguments: Value = match serde_json::from_str(args_text) {
                Ok(v) => v,
                Err(e) => {
                    text.push_str(&out.text);
                    let reason = format!("the arguments of {name:?} are not JSON ({e}): an engine bug");
                    return Ok(Attempt { text, result: Err(CallError::Malformed { reason }) });
                }
            };
            text.push_str(args_text);
            text.push_str(&self.envelope.tail());
            calls.push(ToolCall { name: name.clone(), arguments });
            if calls.len() >= options.max_calls() {
                break;
            }
            // Stage 1 again: another call, or the end of the reply.
            let g = self.opening_grammar(Opening::NextCallOrEnd, allowed)?;
            let out = generate(
                session,
                request(format!("{prompt}{text}"), &call_params, options).with_grammar(g, "tool-name"),
                records,
            )?;
            if out.text.is_empty() && !cut(&out) {
                break;
            }
            match out.text.strip_prefix(&self.envelope.head(false)) {
                Some(rest) if !cut(&out) => {
                    text.push_str(&out.text);
                    name = match decoded_name(rest, allowed) {
                        Ok(name) => name,
                        Err(error) => return Ok(Attempt { text, result: Err(error) }),
                    };
                }
                _ => {
                    text.push_str(&out.text);
                    return Ok(truncated(text, "in the next call's name"));
                }
            }
        }
        Ok(Attempt { text, result: Ok(Reply::Calls(calls).into()) })
    }

    fn single_grammar(
        &self,
        session: &mut Session<'_>,
        prompt: &str,
        allowed: &[&str],
        opening: Opening,
        options: &CallOptions,
        records: &mut Vec<GenerationRecord>,
    ) -> Result<Attempt, ToolError> {
        let max_calls = options.max_calls();
        let key = GrammarKey::Whole(opening, allowed.iter().map(|s| s.to_string()).collect(), max_calls);
        let g =
            self.compiled(key, || grammar::whole_reply(&self.tools, &self.envelope, allowed, opening, max_calls))?;
        let params = if opening == Opening::Text { options.params.clone() } else { without_stops(&options.params) };
        let out =
            generate(session, request(prompt.to_string(), &params, options).with_grammar(g, "tool-reply"), records)?;
        Ok(self.read_reply(out))
    }

    fn unconstrained(
        &self,
        session: &mut Session<'_>,
        prompt: &str,
        options: &CallOptions,
        records: &mut Vec<GenerationRecord>,
    ) -> Result<Attempt, ToolError> {
        let out = generate(session, request(prompt.to_string(), &options.params, options), records)?;
        Ok(self.read_reply(out))
    }

    /// Reads a whole reply; a call cut by the token budget is [`CallError::Truncated`].
    fn read_reply(&self, out: Generation) -> Attempt {
        let opens_call = out.text.trim_start().starts_with(self.envelope.open.trim());
        if opens_call && cut(&out) {
            return truncated(out.text, "in a call");
        }
        let result = self.envelope.parse(&out.text).map(Decoded::from);
        Attempt { text: out.text, result }
    }
}

/// A reply read by a format, judged: cut inside a call, inside the reasoning or before a
/// required call, it is [`CallError::Truncated`]; otherwise its finished calls.
fn decoded(parsed: ParsedReply, choice: &ToolChoice) -> Result<Decoded, CallError> {
    if !parsed.complete {
        let wanted = matches!(choice, ToolChoice::Required | ToolChoice::Named(_));
        if parsed.in_call {
            return Err(CallError::Truncated("in a call".into()));
        }
        if parsed.in_reasoning {
            return Err(CallError::Truncated("in the reasoning".into()));
        }
        if wanted && parsed.calls.is_empty() {
            return Err(CallError::Truncated("before a call".into()));
        }
    }
    Ok(Decoded { content: parsed.content.clone(), reasoning: parsed.reasoning.clone(), calls: parsed.tool_calls() })
}

/// The tool name from what stage 1 decoded after the head: the JSON-escaped name and its
/// closing quote, unescaped, which must be one of `allowed` exactly (the grammar allows
/// nothing else: anything else is an engine bug, reported as a malformed call).
fn decoded_name(after_head: &str, allowed: &[&str]) -> Result<String, CallError> {
    match read_name(after_head) {
        Some(name) if allowed.contains(&name.as_str()) => Ok(name),
        _ => Err(CallError::Malformed {
            reason: format!("the decoded tool name {after_head:?} is not one of the allowed names: an engine bug"),
        }),
    }
}

/// A generation of the reply on the text prompt `prompt`: `params` (the reply's, with or
/// without its stop strings) and the reply's speculation.
fn request(prompt: String, params: &SamplingParams, options: &CallOptions) -> GenerateRequest {
    let mut request = GenerateRequest::new(Prompt::Text(prompt)).with_params(params.clone());
    request.speculation = options.speculation.clone();
    request
}

/// Runs `request`, keeping its record.
fn generate(
    session: &mut Session<'_>,
    request: GenerateRequest,
    records: &mut Vec<GenerationRecord>,
) -> Result<Generation, ToolError> {
    let out = session.generate(&request, |_| {})?;
    records.push(out.record.clone());
    Ok(out)
}

/// Whether the generation stopped before its grammar (or the model) ended it.
fn cut(out: &Generation) -> bool {
    matches!(out.stop_reason, StopReason::Length | StopReason::ContextFull | StopReason::Stop(_))
}

fn truncated(text: String, where_: &str) -> Attempt {
    Attempt { text, result: Err(CallError::Truncated(where_.to_string())) }
}

fn without_stops(params: &SamplingParams) -> SamplingParams {
    SamplingParams { stop: Vec::new(), ..params.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoded_names_are_unescaped_and_must_be_allowed_exactly() {
        let allowed = ["fs/read", "fs/read_file", "say \"hi\"", "C:\\"];
        for name in allowed {
            assert_eq!(decoded_name(&name_and_quote(name), &allowed), Ok(name.to_string()));
        }
        for bad in ["fs/read", "fs/rea\"", "say \"hi\"\"", "C:\\\"", "other\""] {
            assert!(matches!(decoded_name(bad, &allowed), Err(CallError::Malformed { .. })), "{bad:?}");
        }
    }

    #[test]
    fn strategies_parse_and_print() {
        for s in [Strategy::MultiStage, Strategy::SingleGrammar, Strategy::Unconstrained, Strategy::Structural] {
            assert_eq!(s.to_string().parse::<Strategy>(), Ok(s));
        }
        assert!("fast".parse::<Strategy>().is_err());
    }
}
