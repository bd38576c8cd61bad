//! Inference-time scaling: choosing one output among N sampled candidates.
//!
//! The decode loop samples N candidates for one request; these pick among them (all but
//! `run`, which drives the decoding, work without a model):
//!
//! | type | job |
//! |---|---|
//! | [`Extractor`] | finds a candidate's answer: a JSON pointer, a regex, or the last line |
//! | [`Normalizer`] | turns an [`Answer`] into the key it votes under (trim, case fold, numeric and JSON canonical forms) |
//! | [`Tally`], [`self_consistency`] | majority vote, with a deterministic tie-break and early stopping ([`Tally::decided`]) |
//! | [`Verifiers`], [`Candidate`] | best-of-N: schema validity, then a user scorer, then mean log-probability |
//! | [`Session::self_consistency`](crate::Session::self_consistency), [`Session::best_of`](crate::Session::best_of) | both on N samples decoded together (the multi-sequence loop) |
//!
//! # Example: self-consistency
//!
//! ```
//! use stencil_runtime::select::{self_consistency, Extractor, Normalizer};
//!
//! let samples = [
//!     r#"{"reasoning": "6 × 7 = 42", "answer": 42}"#,
//!     r#"{"reasoning": "6 × 7 = 43", "answer": 43}"#,
//!     r#"{"reasoning": "7 × 6", "answer": 42.0}"#,
//!     r#"{"reasoning": "again", "answer": 42}"#,
//!     r#"{"reasoning": "and again", "answer": 42}"#,
//! ];
//! let extractor = Extractor::json_pointer("/answer")?;
//! // 5 planned: after the 4th sample 42 has 3 votes, 43 has 1, and 1 sample is left,
//! // so 42 can no longer be caught: the 5th is never looked at.
//! let vote = self_consistency(samples, &extractor, &Normalizer::default(), 5, true);
//! assert_eq!(vote.winner.as_deref(), Some("42"));
//! assert_eq!(vote.winner_sample, Some(0));
//! assert_eq!((vote.samples_used, vote.stopped_early), (4, true));
//! assert_eq!(vote.counts, vec![("42".to_string(), 3), ("43".to_string(), 1)]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Example: in a decode loop that samples in waves
//!
//! ```no_run
//! use stencil_runtime::select::{Extractor, Normalizer, Tally};
//! # fn decode_wave(n: usize) -> Vec<String> { vec![String::new(); n] }
//! let (planned, wave) = (16, 4);
//! let extractor = Extractor::LastLine;
//! let normalizer = Normalizer::default().with_case_fold(true);
//! let mut tally = Tally::new();
//! while tally.samples() < planned && !tally.decided(planned - tally.samples()) {
//!     // The wave's texts, in sample order.
//!     for text in decode_wave(wave.min(planned - tally.samples())) {
//!         tally.push_text(&text, &extractor, &normalizer);
//!     }
//! }
//! let outcome = tally.outcome(tally.samples() < planned);
//! println!("{:?} ({:.0} % agreement)", outcome.winner, 100.0 * outcome.agreement);
//! ```
//!
//! For best-of-N see [`Verifiers`].

mod best_of;
mod extract;
mod normalize;
mod run;
mod vote;

pub use best_of::{BestOf, Candidate, Ranked, Scorer, Verifiers};
pub use extract::{Answer, AnswerRegex, ExtractError, Extractor};
pub use normalize::{canonical_json, canonical_number, Normalizer};
pub use run::{BestOfRun, Cost, SelfConsistency, SelfConsistencyParams};
pub use vote::{self_consistency, Tally, VoteOutcome};
