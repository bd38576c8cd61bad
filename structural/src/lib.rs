//! # stencil-structural
//!
//! Structural tags: replies that mix free text, reasoning and constrained segments, in the
//! JSON that XGrammar 0.2 and vLLM / SGLang clients send (`{"type": "structural_tag",
//! "format": …}`, and the legacy `structures` + `triggers`). A tag compiles into **one**
//! [`stencil_grammar::Grammar`] — exact, no "lazy" mode that stops checking — which the
//! engine ([`stencil_mask::CompiledGrammar`]) masks like any other, and the same compiled
//! definition reads a finished or partial reply back into its segments (captures).
//!
//! - [`compile_json`] / [`compile_str`]: a tag and [`CompileOptions`] (the schema options,
//!   an optional [`Vocabulary`] for tokens, [`Limits`]) → a [`CompiledTag`]: the grammar,
//!   the tags ([`TagInfo`]), the reasoning budgets ([`Budget`]) and the schema compiler's
//!   warnings; or a [`StructuralError`] located by JSON pointer.
//! - [`CompiledTag::read`] / [`CompiledTag::reader`]: a reply → [`Reply`] of [`Segment`]s
//!   ([`capture`] explains which parse where the grammar is ambiguous).
//! - [`Reader::budget`]: whether the reply so far is inside a budgeted `any_text`, and the
//!   text that closes it ([`budget`]).
//! - [`parse_tag`]: the JSON → the typed [`Node`] tree; [`text::TextDfa`]: text without some
//!   strings, as rules.
//!
//! # Formats
//!
//! Every format of XGrammar 0.2 that has text to constrain (`STRUCTURAL_TAGS.md` at the
//! repository root has an example of each):
//!
//! | format | language |
//! |---|---|
//! | `const_string` | the `value` |
//! | `json_schema` | JSON valid against `json_schema` (Stencil's schema compiler, strict or lenient as [`CompileOptions::schema`] says; `max_whitespace_cnt` caps whitespace runs); `style: "qwen_xml"`: Qwen3-Coder's `<parameter=NAME>VALUE</parameter>` (see `qwen.rs`) |
//! | `regex` | text matching `pattern` (ECMA-262), whole |
//! | `grammar` | the GBNF grammar's language |
//! | `any_text` | any text without `excludes` (nor the enclosing tag's end strings), at most `max_chars` code points; `max_tokens` is a [`Budget`] |
//! | `sequence`, `or` | the elements in turn; one of them |
//! | `optional`, `star`, `plus`, `repeat` | the content 0–1, 0+, 1+, `min`–`max` (−1: unbounded) times |
//! | `tag` | `begin` (text or `token`), `content`, one of the `end`s (text or `token`) |
//! | `triggered_tags` | free text without `excludes` (nor the enclosing end) in which a trigger opens one of the `tags` (whose begins start with it); `at_least_one` (no text before the first tag), `stop_after_first` (nothing after it) |
//! | `tags_with_separator` | tags separated by `separator`, nothing else; `at_least_one`, `stop_after_first` |
//! | `token`, `exclude_token` | one vocabulary token by id or text; one token other than one |
//! | `token_triggered_tags` | tokens until a trigger token opens a tag (one trigger, no other exclusion) |
//!
//! Not supported, each a located [`ErrorKind::Unsupported`]: `any_tokens`, `dispatch`,
//! `token_dispatch`, styles other than `json` and `qwen_xml`, `any_order` and `excludes` on
//! `json_schema`, and an `exclude_token` (or `token_triggered_tags`' free tokens) that must
//! exclude more than one token.
//!
//! ```
//! use std::sync::Arc;
//! use stencil_structural::{compile_json, CompileOptions};
//! let tag = serde_json::json!({"type": "structural_tag", "format": {
//!     "type": "triggered_tags", "triggers": ["<tool_call>"],
//!     "tags": [{"type": "tag", "begin": "<tool_call>",
//!               "content": {"type": "json_schema", "json_schema": {
//!                   "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
//!               "end": "</tool_call>"}]}});
//! let compiled = compile_json(&tag, &CompileOptions::default())?;
//! let r = stencil_grammar::reference::Recognizer::new(&compiled.grammar).unwrap();
//! assert!(r.matches(br#"Let me check. <tool_call>{"city": "Oslo"}</tool_call> Done."#));
//! assert!(!r.matches(br#"<tool_call>{"town": "Oslo"}</tool_call>"#));
//! // `compiled.grammar` goes to `stencil_mask::CompiledGrammar::new` like any grammar.
//! # Ok::<(), stencil_structural::StructuralError>(())
//! ```

