//! Captures: a reply, whole or partial, read back into its segments by the grammar that
//! constrained it.
//!
//! [`CompiledTag::read`](crate::CompiledTag::read) parses a text; [`CompiledTag::reader`](crate::CompiledTag::reader) gives a [`Reader`] that
//! takes text as it streams ([`Reader::feed`]) and gives the segments so far
//! ([`Reader::reply`]) at any point. A [`Reply`] is a list of [`Segment`]s: free text, each
//! tag (its begin, its content's segments, its end) and each leaf format (`const_string`,
//! `json_schema`, `regex`, `grammar`, `token`). Every byte of the text belongs to exactly one
//! segment (a tag's begin and end to the tag), so [`Reply::pieces`] concatenated is the text.
//!
//! ```
//! use stencil_structural::{compile_json, CompileOptions, SegmentKind};
//! let tag = serde_json::json!({"format": {"type": "sequence", "elements": [
//!     {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
//!     {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
//!         {"begin": "<tool_call>", "content": {"type": "json_schema", "json_schema": {"type": "object"}},
//!          "end": "</tool_call>"}]}]}});
//! let compiled = compile_json(&tag, &CompileOptions::default())?;
//! let text = "<think>hmm</think>Sure.<tool_call>{\"a\": 1}</tool_call>";
//! let reply = compiled.read(text.as_bytes()).unwrap();
//! assert!(reply.complete);
//! let kinds: Vec<String> = reply.segments.iter().map(|s| s.describe(text.as_bytes())).collect();
//! assert_eq!(kinds, ["tag 0 <think> [text \"hmm\"] </think>", "text \"Sure.\"", "tag 1 <tool_call> [json \"{\\\"a\\\": 1}\"] </tool_call>"]);
//! // A partial reply: the last tag is open, its JSON so far is its content.
//! let part = &text.as_bytes()[..text.len() - 16];
//! let reply = compiled.read(part).unwrap();
//! let last = reply.segments.last().unwrap();
//! assert!(!last.closed);
//! assert_eq!(last.describe(part), "tag 1 <tool_call> [json \"{\\\"a\\\"\"…] …");
//! # Ok::<(), stencil_structural::StructuralError>(())
//! ```
//!
//! # Which parse
//!
//! Where the grammar allows several parses of a text, captures pick one by two rules:
//! 1. **Earlier segments close as early as the rest allows.** A `regex` content that could
//!    run past its end marker (`tag("<a>", regex "[a-z<>/]*", "</a>")` followed by
//!    `any_text`, on `<a>x</a>y</a>`) ends at the first end marker that lets the rest of the
//!    text parse (`x`, then text `y</a>`).
//! 2. **A partial text opens as few segments as it can.** Where the text so far can be read
//!    as finished segments (a reply that may end here) it is, else the reading with the
//!    fewest open segments. So `<think>abc</thi` is an open tag whose content `abc` is
//!    closed and whose end is being written, and a free text ending with the start of a
//!    trigger (`Hello <tool_c`) is text until the trigger is whole: [`Reply::held`] says how
//!    many of its last bytes may yet open a tag.
//!
//! Otherwise the first alternative of an `or`, the first tag of several with the same begin
//! (in the tag's order), wins.

use std::ops::Range;
use std::sync::Arc;

use thiserror::Error;

use crate::chart::{Chart, Link, Program};
use crate::compile::Mark;
use crate::{CompiledTag, LeafKind};

/// Why a text could not be read.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CaptureError {
    /// The grammar has token terminals without a known text (compile with a vocabulary).
    #[error("the structural tag names tokens by id or excludes tokens: reading a reply needs the vocabulary")]
    NeedsVocabulary,
    /// A regex terminal that the parser cannot build.
    #[error("regex {0}")]
    Regex(String),
    /// The grammar is too large for the parser.
    #[error("the grammar needs more than {states} parser states")]
    TooLarge {
        /// The limit.
        states: usize,
    },
    /// The text made the parser do more than its work limit.
    #[error("reading the reply took more than {limit} parser steps")]
    TooMuchWork {
        /// The limit ([`crate::Limits::max_capture_work`]).
        limit: u64,
    },
    /// The text is not a prefix of any reply the tag allows.
    #[error("the text is not a reply the structural tag allows: byte {at} cannot be read")]
    Rejected {
        /// The offset of the first byte that cannot be read.
        at: usize,
    },
    /// Segments nest deeper than the reader follows.
    #[error("segments nest deeper than {0}")]
    TooDeep(usize),
}

