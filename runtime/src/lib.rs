//! Constrained decoding on llama.cpp.
//!
//! Load a GGUF [`Model`] (its vocabulary is read from the same file, so masks line up with
//! the logits), open a [`Session`] (a llama.cpp context), and [`Session::generate`] text —
//! free, or constrained by a grammar compiled against [`Model::vocab`] — with the sampling
//! pipeline of `stencil-sampling`, stop strings, streaming, and a [`GenerationRecord`] of
//! what ran. [`Session::generate_n`] decodes N samples of one request together, and a
//! [`decode::Decoder`] any set of sequences (one forward pass per step, each sequence with
//! its own matcher, sampler and stop state). [`Session::beam_search`] keeps several beams,
//! each inside the grammar. Contrastive search (`SamplingParams::penalty_alpha`, on a
//! session with [`SessionOptions::embeddings`]) runs in the same loop, each step's
//! candidates scored in one batch.
//!
//! The root holds what a caller names to generate; the rest lives in modules: [`decode`]
//! (the loop, and [`decode::Forward`], the model as the loop sees it), [`speculate`],
//! [`select`] (self-consistency, best-of-N), [`contrastive`], [`beam`], [`chat`], [`score`]
//! (log-probabilities of a given continuation, mean-pooled hidden states),
//! [`telemetry`], [`baseline`].
//!
//! ```no_run
//! use stencil_runtime::{GenerateRequest, Model, ModelOptions, Prompt, SessionOptions};
//! let model = Model::load("model.gguf", &ModelOptions::default())?;
//! let grammar = stencil_grammar::parse_gbnf(r#"root ::= "yes" | "no""#).unwrap();
//! let grammar = stencil_mask::CompiledGrammar::new(&grammar, model.vocab().clone()).unwrap();
//! let mut session = model.session(&SessionOptions::default())?;
//! let request = GenerateRequest::new(Prompt::user_or_text(&model, "Is water wet?"))
//!     .with_grammar(grammar, "gbnf");
//! let out = session.generate(&request, |piece| print!("{piece}"))?;
//! assert!(out.text == "yes" || out.text == "no");
//! # Ok::<(), stencil_runtime::RuntimeError>(())
//! ```

pub mod baseline;
pub mod beam;
pub mod chat;
pub mod contrastive;
pub mod decode;
mod error;
mod model;
pub mod score;
pub mod select;
mod session;
pub mod speculate;
pub mod telemetry;

pub use chat::{ChatMessage, ChatToolCall};
pub use error::{Result, RuntimeError};
pub use model::{FlashAttention, Model, ModelInfo, ModelOptions, Prompt, SessionOptions};
pub use session::{GenerateRequest, Generation, Session};
pub use speculate::Speculation;
pub use stencil_sampling as sampling;
pub use telemetry::{GenerationRecord, StopReason};
