//! Text metrics of decoded outputs: repetition, diversity, distinct-n, self-BLEU, length
//! and parse rate.
//!
//! **Words.** Every text metric works on words: the text split on Unicode whitespace
//! ([`str::split_whitespace`]). Models tokenize differently; words compare across models.
//! Python's `str.split()` splits the same way, except that it also splits on the ASCII
//! separators U+001C..U+001F. Length is the exception: it counts the model's tokens
//! ([`Sample::tokens`]).
//!
//! Below, a text is its words `w[0..L]`, and its n-grams are the windows `w[i..i+n]`.
//!
//! # Metrics
//!
//! - **rep-n** (n = 2, 3, 4) and **diversity**, as `measure_repetition_and_diversity` in
//!   the code of Su et al. 2022 (SimCTG, "A Contrastive Framework for Neural Text
//!   Generation"), quirks kept ([`rep_diversity`]):
//!   - A text counts the n-grams with `i + n < L`. Their loop stops at `end_idx < len`, so
//!     the last n-gram is skipped: `L − n` n-grams, not `L − n + 1`, and none when `L ≤ n`.
//!   - `U_n` is the sum over texts of the distinct n-grams *within* each text (not across
//!     the corpus), and `T_n` is the sum of the counts.
//!   - `rep-n = round(100 · (1 − U_n / T_n), 2)` in percent. `round` is Python's: the
//!     correctly rounded decimal of the binary value, ties to even (`round(2.675, 2)` is
//!     2.67). Where `T_n = 0` the Python raises `ZeroDivisionError`; here rep-n is 0.
//!   - `diversity = (1 − rep-2/100) · (1 − rep-3/100) · (1 − rep-4/100)`, from the rounded
//!     values. So it is 1.0 when no text has more than 2 words (and for no texts at all).
//!   - `unique_words`: the number of distinct words over all texts.
//! - **seq-rep-n** (Welleck et al. 2019, "Neural Text Generation with Unlikelihood
//!   Training"), of one text: `1 − |distinct n-grams| / |n-grams|`, counting all `L − n + 1`
//!   n-grams; 0 when there are none ([`seq_rep`]). [`Metrics::seq_rep`] is the mean over
//!   the samples for n = 2, 3, 4, a sample without n-grams counting 0.
//! - **distinct-n** (Li et al. 2016, "A Diversity-Promoting Objective Function for Neural
//!   Conversation Models"), *corpus-level*, not the mean of per-sample ratios: distinct
//!   n-grams across all the texts divided by all their n-grams (`L − n + 1` per text); 0 when
//!   there are none ([`distinct_n`]).
//! - **BLEU**: sentence BLEU-4 as NLTK's `sentence_bleu` with weights (¼, ¼, ¼, ¼) and
//!   `SmoothingFunction().method1` ([`bleu`]), for a hypothesis of length `c`:
//!   - `p_n = clipped / max(1, |hypothesis n-grams|)`, with each n-gram's count clipped to
//!     its largest count in any one reference.
//!   - If no unigram matches, BLEU is 0. Otherwise `p_n = 0.1 / max(1, |n-grams|)` where
//!     no n-gram matches (method1, ε = 0.1).
//!   - `r` is the reference length closest to `c`, ties going to the shorter;
//!     `BP = 1` if `c > r`, else `exp(1 − r/c)`.
//!   - `BLEU = BP · exp(Σ ¼ · ln p_n)`. A text under 4 words thus never scores 1 (its
//!     4-gram precision is smoothed to 0.1).
//!   - Differences from NLTK: the log sum is a plain sum, not `math.fsum` (the last bit may
//!     differ); with no references at all it is 0 (NLTK raises).
//! - **self-BLEU** (Zhu et al. 2018, Texygen): the mean over the samples of the BLEU of
//!   sample `i` against all the other samples as references, as Texygen's
//!   `get_bleu_parallel` but with BLEU-4 and whitespace words; `None` with fewer than two
//!   samples ([`self_bleu`]). Identical samples of 4 words or more give exactly 1.0. The
//!   cost is quadratic in the number of samples.
//! - **length**: mean and population standard deviation of [`Sample::tokens`].
//! - **parse rate**, **valid rate**: the share of samples with `parses == Some(true)`
//!   (`valid == Some(true)`) among those where it is `Some`; `None` when none is.
//! - **distinct outputs**: the number of different texts (exact string equality).
//!
//! No metric panics or yields NaN on any input; empty input gives zeros and `None`s.
//!
//! ```
//! use stencil_experiment::metrics::{distinct_n, seq_rep};
//! assert_eq!(seq_rep("a a a a", 1), 0.75);
//! assert_eq!(distinct_n(&["a b", "a c"], 1), 0.75);
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::{Group, Sample};