/// What a segment is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SegmentKind {
    /// Free text: an `any_text` (with its budget's index in [`CompiledTag::budgets`]), or the
    /// text of a `triggered_tags` between tags (and `tags_with_separator`'s separators).
    Text {
        /// The budget of this `any_text`, if it has `max_tokens`.
        budget: Option<u32>,
    },
    /// A tag.
    Tag {
        /// Its index in [`CompiledTag::tags`].
        tag: u32,
        /// Its begin's bytes.
        begin: Range<usize>,
        /// Its content's bytes (so far).
        content: Range<usize>,
        /// Its end's bytes (so far; empty while the content is open).
        end: Range<usize>,
        /// The content's segments.
        children: Vec<Segment>,
    },
    /// A leaf format.
    Leaf(LeafKind),
}

/// One segment of a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Its bytes in the text.
    pub range: Range<usize>,
    /// What it is.
    pub kind: SegmentKind,
    /// Whether it is finished (false for the open segments of a partial reply).
    pub closed: bool,
}

/// A text read into segments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The top-level segments, in order.
    pub segments: Vec<Segment>,
    /// Whether the text is a whole reply (the grammar can end here).
    pub complete: bool,
    /// How many bytes at the end of the text may still open a tag (a trigger's beginning
    /// in free text): a streaming client holds them back.
    pub held: usize,
}

impl Segment {
    /// The byte ranges of the segment's pieces in order: a tag's begin, its children's
    /// pieces, its end; any other segment its range.
    pub fn pieces(&self, out: &mut Vec<Range<usize>>) {
        match &self.kind {
            SegmentKind::Tag { begin, end, children, .. } => {
                out.push(begin.clone());
                for c in children {
                    c.pieces(out);
                }
                out.push(end.clone());
            }
            _ => out.push(self.range.clone()),
        }
    }

    /// A one-line description (for tests and logs): `text "…"`, `tag 3 <begin> [children]
    /// </end>`, `json "…"`; an open segment's text ends in `…`.
    pub fn describe(&self, text: &[u8]) -> String {
        let s = |r: &Range<usize>| String::from_utf8_lossy(&text[r.clone()]).into_owned();
        let open = if self.closed { "" } else { "…" };
        match &self.kind {
            SegmentKind::Text { .. } => format!("text {:?}{open}", s(&self.range)),
            SegmentKind::Leaf(k) => format!("{} {:?}{open}", k.name(), s(&self.range)),
            SegmentKind::Tag { tag, begin, end, children, .. } => {
                let inner: Vec<String> = children.iter().map(|c| c.describe(text)).collect();
                format!("tag {tag} {} [{}] {}{open}", s(begin), inner.join(", "), s(end))
            }
        }
    }
}

impl Reply {
    /// Every segment's pieces in order (see [`Segment::pieces`]); their bytes concatenated
    /// are the text read.
    pub fn pieces(&self) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        for s in &self.segments {
            s.pieces(&mut out);
        }
        out
    }

    /// The innermost open segment's path from the top (indices into `segments`, then into
    /// a tag's children), if the reply has an open segment.
    pub fn open_path(&self) -> Vec<usize> {
        let mut path = Vec::new();
        let mut level = &self.segments;
        while let Some(i) = level.iter().position(|s| !s.closed) {
            path.push(i);
            match &level[i].kind {
                SegmentKind::Tag { children, .. } => level = children,
                _ => break,
            }
        }
        path
    }
}

/// Reads a reply as it streams. See the [module docs](self).
pub struct Reader<'t> {
    tag: TagRef<'t>,
    chart: Chart,
    rejected: Option<usize>,
}

/// The compiled tag a reader reads by: borrowed, or shared (a reader that outlives the
/// borrow, as a decode loop's sequence keeps one).
enum TagRef<'t> {
    Borrowed(&'t CompiledTag),
    Shared(Arc<CompiledTag>),
}

impl std::ops::Deref for TagRef<'_> {
    type Target = CompiledTag;

    fn deref(&self) -> &CompiledTag {
        match self {
            TagRef::Borrowed(t) => t,
            TagRef::Shared(t) => t,
        }
    }
}

impl CompiledTag {
    pub(crate) fn program(&self) -> Result<Arc<Program>, CaptureError> {
        self.program
            .get_or_init(|| {
                Program::new(&self.grammar, &self.marks, &self.token_text, self.vocab.as_deref()).map(Arc::new)
            })
            .clone()
    }

