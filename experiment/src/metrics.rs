//! Text metrics of decoded outputs: repetition, diversity, distinct-n and self-BLEU, on
//! any unit — the model's tokens or words.
//!
//! **Units.** Every metric counts n-grams of *units*. [`words`] splits a text on Unicode
//! whitespace ([`str::split_whitespace`]; Python's `str.split()` splits the same way except
//! that it also splits on the ASCII separators U+001C..U+001F). Words compare across
//! models, but miss repetition inside a word: `Lambda-Lambda-Lambda…` or `1000000…` is one
//! word. The model's tokens see it (a model that writes digits one by one repeats the
//! token `0`), but compare only within one model. Reports give both. The functions taking
//! `&str` work on words; those ending in `_of` take any units.
//!
//! Below, a text is its units `w[0..L]`, and its n-grams are the windows `w[i..i+n]`.
//!
//! # Metrics
//!
//! - **rep-n** (n = 2, 3, 4) and **diversity**, as `measure_repetition_and_diversity` in
//!   the code of Su et al. 2022 (SimCTG, "A Contrastive Framework for Neural Text
//!   Generation"), quirks kept ([`RepCounts`], [`rep_diversity`]):
//!   - A text counts the n-grams with `i + n < L`. Their loop stops at `end_idx < len`, so
//!     the last n-gram is skipped: `L − n` n-grams, not `L − n + 1`, and none when `L ≤ n`.
//!   - `U_n` is the sum over texts of the distinct n-grams *within* each text (not across
//!     the corpus), and `T_n` is the sum of the counts.
//!   - `rep-n = round(100 · (1 − U_n / T_n), 2)` in percent. `round` is Python's: the
//!     correctly rounded decimal of the binary value, ties to even (`round(2.675, 2)` is
//!     2.67). Where `T_n = 0` the Python raises `ZeroDivisionError`; here rep-n is 0.
//!   - `diversity = (1 − rep-2/100) · (1 − rep-3/100) · (1 − rep-4/100)`, from the rounded
//!     values. So it is 1.0 when no text has more than 2 units (and for no texts at all).
//!   - `unique_words`: the number of distinct units over all texts.
//! - **seq-rep-n** (Welleck et al. 2019, "Neural Text Generation with Unlikelihood
//!   Training"), of one text: `1 − |distinct n-grams| / |n-grams|`, counting all `L − n + 1`
//!   n-grams; 0 when there are none ([`seq_rep`]).
//! - **distinct-n** (Li et al. 2016, "A Diversity-Promoting Objective Function for Neural
//!   Conversation Models"), *corpus-level*, not the mean of per-text ratios: distinct
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
//!   - `BLEU = BP · exp(Σ ¼ · ln p_n)`. A text under 4 units thus never scores 1 (its
//!     4-gram precision is smoothed to 0.1).
//!   - Differences from NLTK: the log sum is a plain sum, not `math.fsum` (the last bit may
//!     differ); with no references at all it is 0 (NLTK raises).
//! - **self-BLEU** (Zhu et al. 2018, Texygen): the mean over the texts of the BLEU of
//!   text `i` against all the other texts as references, as Texygen's `get_bleu_parallel`
//!   but with BLEU-4; `None` with fewer than two texts ([`self_bleu`]). Identical texts of
//!   4 units or more give exactly 1.0. The cost is quadratic in the number of texts.
//!
//! No metric panics or yields NaN on any input; empty input gives zeros and `None`s.
//!
//! ```
//! use stencil_experiment::metrics::{distinct_n, seq_rep, seq_rep_of};
//! assert_eq!(seq_rep("a a a a", 1), 0.75);
//! assert_eq!(distinct_n(&["a b", "a c"], 1), 0.75);
//! // "1000000" is one word but seven digit tokens: repetition only the tokens show.
//! assert_eq!(seq_rep("1000000", 2), 0.0);
//! assert_eq!(seq_rep_of(&[1, 0, 0, 0, 0, 0, 0], 2), 1.0 - 2.0 / 6.0);
//! ```

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// The words of `text`: split on Unicode whitespace.
///
/// ```
/// assert_eq!(stencil_experiment::metrics::words(" a\tb\u{3000}c\n"), ["a", "b", "c"]);
/// ```
pub fn words(text: &str) -> Vec<&str> {
    text.split_whitespace().collect()
}