#![warn(missing_docs)]

mod ast;
pub mod budget;
pub mod capture;
mod chart;
mod compile;
mod error;
mod parse;
mod qwen;
pub mod text;

use std::sync::{Arc, OnceLock};

use rustc_hash::FxHashMap;
use serde_json::Value;
use stencil_grammar::{Grammar, TokenName};
use stencil_mask::Vocabulary;
use stencil_schema::{SchemaOptions, Unenforced};

pub use ast::{AnyText, Delimiter, End, Format, JsonStyle, Node, Tag, TokenSpec, TriggeredTags};
pub use budget::BudgetPosition;
pub use capture::{CaptureError, Reader, Reply, Segment, SegmentKind};
pub use error::{ErrorKind, StructuralError};
pub use parse::{parse_tag, MAX_NESTING};
pub use qwen::qwen_xml_raw;

/// How to compile a structural tag.
#[derive(Clone, Debug, Default)]
pub struct CompileOptions {
    /// How `json_schema` contents compile (whitespace, strict or lenient, limits). The
    /// default is [`SchemaOptions::default`]: flexible whitespace (runs of at most 2),
    /// strict. A format's `max_whitespace_cnt` overrides the run cap.
    pub schema: SchemaOptions,
    /// The vocabulary that `token` formats are resolved in (texts must be one token).
    /// Without one, tokens named by text are left to the engine to resolve, and captures
    /// cannot read tokens named by id.
    pub vocab: Option<Arc<Vocabulary>>,
    /// Bounds on the compile and on captures.
    pub limits: Limits,
}

/// Bounds on compiling a tag and on reading replies, each a named setting; passing one is
/// [`ErrorKind::TooLarge`] or [`CaptureError::TooMuchWork`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Rules one free text may take: its automaton's states, times `max_chars + 1` when it
    /// counts characters. Default 200,000.
    pub max_text_rules: usize,
    /// Parser steps one reply may take (reading, all calls together). Default 200,000,000.
    pub max_capture_work: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_text_rules: 200_000, max_capture_work: 200_000_000 }
    }
}

/// What a leaf segment is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeafKind {
    /// `const_string`.
    Const,
    /// `json_schema` in the `json` style.
    Json,
    /// `json_schema` in the `qwen_xml` style.
    QwenXml,
    /// `regex`.
    Regex,
    /// `grammar`.
    Grammar,
    /// `token` or `exclude_token`.
    Token,
}

impl LeafKind {
    /// Its name in [`Segment::describe`]: `const`, `json`, `qwen_xml`, `regex`, `grammar`,
    /// `token`.
    pub fn name(self) -> &'static str {
        match self {
            LeafKind::Const => "const",
            LeafKind::Json => "json",
            LeafKind::QwenXml => "qwen_xml",
            LeafKind::Regex => "regex",
            LeafKind::Grammar => "grammar",
            LeafKind::Token => "token",
        }
    }
}

/// A tag of the definition, as captures name it ([`SegmentKind::Tag`]'s index).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagInfo {
    /// JSON pointer of the `tag` object in the structural tag.
    pub pointer: String,
    /// Its begin's text (a token's text, or `<[id]>` without a vocabulary).
    pub begin: String,
}

/// An `any_text` with `max_tokens`: the decode loop's to count (see [`budget`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    /// JSON pointer of the `any_text`.
    pub pointer: String,
    /// Tokens the text may take.
    pub max_tokens: u32,
    /// What closes it once they are spent: the enclosing tag's (first) end, or none when
    /// the `any_text` is in no tag (then the reply may go on with what follows it).
    pub close: Option<Close>,
}

/// The end that closes a budgeted segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Close {
    /// This text.
    Text(String),
    /// This token (its text, and its id when known).
    Token(String, Option<u32>),
}

