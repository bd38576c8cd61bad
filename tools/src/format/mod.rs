//! Tool calls and reasoning in each model family's own format ([`ToolFormat`]): one
//! definition per family that **constrains** a reply (a structural tag, compiled into one
//! grammar of the engine), **reads** it back into OpenAI-shaped calls, content and reasoning
//! (from that tag's captures: no second parser), streams it ([`ToolStream`]) and **writes**
//! calls in the format ([`ToolFormat::write`]).
//!
//! | format | a reply with reasoning and one call | trigger of a call |
//! |---|---|---|
//! | `hermes` (Hermes 2/3, Qwen 2.5, Qwen 3) | `<think>…</think>` `<tool_call>\n{"name": "f", "arguments": {…}}\n</tool_call>` | `<tool_call>` |
//! | `qwen3-coder` | `<tool_call>\n<function=f>\n<parameter=p>\nv\n</parameter>\n</function>\n</tool_call>` | `<tool_call>` |
//! | `llama3` | `{"name": "f", "parameters": {…}}` | `{"name": "` anywhere (bare JSON has no marker) |
//! | `llama3-python-tag` | as `llama3`, each call may be preceded by `<\|python_tag\|>` | `{"name": "`, `<\|python_tag\|>` |
//! | `mistral` (Nemo, Small 3.1) | `[THINK]…[/THINK]` `[TOOL_CALLS][{"name": "f", "arguments": {…}}]` | `[TOOL_CALLS]` |
//! | `mistral-args` (Small 3.2, Devstral, Magistral) | `[TOOL_CALLS]f[ARGS]{…}` | `[TOOL_CALLS]` |
//! | `harmony` (gpt-oss) | `<\|channel\|>analysis<\|message\|>…<\|end\|><\|start\|>assistant<\|channel\|>commentary to=functions.f <\|constrain\|>json<\|message\|>{…}<\|call\|>` | a channel header |
//! | `deepseek-v3.1` | `<think>…</think>` `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{…}<｜tool▁call▁end｜><｜tool▁calls▁end｜>` | `<｜tool▁calls▁begin｜>` |
//! | `envelope` (the fallback, [`Envelope`]) | `<tool_call>{"name": "f", "arguments": {…}}</tool_call>` | the open tag |
//!
//! Each module of this folder documents its format exactly, with a sample reply.
//!
//! # What the grammar allows ([`CallSpec`])
//!
//! - **Reasoning** ([`ReasoningMode`]) comes first in every tool choice: left out (`Off`),
//!   optional, required, or already opened by the prompt (`Open`: DeepSeek's generation
//!   prompt ends with `<think>`). Its text cannot contain a call's trigger (nor, as any tag's
//!   text, its own end), so no call happens inside the reasoning. Where it is optional,
//!   the answer's text cannot contain its opening marker (a reply that begins with it is
//!   reasoning, not text). Its token budget ([`CallSpec::reasoning_budget`]) is
//!   `any_text`'s `max_tokens`, which the decode loop counts and closes.
//! - **`auto`**: free text in which a trigger opens a call, anywhere (text before a call,
//!   between calls, after them), not a choice made at the first token. The block formats
//!   (`mistral`, `deepseek-v3.1`: all calls in one block) allow text before the block only.
//! - **`required`**: at least one call, and the reply (after the reasoning) starts with it.
//! - **a named tool**: as `required`, with that tool only.
//! - **`none`**: text only (Harmony: its `final` channel).
//! - **`parallel_tool_calls: false`**: one call, by the grammar (nothing after it: no text,
//!   no second call), in every format.
//!
//! # Special tokens
//!
//! A marker (`<tool_call>`, `[TOOL_CALLS]`, `<|channel|>`, `<think>`, DeepSeek's `<｜…｜>`) is
//! matched as one token where the vocabulary given to [`ToolFormat::compile`] has it as a
//! control token (which never matches text), and as text otherwise (a vocabulary without
//! it, or one where it is ordinary or user-defined text). Free text cannot spell out a
//! marker that is a token, so that the text of a reply (its tokens' text, control tokens
//! included: [`reply_bytes`]) reads one way, whole or streamed.
//!
//! # Choosing a format
//!
//! [`ToolFormat::detect`] recognizes the format from a chat template's markers (rules in its
//! documentation; the choice is logged); [`ToolFormat::from_str`] takes a name.
//!
//! ```
//! use stencil_tools::format::{CallSpec, ToolFormat};
//! use stencil_tools::{ToolCall, ToolChoice, ToolSet};
//! let tools = ToolSet::from_openai_json(r#"[{"type": "function", "function": {"name": "get_weather",
//!     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]"#)?;
//! let format: ToolFormat = "hermes".parse()?;
//! let compiled = format.compile(&CallSpec::new(&tools, ToolChoice::Auto))?;
//! let reply = compiled.read(b"Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>")?;
//! assert_eq!(reply.content.as_deref(), Some("Let me check."));
//! assert_eq!(reply.calls[0].name, "get_weather");
//! assert_eq!(reply.calls[0].arguments_text, r#"{"city": "Oslo"}"#);
//! // The same definition writes calls:
//! let call = ToolCall::new("get_weather", serde_json::json!({"city": "Oslo"}));
//! let text = format.write(&tools, &Default::default(), &[call.clone()])?;
//! assert_eq!(compiled.read(text.as_bytes())?.calls[0].call(), call);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod build;
mod deepseek;
mod envelope;
mod harmony;
mod hermes;
mod llama;
mod mistral;
mod qwen_xml;
mod read;
mod stream;

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde_json::Value;
use stencil_mask::Vocabulary;
use stencil_structural::{CaptureError, CompiledTag, StructuralError};
use thiserror::Error;