    /// A reader of a reply that streams in. The parser is built on first use and shared.
    ///
    /// # Errors
    ///
    /// [`CaptureError`] when the parser cannot be built (a grammar naming tokens by id
    /// without a vocabulary, one too large).
    pub fn reader(&self) -> Result<Reader<'_>, CaptureError> {
        let chart = Chart::new(self.program()?, self.limits.max_capture_work)?;
        Ok(Reader { tag: TagRef::Borrowed(self), chart, rejected: None })
    }

    /// [`reader`](Self::reader) holding the tag itself, not a borrow of it.
    ///
    /// # Errors
    ///
    /// As [`reader`](Self::reader).
    pub fn shared_reader(self: &Arc<Self>) -> Result<Reader<'static>, CaptureError> {
        let chart = Chart::new(self.program()?, self.limits.max_capture_work)?;
        Ok(Reader { tag: TagRef::Shared(self.clone()), chart, rejected: None })
    }

    /// Reads a whole or partial reply into its segments.
    ///
    /// # Errors
    ///
    /// [`CaptureError::Rejected`] when the text is not a prefix of a reply the tag allows,
    /// and the errors of [`CompiledTag::reader`].
    pub fn read(&self, text: &[u8]) -> Result<Reply, CaptureError> {
        let mut r = self.reader()?;
        r.feed(text)?;
        r.reply()
    }
}

impl Reader<'_> {
    pub(crate) fn chart(&self) -> &Chart {
        &self.chart
    }

    pub(crate) fn compiled(&self) -> &CompiledTag {
        &self.tag
    }

    /// Reads more of the reply.
    ///
    /// # Errors
    ///
    /// [`CaptureError::Rejected`] at the first byte the reply cannot have (the reader keeps
    /// what it read before it), [`CaptureError::TooMuchWork`].
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), CaptureError> {
        if let Some(at) = self.rejected {
            return Err(CaptureError::Rejected { at });
        }
        for (i, &b) in bytes.iter().enumerate() {
            let before = self.chart.text.len();
            if !self.chart.feed(&[b])? {
                self.rejected = Some(before);
                // Keep the last good set: drop the dead one.
                self.chart.sets.pop();
                self.chart.text.pop();
                self.chart.dead = false;
                let _ = i;
                return Err(CaptureError::Rejected { at: before });
            }
        }
        Ok(())
    }

    /// The bytes read so far.
    pub fn text(&self) -> &[u8] {
        &self.chart.text
    }

    /// The segments of the text read so far.
    ///
    /// # Errors
    ///
    /// [`CaptureError::TooDeep`] past the nesting the reader follows.
    pub fn reply(&self) -> Result<Reply, CaptureError> {
        let chart = &self.chart;
        let n = chart.sets.len() - 1;
        let complete = chart.complete_item();
        let chain = match complete {
            Some(i) => vec![(n, i)],
            None => open_chain(chart),
        };
        let mut spans = extract_chain(chart, &chain, complete.is_some())?;
        let segments = to_segments(&mut spans, 0, chart.text.len());
        let held = self.tag.held(&segments, &chart.text);
        Ok(Reply { segments, complete: complete.is_some(), held })
    }
}

/// A marked rule's span, before it becomes a segment.
#[derive(Debug)]
pub(crate) struct Span {
    pub(crate) mark: Mark,
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) children: Vec<Span>,
    pub(crate) closed: bool,
}

const MAX_DEPTH: usize = 1000;

/// The fewest-open chain of items for a partial text: from an item of the last set up to
/// an item of the root rule that began at 0 (breadth-first over callers).
fn open_chain(chart: &Chart) -> Vec<(usize, u32)> {
    let n = chart.sets.len() - 1;
    let p = &chart.program;
    let mut parent: rustc_hash::FxHashMap<(usize, u32), (usize, u32)> = Default::default();
    let mut queue: std::collections::VecDeque<(usize, u32)> =
        (0..chart.sets[n].items.len() as u32).map(|i| (n, i)).collect();
    let mut seen: rustc_hash::FxHashSet<(usize, u32)> = queue.iter().copied().collect();
    while let Some((s, i)) = queue.pop_front() {
        let it = chart.sets[s].items[i as usize];
        let r = p.rule_of(it.state);
        if r == p.root && it.origin == 0 {
            // Walk down from the root to the last set.
            let mut chain = vec![(s, i)];
            let mut cur = (s, i);
            while let Some(&c) = parent.get(&cur) {
                chain.push(c);
                cur = c;
            }
            return chain;
        }
        let o = it.origin as usize;
        if let Some(callers) = chart.sets[o].waiting.get(&r) {
            for &(c, _) in callers {
                if seen.insert((o, c)) {
                    parent.insert((o, c), (s, i));
                    queue.push_back((o, c));
                }
            }
        }
    }
    Vec::new()
}

