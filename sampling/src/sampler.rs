//! [`Sampler`]: logits + grammar mask + history → the next token, through the fixed pipeline
//! of the [crate docs](crate#the-pipeline).
//!
//! One step is one pass over the allowed tokens (set bits of the mask, zero words skipped;
//! every id without a mask). Bias and penalties touch few ids (the bias map, the history's
//! distinct tokens, the n-gram bans), so they are computed first, for those ids only, into a
//! short list sorted by id that the pass merges in; the watermark (one SplitMix64 output per
//! allowed token) is added in the same pass. The pass keeps the tokens above `-inf` in
//! a reused candidate buffer; greedy keeps only the running argmax. Top-k is a selection,
//! top-p a selection by probability mass (no full sort), min-p a filter.

use std::cmp::Ordering;
use std::fmt;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::watermark::Greenlist;
use crate::{SamplingError, SamplingParams, TokenHistory};

/// One surviving token: its id, adjusted logit and, from stage 5 on, its unnormalized
/// probability `exp((logit - max) / T)`.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    id: u32,
    logit: f32,
    weight: f64,
}

/// Decreasing logit, then increasing id: a total order, so top-k and top-p are deterministic
/// when logits tie.
fn by_rank(a: &Candidate, b: &Candidate) -> Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

/// Turns one decode step's logits into a token, following one request's [`SamplingParams`].
///
/// A sampler owns the parameters (validated once), a seeded ChaCha8 generator and the
/// buffers it reuses at every step; keep one per sequence. It never panics: a mask that
/// allows nothing is [`SamplingError::NoCandidates`], NaN logits count as `-inf`, `+inf`
/// logits as the largest finite `f32`.
///
/// # Example
///
/// ```
/// use stencil_sampling::{Sampler, SamplingParams, TokenHistory};
///
/// let logits = [1.0, 4.0, 3.0, 2.0];
/// let history = TokenHistory::with_prompt(&[7, 8]);
///
/// // Greedy: the argmax among the allowed tokens (bit t of the mask = token t).
/// let mut greedy = Sampler::new(SamplingParams::greedy())?;
/// assert_eq!(greedy.sample(&logits, None, &history)?, 1);
/// assert_eq!(greedy.sample(&logits, Some(&[0b1101]), &history)?, 2);
///
/// // Seeded: the same seed replays the same draws.
/// let params = SamplingParams { temperature: 0.8, top_k: 3, seed: Some(42), ..Default::default() };
/// let mut a = Sampler::new(params.clone())?;
/// let mut b = Sampler::new(params)?;
/// for _ in 0..10 {
///     assert_eq!(a.sample(&logits, None, &history)?, b.sample(&logits, None, &history)?);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Sampler {
    params: SamplingParams,
    seed: u64,
    rng: ChaCha8Rng,
    candidates: Vec<Candidate>,
    /// The logits changed by stages 1–2, as (id, new logit), sorted by id.
    edits: Vec<(u32, f32)>,
    /// Scratch: the tokens the n-gram rule bans.
    banned: Vec<u32>,
    /// Stage 4: the watermark's greenlists and its bias δ (`None` when off or δ = 0).
    watermark: Option<(Greenlist, f32)>,
}

impl fmt::Debug for Sampler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sampler").field("params", &self.params).field("seed", &self.seed).finish_non_exhaustive()
    }
}

/// What stages 1–8 left: a greedy choice, or weighted candidates to draw from.
enum Outcome {
    Greedy(u32),
    /// The candidates' weights are their unnormalized probabilities; this is their sum.
    Weighted(f64),
}

impl Sampler {
    /// A sampler for `params`, seeded with `params.seed` or, when it is `None`, with a seed
    /// drawn from the operating system (see [`seed`](Sampler::seed)).
    ///
    /// # Errors
    ///
    /// [`SamplingError::InvalidParam`] when [`SamplingParams::validate`] rejects `params`.
    pub fn new(params: SamplingParams) -> Result<Sampler, SamplingError> {
        params.validate()?;
        let seed = params.seed.unwrap_or_else(|| rand::thread_rng().gen());
        let watermark = match &params.watermark {
            Some(w) if w.delta > 0.0 => Some((w.greenlist()?, w.delta)),
            _ => None,
        };
        Ok(Sampler {
            params,
            seed,
            rng: ChaCha8Rng::seed_from_u64(seed),
            candidates: Vec::new(),
            edits: Vec::new(),
            banned: Vec::new(),
            watermark,
        })
    }