use crate::call::ToolCall;
use crate::envelope::{Envelope, ToolChoice};
use crate::set::ToolSet;

pub use read::{ParsedCall, ParsedReply};
pub use stream::{ToolEvent, ToolStream};

/// A model family's tool-call format. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ToolFormat {
    /// `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`, reasoning in `<think>`.
    Hermes,
    /// Qwen3-Coder's `<tool_call>\n<function=NAME>\n<parameter=P>\nV\n</parameter>\n</function>\n</tool_call>`.
    QwenXml,
    /// Llama 3.x's bare `{"name": …, "parameters": …}`; with `python_tag`, a call may be
    /// preceded by `<|python_tag|>`.
    Llama3 {
        /// Whether `<|python_tag|>` may open a call.
        python_tag: bool,
    },
    /// Mistral's `[TOOL_CALLS]` and a JSON array of `{"name": …, "arguments": …}`.
    MistralJson,
    /// Mistral's newer `[TOOL_CALLS]NAME[ARGS]{…}`, one per call.
    MistralArgs,
    /// gpt-oss's Harmony channels: reasoning in `analysis`, calls in `commentary`.
    Harmony,
    /// DeepSeek V3.1's `<｜tool▁calls▁begin｜>…<｜tool▁calls▁end｜>` block.
    DeepSeekV31,
    /// Stencil's envelope (the fallback): `open{"name": …, "arguments": …}close`.
    Envelope(Envelope),
}

/// Every format, by its name (the fallback envelope with its default tags).
pub const FORMAT_NAMES: [&str; 9] = [
    "hermes",
    "qwen3-coder",
    "llama3",
    "llama3-python-tag",
    "mistral",
    "mistral-args",
    "harmony",
    "deepseek-v3.1",
    "envelope",
];

/// How reasoning may precede the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ReasoningMode {
    /// No reasoning segment.
    #[default]
    Off,
    /// The reply may start with one.
    Optional,
    /// The reply starts with one.
    Required,
    /// The prompt already opened it: the reply starts inside the reasoning, which its end
    /// marker closes (DeepSeek and Qwen templates whose generation prompt ends with
    /// `<think>`).
    Open,
}

/// What a compiled format allows: the tools, the tool choice, parallel calls and reasoning.
#[derive(Clone, Debug)]
pub struct CallSpec<'a> {
    /// The tool set.
    pub tools: &'a ToolSet,
    /// Whether and which tool to call.
    pub choice: ToolChoice,
    /// Several calls in one reply (`parallel_tool_calls`); false: at most one.
    pub parallel: bool,
    /// Reasoning before the answer.
    pub reasoning: ReasoningMode,
    /// Tokens the reasoning may take (`any_text`'s `max_tokens`, counted by the decode
    /// loop); `None`: no bound.
    pub reasoning_budget: Option<u32>,
    /// The model's vocabulary: markers that are control tokens in it are matched as
    /// tokens. `None`: every marker is text.
    pub vocab: Option<Arc<Vocabulary>>,
    /// Under `none`: what the answer after the reasoning is, as a structural-tag format
    /// (`json_schema`, `regex`, `grammar`: a `response_format` that applies after the
    /// reasoning); read back as the content. `None`: free text.
    pub answer: Option<Value>,
}

