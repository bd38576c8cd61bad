//! Intervals: a statistic's value and its 95 % percentile-bootstrap confidence interval,
//! resampling prompts and, within each prompt, seeds (a two-stage bootstrap), so that an
//! interval reflects both how outputs vary across prompts and across seeds.
//!
//! A deterministic setting has one output per prompt; its interval is then over prompts
//! only. A statistic defined on a prompt's whole set of seeds (self-BLEU, distinct-n)
//! resamples prompts only: drawing seeds with replacement would repeat outputs and inflate
//! their similarity.
//!
//! Everything is seeded ([`Resampler::new`]): the same data give the same interval.
//!
//! ```
//! use stencil_experiment::stats::Resampler;
//! // Two prompts, three seeds each.
//! let values = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
//! let r = Resampler::new(&[3, 3], 1000, 7);
//! let mean = r.estimate(|draw| {
//!     let v: Vec<f64> = draw.map(|(p, s)| values[p][s]).collect();
//!     Some(v.iter().sum::<f64>() / v.len() as f64)
//! }).unwrap();
//! assert_eq!(mean.value, 3.5);
//! assert!(mean.lo < 3.5 && 3.5 < mean.hi && mean.lo >= 1.0 && mean.hi <= 6.0);
//! ```

use serde::Serialize;

/// Bootstrap resamples of the report (each interval).
pub const RESAMPLES: usize = 1000;

/// A statistic on the data and its 95 % bootstrap interval (`lo <= value <= hi` is not
/// guaranteed for a skewed statistic, but usual).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Estimate {
    /// The statistic on all the data.
    pub value: f64,
    /// The 2.5 % quantile of the bootstrap distribution.
    pub lo: f64,
    /// The 97.5 % quantile.
    pub hi: f64,
}

impl Estimate {
    /// Whether the two intervals are disjoint: the report calls a difference a difference
    /// only then (a conservative rule: disjoint 95 % intervals mean a difference at well
    /// below the 5 % level).
    ///
    /// ```
    /// use stencil_experiment::stats::Estimate;
    /// let a = Estimate { value: 1.0, lo: 0.5, hi: 1.5 };
    /// assert!(!a.differs(&Estimate { value: 2.0, lo: 1.4, hi: 2.5 }));
    /// assert!(a.differs(&Estimate { value: 2.0, lo: 1.6, hi: 2.5 }));
    /// ```
    pub fn differs(&self, other: &Estimate) -> bool {
        self.hi < other.lo || other.hi < self.lo
    }

    /// `f` applied to the value and both bounds (a monotone increasing `f`, e.g. `exp`).
    pub fn map(self, f: impl Fn(f64) -> f64) -> Estimate {
        Estimate { value: f(self.value), lo: f(self.lo), hi: f(self.hi) }
    }
}

/// Seeded two-stage resampling plans over prompts (groups) and their seeds (members).
#[derive(Clone, Debug)]
pub struct Resampler {
    sizes: Vec<usize>,
    /// Per resample: the drawn prompts, each with its drawn seeds.
    plans: Vec<Vec<(usize, Vec<usize>)>>,
}

impl Resampler {
    /// `resamples` plans for groups of `sizes` members, drawn from `seed`. Empty groups
    /// are never drawn.
    pub fn new(sizes: &[usize], resamples: usize, seed: u64) -> Resampler {
        let groups: Vec<usize> = (0..sizes.len()).filter(|&g| sizes[g] > 0).collect();
        let mut rng = SplitMix(seed);
        let plans = (0..resamples)
            .map(|_| {
                (0..groups.len())
                    .map(|_| {
                        let g = groups[rng.below(groups.len())];
                        (g, (0..sizes[g]).map(|_| rng.below(sizes[g])).collect())
                    })
                    .collect()
            })
            .collect();
        Resampler { sizes: sizes.to_vec(), plans }
    }

    /// The estimate of a statistic of outputs: `stat` gets (prompt, seed) pairs — all of
    /// them for the value, a resample's for each bootstrap draw (repeats included). `None`
    /// when `stat` has no value on all the data; resamples where it has none are skipped.
    pub fn estimate(&self, stat: impl Fn(&mut dyn Iterator<Item = (usize, usize)>) -> Option<f64>) -> Option<Estimate> {
        let all = || self.sizes.iter().enumerate().flat_map(|(g, &n)| (0..n).map(move |s| (g, s)));
        let value = stat(&mut all())?;
        let draws = self
            .plans
            .iter()
            .filter_map(|plan| stat(&mut plan.iter().flat_map(|(g, seeds)| seeds.iter().map(move |&s| (*g, s)))));
        Some(interval(value, draws.collect()))
    }

    /// The estimate of a statistic of prompts: `stat` gets prompt indices, resampled
    /// without their seeds.
    pub fn estimate_prompts(&self, stat: impl Fn(&mut dyn Iterator<Item = usize>) -> Option<f64>) -> Option<Estimate> {
        let value = stat(&mut (0..self.sizes.len()).filter(|&g| self.sizes[g] > 0))?;
        let draws = self.plans.iter().filter_map(|plan| stat(&mut plan.iter().map(|(g, _)| *g)));
        Some(interval(value, draws.collect()))
    }

    /// Every prompt once, with all its seeds: the data a statistic's value is computed on,
    /// as a plan.
    pub fn full(&self) -> Vec<(usize, Vec<usize>)> {
        (0..self.sizes.len()).filter(|&g| self.sizes[g] > 0).map(|g| (g, (0..self.sizes[g]).collect())).collect()
    }

    /// The resampling plans: per resample, the drawn prompts, each with its drawn seeds.
    pub fn plans(&self) -> &[Vec<(usize, Vec<usize>)>] {
        &self.plans
    }
}

/// `value` with the 2.5 % and 97.5 % quantiles of `draws` (non-finite draws left out;
/// both bounds `value` without draws).
pub fn interval(value: f64, mut draws: Vec<f64>) -> Estimate {
    draws.retain(|d| d.is_finite());
    if draws.is_empty() {
        return Estimate { value, lo: value, hi: value };
    }
    draws.sort_by(f64::total_cmp);
    Estimate { value, lo: quantile(&draws, 0.025), hi: quantile(&draws, 0.975) }
}

/// The `p` quantile of sorted, non-empty `v`, interpolated linearly between ranks.
pub fn quantile(v: &[f64], p: f64) -> f64 {
    let rank = p * (v.len() - 1) as f64;
    let (i, frac) = (rank.floor() as usize, rank.fract());
    v[i] + (v[(i + 1).min(v.len() - 1)] - v[i]) * frac
}

/// The mean of `values`; `None` when there are none.
pub fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// A 64-bit FNV-1a hash of `text`: a stable seed for a point's resampling.
pub fn seed_of(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// SplitMix64 (Steele, Lea, Flood 2014).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), by Lemire's multiply-shift (bias below 2⁻³² here).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}