    /// The seed in use: `params.seed`, or the one drawn by [`new`](Sampler::new). Setting it
    /// as `params.seed` replays the run (same logits in, same tokens out).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The (validated) parameters.
    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Picks the next token: stages 1–8, then a seeded draw, or the argmax when greedy.
    ///
    /// `logits` has one entry per token of the model's vocabulary. With `mask`, token `t` is
    /// allowed iff `mask[t / 32] >> (t % 32) & 1 == 1`; tokens at or beyond `mask.len() * 32`
    /// are not. `history` feeds the penalties and the watermark's context.
    ///
    /// Each non-greedy call takes one `f64` from the generator, so the draws depend only on
    /// the seed and the sequence of calls.
    ///
    /// # Errors
    ///
    /// [`SamplingError::NoCandidates`] when no allowed token has a logit above `-inf` (after
    /// bias and penalties).
    pub fn sample(
        &mut self,
        logits: &[f32],
        mask: Option<&[u32]>,
        history: &TokenHistory,
    ) -> Result<u32, SamplingError> {
        let outcome = self.run(logits, mask, history)?;
        self.draw(outcome)
    }

    /// [`sample`](Sampler::sample) and the [`logprob`](Sampler::logprob) of the token it
    /// picks, from one pass of the pipeline: the same token, the same value and the same
    /// draws from the generator as the two calls (what a decode step records).
    ///
    /// ```
    /// use stencil_sampling::{Sampler, SamplingParams, TokenHistory};
    ///
    /// let params = SamplingParams { temperature: 0.8, seed: Some(5), ..Default::default() };
    /// let (mut one, mut two) = (Sampler::new(params.clone())?, Sampler::new(params)?);
    /// let (logits, history) = ([0.5, 2.0, 1.0], TokenHistory::new());
    /// let (token, logprob) = one.sample_with_logprob(&logits, None, &history)?;
    /// assert_eq!(token, two.sample(&logits, None, &history)?);
    /// assert_eq!(logprob, two.logprob(&logits, None, &history, token));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sample_with_logprob(
        &mut self,
        logits: &[f32],
        mask: Option<&[u32]>,
        history: &TokenHistory,
    ) -> Result<(u32, Option<f64>), SamplingError> {
        self.prepare(logits, mask, history, false)?;
        let (max, temperature, log_total) = self.normalizer();
        let (token, logit) = if self.params.is_greedy() {
            // The lowest id with the largest logit, as the greedy pass picks it.
            let best = self.candidates.iter().find(|c| f64::from(c.logit) == max).ok_or(SamplingError::NoCandidates)?;
            (best.id, best.logit)
        } else {
            let outcome = self.truncate()?;
            let token = self.draw(outcome)?;
            let chosen = self.candidates.iter().find(|c| c.id == token).ok_or(SamplingError::NoCandidates)?;
            (token, chosen.logit)
        };
        Ok((token, Some((f64::from(logit) - max) / temperature - log_total)))
    }

    /// A token from what stages 1–8 left: the greedy choice, or a seeded draw by weight.
    fn draw(&mut self, outcome: Outcome) -> Result<u32, SamplingError> {
        match outcome {
            Outcome::Greedy(token) => Ok(token),
            Outcome::Weighted(total) => {
                let mut target = self.rng.gen::<f64>() * total;
                for c in &self.candidates {
                    if target < c.weight {
                        return Ok(c.id);
                    }
                    target -= c.weight;
                }
                // Rounding left `target` at the very end: the last candidate with weight.
                self.candidates.iter().rev().find(|c| c.weight > 0.0).map(|c| c.id).ok_or(SamplingError::NoCandidates)
            }
        }
    }

    /// The exact distribution [`sample`](Sampler::sample) draws from, after every stage:
    /// `(token, probability)` pairs with probability > 0, most likely first (ties: lowest id
    /// first), summing to 1. Greedy gives the argmax with probability 1; nothing to sample
    /// gives an empty vector. Does not touch the generator.
    ///
    /// # Example
    ///
    /// ```
    /// use stencil_sampling::{Sampler, SamplingParams, TokenHistory};
    ///
    /// let mut sampler = Sampler::new(SamplingParams { top_k: 2, ..Default::default() })?;
    /// let dist = sampler.distribution(&[0.0, 1.0, 0.0, 1.0], None, &TokenHistory::new());
    /// assert_eq!(dist, [(1, 0.5), (3, 0.5)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn distribution(&mut self, logits: &[f32], mask: Option<&[u32]>, history: &TokenHistory) -> Vec<(u32, f64)> {
        let mut dist = match self.run(logits, mask, history) {
            Err(_) => Vec::new(),
            Ok(Outcome::Greedy(token)) => vec![(token, 1.0)],
            Ok(Outcome::Weighted(total)) => {
                self.candidates.iter().filter(|c| c.weight > 0.0).map(|c| (c.id, c.weight / total)).collect()
            }
        };
        dist.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        dist
    }

    /// One uniform draw in `[0, 1)` from the sampler's generator (the same stream
    /// [`sample`](Sampler::sample) draws from): for [`speculative::verify`](crate::speculative::verify).
    ///
    /// ```
    /// use stencil_sampling::{Sampler, SamplingParams};
    ///
    /// let mut a = Sampler::new(SamplingParams { seed: Some(3), ..Default::default() })?;
    /// let mut b = a.clone();
    /// let u = a.uniform();
    /// assert!((0.0..1.0).contains(&u) && u == b.uniform());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn uniform(&mut self) -> f64 {
        self.rng.gen::<f64>()
    }

    /// The `n` most likely next tokens with their log-probabilities after stages 1–5 only
    /// (bias, penalties, mask, watermark, temperature — taken as 1 when greedy; no truncation), most
    /// likely first (ties: lowest id). For beam search and for OpenAI-style `logprobs`.
    /// Empty when nothing can follow.
    ///
    /// # Example
    ///
    /// ```
    /// use stencil_sampling::{Sampler, SamplingParams, TokenHistory};
    ///
    /// let mut sampler = Sampler::new(SamplingParams::greedy())?;
    /// let top = sampler.top_logprobs(&[0.0, 2.0, 0.0, 2.0], Some(&[0b0111]), &TokenHistory::new(), 2);
    /// assert_eq!(top[0].0, 1);
    /// let p1 = top[0].1.exp();
    /// assert!((p1 - 2f64.exp() / (2.0 + 2f64.exp())).abs() < 1e-12);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn top_logprobs(
        &mut self,
        logits: &[f32],
        mask: Option<&[u32]>,
        history: &TokenHistory,
        n: usize,
    ) -> Vec<(u32, f64)> {
        if n == 0 || self.prepare(logits, mask, history, false).is_err() {
            return Vec::new();
        }
        let log_softmax = self.log_softmax();
        self.top_of_prepared(n, &log_softmax)
    }

    /// The log-probability of `token` on the same terms as
    /// [`top_logprobs`](Sampler::top_logprobs) (stages 1–5, no truncation; temperature 1
    /// when greedy): what best-of-N ranks candidates by. `None` when `token` is not allowed
    /// or nothing can follow.
    ///
    /// # Example
    ///
    /// ```
    /// use stencil_sampling::{Sampler, SamplingParams, TokenHistory};
    ///
    /// let mut sampler = Sampler::new(SamplingParams::greedy())?;
    /// let lp = sampler.logprob(&[0.0, 0.0], None, &TokenHistory::new(), 1).unwrap();
    /// assert!((lp - 0.5f64.ln()).abs() < 1e-12);
    /// assert_eq!(sampler.logprob(&[0.0, 0.0], Some(&[0b01]), &TokenHistory::new(), 1), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn logprob(&mut self, logits: &[f32], mask: Option<&[u32]>, history: &TokenHistory, token: u32) -> Option<f64> {
        self.prepare(logits, mask, history, false).ok()?;
        self.logprob_of_prepared(token, &self.log_softmax())
    }

    /// [`logprob`](Sampler::logprob) of `token` and [`top_logprobs`](Sampler::top_logprobs)
    /// `n`, from one pass of the pipeline (a sampled step that reports its alternatives).
    ///
    /// ```
    /// use stencil_sampling::{Sampler, SamplingParams, TokenHistory};
    ///
    /// let mut sampler = Sampler::new(SamplingParams::greedy())?;
    /// let (logits, history) = ([0.0, 2.0, 1.0], TokenHistory::new());
    /// let (lp, top) = sampler.logprob_and_top(&logits, None, &history, 2, 2);
    /// assert_eq!(lp, sampler.logprob(&logits, None, &history, 2));
    /// assert_eq!(top, sampler.top_logprobs(&logits, None, &history, 2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn logprob_and_top(
        &mut self,
        logits: &[f32],
        mask: Option<&[u32]>,
        history: &TokenHistory,
        token: u32,
        n: usize,
    ) -> (Option<f64>, Vec<(u32, f64)>) {
        if self.prepare(logits, mask, history, false).is_err() {
            return (None, Vec::new());
        }
        let log_softmax = self.log_softmax();
        let logprob = self.logprob_of_prepared(token, &log_softmax);
        let top = if n == 0 { Vec::new() } else { self.top_of_prepared(n, &log_softmax) };
        (logprob, top)
    }

    /// Log-probabilities over the prepared candidates (temperature 1 when greedy).
    fn log_softmax(&self) -> impl Fn(&Candidate) -> f64 {
        let (max, temperature, log_total) = self.normalizer();
        move |c: &Candidate| (f64::from(c.logit) - max) / temperature - log_total
    }

    /// The prepared candidates' largest logit, temperature (1 when greedy) and log of the
    /// softmax's denominator: `log p(c) = (logit(c) − max) / T − log_total`.
    fn normalizer(&self) -> (f64, f64, f64) {
        let temperature = if self.params.is_greedy() { 1.0 } else { f64::from(self.params.temperature) };
        let max = max_logit(&self.candidates);
        let log_total =
            self.candidates.iter().map(|c| ((f64::from(c.logit) - max) / temperature).exp()).sum::<f64>().ln();
        (max, temperature, log_total)
    }

    /// `token`'s log-probability among the prepared candidates (in id order).
    fn logprob_of_prepared(&self, token: u32, log_softmax: &impl Fn(&Candidate) -> f64) -> Option<f64> {
        let chosen = self.candidates.binary_search_by_key(&token, |c| c.id).ok()?;
        Some(log_softmax(&self.candidates[chosen]))
    }

    /// The `n` best prepared candidates with their log-probabilities (reorders them).
    fn top_of_prepared(&mut self, n: usize, log_softmax: &impl Fn(&Candidate) -> f64) -> Vec<(u32, f64)> {
        sort_front(&mut self.candidates, n);
        self.candidates.truncate(n);
        self.candidates.iter().map(|c| (c.id, log_softmax(c))).collect()
    }

    /// Stages 1–4: fills `candidates` with the allowed tokens above `-inf` after bias and
    /// penalties (NaN counts as `-inf`, `+inf` becomes `f32::MAX`), in increasing id order,
    /// with the watermark's δ added to the green ones. With `greedy`, keeps only the best
    /// one instead.
    fn prepare(
        &mut self,
        logits: &[f32],
        mask: Option<&[u32]>,
        history: &TokenHistory,
        greedy: bool,
    ) -> Result<(), SamplingError> {
        let logits = &logits[..logits.len().min(u32::MAX as usize)];
        self.edit(logits, history);
        // Stage 4, on what the mask let through: a masked token stays masked.
        let green = self.watermark.as_ref().and_then(|(g, delta)| Some((g, g.seed(history.tokens())?, *delta)));
        let watermark = |id: u32, logit: f32| match green {
            Some((g, seed, delta)) if g.is_green(seed, id) => (logit + delta).min(f32::MAX),
            _ => logit,
        };
        let candidates = &mut self.candidates;
        candidates.clear();
        if greedy {
            let (mut best, mut best_logit) = (None, f32::NEG_INFINITY);
            scan(logits, mask, &self.edits, |id, logit| {
                let logit = watermark(id, logit);
                if logit > best_logit {
                    // Strictly greater: ties keep the lowest id.
                    (best, best_logit) = (Some(id), logit);
                }
            });
            candidates.extend(best.map(|id| Candidate { id, logit: best_logit, weight: 0.0 }));
        } else {
            if mask.is_none() {
                candidates.reserve(logits.len());
            }
            scan(logits, mask, &self.edits, |id, logit| {
                candidates.push(Candidate { id, logit: watermark(id, logit), weight: 0.0 })
            });
        }
        if candidates.is_empty() {
            Err(SamplingError::NoCandidates)
        } else {
            Ok(())
        }
    }

    /// Stages 1–2 for the few ids they touch: fills `edits` with (id, new logit), by id.
    fn edit(&mut self, logits: &[f32], history: &TokenHistory) {
        let p = &self.params;
        let (rep, freq, pres) = (p.repetition_penalty, p.frequency_penalty, p.presence_penalty);
        let penalize = rep != 1.0 || freq != 0.0 || pres != 0.0;
        ngram_bans(history.tokens(), p.no_repeat_ngram_size as usize, &mut self.banned);
        self.banned.sort_unstable();
        let edits = &mut self.edits;
        edits.clear();
        edits.extend(p.logit_bias.keys().map(|&id| (id, 0.0)));
        if penalize {
            edits.extend(history.distinct().iter().map(|c| (c.token, 0.0)));
        }
        edits.extend(self.banned.iter().map(|&id| (id, 0.0)));
        edits.retain(|&(id, _)| (id as usize) < logits.len());
        edits.sort_unstable_by_key(|e| e.0);
        edits.dedup_by_key(|e| e.0);
        for (id, logit) in edits.iter_mut() {
            let raw = logits[*id as usize];
            let mut l = if raw.is_nan() { f32::NEG_INFINITY } else { raw };
            // Stage 1: logit bias.
            if let Some(bias) = p.logit_bias.get(id) {
                l += bias;
            }
            // Stage 2: repetition penalty (prompt + output), frequency and presence penalties
            // (output only), the n-gram ban.
            if penalize {
                let count = history.count(*id);
                if rep != 1.0 && (count.prompt > 0 || count.output > 0) {
                    l = if l > 0.0 { l / rep } else { l * rep };
                }
                if count.output > 0 {
                    l -= count.output as f32 * freq + pres;
                }
            }
            if self.banned.binary_search(id).is_ok() {
                l = f32::NEG_INFINITY;
            }
            *logit = l;
        }
    }

    /// Stages 1–8: a greedy choice, or the weighted candidates to draw from.
    fn run(&mut self, logits: &[f32], mask: Option<&[u32]>, history: &TokenHistory) -> Result<Outcome, SamplingError> {
        let greedy = self.params.is_greedy();
        self.prepare(logits, mask, history, greedy)?;
        if greedy {
            // Truncation always keeps the argmax: no softmax needed.
            return self.candidates.first().map(|c| Outcome::Greedy(c.id)).ok_or(SamplingError::NoCandidates);
        }
        self.truncate()
    }

    /// Stages 5–8 on the prepared candidates (not greedy): the weighted candidates to draw
    /// from.
    fn truncate(&mut self) -> Result<Outcome, SamplingError> {
        let candidates = &mut self.candidates;
        // Stage 6 before 5 in the code: top-k needs only the logits' order, and then only k
        // weights are computed.
        let k = self.params.top_k as usize;
        if k > 0 && k < candidates.len() {
            candidates.select_nth_unstable_by(k - 1, by_rank);
            candidates.truncate(k);
        }
        // Stage 5: temperature, as weights exp((l - max) / T): the most likely weighs 1.
        let (max, temperature) = (max_logit(candidates), f64::from(self.params.temperature));
        let weigh = |c: &mut Candidate| {
            c.weight = ((f64::from(c.logit) - max) / temperature).exp();
            c.weight
        };
        // Stage 7: top-p.
        let top_p = f64::from(self.params.top_p);
        let mut total;
        if top_p < 1.0 {
            // The mass above a few weight floors bounds the nucleus: once the tokens above a
            // floor hold `target`, the lighter ones cannot be in it. On peaked distributions
            // this leaves a few dozen tokens to select from. (Separate sums, in registers: a
            // histogram indexed by weight would chain its additions through memory.)
            const FLOORS: [f64; 3] = [1.0 / 16.0, 1.0 / 1024.0, 1.0 / 1048576.0];
            let (mut above, mut all) = ([0.0f64; 3], 0.0);
            for c in candidates.iter_mut() {
                let w = weigh(c);
                for (sum, floor) in above.iter_mut().zip(FLOORS) {
                    *sum += if w >= floor { w } else { 0.0 };
                }
                all += w;
            }
            let target = top_p * all;
            // A margin for rounding: the sums run in a different order from the nucleus's.
            if let Some(i) = above.iter().position(|&sum| sum >= target * (1.0 + 1e-9)) {
                candidates.retain(|c| c.weight >= FLOORS[i]);
            }
            let keep = nucleus(candidates, target);
            candidates.truncate(keep);
            total = candidates.iter().map(|c| c.weight).sum();
        } else {
            total = candidates.iter_mut().map(weigh).sum();
        }
        // Stage 8: min-p, relative to the most likely token, whose weight is 1.
        let min_p = f64::from(self.params.min_p);
        if min_p > 0.0 {
            candidates.retain(|c| c.weight >= min_p);
            total = candidates.iter().map(|c| c.weight).sum();
        }
        // (Weights that underflowed to 0 may remain: they are never drawn.)
        Ok(Outcome::Weighted(total))
    }
}