/// The metrics of one group of samples (one model, prompt, preset and constraint).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Metrics {
    /// How many samples.
    pub samples: usize,
    /// How many different texts among them (1: every seed gave the same output).
    pub distinct_outputs: usize,
    /// rep-2, rep-3, rep-4 of Su et al. (percent, rounded to 2 decimals as in their code).
    pub rep: [f64; 3],
    /// Diversity of Su et al.: (1 − rep-2/100)(1 − rep-3/100)(1 − rep-4/100).
    pub diversity: f64,
    /// seq-rep-2, seq-rep-3, seq-rep-4 of Welleck et al., mean over the samples (0..1).
    pub seq_rep: [f64; 3],
    /// distinct-1, distinct-2, distinct-3 (0..1; the variant is in the docs).
    pub distinct: [f64; 3],
    /// Self-BLEU over the samples (0..1); `None` with fewer than two samples.
    pub self_bleu: Option<f64>,
    /// Mean length in tokens.
    pub length_mean: f64,
    /// Standard deviation of the length in tokens (population).
    pub length_std: f64,
    /// Share of samples whose text parses as JSON (schema prompts only).
    pub parse_rate: Option<f64>,
    /// Share of samples that parse and validate against the schema (schema prompts only).
    pub valid_rate: Option<f64>,
}

impl Metrics {
    /// The metrics of `samples`, as defined in the [module docs](self).
    ///
    /// ```
    /// use stencil_experiment::{metrics::Metrics, Sample};
    /// let (a, b) = (Sample::free_text("m", "p", "x", 1, "a b", 2), Sample::free_text("m", "p", "x", 2, "c", 4));
    /// let m = Metrics::of(&[&a, &b]);
    /// assert_eq!((m.samples, m.distinct_outputs, m.length_mean, m.length_std), (2, 2, 3.0, 1.0));
    /// assert_eq!((m.distinct[0], m.parse_rate), (1.0, None));
    /// ```
    pub fn of(samples: &[&Sample]) -> Metrics {
        let texts: Vec<&str> = samples.iter().map(|s| s.text.as_str()).collect();
        let mean = |f: &dyn Fn(&Sample) -> f64| match samples.len() {
            0 => 0.0,
            n => samples.iter().map(|s| f(s)).sum::<f64>() / n as f64,
        };
        let length_mean = mean(&|s| s.tokens as f64);
        let rate = |f: fn(&Sample) -> Option<bool>| {
            let known: Vec<bool> = samples.iter().filter_map(|s| f(s)).collect();
            let yes = known.iter().filter(|&&b| b).count();
            (!known.is_empty()).then(|| yes as f64 / known.len() as f64)
        };
        let RepDiversity { rep, diversity, .. } = rep_diversity(&texts);
        Metrics {
            samples: samples.len(),
            distinct_outputs: texts.iter().collect::<HashSet<_>>().len(),
            rep,
            diversity,
            seq_rep: [2, 3, 4].map(|n| mean(&|s| seq_rep(&s.text, n))),
            distinct: [1, 2, 3].map(|n| distinct_n(&texts, n)),
            self_bleu: self_bleu(&texts),
            length_mean,
            length_std: mean(&|s| (s.tokens as f64 - length_mean).powi(2)).sqrt(),
            parse_rate: rate(|s| s.parses),
            valid_rate: rate(|s| s.valid),
        }
    }
}