impl<'a> CallSpec<'a> {
    /// `tools` under `choice`, one call at most, no reasoning, no vocabulary.
    pub fn new(tools: &'a ToolSet, choice: ToolChoice) -> Self {
        CallSpec {
            tools,
            choice,
            parallel: false,
            reasoning: ReasoningMode::Off,
            reasoning_budget: None,
            vocab: None,
            answer: None,
        }
    }

    /// The names of the tools a call may name.
    fn allowed(&self) -> Result<Vec<usize>, FormatError> {
        let names: Vec<&str> = self.tools.names().collect();
        match &self.choice {
            ToolChoice::None => Ok(Vec::new()),
            ToolChoice::Auto => Ok((0..names.len()).collect()),
            ToolChoice::Required if names.is_empty() => Err(FormatError::NoTools(self.choice.clone())),
            ToolChoice::Required => Ok((0..names.len()).collect()),
            ToolChoice::Named(name) => match names.iter().position(|n| n == name) {
                Some(i) => Ok(vec![i]),
                None => Err(FormatError::UnknownTool(name.clone())),
            },
        }
    }
}

/// Why a format cannot be chosen, compiled or read.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FormatError {
    /// [`ToolFormat::from_str`] of an unknown name.
    #[error("unknown tool format {0:?}: expected one of {names}", names = FORMAT_NAMES.join(", "))]
    UnknownFormat(String),
    /// A tool name the format cannot write (found at request time, before decoding).
    #[error("the {format} tool format cannot carry the tool name {name:?}: {reason}")]
    InvalidName {
        /// The format's name.
        format: &'static str,
        /// The tool name.
        name: String,
        /// What in it the format cannot write.
        reason: String,
    },
    /// [`ToolChoice::Named`] names a tool outside the set.
    #[error("tool_choice names {0:?}, which is not in the tool set")]
    UnknownTool(String),
    /// `required` or a named tool with an empty set.
    #[error("tool_choice {0} needs at least one tool")]
    NoTools(ToolChoice),
    /// Two segments of the definition would begin alike (a tool named like a marker).
    #[error("the tool name {name:?} makes the format ambiguous: a segment of the reply already begins with {begin:?}")]
    Ambiguous {
        /// The tool name.
        name: String,
        /// The shared beginning.
        begin: String,
    },
    /// The structural tag does not compile (a schema the format's style cannot write, …).
    #[error("the {format} tool format's structural tag does not compile: {source}")]
    Structural {
        /// The format's name.
        format: &'static str,
        /// The structural compiler's error, located in [`CompiledFormat::tag`].
        source: Box<StructuralError>,
    },
    /// The reply cannot be read (it is not a reply of the format).
    #[error("the reply is not in the {format} tool format: {source}")]
    Reply {
        /// The format's name.
        format: &'static str,
        /// Where it departs from the format.
        source: CaptureError,
    },
    /// [`ToolFormat::write`]: a call the format cannot write.
    #[error("the {format} tool format cannot write this call of {name:?}: {reason}")]
    Unwritable {
        /// The format's name.
        format: &'static str,
        /// The tool.
        name: String,
        /// Why.
        reason: String,
    },
}