/// Su et al.'s n-gram counts of some texts, for n = 2, 3, 4: distinct n-grams within each
/// text and n-grams counted (the last n-gram of each text skipped), summed over texts.
/// Sums of texts add up (`+`), which is what a bootstrap resamples.
///
/// ```
/// use stencil_experiment::metrics::RepCounts;
/// let c = RepCounts::of(&["a", "b", "a", "b", "a"]);
/// // 2-grams counted: "a b", "b a", "a b" (the last, "b a", is skipped): 2 distinct of 3.
/// assert_eq!((c.unique, c.counted), ([2, 2, 1], [3, 2, 1]));
/// assert_eq!(c.rep(), [33.33, 0.0, 0.0]);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RepCounts {
    /// `U_n`: distinct n-grams within each text, summed.
    pub unique: [usize; 3],
    /// `T_n`: n-grams counted, summed.
    pub counted: [usize; 3],
}

impl RepCounts {
    /// The counts of one text's units.
    pub fn of<T: Hash + Eq>(units: &[T]) -> RepCounts {
        let mut c = RepCounts::default();
        for (k, n) in [2, 3, 4].into_iter().enumerate() {
            let counted = units.len().saturating_sub(n);
            c.unique[k] = ngrams(units, n).take(counted).collect::<HashSet<_>>().len();
            c.counted[k] = counted;
        }
        c
    }

    /// rep-2, rep-3, rep-4 in percent, unrounded: `100 · (1 − U_n / T_n)`, 0 where `T_n = 0`.
    pub fn rep_exact(&self) -> [f64; 3] {
        std::array::from_fn(|k| match self.counted[k] {
            0 => 0.0,
            t => (1.0 - self.unique[k] as f64 / t as f64) * 100.0,
        })
    }

    /// rep-2, rep-3, rep-4 in percent, rounded to 2 decimals as Su et al.'s code does.
    pub fn rep(&self) -> [f64; 3] {
        self.rep_exact().map(round2)
    }
}

/// The counts of two sets of texts together.
impl std::ops::Add for RepCounts {
    type Output = RepCounts;

    fn add(self, other: RepCounts) -> RepCounts {
        RepCounts {
            unique: std::array::from_fn(|k| self.unique[k] + other.unique[k]),
            counted: std::array::from_fn(|k| self.counted[k] + other.counted[k]),
        }
    }
}

