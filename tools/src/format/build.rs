//! Building a format's structural tag (its JSON): markers as tokens or text, calls as tags
//! whose begin names the tool, calls in free text after triggers, and reasoning first.

use std::collections::HashMap;

use serde_json::{json, Value};
use stencil_mask::{TokenKind, Vocabulary};

use super::{CallSpec, FormatError, ReasoningMode, Role};
use crate::envelope::ToolChoice;

/// A marker of the format: one control token of the vocabulary, or text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Piece {
    Text(String),
    Token(String),
}

impl Piece {
    fn text(&self) -> &str {
        match self {
            Piece::Text(s) | Piece::Token(s) => s,
        }
    }

    /// As a format: `const_string` or `token`.
    pub(super) fn node(&self) -> Value {
        match self {
            Piece::Text(s) => json!({"type": "const_string", "value": s}),
            Piece::Token(s) => json!({"type": "token", "token": s}),
        }
    }

    /// As a tag's begin or end: a string or a `token`.
    fn delimiter(&self) -> Value {
        match self {
            Piece::Text(s) => Value::String(s.clone()),
            Piece::Token(s) => json!({"type": "token", "token": s}),
        }
    }
}

/// One call (or block of calls): its format, and its begin when it is a tag that begins
/// with text (what `triggered_tags` needs).
pub(super) struct Unit {
    pub node: Value,
    pub text_begin: Option<String>,
}

/// What building leaves for reading.
pub(super) struct Built {
    pub roles: HashMap<String, Role>,
    pub holds: Vec<String>,
}

pub(super) struct Builder<'s> {
    pub spec: &'s CallSpec<'s>,
    vocab: Option<&'s Vocabulary>,
    roles: HashMap<String, Role>,
    holds: Vec<String>,
    /// What free text may not contain, so that a reply reads one way: the text of the
    /// markers matched as tokens (else the token or its text spelled out), and with
    /// optional reasoning its opening marker (else a reply that begins with it is
    /// reasoning or text).
    excluded: Vec<String>,
    /// The reasoning's markers.
    reasoning: (String, String),
    /// Text triggers of calls, which the reasoning may not contain.
    triggers: Vec<String>,
}

impl<'s> Builder<'s> {
    pub fn new(spec: &'s CallSpec<'s>, reasoning: (&str, &str)) -> Self {
        let mut b = Builder {
            spec,
            vocab: spec.vocab.as_deref(),
            roles: HashMap::new(),
            holds: Vec::new(),
            excluded: Vec::new(),
            reasoning: (reasoning.0.to_string(), reasoning.1.to_string()),
            triggers: Vec::new(),
        };
        b.hold(reasoning.1);
        if spec.reasoning != ReasoningMode::Off {
            // Known before any free text is built, which may not spell them out if tokens.
            b.marker(reasoning.0);
            b.marker(reasoning.1);
        }
        if spec.reasoning == ReasoningMode::Optional {
            b.exclude(reasoning.0);
        }
        b
    }

    pub fn finish(self) -> Built {
        Built { roles: self.roles, holds: self.holds }
    }

    /// A marker: a token where the vocabulary has it as a control token, else text. Its
    /// text is held back when streaming until it is decided; a token's text is not free
    /// text ([`Builder::free_text`]).
    pub fn marker(&mut self, text: &str) -> Piece {
        self.hold(text);
        match self.vocab.and_then(|v| v.find_token(text.as_bytes()).map(|id| v.kind(id))) {
            Some(TokenKind::Control) => {
                self.exclude(text);
                Piece::Token(text.to_string())
            }
            _ => Piece::Text(text.to_string()),
        }
    }

    /// Text a streamed segment may end with the start of.
    pub fn hold(&mut self, text: &str) {
        if !text.is_empty() && !self.holds.iter().any(|h| h == text) {
            self.holds.push(text.to_string());
        }
    }

