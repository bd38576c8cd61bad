//! Reading a reply by its format's captures: the segments of the structural tag that
//! constrained it, turned into content, reasoning and OpenAI-shaped calls.

use serde_json::Value;
use stencil_structural::{LeafKind, Reply, Segment, SegmentKind};

use super::{qwen_xml, CompiledFormat, FormatError, Role};
use crate::call::ToolCall;

/// A reply read by its format ([`CompiledFormat::read`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedReply {
    /// The text for the user (every text segment outside the reasoning and the calls, in
    /// order, leading and trailing whitespace left out), if any.
    pub content: Option<String>,
    /// The reasoning's text (trimmed), if the reply has reasoning.
    pub reasoning: Option<String>,
    /// The calls whose tool is known (a call being written is here once its arguments
    /// began), in order.
    pub calls: Vec<ParsedCall>,
    /// Whether the text is a whole reply of the format.
    pub complete: bool,
    /// Whether the text ends inside a call (one being written, its tool perhaps not yet
    /// known).
    pub in_call: bool,
    /// Whether the text ends inside the reasoning.
    pub in_reasoning: bool,
}

/// One call of a reply.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedCall {
    /// The tool's name.
    pub name: String,
    /// The arguments (`Value::Null` while they are incomplete).
    pub arguments: Value,
    /// The arguments' JSON text: as the model wrote it for the JSON formats (so that
    /// streamed pieces concatenate to it), as serde_json writes the object read from
    /// Qwen3-Coder's parameters (`{"a": 1, "b": "x"}`). So far, for a call being written.
    pub arguments_text: String,
    /// Whether the call is finished.
    pub complete: bool,
}

impl ParsedCall {
    /// The call as a [`ToolCall`].
    pub fn call(&self) -> ToolCall {
        ToolCall::new(self.name.clone(), self.arguments.clone())
    }
}

impl ParsedReply {
    /// The finished calls as [`ToolCall`]s.
    pub fn tool_calls(&self) -> Vec<ToolCall> {
        self.calls.iter().filter(|c| c.complete).map(ParsedCall::call).collect()
    }
}

/// The leaves an answer is made of (not the markers: `const_string`, `token`).
fn is_answer(kind: LeafKind) -> bool {
    matches!(kind, LeafKind::Json | LeafKind::QwenXml | LeafKind::Regex | LeafKind::Grammar)
}

/// What reading collects, before trimming.
#[derive(Default)]
pub(super) struct Raw {
    /// Content pieces: (text, how many calls precede it).
    pub content: Vec<(String, usize)>,
    /// How many call tags were read (a call's tag counts once it began, its arguments
    /// perhaps not yet).
    pub call_tags: usize,
    pub reasoning: Option<String>,
    pub calls: Vec<ParsedCall>,
    pub in_call: bool,
    pub in_reasoning: bool,
}

impl CompiledFormat {
    /// Reads a whole or partial reply: its content, reasoning and calls, from the segments
    /// of the structural tag that constrains the format (see [`ParsedReply`]).
    ///
    /// # Errors
    /// [`FormatError::Reply`] when the text is not (the start of) a reply of the format.
    pub fn read(&self, text: &[u8]) -> Result<ParsedReply, FormatError> {
        let reply =
            self.compiled.read(text).map_err(|source| FormatError::Reply { format: self.format.name(), source })?;
        Ok(finish(self.raw(&reply, text, false), reply.complete))
    }