/// Calls `sink(id, logit)` for every allowed token, in increasing id order, with its logit
/// replaced where `edits` (sorted by id) says, if that logit is above `-inf` (so not NaN);
/// `+inf` is passed as `f32::MAX`.
fn scan(logits: &[f32], mask: Option<&[u32]>, edits: &[(u32, f32)], mut sink: impl FnMut(u32, f32)) {
    let mut take = |id: usize, logit: f32| {
        if logit > f32::NEG_INFINITY {
            sink(id as u32, logit.min(f32::MAX));
        }
    };
    match mask {
        None => {
            // Tight loops between the edited ids.
            let mut start = 0;
            for &(id, value) in edits {
                let id = id as usize;
                logits[start..id].iter().enumerate().for_each(|(i, &logit)| take(start + i, logit));
                take(id, value);
                start = id + 1;
            }
            logits[start..].iter().enumerate().for_each(|(i, &logit)| take(start + i, logit));
        }
        Some(mask) => {
            let mut edits = edits.iter().peekable();
            for (w, &word) in mask.iter().enumerate().take(logits.len().div_ceil(32)) {
                let mut bits = word;
                while bits != 0 {
                    let id = w * 32 + bits.trailing_zeros() as usize;
                    if id >= logits.len() {
                        break;
                    }
                    let mut logit = logits[id];
                    while let Some(&&(edited, value)) = edits.peek() {
                        if edited as usize > id {
                            break;
                        }
                        edits.next();
                        if edited as usize == id {
                            logit = value;
                        }
                    }
                    take(id, logit);
                    bits &= bits - 1;
                }
            }
        }
    }
}

