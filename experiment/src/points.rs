//! Every metric of every *point* — one model, task, decoding setting and constraint, over
//! its prompts and seeds — with its 95 % bootstrap interval ([`crate::stats`]).
//!
//! Per output: Su et al.'s rep-n counts, seq-rep-n, length (tokens and words), whether it
//! was cut, the scorer's NLL, coherence, parse and validity. Per prompt, over its seeds
//! (sampled settings only: a deterministic one has one output per prompt): distinct-n and
//! self-BLEU. Each statistic of a point:
//!
//! - rep-n: Su et al.'s corpus ratio over the point's outputs (the value rounded to 2
//!   decimals as their code does; resamples unrounded), diversity from it;
//! - seq-rep-n, length, cut, parse, valid, correct, coherence: the mean over outputs;
//! - perplexity: `exp` of the mean over outputs of each output's mean NLL per token (each
//!   output weighs the same, whatever its length);
//! - distinct-n, self-BLEU: the mean over prompts of the per-prompt value.
//!
//! ```
//! use stencil_experiment::{points::{points, Metric, Unit}, Sample};
//! let samples: Vec<Sample> = (1..=4)
//!     .map(|seed| Sample::text("m", "story", "p", "T 1", seed, "a b a b a", &[1, 2, 1, 2, 1]))
//!     .collect();
//! let p = &points(&samples)[0];
//! assert_eq!((p.outputs, p.prompts, p.distinct_outputs), (4, 1, 1));
//! assert_eq!(p.get(Metric::Rep(2, Unit::Words)).unwrap().value, 33.33);
//! assert_eq!(p.get(Metric::SelfBleu(Unit::Tokens)).unwrap().value, 1.0); // the seeds agree
//! ```

use std::collections::HashSet;

use serde::Serialize;

use crate::metrics::{self, diversity, RepCounts};
use crate::stats::{interval, seed_of, Estimate, Resampler, RESAMPLES};
use crate::{Failure, Sample};

/// What is counted as a unit of text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Unit {
    /// The model's tokens.
    Tokens,
    /// Whitespace-separated words.
    Words,
}

impl Unit {
    /// `tokens` or `words`.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Tokens => "tokens",
            Unit::Words => "words",
        }
    }
}

/// A measured quantity of a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Metric {
    /// Su et al.'s rep-n (n = 2, 3, 4), in percent.
    Rep(u8, Unit),
    /// Su et al.'s diversity (0–1).
    Diversity(Unit),
    /// Welleck et al.'s seq-rep-n (n = 2, 3, 4), mean over outputs (0–1).
    SeqRep(u8, Unit),
    /// Corpus distinct-n (n = 1, 2, 3) over a prompt's seeds, mean over prompts (0–1).
    Distinct(u8, Unit),
    /// Self-BLEU-4 over a prompt's seeds, mean over prompts (0–1).
    SelfBleu(Unit),
    /// Mean output length.
    Length(Unit),
    /// Share of outputs cut by the token cap or the context (0–1).
    Cut,
    /// The scorer's perplexity: `exp(mean NLL)`.
    Perplexity,
    /// Mean coherence (cosine, −1–1).
    Coherence,
    /// Share of outputs that parse as JSON (schema tasks).
    Parse,
    /// Share of outputs valid under the schema (schema tasks).
    Valid,
    /// Share of outputs whose JSON holds the expected answer (prompts with one).
    Correct,
}

const U: [Unit; 2] = [Unit::Tokens, Unit::Words];

impl Metric {
    /// Every metric, in the order of [`Point::values`] and of `metrics.csv`'s columns.
    pub fn all() -> Vec<Metric> {
        let mut all = Vec::new();
        for u in U {
            all.extend([2, 3, 4].map(|n| Metric::Rep(n, u)));
            all.push(Metric::Diversity(u));
            all.extend([2, 3, 4].map(|n| Metric::SeqRep(n, u)));
            all.extend([1, 2, 3].map(|n| Metric::Distinct(n, u)));
            all.push(Metric::SelfBleu(u));
            all.push(Metric::Length(u));
        }
        all.extend([Metric::Cut, Metric::Perplexity, Metric::Coherence, Metric::Parse, Metric::Valid, Metric::Correct]);
        all
    }

    /// A short name: `rep-4 (tokens)`, `perplexity`, ...
    pub fn name(self) -> String {
        match self {
            Metric::Rep(n, u) => format!("rep-{n} ({})", u.name()),
            Metric::Diversity(u) => format!("diversity ({})", u.name()),
            Metric::SeqRep(n, u) => format!("seq-rep-{n} ({})", u.name()),
            Metric::Distinct(n, u) => format!("distinct-{n} ({})", u.name()),
            Metric::SelfBleu(u) => format!("self-BLEU ({})", u.name()),
            Metric::Length(u) => format!("length ({})", u.name()),
            Metric::Cut => "cut".into(),
            Metric::Perplexity => "perplexity".into(),
            Metric::Coherence => "coherence".into(),
            Metric::Parse => "parse".into(),
            Metric::Valid => "valid".into(),
            Metric::Correct => "correct".into(),
        }
    }

