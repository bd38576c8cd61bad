//! Errors of compiling grammars and of matching tokens.

use crate::limits::LimitKind;
use thiserror::Error;

/// Why a grammar could not be compiled against a vocabulary.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CompileError {
    #[error("limit {limit} ({value}) exceeded while compiling rule `{rule}`")]
    LimitExceeded { limit: LimitKind, value: usize, rule: String },
    #[error("rule `{rule}`: regular expression {pattern:?} is invalid: {message}")]
    BadRegex { rule: String, pattern: String, message: String },
    #[error("rule `{rule}`: regular expression {pattern:?} uses {feature}, which a token mask cannot enforce")]
    UnsupportedRegex { rule: String, pattern: String, feature: String },
    #[error("rule `{rule}`: token {text} is not a single token of the vocabulary")]
    UnknownTokenText { rule: String, text: String },
    #[error("rule `{rule}`: token id {id} is outside the vocabulary of {len} tokens")]
    TokenIdOutOfRange { rule: String, id: u32, len: usize },
    #[error("rule `{rule}` references rule #{id}, which does not exist")]
    DanglingRule { rule: String, id: u32 },
    #[error("the grammar matches no string at all (start rule `{rule}` is unproductive)")]
    EmptyLanguage { rule: String },
}

/// Why a matcher refused a token.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum MatchError {
    #[error("token {token} is not allowed here{}", byte_note(*.byte_offset))]
    TokenRejected {
        token: u32,
        /// Offset inside the token's bytes of the first byte no path accepted, when known.
        byte_offset: Option<usize>,
    },
    #[error("token id {token} is outside the vocabulary ({len} tokens)")]
    TokenOutOfRange { token: u32, len: usize },
    #[error("the grammar has already ended (EOS accepted)")]
    AlreadyEnded,
    #[error("cannot roll back {requested} tokens: only {available} were accepted")]
    RollbackTooFar { requested: usize, available: usize },
    #[error("limit {limit} exceeded while matching")]
    LimitExceeded { limit: LimitKind },
}

fn byte_note(offset: Option<usize>) -> String {
    offset.map(|o| format!(" (rejected at byte {o} of the token)")).unwrap_or_default()
}