/// Top-p's cut: reorders `candidates` so that the first `m` are the shortest run, in
/// [`by_rank`] order, whose weights add up to `target`, and returns `m` (all of them if
/// rounding keeps the sum below `target`). A selection by mass — partition around a pivot,
/// keep the side holding the crossing point, halve — so O(n), without sorting everything.
fn nucleus(candidates: &mut [Candidate], target: f64) -> usize {
    // The answer lies in lo..hi; `above` is the weight of candidates[..lo]. The first pivot
    // is the 64th best: real next-token distributions are peaked, so one pass usually ends it.
    let (mut lo, mut hi, mut above) = (0, candidates.len(), 0.0);
    let mut pivot = 63;
    while hi - lo > 32 {
        let mid = lo + pivot.min((hi - lo) / 2);
        pivot = usize::MAX;
        candidates[lo..hi].select_nth_unstable_by(mid - lo, by_rank);
        let through_mid = above + candidates[lo..=mid].iter().map(|c| c.weight).sum::<f64>();
        if through_mid >= target {
            hi = mid + 1;
        } else {
            (lo, above) = (mid + 1, through_mid);
        }
    }
    candidates[lo..hi].sort_unstable_by(by_rank);
    for (i, c) in candidates[lo..hi].iter().enumerate() {
        above += c.weight;
        if above >= target {
            return lo + i + 1;
        }
    }
    candidates.len()
}