/// Su et al.'s diversity from rep-2/3/4 in percent: `Π (1 − rep-n/100)`.
///
/// ```
/// assert_eq!(stencil_experiment::metrics::diversity([50.0, 0.0, 0.0]), 0.5);
/// ```
pub fn diversity(rep: [f64; 3]) -> f64 {
    (1.0 - rep[0] / 100.0) * (1.0 - rep[1] / 100.0) * (1.0 - rep[2] / 100.0)
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

/// rep-n and diversity of `texts` (words), exactly as SimCTG's
/// `measure_repetition_and_diversity` (the last n-gram of each text skipped; rep-n 0 where
/// the Python divides by zero).
///
/// ```
/// use stencil_experiment::metrics::rep_diversity;
/// let r = rep_diversity(&["a b a b a"]);
/// assert_eq!((r.rep, r.unique_words), ([33.33, 0.0, 0.0], 2));
/// assert_eq!(r.diversity, 1.0 - 33.33 / 100.0);
/// ```
pub fn rep_diversity(texts: &[&str]) -> RepDiversity {
    let mut counts = RepCounts::default();
    let mut vocabulary = HashSet::new();
    for text in texts {
        let w = words(text);
        counts = counts + RepCounts::of(&w);
        vocabulary.extend(w);
    }
    let rep = counts.rep();
    RepDiversity { rep, diversity: diversity(rep), unique_words: vocabulary.len() }
}

/// seq-rep-n of Welleck et al. 2019 on words: 1 − distinct n-grams / n-grams of one text
/// (0..1).
///
/// ```
/// use stencil_experiment::metrics::seq_rep;
/// assert_eq!(seq_rep("a a a a", 2), 1.0 - 1.0 / 3.0);
/// assert_eq!(seq_rep("a", 2), 0.0); // no 2-grams
/// ```
pub fn seq_rep(text: &str, n: usize) -> f64 {
    seq_rep_of(&words(text), n)
}

/// [`seq_rep`] of any units.
pub fn seq_rep_of<T: Hash + Eq>(units: &[T], n: usize) -> f64 {
    match ngrams(units, n).count() {
        0 => 0.0,
        t => 1.0 - ngrams(units, n).collect::<HashSet<_>>().len() as f64 / t as f64,
    }
}

/// Corpus-level distinct-n on words: distinct n-grams across `texts` / all their n-grams
/// (0..1).
///
/// ```
/// use stencil_experiment::metrics::distinct_n;
/// assert_eq!(distinct_n(&["a b c", "a b d"], 2), 0.75); // {a b, b c, b d} of 4
/// assert_eq!(distinct_n(&[], 2), 0.0);
/// ```
pub fn distinct_n(texts: &[&str], n: usize) -> f64 {
    let words: Vec<Vec<&str>> = texts.iter().map(|t| words(t)).collect();
    distinct_of(&words.iter().map(Vec::as_slice).collect::<Vec<_>>(), n)
}

/// [`distinct_n`] of any units.
pub fn distinct_of<T: Hash + Eq>(texts: &[&[T]], n: usize) -> f64 {
    let total: usize = texts.iter().map(|w| ngrams(w, n).count()).sum();
    match total {
        0 => 0.0,
        t => texts.iter().flat_map(|w| ngrams(w, n)).collect::<HashSet<_>>().len() as f64 / t as f64,
    }
}

/// Sentence BLEU-4 of `hypothesis` against `references` (unit lists), as NLTK's
/// `sentence_bleu` with `SmoothingFunction().method1` (0..1; see the [module docs](self)).
///
/// ```
/// use stencil_experiment::metrics::{bleu, words};
/// assert_eq!(bleu(&words("a b c d"), &[words("a b c d"), words("e f")]), 1.0);
/// assert_eq!(bleu(&words("a b c d"), &[words("e f g h")]), 0.0); // no unigram matches
/// ```
pub fn bleu<T: Hash + Eq>(hypothesis: &[T], references: &[Vec<T>]) -> f64 {
    let references: Vec<Counts<T>> = references.iter().map(|r| Counts::of(r)).collect();
    bleu_of(&Counts::of(hypothesis), &references.iter().collect::<Vec<_>>())
}

/// Self-BLEU (Texygen) on words: mean BLEU-4 of each text against all the others; `None`
/// with fewer than two texts.
///
/// ```
/// use stencil_experiment::metrics::self_bleu;
/// assert_eq!(self_bleu(&["a b c d", "a b c d"]), Some(1.0));
/// assert_eq!(self_bleu(&["a b c d"]), None);
/// ```
pub fn self_bleu(texts: &[&str]) -> Option<f64> {
    let words: Vec<Vec<&str>> = texts.iter().map(|t| words(t)).collect();
    self_bleu_of(&words.iter().map(Vec::as_slice).collect::<Vec<_>>())
}

/// [`self_bleu`] of any units.
pub fn self_bleu_of<T: Hash + Eq>(texts: &[&[T]]) -> Option<f64> {
    if texts.len() < 2 {
        return None;
    }
    let counts: Vec<Counts<T>> = texts.iter().map(|w| Counts::of(w)).collect();
    let scores = counts.iter().enumerate().map(|(i, hypothesis)| {
        let others: Vec<&Counts<T>> = counts.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, c)| c).collect();
        bleu_of(hypothesis, &others)
    });
    Some(scores.sum::<f64>() / texts.len() as f64)
}

/// The `L − n + 1` n-grams of `w` (none for n = 0).
fn ngrams<T>(w: &[T], n: usize) -> impl Iterator<Item = &[T]> + '_ {
    let count = if n == 0 { 0 } else { (w.len() + 1).saturating_sub(n) };
    (0..count).map(move |i| &w[i..i + n])
}

/// Python's `round(x, 2)`: Rust's `{:.2}` is also the correctly rounded decimal, ties to even.
fn round2(x: f64) -> f64 {
    format!("{x:.2}").parse().unwrap_or(x)
}

/// A text's length and its 1- to 4-gram counts, for BLEU.
struct Counts<'a, T> {
    len: usize,
    grams: [HashMap<&'a [T], usize>; 4],
}

impl<'a, T: Hash + Eq> Counts<'a, T> {
    fn of(w: &'a [T]) -> Counts<'a, T> {
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

fn bleu_of<T: Hash + Eq>(hypothesis: &Counts<T>, references: &[&Counts<T>]) -> f64 {
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