/// The metrics table: samples grouped by [`Group::of`], in group order.
///
/// ```
/// use stencil_experiment::{metrics::table, Sample};
/// let rows = table(&[Sample::free_text("m", "p", "top-k", 1, "a", 1), Sample::free_text("m", "p", "greedy", 1, "a", 1)]);
/// assert_eq!(rows.iter().map(|(g, m)| (g.preset.as_str(), m.samples)).collect::<Vec<_>>(), [("greedy", 1), ("top-k", 1)]);
/// ```
pub fn table(samples: &[Sample]) -> Vec<(Group, Metrics)> {
    let mut groups: BTreeMap<Group, Vec<&Sample>> = BTreeMap::new();
    for sample in samples {
        groups.entry(Group::of(sample)).or_default().push(sample);
    }
    groups.into_iter().map(|(group, samples)| (group, Metrics::of(&samples))).collect()
}

/// rep-2/3/4 and diversity of Su et al. 2022 (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RepDiversity {
    /// rep-2, rep-3, rep-4 in percent, rounded to 2 decimals (0..=100).
    pub rep: [f64; 3],
    /// (1 − rep-2/100)(1 − rep-3/100)(1 − rep-4/100), from the rounded values (0..=1).
    pub diversity: f64,
    /// Distinct words over all the texts.
    pub unique_words: usize,
}

/// rep-n and diversity of `texts`, exactly as SimCTG's `measure_repetition_and_diversity`
/// (the last n-gram of each text skipped; rep-n 0 where the Python divides by zero).
///
/// ```
/// use stencil_experiment::metrics::rep_diversity;
/// // 2-grams counted: "a b", "b a", "a b" (the last, "b a", is skipped): 1 − 2/3.
/// let r = rep_diversity(&["a b a b a"]);
/// assert_eq!((r.rep, r.unique_words), ([33.33, 0.0, 0.0], 2));
/// assert_eq!(r.diversity, 1.0 - 33.33 / 100.0);
/// ```
pub fn rep_diversity(texts: &[&str]) -> RepDiversity {
    let (mut unique, mut total) = ([0usize; 3], [0usize; 3]);
    let mut vocabulary = HashSet::new();
    for text in texts {
        let w = words(text);
        for (k, n) in [2, 3, 4].into_iter().enumerate() {
            let counted = w.len().saturating_sub(n);
            unique[k] += ngrams(&w, n).take(counted).collect::<HashSet<_>>().len();
            total[k] += counted;
        }
        vocabulary.extend(w);
    }
    let rep: [f64; 3] = std::array::from_fn(|k| match total[k] {
        0 => 0.0,
        t => round2((1.0 - unique[k] as f64 / t as f64) * 100.0),
    });
    let diversity = (1.0 - rep[0] / 100.0) * (1.0 - rep[1] / 100.0) * (1.0 - rep[2] / 100.0);
    RepDiversity { rep, diversity, unique_words: vocabulary.len() }
}

/// seq-rep-n of Welleck et al. 2019: 1 − distinct n-grams / n-grams of one text (0..1).
///
/// ```
/// use stencil_experiment::metrics::seq_rep;
/// assert_eq!(seq_rep("a a a a", 2), 1.0 - 1.0 / 3.0);
/// assert_eq!(seq_rep("a", 2), 0.0); // no 2-grams
/// ```
pub fn seq_rep(text: &str, n: usize) -> f64 {
    let w = words(text);
    let total = ngrams(&w, n).count();
    match total {
        0 => 0.0,
        t => 1.0 - ngrams(&w, n).collect::<HashSet<_>>().len() as f64 / t as f64,
    }
}

/// Corpus-level distinct-n: distinct n-grams across `texts` / all their n-grams (0..1).
///
/// ```
/// use stencil_experiment::metrics::distinct_n;
/// assert_eq!(distinct_n(&["a b c", "a b d"], 2), 0.75); // {a b, b c, b d} of 4
/// assert_eq!(distinct_n(&[], 2), 0.0);
/// ```
pub fn distinct_n(texts: &[&str], n: usize) -> f64 {
    let words: Vec<Vec<&str>> = texts.iter().map(|t| words(t)).collect();
    let total: usize = words.iter().map(|w| ngrams(w, n).count()).sum();
    match total {
        0 => 0.0,
        t => words.iter().flat_map(|w| ngrams(w, n)).collect::<HashSet<_>>().len() as f64 / t as f64,
    }
}

