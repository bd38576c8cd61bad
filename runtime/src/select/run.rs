//! Self-consistency and best-of-N on the multi-sequence decode loop: N samples of one
//! request decoded together ([`Session::generate_n`]'s seeds), then a vote or verifiers.

use std::time::Instant;

use serde::Serialize;

use super::{BestOf, Candidate, Extractor, Normalizer, Tally, Verifiers, VoteOutcome};
use crate::error::Result;
use crate::session::{GenerateRequest, Generation, Session};
use crate::telemetry::StopReason;

/// What N samples cost.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Cost {
    /// Samples started.
    pub samples: usize,
    /// Samples decoded to their end (the others were cancelled once the vote was decided).
    pub finished: usize,
    /// Tokens generated over all samples.
    pub tokens: usize,
    /// Wall-clock time of the whole run, prompt included.
    pub total_ms: f64,
}

/// How self-consistency votes.
///
/// ```
/// use stencil_runtime::select::{Extractor, Normalizer, SelfConsistencyParams};
/// let p = SelfConsistencyParams::new(5, Extractor::json_pointer("/answer").unwrap());
/// assert!(p.early_stop && p.normalizer == Normalizer::default());
/// ```
#[derive(Clone, Debug)]
pub struct SelfConsistencyParams {
    /// Samples to draw.
    pub n: usize,
    pub extractor: Extractor,
    pub normalizer: Normalizer,
    /// Cancel the samples still running once the leader cannot be overtaken (or tied) by
    /// them. Samples are counted in sample order, so the outcome does not depend on which
    /// finish first.
    pub early_stop: bool,
}

impl SelfConsistencyParams {
    /// `n` samples, the default normalizer, early stop on.
    pub fn new(n: usize, extractor: Extractor) -> Self {
        SelfConsistencyParams { n, extractor, normalizer: Normalizer::default(), early_stop: true }
    }
}

/// The result of [`Session::self_consistency`].
#[derive(Clone, Debug)]
pub struct SelfConsistency {
    /// Every sample, in order; those cancelled by the early stop end with
    /// [`StopReason::Cancelled`] and did not vote.
    pub samples: Vec<Generation>,
    /// Each sample's vote: its normalized answer, `None` when it gave none or did not vote.
    pub answers: Vec<Option<String>>,
    pub vote: VoteOutcome,
    pub cost: Cost,
}

impl SelfConsistency {
    /// The first sample that gave the winning answer.
    pub fn winner(&self) -> Option<&Generation> {
        self.vote.winner_sample.map(|i| &self.samples[i])
    }
}

/// The result of [`Session::best_of`].
#[derive(Clone, Debug)]
pub struct BestOfRun {
    /// Every sample, in order.
    pub samples: Vec<Generation>,
    /// The ranking and why the winner won.
    pub decision: BestOf,
    pub cost: Cost,
}

impl BestOfRun {
    /// The winning sample.
    pub fn winner(&self) -> Option<&Generation> {
        self.decision.winner.map(|i| &self.samples[i])
    }
}

impl Session<'_> {
    /// Self-consistency (Wang et al. 2022): `params.n` samples of `request` decoded
    /// together, each one's answer extracted and normalized, and a majority vote (ties: the
    /// answer whose first vote came first). With `early_stop`, the samples still running
    /// are cancelled once the vote is decided.
    pub fn self_consistency(
        &mut self,
        request: &GenerateRequest,
        params: &SelfConsistencyParams,
    ) -> Result<SelfConsistency> {
        let start = Instant::now();
        let n = params.n;
        let mut batch = self.decoder();
        let first = batch.add_samples(request, n)?[0];
        let mut done: Vec<Option<Generation>> = vec![None; n];
        let mut tally = Tally::new();
        let mut answers = vec![None; n];
        let mut decided = false;
        let mut finished = batch.take_finished(|_, _| {});
        loop {
            for (handle, result) in finished {
                done[handle - first] = Some(result?);
            }
            // Votes in sample order: a sample votes once all before it have.
            while !decided && tally.samples() < n {
                let i = tally.samples();
                let Some(g) = &done[i] else { break };
                if g.stop_reason == StopReason::Cancelled {
                    break;
                }
                answers[i] = params.extractor.extract(&g.text).and_then(|a| params.normalizer.key(&a));
                tally.push(answers[i].clone());
                decided = params.early_stop && tally.samples() < n && tally.decided(n - tally.samples());
            }
            if decided {
                for i in 0..n {
                    batch.cancel(first + i);
                }
            }
            if batch.is_idle() {
                break;
            }
            finished = batch.step(|_, _| {})?;
        }
        drop(batch);
        let samples: Vec<Generation> = done.into_iter().map(|g| g.expect("every sample finishes")).collect();
        let vote = tally.outcome(decided);
        // Answers of samples that finished but were not counted are not votes.
        for a in answers.iter_mut().skip(tally.samples()) {
            *a = None;
        }
        let cost = cost(&samples, start);
        Ok(SelfConsistency { samples, answers, vote, cost })
    }

    /// Best-of-N: `n` samples of `request` decoded together, then `verifiers` (schema
    /// validity, a scorer, mean log-probability) pick one. A sample cut by `max_tokens` or
    /// the context is rejected before the verifiers run (its text is incomplete).
    pub fn best_of(&mut self, request: &GenerateRequest, n: usize, verifiers: &mut Verifiers) -> Result<BestOfRun> {
        let start = Instant::now();
        let samples = self.generate_n(request, n, |_, _| {})?;
        let candidates: Vec<Candidate> = samples
            .iter()
            .enumerate()
            .map(|(index, g)| Candidate {
                index,
                text: g.text.clone(),
                mean_logprob: g.record.mean_logprob.unwrap_or(f64::NEG_INFINITY),
                tokens: g.tokens.len(),
                complete: !g.stop_reason.is_cut(),
            })
            .collect();
        let decision = verifiers.best_of(&candidates);
        let cost = cost(&samples, start);
        Ok(BestOfRun { samples, decision, cost })
    }
}

fn cost(samples: &[Generation], start: Instant) -> Cost {
    Cost {
        samples: samples.len(),
        finished: samples.iter().filter(|g| g.stop_reason != StopReason::Cancelled).count(),
        tokens: samples.iter().map(|g| g.tokens.len()).sum(),
        total_ms: start.elapsed().as_secs_f64() * 1e3,
    }
}
