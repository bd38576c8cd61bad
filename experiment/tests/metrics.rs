//! Golden values of `stencil_experiment::metrics`, computed by hand in the comments (and,
//! where it says so, recorded from the reference Python).

use stencil_experiment::metrics::{bleu, distinct_n, rep_diversity, self_bleu, seq_rep, table, Metrics, RepDiversity};
use stencil_experiment::Sample;

fn words(text: &str) -> Vec<&str> {
    text.split_whitespace().collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn seq_rep_golden() {
    // "a a a a": 4 unigrams, 1 distinct: 1 − 1/4 = 0.75.
    assert_eq!(seq_rep("a a a a", 1), 0.75);
    // 3 bigrams "a a", 1 distinct: 1 − 1/3.
    assert_eq!(seq_rep("a a a a", 2), 1.0 - 1.0 / 3.0);
    // One 4-gram: 1 − 1/1 = 0; no 5-gram (and no 0-gram): 0.
    assert_eq!(seq_rep("a a a a", 4), 0.0);
    assert_eq!(seq_rep("a a a a", 5), 0.0);
    assert_eq!(seq_rep("a a a a", 0), 0.0);
    // Whitespace of any kind separates words: "a b a" has 2-grams "a b", "b a".
    assert_eq!(seq_rep(" a\tb\u{3000}a\n", 2), 0.0);
    assert_eq!(seq_rep("", 1), 0.0);
}

#[test]
fn rep_diversity_golden() {
    // Su et al. count L − n n-grams per text (the last one is skipped).
    //
    // "the cat sat on the cat sat", L = 7:
    //   n=2, 5 counted: the-cat cat-sat sat-on on-the the-cat (cat-sat skipped): 4 unique of 5
    //   n=3, 4 counted: the-cat-sat cat-sat-on sat-on-the on-the-cat: 4 of 4
    //        (counting all 5 would add a second the-cat-sat: 4 of 5)
    //   n=4, 3 counted: 3 of 3
    // "a b a b a b", L = 6:
    //   n=2, 4 counted: ab ba ab ba: 2 of 4
    //   n=3, 3 counted: aba bab aba: 2 of 3
    //   n=4, 2 counted: abab baba: 2 of 2
    // "hi there", L = 2: no n-gram for n ≥ 2 (L − n ≤ 0).
    //
    // Sums: n=2: 6 of 9, rep-2 = (1 − 6/9)·100 = 33.33…  → 33.33
    //       n=3: 6 of 7, rep-3 = (1 − 6/7)·100 = 14.2857… → 14.29
    //       n=4: 5 of 5, rep-4 = 0
    // diversity = (1 − 0.3333)(1 − 0.1429)(1 − 0) = 0.6667 · 0.8571 = 0.57142857
    // words: the cat sat on a b hi there = 8
    let r = rep_diversity(&["the cat sat on the cat sat", "a b a b a b", "hi there"]);
    assert_eq!(r, RepDiversity { rep: [33.33, 14.29, 0.0], diversity: 0.57142857, unique_words: 8 });

    // n-grams are unique within a text, then summed: two copies of "a b c" count
    // a-b twice (2 unique of 2), so rep-2 is 0 although the corpus repeats it.
    assert_eq!(rep_diversity(&["a b c", "a b c"]).rep, [0.0, 0.0, 0.0]);

    // Every text under 3 words: the Python divides by zero for every n; here rep = 0.
    let short = rep_diversity(&["a b", "", " c "]);
    assert_eq!(short, RepDiversity { rep: [0.0; 3], diversity: 1.0, unique_words: 3 });
    assert_eq!(rep_diversity(&[]), RepDiversity { rep: [0.0; 3], diversity: 1.0, unique_words: 0 });

    // "a a a a a", L = 5: n=2: 3 counted, 1 unique: 66.67; n=3: 2 counted, 1 unique: 50;
    // n=4: 1 counted, 1 unique: 0. diversity = 0.3333 · 0.5 · 1.
    let r = rep_diversity(&["a a a a a"]);
    assert_eq!(r.rep, [66.67, 50.0, 0.0]);
    assert_eq!(r.diversity, (1.0 - 66.67 / 100.0) * (1.0 - 50.0 / 100.0) * 1.0);
}

#[test]
fn rep_diversity_matches_simctg_python() {
    // Recorded by running SimCTG's `measure_repetition_and_diversity` (as quoted in the
    // module docs) on these texts: (39.53, 34.21, 27.27, 0.289343308149, 23).
    let texts = [
        "the model said that the model said that it was fine",
        "it was fine and it was fine and it was not fine at all",
        "fine fine fine fine fine fine",
        "a completely different sentence with no repeats here",
        "the cat sat on the mat the cat sat on the mat the cat",
    ];
    let r = rep_diversity(&texts);
    assert_eq!(r, RepDiversity { rep: [39.53, 34.21, 27.27], diversity: 0.289343308149, unique_words: 23 });
    // NLTK 3.10 `sentence_bleu` with method1, each text against the others, averaged.
    assert!(close(self_bleu(&texts).unwrap(), 0.048362050018308164));
}

#[test]
fn bleu_golden() {
    // Identical texts: every p_n = 1 and c = r, so BP = 1 and BLEU = exp(0) = 1.0 exactly.
    assert_eq!(self_bleu(&["a b c d", "a b c d", "a b c d"]), Some(1.0));
    // Disjoint texts: no unigram matches, and NLTK's corpus_bleu returns 0 before
    // smoothing (`if p_numerators[1] == 0: return 0`), so not (0.1/4)^(…) but 0.
    assert_eq!(self_bleu(&["a b c d", "e f g h"]), Some(0.0));

    // "a b c d" against "d c b a": p1 = 4/4; no 2-, 3-, 4-gram matches, smoothed to
    // 0.1/3, 0.1/2, 0.1/1; c = r = 4, BP = 1.
    // BLEU = (1 · 0.1/3 · 0.05 · 0.1)^(1/4) = (1/6000)^(1/4) ≈ 1/8.8011 ≈ 0.11362
    // (NLTK: 0.11362193664674995). Both texts score the same, so self-BLEU too.
    let expected = (1.0f64 / 6000.0).powf(0.25);
    assert!(close(bleu(&words("a b c d"), &[words("d c b a")]), expected));
    assert!(close(self_bleu(&["a b c d", "d c b a"]).unwrap(), expected));
    assert!(close(expected, 0.11362193664674995));

    // Clipping (Papineni's example): 7 × "the" against "the cat is on the mat": p1 = 2/7
    // ("the" clipped to its 2 in the reference); "the the" etc. never match: 0.1/6, 0.1/5,
    // 0.1/4; c = 7 > r = 6, BP = 1.
    // BLEU = (2/7 · 0.1/6 · 0.1/5 · 0.1/4)^(1/4) = (1/420000)^(1/4) ≈ 0.039281
    let hypothesis = ["the"; 7];
    let score = bleu(&hypothesis, &[words("the cat is on the mat")]);
    assert!(close(score, (1.0f64 / 420000.0).powf(0.25)));
    assert!(close(score, 0.039281465090051315));

    // Brevity: "a b c d" against "a b c d e f": every p_n = 1, c = 4 < r = 6,
    // BP = exp(1 − 6/4) = exp(−0.5) ≈ 0.60653.
    assert!(close(bleu(&words("a b c d"), &[words("a b c d e f")]), (-0.5f64).exp()));
    // The closest reference length ties (5 and 3 for c = 4) go to the shorter: r = 3,
    // BP = 1, so 1.0 (with r = 5 it would be exp(−0.25)).
    assert_eq!(bleu(&words("a b c d"), &[words("a b c d e"), words("x y z")]), 1.0);

    // Under 4 words, identical texts stay below 1: p3 = p4 = 0.1/1 (no n-grams, the
    // denominator is max(1, 0)), BLEU = (1 · 1 · 0.1 · 0.1)^(1/4) = √0.1 ≈ 0.31623.
    assert!(close(self_bleu(&["a b", "a b"]).unwrap(), 0.1f64.sqrt()));

    // Empty hypothesis, empty or no references, fewer than two texts.
    assert_eq!(bleu(&[], &[words("a")]), 0.0);
    assert_eq!(bleu(&words("a"), &[vec![]]), 0.0);
    assert_eq!(bleu(&words("a"), &[]), 0.0);
    assert_eq!(self_bleu(&["a b c d"]), None);
    assert_eq!(self_bleu(&[]), None);
}

#[test]
fn distinct_n_golden() {
    // "a b a", "b a c":
    //   1-grams: a b a b a c: 6, distinct {a, b, c}: 3/6 = 0.5
    //   (the per-sample mean would be (2/3 + 3/3)/2 ≈ 0.83: this is corpus-level)
    //   2-grams: ab ba | ba ac: 4, distinct {ab, ba, ac}: 3/4 = 0.75
    //   3-grams: aba | bac: 2/2 = 1; 4-grams: none: 0
    let corpus = ["a b a", "b a c"];
    assert_eq!(distinct_n(&corpus, 1), 0.5);
    assert_eq!(distinct_n(&corpus, 2), 0.75);
    assert_eq!(distinct_n(&corpus, 3), 1.0);
    assert_eq!(distinct_n(&corpus, 4), 0.0);
    assert_eq!(distinct_n(&corpus, 0), 0.0);
    assert_eq!(distinct_n(&["", " "], 1), 0.0);
}

fn schema_sample(seed: u64, text: &str, tokens: usize, parses: Option<bool>, valid: Option<bool>) -> Sample {
    Sample { constrained: true, parses, valid, ..Sample::free_text("m", "p", "greedy", seed, text, tokens) }
}

#[test]
fn metrics_of_mixtures() {
    let samples = [
        schema_sample(1, "a a a a", 2, Some(true), Some(false)),
        schema_sample(2, "a a a a", 4, Some(false), Some(false)),
        schema_sample(3, "b c", 9, None, None),
    ];
    let m = Metrics::of(&samples.iter().collect::<Vec<_>>());
    assert_eq!((m.samples, m.distinct_outputs), (3, 2));
    // parses: 1 true of 2 known; valid: 0 of 2 known (None is left out).
    assert_eq!((m.parse_rate, m.valid_rate), (Some(0.5), Some(0.0)));
    // Tokens 2, 4, 9: mean 5; variance ((−3)² + (−1)² + 4²)/3 = 26/3.
    assert_eq!(m.length_mean, 5.0);
    assert!(close(m.length_std, (26.0f64 / 3.0).sqrt()));
    // seq-rep-2: "a a a a" 1 − 1/3 twice, "b c" 0 (one 2-gram): mean (2/3 + 2/3 + 0)/3 = 4/9.
    // seq-rep-3: 1 − 1/2 twice, "b c" has none: (0.5 + 0.5 + 0)/3 = 1/3. seq-rep-4: 0.
    assert!(close(m.seq_rep[0], 4.0 / 9.0) && close(m.seq_rep[1], 1.0 / 3.0));
    assert_eq!(m.seq_rep[2], 0.0);
    // distinct-1: a×8, b, c: {a, b, c} = 3/10. distinct-2: aa×6, bc: 2/7.
    assert_eq!(m.distinct[..2], [0.3, 2.0 / 7.0]);
    // rep (Su): "a a a a" n=2: 2 counted, 1 unique, twice; "b c" none: 1 − 2/4 = 50%.
    // n=3: 1 counted, 1 unique, twice: 0. n=4: none: 0.
    assert_eq!((m.rep, m.diversity), ([50.0, 0.0, 0.0], 0.5));

    let none = Metrics::of(&[&Sample::free_text("m", "p", "greedy", 1, "x", 1)]);
    assert_eq!((none.parse_rate, none.valid_rate, none.self_bleu), (None, None, None));
}

#[test]
fn metrics_of_empty() {
    let m = Metrics::of(&[]);
    let expected = Metrics {
        samples: 0,
        distinct_outputs: 0,
        rep: [0.0; 3],
        diversity: 1.0, // the product of (1 − 0) factors: see the module docs
        seq_rep: [0.0; 3],
        distinct: [0.0; 3],
        self_bleu: None,
        length_mean: 0.0,
        length_std: 0.0,
        parse_rate: None,
        valid_rate: None,
    };
    assert_eq!(m, expected);
}

#[test]
fn table_groups_in_order() {
    let mut constrained = schema_sample(1, "x", 1, Some(true), Some(true));
    constrained.preset = "a".into();
    let samples = [
        Sample::free_text("m", "p", "b", 1, "x", 1),
        constrained,
        Sample::free_text("m", "p", "a", 2, "y", 1),
        Sample::free_text("m", "p", "a", 1, "z", 1),
    ];
    let rows = table(&samples);
    let keys: Vec<_> = rows.iter().map(|(g, m)| (g.preset.as_str(), g.constrained, m.samples)).collect();
    assert_eq!(keys, [("a", false, 2), ("a", true, 1), ("b", false, 1)]);
    assert_eq!(rows[1].1.valid_rate, Some(1.0));
    assert!(table(&[]).is_empty());
}

/// xorshift64 (Marsaglia), so the test needs no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[test]
fn random_texts_stay_in_range() {
    const WORDS: [&str; 4] = ["a", "b", "c", "dd"];
    const SPACES: [&str; 4] = [" ", "\n", "\t ", "\u{3000}"];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let unit = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
    for _ in 0..300 {
        let count = rng.below(6);
        let samples: Vec<Sample> = (0..count)
            .map(|seed| {
                let len = rng.below(25);
                let text: String = (0..len).map(|_| [WORDS[rng.below(4)], SPACES[rng.below(4)]].concat()).collect();
                let flag = [None, Some(false), Some(true)][rng.below(3)];
                Sample {
                    parses: flag,
                    valid: flag.map(|f| f && rng.below(2) == 0),
                    ..Sample::free_text("m", "p", "x", seed as u64, &text, len)
                }
            })
            .collect();
        let m = Metrics::of(&samples.iter().collect::<Vec<_>>());
        let texts: Vec<&str> = samples.iter().map(|s| s.text.as_str()).collect();
        assert!(m.rep.iter().all(|&r| r.is_finite() && (0.0..=100.0).contains(&r)), "{m:?}");
        assert_eq!(m.diversity, (1.0 - m.rep[0] / 100.0) * (1.0 - m.rep[1] / 100.0) * (1.0 - m.rep[2] / 100.0));
        assert!(unit(m.diversity) && m.seq_rep.iter().chain(&m.distinct).all(|&x| unit(x)), "{m:?}");
        assert!([m.self_bleu, m.parse_rate, m.valid_rate].iter().flatten().all(|&x| unit(x)), "{m:?}");
        assert!(m.length_mean.is_finite() && m.length_std.is_finite() && m.length_std >= 0.0);
        assert_eq!(m.self_bleu.is_some(), count >= 2);
        assert!(m.distinct_outputs <= m.samples && m.samples == count);
        assert!(rep_diversity(&texts).unique_words <= 4);
        for n in 0..6 {
            assert!(texts.iter().all(|t| unit(seq_rep(t, n))) && unit(distinct_n(&texts, n)));
        }
    }
}