impl ToolFormat {
    /// The format's name (what [`ToolFormat::from_str`] takes).
    pub fn name(&self) -> &'static str {
        match self {
            ToolFormat::Hermes => "hermes",
            ToolFormat::QwenXml => "qwen3-coder",
            ToolFormat::Llama3 { python_tag: false } => "llama3",
            ToolFormat::Llama3 { python_tag: true } => "llama3-python-tag",
            ToolFormat::MistralJson => "mistral",
            ToolFormat::MistralArgs => "mistral-args",
            ToolFormat::Harmony => "harmony",
            ToolFormat::DeepSeekV31 => "deepseek-v3.1",
            ToolFormat::Envelope(_) => "envelope",
        }
    }

    /// The format a chat template uses, recognized by its markers (first rule that holds):
    ///
    /// 1. `<|channel|>` and `<|call|>`: `harmony`;
    /// 2. `tool▁calls▁begin` (DeepSeek's `<｜tool▁calls▁begin｜>`): `deepseek-v3.1`;
    /// 3. `[TOOL_CALLS]` and `[ARGS]`: `mistral-args`; `[TOOL_CALLS]` alone: `mistral`;
    /// 4. `<function=` and `<parameter=`: `qwen3-coder`;
    /// 5. `<tool_call>`: `hermes`;
    /// 6. `"parameters"` and `<|start_header_id|>`: `llama3-python-tag` when the template
    ///    has `<|python_tag|>`, else `llama3`;
    ///
    /// else none (a template without tool calls: use the fallback envelope). The choice is
    /// logged (`tracing`, info).
    ///
    /// ```
    /// use stencil_tools::format::ToolFormat;
    /// assert_eq!(ToolFormat::detect("{{ '[TOOL_CALLS]' + name + '[ARGS]' }}"), Some(ToolFormat::MistralArgs));
    /// assert_eq!(ToolFormat::detect("{% for m in messages %}{{ m.content }}{% endfor %}"), None);
    /// ```
    pub fn detect(template: &str) -> Option<ToolFormat> {
        let has = |s: &str| template.contains(s);
        let format = if has("<|channel|>") && has("<|call|>") {
            ToolFormat::Harmony
        } else if has("tool▁calls▁begin") {
            ToolFormat::DeepSeekV31
        } else if has("[TOOL_CALLS]") && has("[ARGS]") {
            ToolFormat::MistralArgs
        } else if has("[TOOL_CALLS]") {
            ToolFormat::MistralJson
        } else if has("<function=") && has("<parameter=") {
            ToolFormat::QwenXml
        } else if has("<tool_call>") {
            ToolFormat::Hermes
        } else if has("\"parameters\"") && has("<|start_header_id|>") {
            ToolFormat::Llama3 { python_tag: has("<|python_tag|>") }
        } else {
            tracing::debug!("no tool format recognized in the chat template");
            return None;
        };
        tracing::debug!(format = format.name(), "tool format recognized from the chat template");
        Some(format)
    }

    /// The markers that open and close this format's reasoning.
    pub fn reasoning_markers(&self) -> (&'static str, &'static str) {
        match self {
            ToolFormat::MistralJson | ToolFormat::MistralArgs => ("[THINK]", "[/THINK]"),
            ToolFormat::Harmony => (harmony::ANALYSIS, harmony::END),
            _ => ("<think>", "</think>"),
        }
    }

    /// The reasoning a reply to `prompt` may have when none is asked for: `Open` when the
    /// prompt ends with the opening marker (the template opened it), `Off` when it ends with
    /// the closing one (the template closed it: thinking disabled), else `Optional` when
    /// the template's source mentions the opening marker, else `Off`.
    ///
    /// ```
    /// use stencil_tools::format::{ReasoningMode, ToolFormat};
    /// let t = "{{ '<think>' }}";
    /// assert_eq!(ToolFormat::Hermes.reasoning_for(t, "<|im_start|>assistant\n<think>\n"), ReasoningMode::Open);
    /// assert_eq!(ToolFormat::Hermes.reasoning_for(t, "<|im_start|>assistant\n<think>\n\n</think>\n\n"), ReasoningMode::Off);
    /// assert_eq!(ToolFormat::Hermes.reasoning_for(t, "<|im_start|>assistant\n"), ReasoningMode::Optional);
    /// assert_eq!(ToolFormat::Hermes.reasoning_for("", "<|im_start|>assistant\n"), ReasoningMode::Off);
    /// ```
    pub fn reasoning_for(&self, template: &str, prompt: &str) -> ReasoningMode {
        let (open, close) = self.reasoning_markers();
        let end = prompt.trim_end();
        if end.ends_with(open) && !matches!(self, ToolFormat::Harmony) {
            ReasoningMode::Open
        } else if end.ends_with(close) && !matches!(self, ToolFormat::Harmony) {
            ReasoningMode::Off
        } else if template.contains(open) {
            ReasoningMode::Optional
        } else {
            ReasoningMode::Off
        }
    }

    /// Characters a tool name may not have in this format, and why.
    fn forbidden(&self) -> (&'static [char], &'static str) {
        match self {
            ToolFormat::QwenXml => (&['<', '>'], "`<`, `>` and whitespace would end `<function=NAME>`"),
            ToolFormat::MistralArgs => (&['[', ']'], "`[`, `]` and whitespace would run into `[ARGS]`"),
            ToolFormat::Harmony => (&['<'], "`<` and whitespace would end `to=functions.NAME`"),
            ToolFormat::DeepSeekV31 => (&['<', '｜'], "`<` and `｜` would run into `<｜tool▁sep｜>`"),
            _ => (&[], ""),
        }
    }

    /// Checks that the format can write every name of `tools` (JSON formats escape any
    /// name; the others cannot carry some characters, see each format).
    ///
    /// ```
    /// use stencil_tools::{format::ToolFormat, ToolSet};
    /// let tools = ToolSet::from_openai_json(r#"[{"type": "function", "function": {"name": "get weather"}}]"#)?;
    /// assert!(ToolFormat::Hermes.check_names(&tools).is_ok());
    /// let err = ToolFormat::QwenXml.check_names(&tools).unwrap_err();
    /// assert!(err.to_string().contains("cannot carry the tool name \"get weather\""), "{err}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`FormatError::InvalidName`] for the first name it cannot write.
    pub fn check_names(&self, tools: &ToolSet) -> Result<(), FormatError> {
        let (chars, reason) = self.forbidden();
        if chars.is_empty() {
            return Ok(());
        }
        let spaces = !matches!(self, ToolFormat::DeepSeekV31);
        for name in tools.names() {
            if let Some(c) = name.chars().find(|c| chars.contains(c) || (spaces && c.is_whitespace())) {
                return Err(FormatError::InvalidName {
                    format: self.name(),
                    name: name.to_string(),
                    reason: format!("{c:?}: {reason}"),
                });
            }
        }
        Ok(())
    }

    /// Compiles the format for `spec`: the structural tag (JSON, see
    /// [`CompiledFormat::tag`]) and its grammar and captures.
    ///
    /// # Errors
    /// [`FormatError::InvalidName`], [`FormatError::UnknownTool`], [`FormatError::NoTools`],
    /// [`FormatError::Ambiguous`], [`FormatError::Structural`].
    pub fn compile(&self, spec: &CallSpec<'_>) -> Result<CompiledFormat, FormatError> {
        let _span = tracing::debug_span!("tool_format_compile", format = self.name()).entered();
        self.check_names(spec.tools)?;
        let allowed = spec.allowed()?;
        let mut b = build::Builder::new(spec, self.reasoning_markers());
        let body = match self {
            ToolFormat::Hermes => hermes::build(&mut b, &allowed)?,
            ToolFormat::Envelope(env) => envelope::build(&mut b, env, &allowed)?,
            ToolFormat::QwenXml => qwen_xml::build(&mut b, &allowed)?,
            ToolFormat::Llama3 { python_tag } => llama::build(&mut b, &allowed, *python_tag)?,
            ToolFormat::MistralJson => mistral::build_json(&mut b, &allowed)?,
            ToolFormat::MistralArgs => mistral::build_args(&mut b, &allowed)?,
            ToolFormat::Harmony => harmony::build(&mut b, &allowed)?,
            ToolFormat::DeepSeekV31 => deepseek::build(&mut b, &allowed)?,
        };
        let format = match self {
            ToolFormat::Harmony => body,
            _ => b.with_reasoning(body)?,
        };
        let tag = serde_json::json!({"type": "structural_tag", "format": format});
        let options = stencil_structural::CompileOptions {
            schema: spec.tools.schema_options().clone(),
            vocab: spec.vocab.clone(),
            ..Default::default()
        };
        let compiled = stencil_structural::compile_json(&tag, &options)
            .map_err(|e| FormatError::Structural { format: self.name(), source: Box::new(e) })?;
        let b = b.finish();
        Ok(CompiledFormat {
            format: self.clone(),
            tag,
            compiled: Arc::new(compiled),
            roles: b.roles,
            holds: b.holds,
            separators: match self {
                ToolFormat::Llama3 { .. } => vec![";".to_string()],
                _ => Vec::new(),
            },
            answer: spec.answer.is_some() && spec.choice == ToolChoice::None,
            eog_closers: match self {
                ToolFormat::Harmony => vec![harmony::CALL.to_string()],
                _ => Vec::new(),
            },
            tools: spec
                .tools
                .entries()
                .iter()
                .map(|e| (e.definition.name.clone(), e.definition.parameters.clone()))
                .collect(),
        })
    }

    /// The text of a reply in this format: `parts`' reasoning and content, then `calls`
    /// (names as the format writes them, arguments compact as serde_json writes them, or
    /// Qwen3-Coder's parameters in schema order). What the format's grammar accepts for a
    /// spec that allows these parts (content with calls needs `auto`).
    ///
    /// # Errors
    /// [`FormatError::Unwritable`]: a call of a tool outside `tools`, Qwen3-Coder
    /// arguments that are not an object of declared properties, or a raw string value
    /// that holds `</parameter>` (the format has no escape for it).
    pub fn write(&self, tools: &ToolSet, parts: &ReplyParts, calls: &[ToolCall]) -> Result<String, FormatError> {
        let mut out = String::new();
        if let Some(r) = &parts.reasoning {
            let (open, close) = self.reasoning_markers();
            match self {
                ToolFormat::Harmony => out.push_str(&harmony::write_reasoning(r)),
                _ if parts.reasoning_open => out.push_str(&format!("{r}{close}")),
                ToolFormat::MistralJson | ToolFormat::MistralArgs => out.push_str(&format!("{open}{r}{close}")),
                _ => out.push_str(&format!("{open}\n{r}\n{close}\n\n")),
            }
        }
        let content = parts.content.as_deref().unwrap_or("");
        let written = match self {
            ToolFormat::Hermes => hermes::write(content, calls),
            ToolFormat::Envelope(env) => envelope::write(env, content, calls),
            ToolFormat::QwenXml => qwen_xml::write(tools, content, calls)?,
            ToolFormat::Llama3 { .. } => llama::write(content, calls),
            ToolFormat::MistralJson => mistral::write_json(content, calls),
            ToolFormat::MistralArgs => mistral::write_args(content, calls),
            ToolFormat::Harmony => harmony::write(content, calls),
            ToolFormat::DeepSeekV31 => deepseek::write(content, calls),
        };
        for call in calls {
            if tools.get(&call.name).is_none() {
                return Err(FormatError::Unwritable {
                    format: self.name(),
                    name: call.name.clone(),
                    reason: "no tool of the set has that name".into(),
                });
            }
        }
        out.push_str(&written);
        Ok(out)
    }

    /// How to call a tool in this format, for a system prompt that shows it: one call with
    /// `TOOL_NAME` and placeholder arguments.
    ///
    /// ```
    /// use stencil_tools::format::ToolFormat;
    /// assert_eq!(ToolFormat::MistralArgs.example(), "[TOOL_CALLS]TOOL_NAME[ARGS]{\"ARGUMENT\":\"VALUE\"}");
    /// ```
    pub fn example(&self) -> String {
        let mut set = ToolSet::new();
        let params = serde_json::json!({"type": "object", "properties": {"ARGUMENT": {"type": "string"}}});
        set.add(crate::ToolDefinition::new("TOOL_NAME", "", params)).expect("a valid tool");
        let call = ToolCall::new("TOOL_NAME", serde_json::json!({"ARGUMENT": "VALUE"}));
        self.write(&set, &ReplyParts::default(), &[call]).expect("the example is writable")
    }

    /// A new call id: 9 characters of `[A-Za-z0-9]` (Mistral's templates want exactly that;
    /// other formats take any id), distinct within the process.
    pub fn new_call_id() -> String {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        // splitmix64 of the time and the counter: distinct counters give distinct ids.
        let mut x = nanos.rotate_left(17) ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        // 62^9 > 2^53: the low 53 bits of x and the counter's low bits, in base 62.
        let mut v = (x >> 11) as u128 + ((n as u128 & 0x3F) << 53);
        (0..9)
            .map(|_| {
                let d = DIGITS[(v % 62) as usize] as char;
                v /= 62;
                d
            })
            .collect()
    }
}