    /// [`read`](Self::read) for a reply that the model ended with an end-of-generation
    /// token (not in the text): when the text is not complete but is with one of the
    /// markers that the format ends on and the model's vocabulary makes end-of-generation
    /// tokens (Harmony's `<|call|>`), it is read with that marker.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    pub fn read_ended(&self, text: &[u8], by_eos: bool) -> Result<ParsedReply, FormatError> {
        let parsed = self.read(text)?;
        if parsed.complete || !by_eos {
            return Ok(parsed);
        }
        for closer in &self.eog_closers {
            let mut longer = text.to_vec();
            longer.extend_from_slice(closer.as_bytes());
            if let Ok(p) = self.read(&longer) {
                if p.complete {
                    return Ok(p);
                }
            }
        }
        Ok(parsed)
    }

    /// The reply's parts before trimming; `streaming` leaves out what may still change (the
    /// end of the text read that may be the start of a marker, a character cut at the end,
    /// a separator after a call).
    pub(super) fn raw(&self, reply: &Reply, text: &[u8], streaming: bool) -> Raw {
        let mut raw = Raw::default();
        self.walk(&reply.segments, text, streaming, Context::Content, &mut raw);
        // Text between two calls that is only a separator is not content; streaming, text
        // after the last call may yet be followed by one, and is held back.
        if !self.separators.is_empty() {
            let calls = raw.call_tags;
            for (t, before) in raw.content.iter_mut() {
                let between = *before > 0 && (*before < calls || streaming);
                if between && is_separator(t, &self.separators) {
                    t.clear();
                }
            }
        }
        raw
    }

    fn role(&self, tag: u32) -> Option<Role> {
        let begin = &self.compiled.tags.get(tag as usize)?.begin;
        self.roles.get(begin.as_str()).copied()
    }

    fn walk(&self, segments: &[Segment], text: &[u8], streaming: bool, ctx: Context, raw: &mut Raw) {
        for s in segments {
            match &s.kind {
                SegmentKind::Text { .. } => {
                    let at_end = streaming && s.range.end == text.len();
                    let bytes = &text[s.range.clone()];
                    // Streaming, a character cut at the end of the text read is not read yet.
                    let bytes = if at_end { whole_chars(bytes) } else { bytes };
                    let mut t = String::from_utf8_lossy(bytes).into_owned();
                    // Streaming, the end of the text read may still turn into a marker.
                    if at_end {
                        t.truncate(t.len() - self.held_back(&t));
                    }
                    match ctx {
                        Context::Content => raw.content.push((t, raw.call_tags)),
                        Context::Reasoning => {
                            raw.reasoning.get_or_insert_with(String::new).push_str(&t);
                            raw.in_reasoning = !s.closed;
                        }
                        Context::Ignore => {}
                    }
                }
                // A constrained answer (`CallSpec::answer`) is content; other leaves are
                // markers or separators.
                SegmentKind::Leaf(kind) if self.answer && ctx == Context::Content && is_answer(*kind) => {
                    let bytes = &text[s.range.clone()];
                    let bytes = if streaming && s.range.end == text.len() { whole_chars(bytes) } else { bytes };
                    raw.content.push((String::from_utf8_lossy(bytes).into_owned(), raw.call_tags));
                }
                SegmentKind::Leaf(_) => {}
                SegmentKind::Tag { tag, children, .. } => match self.role(*tag) {
                    Some(Role::Call(i)) => {
                        raw.in_call = !s.closed;
                        raw.call_tags += 1;
                        if let Some(call) = self.call(i, children, text, s.closed, streaming) {
                            raw.calls.push(call);
                        }
                    }
                    Some(Role::Reasoning) => {
                        raw.reasoning.get_or_insert_with(String::new);
                        raw.in_reasoning = !s.closed;
                        self.walk(children, text, streaming, Context::Reasoning, raw);
                        if s.closed {
                            raw.in_reasoning = false;
                        }
                    }
                    Some(Role::Content) => self.walk(children, text, streaming, Context::Content, raw),
                    Some(Role::Block) => {
                        raw.in_call = !s.closed;
                        self.walk(children, text, streaming, Context::Ignore, raw);
                        raw.in_call = !s.closed;
                    }
                    None => self.walk(children, text, streaming, Context::Ignore, raw),
                },
            }
        }
    }

    /// How many bytes at the end of an open text may be the start of one of the format's
    /// markers.
    pub(super) fn held_back(&self, t: &str) -> usize {
        let bytes = t.as_bytes();
        let n = self
            .holds
            .iter()
            .flat_map(|h| (1..=h.len().min(bytes.len())).filter(move |&k| bytes.ends_with(&h.as_bytes()[..k])))
            .max()
            .unwrap_or(0);
        // Never split a character.
        (n..=bytes.len()).find(|&k| t.is_char_boundary(bytes.len() - k)).unwrap_or(bytes.len())
    }

    /// Call of tool `i` from its tag's children: its arguments leaf (JSON, or Qwen3-Coder's
    /// parameters). `None` until the arguments began. Streaming, a character cut at the end
    /// of the text read is left out.
    fn call(&self, i: usize, children: &[Segment], text: &[u8], closed: bool, streaming: bool) -> Option<ParsedCall> {
        let (name, schema) = &self.tools[i];
        let leaf = find_leaf(children)?;
        let bytes = &text[leaf.range.clone()];
        let bytes = if streaming && leaf.range.end == text.len() { whole_chars(bytes) } else { bytes };
        let body = String::from_utf8_lossy(bytes).into_owned();
        let (arguments, arguments_text) = match leaf.kind {
            SegmentKind::Leaf(LeafKind::QwenXml) => {
                let (params, whole) = qwen_xml::read_parameters(schema, &body);
                let mut t = String::from("{");
                for (k, (key, v)) in params.iter().enumerate() {
                    if k > 0 {
                        t.push_str(", ");
                    }
                    t.push_str(&format!("{}: {v}", Value::String(key.clone())));
                }
                if closed || (leaf.closed && whole) {
                    t.push('}');
                }
                let complete = leaf.closed && whole;
                (if complete { Value::Object(params) } else { Value::Null }, t)
            }
            _ if leaf.closed => (serde_json::from_str(&body).unwrap_or(Value::Null), body),
            _ => (Value::Null, body),
        };
        Some(ParsedCall { name: name.clone(), arguments, arguments_text, complete: closed })
    }
}

/// The first arguments leaf among a call's children (nested in sequences).
fn find_leaf(children: &[Segment]) -> Option<&Segment> {
    children.iter().find(|c| matches!(c.kind, SegmentKind::Leaf(LeafKind::Json | LeafKind::QwenXml)))
}

/// `bytes` without a UTF-8 character cut at their end (its first bytes, the rest not yet
/// read).
fn whole_chars(bytes: &[u8]) -> &[u8] {
    for k in 1..=bytes.len().min(4) {
        let b = bytes[bytes.len() - k];
        if b < 0x80 {
            break;
        }
        if b >= 0xC0 {
            // A lead byte: the character needs 2, 3 or 4 bytes.
            let needs = if b >= 0xF0 {
                4
            } else if b >= 0xE0 {
                3
            } else {
                2
            };
            if needs > k {
                return &bytes[..bytes.len() - k];
            }
            break;
        }
    }
    bytes
}

fn is_separator(t: &str, separators: &[String]) -> bool {
    let t = t.trim();
    t.is_empty() || separators.iter().any(|s| s == t)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    Content,
    Reasoning,
    Ignore,
}

/// Trims and joins what was read.
pub(super) fn finish(raw: Raw, complete: bool) -> ParsedReply {
    let content: String = raw.content.iter().map(|(t, _)| t.as_str()).collect();
    let content = content.trim();
    ParsedReply {
        content: (!content.is_empty()).then(|| content.to_string()),
        reasoning: raw.reasoning.map(|r| r.trim().to_string()),
        calls: raw.calls,
        complete,
        in_call: raw.in_call,
        in_reasoning: raw.in_reasoning,
    }
}
