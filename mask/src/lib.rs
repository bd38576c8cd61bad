//! # stencil-mask
//!
//! Grammar IR → token-level masks over a real vocabulary.

pub mod vocab;

pub use vocab::{TokenKind, VocabError, Vocabulary};