/// Sentence BLEU-4 of `hypothesis` against `references` (word lists), as NLTK's
/// `sentence_bleu` with `SmoothingFunction().method1` (0..1; see the [module docs](self)).
///
/// ```
/// use stencil_experiment::metrics::bleu;
/// let words = |t: &'static str| t.split_whitespace().collect::<Vec<_>>();
/// assert_eq!(bleu(&words("a b c d"), &[words("a b c d"), words("e f")]), 1.0);
/// assert_eq!(bleu(&words("a b c d"), &[words("e f g h")]), 0.0); // no unigram matches
/// ```
pub fn bleu(hypothesis: &[&str], references: &[Vec<&str>]) -> f64 {
    let references: Vec<Counts> = references.iter().map(|r| Counts::of(r)).collect();
    bleu_of(&Counts::of(hypothesis), &references.iter().collect::<Vec<_>>())
}

/// Self-BLEU (Texygen): mean BLEU-4 of each text against all the others; `None` with
/// fewer than two texts.
///
/// ```
/// use stencil_experiment::metrics::self_bleu;
/// assert_eq!(self_bleu(&["a b c d", "a b c d"]), Some(1.0));
/// assert_eq!(self_bleu(&["a b c d"]), None);
/// ```
pub fn self_bleu(texts: &[&str]) -> Option<f64> {
    if texts.len() < 2 {
        return None;
    }
    let words: Vec<Vec<&str>> = texts.iter().map(|t| words(t)).collect();
    let counts: Vec<Counts> = words.iter().map(|w| Counts::of(w)).collect();
    let scores = counts.iter().enumerate().map(|(i, hypothesis)| {
        let others: Vec<&Counts> = counts.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, c)| c).collect();
        bleu_of(hypothesis, &others)
    });
    Some(scores.sum::<f64>() / texts.len() as f64)
}

fn words(text: &str) -> Vec<&str> {
    text.split_whitespace().collect()
}

/// The `L − n + 1` n-grams of `w` (none for n = 0).
fn ngrams<'a>(w: &'a [&'a str], n: usize) -> impl Iterator<Item = &'a [&'a str]> + 'a {
    let count = if n == 0 { 0 } else { (w.len() + 1).saturating_sub(n) };
    (0..count).map(move |i| &w[i..i + n])
}

/// Python's `round(x, 2)`: Rust's `{:.2}` is also the correctly rounded decimal, ties to even.
fn round2(x: f64) -> f64 {
    format!("{x:.2}").parse().unwrap_or(x)
}

/// A text's length and its 1- to 4-gram counts, for BLEU.
struct Counts<'a> {
    len: usize,
    grams: [HashMap<&'a [&'a str], usize>; 4],
}

impl<'a> Counts<'a> {
    fn of(w: &'a [&'a str]) -> Counts<'a> {
        let grams = std::array::from_fn(|k| {
            let mut counts = HashMap::new();
            for gram in ngrams(w, k + 1) {
                *counts.entry(gram).or_insert(0) += 1;
            }
            counts
        });
        Counts { len: w.len(), grams }
    }
}

fn bleu_of(hypothesis: &Counts, references: &[&Counts]) -> f64 {
    let c = hypothesis.len;
    let Some(r) = references.iter().map(|r| r.len).min_by_key(|&r| (r.abs_diff(c), r)) else {
        return 0.0;
    };
    let mut log_sum = 0.0;
    for (k, counts) in hypothesis.grams.iter().enumerate() {
        let max_ref = |gram| references.iter().map(|r| r.grams[k].get(gram).copied().unwrap_or(0)).max();
        let clipped: usize = counts.iter().map(|(gram, &n)| n.min(max_ref(gram).unwrap_or(0))).sum();
        if k == 0 && clipped == 0 {
            return 0.0;
        }
        let denominator = counts.values().sum::<usize>().max(1) as f64;
        let p = if clipped == 0 { 0.1 / denominator } else { clipped as f64 / denominator };
        log_sum += 0.25 * p.ln();
    }
    let bp = if c > r { 1.0 } else { (1.0 - r as f64 / c as f64).exp() };
    bp * log_sum.exp()
}