/// The text of a reply's tokens, control tokens included (their text: what the formats'
/// token markers read; [`stencil_runtime::Generation::text`] leaves them out).
pub fn reply_bytes(vocab: &Vocabulary, tokens: &[u32]) -> Vec<u8> {
    tokens.iter().flat_map(|&t| vocab.token_bytes(t).iter().copied()).collect()
}

impl fmt::Display for ToolFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ToolFormat {
    type Err = FormatError;

    /// A name of [`FORMAT_NAMES`], or an alias: `qwen`, `qwen2.5`, `qwen3` (hermes);
    /// `qwen-xml` (qwen3-coder); `llama` (llama3); `mistral-json`, `mistral-nemo`
    /// (mistral); `magistral`, `devstral` (mistral-args); `gpt-oss` (harmony); `deepseek`
    /// (deepseek-v3.1); `fallback` (envelope).
    fn from_str(s: &str) -> Result<Self, FormatError> {
        Ok(match s {
            "hermes" | "qwen" | "qwen2.5" | "qwen3" => ToolFormat::Hermes,
            "qwen3-coder" | "qwen-xml" => ToolFormat::QwenXml,
            "llama3" | "llama" => ToolFormat::Llama3 { python_tag: false },
            "llama3-python-tag" => ToolFormat::Llama3 { python_tag: true },
            "mistral" | "mistral-json" | "mistral-nemo" => ToolFormat::MistralJson,
            "mistral-args" | "magistral" | "devstral" => ToolFormat::MistralArgs,
            "harmony" | "gpt-oss" => ToolFormat::Harmony,
            "deepseek-v3.1" | "deepseek" => ToolFormat::DeepSeekV31,
            "envelope" | "fallback" => ToolFormat::Envelope(Envelope::fallback()),
            other => return Err(FormatError::UnknownFormat(other.to_string())),
        })
    }
}

