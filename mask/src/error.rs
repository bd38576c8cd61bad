//! Errors of compiling grammars and of matching tokens.

use crate::limits::LimitKind;
use thiserror::Error;

/// Why a grammar could not be compiled against a vocabulary.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompileError {
    /// A [`Limits`](crate::Limits) setting was passed while compiling a rule.
    #[error("limit {limit} ({value}) exceeded while compiling rule `{rule}`")]
    LimitExceeded {
        /// Which limit.
        limit: LimitKind,
        /// The limit's value (milliseconds for [`LimitKind::CompileTime`]).
        value: usize,
        /// The rule being compiled when it was passed.
        rule: String,
    },
    /// A regular-expression terminal does not parse.
    #[error("rule `{rule}`: regular expression {pattern:?} is invalid: {message}")]
    BadRegex {
        /// The rule holding the terminal.
        rule: String,
        /// The pattern.
        pattern: String,
        /// The parser's message.
        message: String,
    },
    /// A regular-expression terminal uses a feature (a look-around, a backreference...)
    /// that an automaton over bytes cannot enforce.
    #[error("rule `{rule}`: regular expression {pattern:?} uses {feature}, which a token mask cannot enforce")]
    UnsupportedRegex {
        /// The rule holding the terminal.
        rule: String,
        /// The pattern.
        pattern: String,
        /// The feature, in words.
        feature: String,
    },
    /// A token terminal written as text (`<text>`) is not one token of the vocabulary.
    #[error("rule `{rule}`: token {text} is not a single token of the vocabulary")]
    UnknownTokenText {
        /// The rule holding the terminal.
        rule: String,
        /// The token's text.
        text: String,
    },
    /// A token terminal written as an id (`<[id]>`) is past the vocabulary's end.
    #[error("rule `{rule}`: token id {id} is outside the vocabulary of {len} tokens")]
    TokenIdOutOfRange {
        /// The rule holding the terminal.
        rule: String,
        /// The id.
        id: u32,
        /// The vocabulary's size.
        len: usize,
    },
    /// A rule calls a rule id the grammar does not have (or the root is one).
    #[error("rule `{rule}` references rule #{id}, which does not exist")]
    DanglingRule {
        /// The calling rule (`<root>` for the grammar's root).
        rule: String,
        /// The missing rule's id.
        id: u32,
    },
    /// The grammar's language is empty: its root can never finish.
    #[error("the grammar matches no string at all (start rule `{rule}` is unproductive)")]
    EmptyLanguage {
        /// The root rule.
        rule: String,
    },
}

/// Why a matcher refused a token.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MatchError {
    /// The token does not continue any parse of the input so far.
    #[error("token {token} is not allowed here{}", byte_note(*.byte_offset))]
    TokenRejected {
        /// The token's id.
        token: u32,
        /// Offset inside the token's bytes of the first byte no path accepted, when known.
        byte_offset: Option<usize>,
    },
    /// The token id is past the vocabulary's end.
    #[error("token id {token} is outside the vocabulary ({len} tokens)")]
    TokenOutOfRange {
        /// The token's id.
        token: u32,
        /// The vocabulary's size.
        len: usize,
    },
    /// End-of-generation was accepted already: nothing more can be.
    #[error("the grammar has already ended (EOS accepted)")]
    AlreadyEnded,
    /// [`Matcher::rollback`](crate::Matcher::rollback) of more tokens than were accepted.
    #[error("cannot roll back {requested} tokens: only {available} were accepted")]
    RollbackTooFar {
        /// Tokens asked to roll back.
        requested: usize,
        /// Tokens accepted so far.
        available: usize,
    },
    /// A [`Limits`](crate::Limits) setting was passed during one step.
    #[error("limit {limit} exceeded while matching")]
    LimitExceeded {
        /// Which limit.
        limit: LimitKind,
    },
}

fn byte_note(offset: Option<usize>) -> String {
    offset.map(|o| format!(" (rejected at byte {o} of the token)")).unwrap_or_default()
}