/// A compiled structural tag. See the [crate docs](crate).
pub struct CompiledTag {
    /// The grammar of every reply the tag allows.
    pub grammar: Grammar,
    /// The tags of the definition, in the order they were compiled.
    pub tags: Vec<TagInfo>,
    /// The reasoning budgets.
    pub budgets: Vec<Budget>,
    /// Keywords of `json_schema` contents left to post-hoc validation (lenient mode), with
    /// the pointer of their format's `json_schema`.
    pub warnings: Vec<(String, Unenforced)>,
    marks: Vec<Option<compile::Mark>>,
    token_text: FxHashMap<TokenName, Vec<u8>>,
    vocab: Option<Arc<Vocabulary>>,
    limits: Limits,
    /// Every `triggered_tags` trigger, for [`Reply::held`].
    triggers: Vec<String>,
    program: OnceLock<Result<Arc<chart::Program>, CaptureError>>,
}

impl std::fmt::Debug for CompiledTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledTag")
            .field("rules", &self.grammar.rules.len())
            .field("tags", &self.tags.len())
            .field("budgets", &self.budgets)
            .finish()
    }
}

/// Compiles a structural tag given as JSON.
///
/// # Errors
///
/// [`StructuralError`] with the pointer of the format at fault.
pub fn compile_json(tag: &Value, options: &CompileOptions) -> Result<CompiledTag, StructuralError> {
    let node = parse_tag(tag)?;
    compile_node(&node, options)
}

/// Compiles a structural tag given as JSON text.
///
/// # Errors
///
/// [`ErrorKind::Json`] for text that is not JSON, else as [`compile_json`].
pub fn compile_str(tag: &str, options: &CompileOptions) -> Result<CompiledTag, StructuralError> {
    let v: Value = serde_json::from_str(tag).map_err(|e| StructuralError::new("", ErrorKind::Json(e.to_string())))?;
    compile_json(&v, options)
}

/// Compiles a parsed tag (its root format).
///
/// # Errors
///
/// As [`compile_json`].
pub fn compile_node(node: &Node, options: &CompileOptions) -> Result<CompiledTag, StructuralError> {
    let _span = tracing::debug_span!("structural_compile").entered();
    let out = compile::compile(node, options)?;
    let mut triggers = Vec::new();
    collect_triggers(node, &mut triggers);
    Ok(CompiledTag {
        grammar: out.grammar,
        tags: out.tags,
        budgets: out.budgets,
        warnings: out.warnings,
        marks: out.marks,
        token_text: out.token_text,
        vocab: options.vocab.clone(),
        limits: options.limits.clone(),
        triggers,
        program: OnceLock::new(),
    })
}

fn collect_triggers(n: &Node, out: &mut Vec<String>) {
    let tag = |t: &Tag, out: &mut Vec<String>| collect_triggers(&t.content, out);
    match &n.format {
        Format::TriggeredTags(tt) => {
            out.extend(tt.triggers.iter().cloned());
            tt.tags.iter().for_each(|t| tag(t, out));
        }
        Format::Sequence(v) | Format::Or(v) => v.iter().for_each(|e| collect_triggers(e, out)),
        Format::Repeat { content, .. } => collect_triggers(content, out),
        Format::Tag(t) => tag(t, out),
        Format::TagsWithSeparator { tags, .. } | Format::TokenTriggeredTags { tags, .. } => {
            tags.iter().for_each(|t| tag(t, out))
        }
        _ => {}
    }
}

impl CompiledTag {
    /// The bytes at the end of a reply's last text segment that begin a trigger.
    fn held(&self, segments: &[Segment], text: &[u8]) -> usize {
        let mut level = segments;
        loop {
            let Some(last) = level.last() else { return 0 };
            match &last.kind {
                SegmentKind::Tag { children, .. } if !last.closed => level = children,
                SegmentKind::Text { .. } if last.range.end == text.len() => {
                    let t = &text[last.range.clone()];
                    return self
                        .triggers
                        .iter()
                        .flat_map(|tr| {
                            (1..tr.len().min(t.len() + 1)).filter(move |&k| t.ends_with(&tr.as_bytes()[..k]))
                        })
                        .max()
                        .unwrap_or(0);
                }
                _ => return 0,
            }
        }
    }
}
