//! Constrained decoding on llama.cpp.
//!
//! Load a GGUF [`Model`] (its vocabulary is read from the same file, so masks line up with
//! the logits), open a [`Session`] (a llama.cpp context), and [`Session::generate`] text —
//! free, or constrained by a grammar compiled against [`Model::vocab`] — with the sampling
//! pipeline of `stencil-sampling`, stop strings, streaming, and a [`GenerationRecord`] of
//! what ran. [`Session::generate_n`] decodes N samples of one request together, and a
//! [`BatchDecoder`] any set of sequences (one llama.cpp batch per step, each sequence with
//! its own matcher, sampler and stop state). [`Session::beam_search`] keeps several beams,
//! each inside the grammar. Contrastive search (`SamplingParams::penalty_alpha`, on a
//! session with [`SessionOptions::embeddings`]) runs in the same loop, each step's
//! candidates scored in one batch.
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

mod baseline;
mod batch;
mod beam;
mod chat;
mod contrastive;
mod draft;
mod error;
mod model;
pub mod select;
mod session;
mod speculate;
mod telemetry;

pub use baseline::BaselineRun;
pub use batch::{sample_seed, BatchDecoder, SequenceHandle};
pub use beam::{Beam, BeamParams};
pub use chat::{ChatMessage, ChatTemplate};
pub use contrastive::{contrastive_pick, contrastive_score, max_cosine, ContrastiveStats};
pub use error::{Result, RuntimeError};
pub use model::{FlashAttention, Model, ModelInfo, ModelOptions, Prompt, SessionOptions};
pub use select::{
    canonical_json, canonical_number, self_consistency, Answer, AnswerRegex, BestOf, BestOfRun, Candidate, Cost,
    ExtractError, Extractor, Normalizer, Ranked, Scorer, SelfConsistency, SelfConsistencyParams, Tally, Verifiers,
    VoteOutcome,
};
pub use session::{GenerateRequest, Generation, Session};
pub use speculate::{lookup, DraftModel, Lookup, LookupOrigin, PromptLookup, Speculation, SpeculationStats};
pub use stencil_sampling as sampling;
pub use telemetry::{GenerationRecord, StopReason, Timings};