/// The largest logit, as `f64` (the candidates are non-empty and finite).
fn max_logit(candidates: &[Candidate]) -> f64 {
    candidates.iter().map(|c| f64::from(c.logit)).fold(f64::NEG_INFINITY, f64::max)
}

/// Moves the `n` best candidates (by [`by_rank`]) to the front, sorted; the rest follow in
/// no particular order.
fn sort_front(candidates: &mut [Candidate], n: usize) {
    let n = n.min(candidates.len());
    if n == 0 {
        return;
    }
    if n < candidates.len() {
        candidates.select_nth_unstable_by(n - 1, by_rank);
    }
    candidates[..n].sort_unstable_by(by_rank);
}

/// Hugging Face's `no_repeat_ngram_size`: the tokens that would complete an `n`-gram already
/// in `tokens`, i.e. those that followed an earlier occurrence of the last `n - 1` tokens.
fn ngram_bans(tokens: &[u32], n: usize, banned: &mut Vec<u32>) {
    banned.clear();
    if n == 0 || tokens.len() < n {
        return;
    }
    let prefix = &tokens[tokens.len() + 1 - n..];
    banned.extend(tokens.windows(n).filter(|w| w[..n - 1] == *prefix).map(|w| w[n - 1]));
}

#[cfg(test)]
mod tests;