    /// The column name in `metrics.csv`: `rep4_tokens`, `perplexity`, ...
    pub fn column(self) -> String {
        self.name().replace(" (", "_").replace(['(', ')'], "").replace(['-', ' '], "")
    }

    /// Shown as a percentage (stored as a share 0–1, except rep-n, already in percent).
    pub fn is_share(self) -> bool {
        matches!(self, Metric::Cut | Metric::Parse | Metric::Valid | Metric::Correct)
    }

    fn index(self) -> usize {
        Metric::all().iter().position(|&m| m == self).expect("every metric is listed")
    }
}

/// What a point is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Key {
    /// The model's name.
    pub model: String,
    /// The task's name.
    pub task: String,
    /// The setting's label.
    pub setting: String,
    /// Decoded under the task's schema.
    pub constrained: bool,
}

impl Key {
    /// The key of a sample's point.
    pub fn of(s: &Sample) -> Key {
        Key { model: s.model.clone(), task: s.task.clone(), setting: s.setting.clone(), constrained: s.constrained }
    }
}

/// One point: its outputs and every metric's estimate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// What it is about.
    pub key: Key,
    /// Prompts.
    pub prompts: usize,
    /// Outputs (prompts × seeds).
    pub outputs: usize,
    /// The most seeds any prompt had.
    pub seeds: usize,
    /// The most different texts any one prompt gave across its seeds (1: the seeds agreed).
    pub distinct_outputs: usize,
    /// Outputs cut by a limit.
    pub cut: usize,
    /// Schema tasks: outputs that failed, per reason, in [`Failure`] order (cut, bad
    /// JSON, schema violation).
    pub failures: [usize; 3],
    /// Per [`Metric::all`]: the estimate, `None` where it does not apply (self-BLEU with
    /// one seed, validity of free text, perplexity of empty outputs).
    pub values: Vec<Option<Estimate>>,
}

impl Point {
    /// The estimate of `metric`.
    pub fn get(&self, metric: Metric) -> Option<Estimate> {
        self.values[metric.index()]
    }
}

/// Mean-type quantities per output, in this order.
const MEANS: usize = 14;

/// An output's measurements.
struct Output {
    rep: [RepCounts; 2],
    /// seq-rep-2..4 (tokens), seq-rep-2..4 (words), length (tokens, words), cut, NLL,
    /// coherence, parses, valid, correct.
    means: [Option<f64>; MEANS],
}

impl Output {
    fn of(s: &Sample) -> Output {
        let words = metrics::words(&s.text);
        let flag = |b: Option<bool>| b.map(|b| if b { 1.0 } else { 0.0 });
        let seq = |n| [Some(metrics::seq_rep_of(&s.tokens, n)), Some(metrics::seq_rep_of(&words, n))];
        let [t2, w2] = seq(2);
        let [t3, w3] = seq(3);
        let [t4, w4] = seq(4);
        Output {
            rep: [RepCounts::of(&s.tokens), RepCounts::of(&words)],
            means: [
                t2,
                t3,
                t4,
                w2,
                w3,
                w4,
                Some(s.tokens.len() as f64),
                Some(words.len() as f64),
                flag(Some(s.is_cut())),
                s.nll.filter(|v| v.is_finite()),
                s.coherence.filter(|v| v.is_finite()),
                flag(s.parses),
                flag(s.valid),
                flag(s.correct),
            ],
        }
    }
}

/// Per-prompt quantities over its seeds: distinct-1..3 (tokens), distinct-1..3 (words),
/// self-BLEU (tokens, words).
fn prompt_stats(samples: &[&Sample]) -> [Option<f64>; 8] {
    if samples.len() < 2 {
        return [None; 8];
    }
    let tokens: Vec<&[u32]> = samples.iter().map(|s| s.tokens.as_slice()).collect();
    let words: Vec<Vec<&str>> = samples.iter().map(|s| metrics::words(&s.text)).collect();
    let words: Vec<&[&str]> = words.iter().map(Vec::as_slice).collect();
    let d = |n| [Some(metrics::distinct_of(&tokens, n)), Some(metrics::distinct_of(&words, n))];
    let ([t1, w1], [t2, w2], [t3, w3]) = (d(1), d(2), d(3));
    [t1, t2, t3, w1, w2, w3, metrics::self_bleu_of(&tokens), metrics::self_bleu_of(&words)]
}

