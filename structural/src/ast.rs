//! The typed form of a structural tag: one [`Node`] per format object, each with the JSON
//! pointer it came from (for errors and for naming tags in captures).

use serde_json::Value;

/// A format and where it is in the tag.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// JSON pointer of the format object in the tag as given.
    pub pointer: String,
    /// The format.
    pub format: Format,
}

/// One format of the structural-tag language (XGrammar 0.2's names).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Format {
    /// `const_string`: exactly this text.
    ConstString(String),
    /// `json_schema`: a JSON value valid against the schema, in a style.
    JsonSchema {
        /// The schema (an object or a boolean).
        schema: Value,
        /// How the value is written.
        style: JsonStyle,
        /// `max_whitespace_cnt`: the longest run of whitespace between JSON tokens.
        max_whitespace: Option<u32>,
    },
    /// `regex`: text matching the pattern (ECMA-262 syntax), whole.
    Regex(String),
    /// `grammar`: text of the GBNF grammar's language.
    Grammar(String),
    /// `any_text`: any text without the excluded strings (nor the enclosing tag's end).
    AnyText(AnyText),
    /// `sequence`: each element in turn.
    Sequence(Vec<Node>),
    /// `or`: one of the elements.
    Or(Vec<Node>),
    /// `optional`, `star`, `plus`, `repeat`: `min` to `max` (unbounded when `None`) times.
    Repeat {
        /// The repeated format.
        content: Box<Node>,
        /// Fewest times.
        min: u32,
        /// Most times, unbounded when `None`.
        max: Option<u32>,
    },
    /// `tag`: begin, content, end.
    Tag(Tag),
    /// `triggered_tags`: free text in which a trigger opens one of the tags.
    TriggeredTags(TriggeredTags),
    /// `tags_with_separator`: tags separated by a separator, nothing else.
    TagsWithSeparator {
        /// The tags.
        tags: Vec<Tag>,
        /// Between two tags.
        separator: String,
        /// At least one tag.
        at_least_one: bool,
        /// At most one tag.
        stop_after_first: bool,
    },
    /// `token`: one vocabulary token.
    Token(TokenSpec),
    /// `exclude_token`: one vocabulary token other than these.
    ExcludeToken(Vec<TokenSpec>),
    /// `token_triggered_tags`: tokens until a trigger token opens one of the tags.
    TokenTriggeredTags {
        /// Trigger tokens; each tag begins with one.
        triggers: Vec<TokenSpec>,
        /// The tags (each `begin` a token).
        tags: Vec<Tag>,
        /// Tokens that may not appear outside the tags.
        excludes: Vec<TokenSpec>,
        /// At least one tag.
        at_least_one: bool,
        /// At most one tag.
        stop_after_first: bool,
    },
}

/// `any_text`'s fields.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AnyText {
    /// Strings that may not occur in the text.
    pub excludes: Vec<String>,
    /// Most Unicode code points (enforced by the grammar).
    pub max_chars: Option<u32>,
    /// Most model tokens (counted by the decode loop: see [`crate::Budget`]).
    pub max_tokens: Option<u32>,
}

/// `triggered_tags`' fields.
#[derive(Clone, Debug, PartialEq)]
pub struct TriggeredTags {
    /// Strings that open a tag; each tag's `begin` starts with exactly one of them.
    pub triggers: Vec<String>,
    /// The tags.
    pub tags: Vec<Tag>,
    /// Strings that may not occur in the free text.
    pub excludes: Vec<String>,
    /// At least one tag (and no free text before the first).
    pub at_least_one: bool,
    /// Nothing after the first tag.
    pub stop_after_first: bool,
}

/// A `tag`.
#[derive(Clone, Debug, PartialEq)]
pub struct Tag {
    /// JSON pointer of the tag object.
    pub pointer: String,
    /// What opens it.
    pub begin: Delimiter,
    /// What it holds.
    pub content: Box<Node>,
    /// What closes it: one of these texts, or a token.
    pub end: End,
}

/// A tag's `begin`: text or a token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delimiter {
    /// This text.
    Text(String),
    /// This token.
    Token(TokenSpec),
}

/// A tag's `end`: one of several texts, or a token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// Any one of these texts (at least one).
    Texts(Vec<String>),
    /// This token.
    Token(TokenSpec),
}

/// A token named by id or by its exact text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TokenSpec {
    /// The token id.
    Id(u32),
    /// The token whose text this is (exactly one token of the vocabulary).
    Text(String),
}

/// How a `json_schema` value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonStyle {
    /// JSON text.
    Json,
    /// Qwen3-Coder's parameters: `<parameter=NAME>\nVALUE\n</parameter>` per property of the
    /// top-level object; a string value is raw text (without `</parameter>`), any other value
    /// JSON.
    QwenXml,
}

impl Tag {
    /// The end texts when the end is text (empty for a token end).
    pub fn end_texts(&self) -> &[String] {
        match &self.end {
            End::Texts(v) => v,
            End::Token(_) => &[],
        }
    }
}