/// The spans of a chain of items (outermost first): each item's finished part, with the
/// next item's rule open inside it.
fn extract_chain(chart: &Chart, chain: &[(usize, u32)], complete: bool) -> Result<Vec<Span>, CaptureError> {
    let p = &chart.program;
    let n = chart.sets.len() - 1;
    let mut inner: Vec<Span> = Vec::new();
    for (depth, &(s, i)) in chain.iter().enumerate().rev() {
        let mut spans = left(chart, s, i, 0)?;
        spans.append(&mut inner);
        let it = chart.sets[s].items[i as usize];
        let r = p.rule_of(it.state);
        let is_last_complete = complete && depth == 0;
        match (&p.marks[r as usize], depth) {
            (Some(m), _) => {
                inner = vec![Span {
                    mark: m.clone(),
                    start: it.origin as usize,
                    end: n,
                    children: spans,
                    closed: is_last_complete,
                }]
            }
            (None, _) => inner = spans,
        }
    }
    Ok(inner)
}

/// The marked spans of the finished part of an item's rule, in order.
fn left(chart: &Chart, mut s: usize, mut i: u32, depth: usize) -> Result<Vec<Span>, CaptureError> {
    if depth > MAX_DEPTH {
        return Err(CaptureError::TooDeep(MAX_DEPTH));
    }
    let p = &chart.program;
    let mut out: Vec<Span> = Vec::new();
    let mut steps = 0usize;
    loop {
        steps += 1;
        if steps > 4 * chart.text.len() + 1_000_000 {
            return Err(CaptureError::TooDeep(depth));
        }
        let it = chart.sets[s].items[i as usize];
        match it.link {
            Link::Predict => break,
            Link::Eps(k) => i = k,
            Link::Scan(k) => {
                s -= 1;
                i = k;
            }
            Link::Token { from, item } => {
                s = from as usize;
                i = item;
            }
            Link::Complete { caller, child } => {
                let c = chart.sets[s].items[child as usize];
                let r = p.rule_of(c.state);
                let mut kids = left(chart, s, child, depth + 1)?;
                match &p.marks[r as usize] {
                    Some(m) => {
                        out.push(Span {
                            mark: m.clone(),
                            start: c.origin as usize,
                            end: s,
                            children: kids,
                            closed: true,
                        });
                    }
                    None => {
                        kids.reverse();
                        out.extend(kids);
                    }
                }
                s = c.origin as usize;
                i = caller;
            }
        }
    }
    out.reverse();
    Ok(out)
}

/// Spans → segments, with the gaps between them as text.
fn to_segments(spans: &mut Vec<Span>, start: usize, end: usize) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut at = start;
    let gap = |out: &mut Vec<Segment>, from: usize, to: usize| {
        if to > from {
            out.push(Segment { range: from..to, kind: SegmentKind::Text { budget: None }, closed: true });
        }
    };
    for sp in flatten(std::mem::take(spans)) {
        let (mut s0, e0) = (sp.start, sp.end);
        let kind = match sp.mark {
            Mark::Tag(tag) | Mark::TagRest { tag, .. } => {
                if let Mark::TagRest { skip: k, .. } = sp.mark {
                    s0 = s0.saturating_sub(k as usize).max(at);
                }
                let mut kids = sp.children;
                let content = kids.iter().position(|k| k.mark == Mark::Content);
                let (c0, c1, children) = match content {
                    Some(ci) => {
                        let mut c = kids.swap_remove(ci);
                        let (c0, c1) = (c.start, c.end);
                        let children = to_segments(&mut c.children, c0, c1);
                        (c0, if c.closed { c1 } else { e0 }, children)
                    }
                    None => (e0, e0, Vec::new()),
                };
                SegmentKind::Tag { tag, begin: s0..c0, content: c0..c1, end: c1..e0, children }
            }
            Mark::Leaf(k) => SegmentKind::Leaf(k),
            Mark::Text { budget } => SegmentKind::Text { budget },
            Mark::Content | Mark::Free => unreachable!("flattened"),
        };
        gap(&mut out, at, s0);
        out.push(Segment { range: s0..e0, kind, closed: sp.closed });
        at = e0;
    }
    gap(&mut out, at, end);
    out
}

/// Free containers and stray contents dissolve into their children.
fn flatten(spans: Vec<Span>) -> Vec<Span> {
    let mut out = Vec::new();
    for sp in spans {
        match sp.mark {
            Mark::Free | Mark::Content => out.extend(flatten(sp.children)),
            _ => out.push(sp),
        }
    }
    out
}