/// What a written reply holds besides its calls ([`ToolFormat::write`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplyParts {
    /// Reasoning, written first.
    pub reasoning: Option<String>,
    /// Whether the prompt opened the reasoning ([`ReasoningMode::Open`]): only its text and
    /// its end are written.
    pub reasoning_open: bool,
    /// Text (before the calls).
    pub content: Option<String>,
}

/// What a tag of the definition is, by its begin text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// A call of the tool at this index of the set.
    Call(usize),
    /// Reasoning: its text is the reply's reasoning.
    Reasoning,
    /// A message whose text is content (Harmony's commentary preamble).
    Content,
    /// A block of calls (its text between calls is not content).
    Block,
}

/// A format compiled for one [`CallSpec`]: the structural tag, its compiled grammar and
/// captures, and how its segments read as calls, content and reasoning.
#[derive(Debug)]
pub struct CompiledFormat {
    format: ToolFormat,
    /// The structural tag (`{"type": "structural_tag", "format": …}`), as vLLM and SGLang
    /// clients would send it.
    pub tag: Value,
    compiled: Arc<CompiledTag>,
    /// Tag begin text → role.
    roles: HashMap<String, Role>,
    /// Texts a streamed segment's end may be the start of (held back until decided).
    holds: Vec<String>,
    /// Text between two calls that is not content (Llama's `; `), trimmed.
    separators: Vec<String>,
    /// Markers that the model's end-of-generation token stands for (Harmony's `<|call|>`).
    eog_closers: Vec<String>,
    /// Whether the answer is a constrained segment ([`CallSpec::answer`]), read as content.
    answer: bool,
    /// Every tool of the set: name and parameters schema.
    tools: Vec<(String, Value)>,
}

impl CompiledFormat {
    /// The format.
    pub fn format(&self) -> &ToolFormat {
        &self.format
    }

    /// The compiled structural tag (its `grammar` goes to the engine, the tag itself to
    /// [`stencil_runtime::GenerateRequest::structural_tag`] for the reasoning budget).
    pub fn compiled_tag(&self) -> &Arc<CompiledTag> {
        &self.compiled
    }
}
