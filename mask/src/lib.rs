//! # stencil-mask
//!
//! Grammar IR → token-level masks over a real vocabulary.
//!
//! [`CompiledGrammar`] turns a [`stencil_grammar::Grammar`] into per-rule automata run by an
//! Earley parser; [`Matcher`] tracks one sequence and gives the allowed-token bitmask for
//! each step (see [`bitmask`] for the layout), accepts tokens, rolls back and forks.

mod automaton;
pub mod bitmask;
mod cache;
mod earley;
mod error;
mod limits;
mod matcher;
mod trie;
pub mod vocab;

pub use error::{CompileError, MatchError};
pub use limits::{LimitKind, Limits};
pub use matcher::{fill_masks_parallel, CompiledGrammar, GrammarStats, Matcher};
pub use vocab::{TokenKind, VocabError, Vocabulary};