/// The statistics of one plan (drawn prompts with drawn seeds), in [`Metric::all`] order;
/// `round` gives Su et al.'s rounded rep-n (the value), else unrounded (resamples).
fn statistics(
    plan: &[(usize, Vec<usize>)],
    outputs: &[Vec<Output>],
    prompts: &[[Option<f64>; 8]],
    round: bool,
) -> Vec<Option<f64>> {
    let mut rep = [RepCounts::default(); 2];
    let (mut sums, mut counts) = ([0.0; MEANS], [0usize; MEANS]);
    let (mut psums, mut pcounts) = ([0.0; 8], [0usize; 8]);
    for (p, seeds) in plan {
        for &s in seeds {
            let o = &outputs[*p][s];
            rep = [rep[0] + o.rep[0], rep[1] + o.rep[1]];
            for (k, v) in o.means.iter().enumerate() {
                if let Some(v) = v {
                    sums[k] += v;
                    counts[k] += 1;
                }
            }
        }
        for (k, v) in prompts[*p].iter().enumerate() {
            if let Some(v) = v {
                psums[k] += v;
                pcounts[k] += 1;
            }
        }
    }
    let mean = |k: usize| (counts[k] > 0).then(|| sums[k] / counts[k] as f64);
    let pmean = |k: usize| (pcounts[k] > 0).then(|| psums[k] / pcounts[k] as f64);
    let mut out = Vec::with_capacity(31);
    for (u, counts) in rep.iter().enumerate() {
        let r = if round { counts.rep() } else { counts.rep_exact() };
        out.extend(r.map(Some));
        out.push(Some(diversity(r)));
        out.extend((0..3).map(|n| mean(3 * u + n)));
        out.extend((0..3).map(|n| pmean(3 * u + n)));
        out.push(pmean(6 + u));
        out.push(mean(6 + u));
    }
    out.extend([mean(8), mean(9).map(f64::exp), mean(10), mean(11), mean(12), mean(13)]);
    out
}

/// Every point of `samples`, in the order the samples first name them; within a point,
/// prompts in order of appearance and outputs in seed order.
pub fn points(samples: &[Sample]) -> Vec<Point> {
    let mut keys: Vec<Key> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let mut groups: Vec<Vec<&Sample>> = Vec::new();
    for s in samples {
        let key = Key::of(s);
        let i = *index.entry(key.clone()).or_insert_with(|| {
            keys.push(key);
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[i].push(s);
    }
    keys.into_iter().zip(groups).map(|(key, group)| point(key, &group)).collect()
}

fn point(key: Key, samples: &[&Sample]) -> Point {
    let mut prompt_ids: Vec<&str> = Vec::new();
    for s in samples {
        if !prompt_ids.contains(&s.prompt.as_str()) {
            prompt_ids.push(&s.prompt);
        }
    }
    let by_prompt: Vec<Vec<&Sample>> = prompt_ids
        .iter()
        .map(|p| {
            let mut v: Vec<&Sample> = samples.iter().copied().filter(|s| s.prompt == *p).collect();
            v.sort_by_key(|s| s.seed);
            v
        })
        .collect();
    let outputs: Vec<Vec<Output>> = by_prompt.iter().map(|v| v.iter().map(|s| Output::of(s)).collect()).collect();
    let prompts: Vec<[Option<f64>; 8]> = by_prompt.iter().map(|v| prompt_stats(v)).collect();
    let sizes: Vec<usize> = by_prompt.iter().map(Vec::len).collect();
    let label = format!("{}|{}|{}|{}", key.model, key.task, key.setting, key.constrained);
    let resampler = Resampler::new(&sizes, RESAMPLES, seed_of(&label));
    let value = statistics(&resampler.full(), &outputs, &prompts, true);
    let draws: Vec<Vec<Option<f64>>> =
        resampler.plans().iter().map(|plan| statistics(plan, &outputs, &prompts, false)).collect();
    let values = value
        .iter()
        .enumerate()
        .map(|(k, v)| v.map(|v| interval(v, draws.iter().filter_map(|d| d[k]).collect())))
        .collect();
    let mut failures = [0; 3];
    for s in samples {
        if let Some(Err(f)) = s.outcome() {
            failures[[Failure::Cut, Failure::BadJson, Failure::SchemaViolation]
                .iter()
                .position(|&x| x == f)
                .unwrap_or(0)] += 1;
        }
    }
    Point {
        prompts: by_prompt.len(),
        outputs: samples.len(),
        seeds: sizes.iter().copied().max().unwrap_or(0),
        distinct_outputs: by_prompt
            .iter()
            .map(|v| v.iter().map(|s| s.text.as_str()).collect::<HashSet<_>>().len())
            .max()
            .unwrap_or(0),
        cut: samples.iter().filter(|s| s.is_cut()).count(),
        failures,
        values,
        key,
    }
}
