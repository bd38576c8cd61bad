//! # stencil-mask
//!
//! Stencil's engine: grammar IR → token-level masks over a real vocabulary. It knows
//! nothing of models, logits or JSON Schema: it takes a [`stencil_grammar::Grammar`] and a
//! [`Vocabulary`] and says, at each step, which tokens keep the output inside the
//! grammar.
//!
//! - [`CompiledGrammar`]: a grammar compiled against a vocabulary, immutable and shared
//!   by any number of matchers on any threads ([`CompiledGrammar::new`],
//!   [`with_limits`](CompiledGrammar::with_limits)); [`GrammarStats`] are its sizes.
//! - [`Matcher`]: the parse state of one sequence: the allowed-token mask of the next
//!   step ([`fill_mask`](Matcher::fill_mask), or many at once with
//!   [`fill_masks_parallel`]), [`accept_token`](Matcher::accept_token),
//!   [`rollback`](Matcher::rollback), [`fork`](Matcher::fork), and the bytes or tokens
//!   the grammar forces next ([`forced_bytes`](Matcher::forced_bytes)).
//! - [`bitmask`]: the mask layout, one bit per token in `u32` words.
//! - [`bytes`]: the ground floor, sets of bytes ([`bytes::ByteSet`]) and what plain
//!   text is, which every other module builds on.
//! - [`vocab`]: vocabularies (token id → bytes and [`TokenKind`]) from GGUF metadata or
//!   `tokenizer.json`, and a [`Tokenizer`](vocab::Tokenizer) for tests and tools.
//! - [`walk`]: model-free random walks through the masks (random members of a
//!   grammar's language, token by token), for sampling and benchmarks.
//! - [`Limits`]: every resource limit, named; passing one is a typed error
//!   ([`CompileError::LimitExceeded`], [`MatchError::LimitExceeded`]) naming
//!   the [`LimitKind`].
//!
//! # How a mask is computed
//!
//! Compiling makes every rule a deterministic automaton over bytes, rule calls and
//! whole-token terminals, all states in one table (the private `automaton` module, one
//! file per pass: planning, determinization, minimization, the analyses, the text fast
//! paths). An Earley parser runs those automata byte by byte. For each automaton state,
//! a walk over the vocabulary's trie finds once which tokens are allowed whatever the
//! context and which depend on the callers (the mask cache); at mask time only those
//! are checked against the real parse. Only text tokens ([`Vocabulary::is_text`]) ever
//! match grammar bytes; control tokens match only whole-token terminals (`<[id]>`) and
//! end-of-generation.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use stencil_mask::{bitmask, CompiledGrammar, Matcher, TokenKind, Vocabulary};
//!
//! // A 4-token vocabulary: token 0 is end-of-generation.
//! let tokens = ["<eos>", "{", "}", "x"]
//!     .iter()
//!     .enumerate()
//!     .map(|(i, t)| (t.as_bytes().to_vec(), if i == 0 { TokenKind::Control } else { TokenKind::Normal }))
//!     .collect();
//! let vocab = Arc::new(Vocabulary::new(tokens, vec![0])?);
//! let grammar = stencil_grammar::parse_gbnf(r#"root ::= "{" "x"* "}""#)?;
//! let compiled = CompiledGrammar::new(&grammar, vocab)?;
//!
//! let mut m = Matcher::new(compiled);
//! let mut mask = bitmask::new_mask(4);
//! m.fill_mask(&mut mask)?;
//! assert_eq!(bitmask::allowed(&mask).collect::<Vec<_>>(), vec![1]); // "{"
//! m.accept_token(1)?;
//! m.fill_mask(&mut mask)?;
//! assert_eq!(bitmask::allowed(&mask).collect::<Vec<_>>(), vec![2, 3]); // "}", "x"
//! m.accept_token(2)?;
//! assert!(m.can_end());
//! m.fill_mask(&mut mask)?;
//! assert_eq!(bitmask::allowed(&mask).collect::<Vec<_>>(), vec![0]); // only end-of-generation
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Tracing
//!
//! Compiling runs each pass under a `tracing` span at debug level (`compile`, `split`,
//! `callees`, `inline`, `representatives`, `fuse`, `build`, `fixpoint`, `trim`,
//! `text_facts`, `closures`, `follow`), with sizes as fields; rules slow to build are
//! `debug!` events. Nothing is recorded unless a subscriber enables the
//! `stencil_mask` target at debug level.

#![warn(missing_docs)]

mod automaton;
pub mod bitmask;
pub mod bytes;
mod cache;
mod earley;
mod error;
mod limits;
mod matcher;
pub mod vocab;
pub mod walk;

pub use error::{CompileError, MatchError};
pub use limits::{LimitKind, Limits};
pub use matcher::{fill_masks_parallel, CompiledGrammar, GrammarStats, Matcher};
pub use vocab::{TokenKind, VocabError, Vocabulary};