    /// The name of tool `i`.
    pub fn name(&self, i: usize) -> &'s str {
        &self.spec.tools.entries()[i].definition.name
    }

    /// The parameters schema of tool `i`.
    pub fn parameters(&self, i: usize) -> &'s Value {
        &self.spec.tools.entries()[i].definition.parameters
    }

    /// Tool `i`'s arguments as JSON.
    pub fn json_arguments(&self, i: usize) -> Value {
        json!({"type": "json_schema", "json_schema": self.parameters(i)})
    }

    /// Text that free text may not contain.
    fn exclude(&mut self, text: &str) {
        if !self.excluded.iter().any(|t| t == text) {
            self.excluded.push(text.to_string());
        }
    }

    /// Free text (`any_text`) without `excludes`, at most `max_tokens` tokens. Nor may it
    /// contain what would make a reply read two ways (see `excluded`: the markers that are
    /// tokens, so make the markers first).
    pub fn free_text(&self, excludes: &[String], max_tokens: Option<u32>) -> Value {
        let mut all = excludes.to_vec();
        all.extend(self.excluded.iter().filter(|t| !excludes.contains(t)).cloned());
        any_text(&all, max_tokens)
    }

    /// The answer of a reply without calls: [`CallSpec::answer`], else free text.
    pub fn answer(&self) -> Value {
        self.spec.answer.clone().unwrap_or_else(|| self.free_text(&[], None))
    }

    /// Records what a tag that begins with `begin` is.
    pub fn role(&mut self, begin: &str, role: Role) -> Result<(), FormatError> {
        match self.roles.insert(begin.to_string(), role) {
            Some(old) if old != role => {
                let name = match (old, role) {
                    (Role::Call(i), _) | (_, Role::Call(i)) => self.name(i).to_string(),
                    _ => String::new(),
                };
                Err(FormatError::Ambiguous { name, begin: begin.to_string() })
            }
            _ => Ok(()),
        }
    }

    /// A tag whose begin is `before`, `name` and `after` (each text piece next to the name
    /// joins the begin; tokens stay apart: those before the name precede the tag, those
    /// after it start its content), whose content is `after`'s rest then `content`, and
    /// whose end is `end` (or nothing).
    pub fn unit(
        &mut self,
        before: &[Piece],
        name: String,
        after: &[Piece],
        content: Vec<Value>,
        end: Option<Piece>,
        role: Role,
    ) -> Result<Unit, FormatError> {
        let mut begin = name;
        let mut prefix = before.to_vec();
        while let Some(Piece::Text(t)) = prefix.last() {
            begin.insert_str(0, t);
            prefix.pop();
        }
        let mut inner = Vec::new();
        let mut joining = true;
        for p in after {
            match p {
                Piece::Text(t) if joining => begin.push_str(t),
                p => {
                    joining = false;
                    inner.push(p.node());
                }
            }
        }
        inner.extend(content);
        self.role(&begin, role)?;
        let tag = json!({
            "type": "tag",
            "begin": begin,
            "content": seq(inner),
            "end": end.as_ref().map_or(Value::String(String::new()), Piece::delimiter),
        });
        if prefix.is_empty() {
            return Ok(Unit { node: tag, text_begin: Some(begin) });
        }
        let mut parts: Vec<Value> = prefix.iter().map(Piece::node).collect();
        parts.push(tag);
        Ok(Unit { node: seq(parts), text_begin: None })
    }

    /// A tag that begins with the marker `begin` (a block of calls, a reasoning segment).
    pub fn block(&mut self, begin: &Piece, content: Value, end: &Piece, role: Role) -> Result<Unit, FormatError> {
        self.role(begin.text(), role)?;
        let node = json!({"type": "tag", "begin": begin.delimiter(), "content": content, "end": end.delimiter()});
        let text_begin = match begin {
            Piece::Text(s) => Some(s.clone()),
            Piece::Token(_) => None,
        };
        Ok(Unit { node, text_begin })
    }

    /// Free text in which the `triggers` open `units`, as the tool choice and parallel
    /// calls say ([`super`]'s rules): `at_least_one` for `required` and a named tool, one
    /// unit at most with `single` (nothing after it). A `triggered_tags` when every unit is
    /// a tag that begins with a text trigger; else free text (without the text triggers)
    /// and the units in turn.
    pub fn calls_in_text(&mut self, triggers: &[Piece], units: Vec<Unit>, single: bool) -> Value {
        let at_least_one = matches!(self.spec.choice, ToolChoice::Required | ToolChoice::Named(_));
        let texts: Vec<String> =
            triggers.iter().filter_map(|t| if let Piece::Text(s) = t { Some(s.clone()) } else { None }).collect();
        self.triggers.extend(triggers.iter().map(|t| t.text().to_string()));
        if units.is_empty() {
            return self.answer();
        }
        let plain = units.iter().all(|u| u.text_begin.as_ref().is_some_and(|b| texts.iter().any(|t| b.starts_with(t))))
            && texts.len() == triggers.len();
        if plain {
            let mut tags = json!({
                "type": "triggered_tags",
                "triggers": texts,
                "tags": units.into_iter().map(|u| u.node).collect::<Vec<_>>(),
                "at_least_one": at_least_one,
                "stop_after_first": single,
            });
            if !self.excluded.is_empty() {
                tags["excludes"] = json!(self.excluded);
            }
            return tags;
        }
        let text = self.free_text(&texts, None);
        let one = or(units.into_iter().map(|u| u.node).collect());
        match (at_least_one, single) {
            (false, false) => seq(vec![text.clone(), json!({"type": "star", "content": seq(vec![one, text])})]),
            (false, true) => seq(vec![text, json!({"type": "optional", "content": one})]),
            (true, false) => json!({"type": "plus", "content": seq(vec![one, text])}),
            (true, true) => one,
        }
    }

    /// The reasoning segment: `open`, text (without the call triggers, at most
    /// `reasoning_budget` tokens), `close`; with [`ReasoningMode::Open`] only the text and
    /// `close`.
    fn reasoning_tag(&mut self, open_marker: bool) -> Result<Value, FormatError> {
        let (open, close) = self.reasoning.clone();
        let close = self.marker(&close);
        let begin = if open_marker { self.marker(&open) } else { Piece::Text(String::new()) };
        let text = self.free_text(&self.triggers, self.spec.reasoning_budget);
        Ok(self.block(&begin, text, &close, Role::Reasoning)?.node)
    }

    /// `body` after the reasoning that the spec asks for, and at most two spaces or
    /// newlines after it.
    pub fn with_reasoning(&mut self, body: Value) -> Result<Value, FormatError> {
        let ws = json!({"type": "regex", "pattern": "[ \\n]{0,2}"});
        Ok(match self.spec.reasoning {
            ReasoningMode::Off => body,
            ReasoningMode::Optional => {
                let r = self.reasoning_tag(true)?;
                seq(vec![json!({"type": "optional", "content": seq(vec![r, ws])}), body])
            }
            ReasoningMode::Required => seq(vec![self.reasoning_tag(true)?, ws, body]),
            ReasoningMode::Open => seq(vec![self.reasoning_tag(false)?, ws, body]),
        })
    }
}

/// A `sequence` (its only element when there is one).
pub(super) fn seq(mut parts: Vec<Value>) -> Value {
    if parts.len() == 1 {
        return parts.pop().expect("one");
    }
    json!({"type": "sequence", "elements": parts})
}

/// An `or` (its only element when there is one).
pub(super) fn or(mut parts: Vec<Value>) -> Value {
    if parts.len() == 1 {
        return parts.pop().expect("one");
    }
    json!({"type": "or", "elements": parts})
}

/// `any_text` without `excludes`, at most `max_tokens` tokens.
pub(super) fn any_text(excludes: &[String], max_tokens: Option<u32>) -> Value {
    let mut v = json!({"type": "any_text"});
    if !excludes.is_empty() {
        v["excludes"] = json!(excludes);
    }
    if let Some(n) = max_tokens {
        v["max_tokens"] = json!(n);
    }
    v
}

/// `const_string`.
pub(super) fn text(s: &str) -> Value {
    json!({"type": "const_string", "value": s})
}
