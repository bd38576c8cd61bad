//! Golden values of `stencil_experiment::metrics`, computed by hand in the comments (and,
//! where it says so, recorded from the reference Python), on words and on token ids.

use stencil_experiment::metrics::{
    bleu, distinct_n, distinct_of, rep_diversity, self_bleu, self_bleu_of, seq_rep, seq_rep_of, RepCounts, RepDiversity,
};

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

#[test]
fn token_units_see_what_words_miss() {
    // Gemma writes digits one token at a time: "1000000" is one word but seven tokens.
    let digits: [u32; 7] = [236770, 236771, 236771, 236771, 236771, 236771, 236771];
    assert_eq!(seq_rep("1000000", 2), 0.0);
    // 6 token 2-grams: "1 0" and five "0 0": 2 distinct: 1 − 2/6.
    assert!(close(seq_rep_of(&digits, 2), 1.0 - 2.0 / 6.0));
    // Su et al. on tokens: n=2 counts 5 (the last skipped), 2 distinct: rep-2 = 60 %;
    // n=3: 4 counted, 2 distinct ("1 0 0", "0 0 0"): 50 %; n=4: 3 counted, 2 distinct: 33.33 %.
    let c = RepCounts::of(&digits);
    assert_eq!((c.unique, c.counted), ([2, 2, 2], [5, 4, 3]));
    assert_eq!(c.rep(), [60.0, 50.0, 33.33]);
    // A hyphenated loop: one word, a run of repeated tokens.
    let lambda: Vec<u32> = [10, 11].repeat(8);
    assert_eq!(seq_rep("Lambda-Lambda-Lambda-Lambda-Lambda-Lambda-Lambda-Lambda", 4), 0.0);
    assert!(seq_rep_of(&lambda, 4) > 0.8);
    // Generic and word functions agree on words.
    let w: Vec<Vec<&str>> = ["a b a", "b a c"].iter().map(|t| words(t)).collect();
    let w: Vec<&[&str]> = w.iter().map(Vec::as_slice).collect();
    assert_eq!(distinct_of(&w, 2), distinct_n(&["a b a", "b a c"], 2));
    assert_eq!(self_bleu_of(&w), self_bleu(&["a b a", "b a c"]));
    // Counts add up: the counts of two texts are those of both.
    let (a, b) = (RepCounts::of(&[1, 2, 1, 2, 1]), RepCounts::of(&[3, 3, 3, 3]));
    assert_eq!(
        (a + b).counted,
        [a.counted[0] + b.counted[0], a.counted[1] + b.counted[1], a.counted[2] + b.counted[2]]
    );
    assert_eq!(RepCounts::default().rep(), [0.0; 3]);
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
        let texts: Vec<String> = (0..count)
            .map(|_| (0..rng.below(25)).map(|_| [WORDS[rng.below(4)], SPACES[rng.below(4)]].concat()).collect())
            .collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let tokens: Vec<Vec<u32>> =
            (0..count).map(|_| (0..rng.below(25)).map(|_| rng.below(3) as u32).collect()).collect();
        let tokens: Vec<&[u32]> = tokens.iter().map(Vec::as_slice).collect();
        let r = rep_diversity(&texts);
        assert!(r.rep.iter().all(|&x| x.is_finite() && (0.0..=100.0).contains(&x)), "{r:?}");
        assert!(unit(r.diversity) && r.unique_words <= 4);
        let c = tokens.iter().fold(RepCounts::default(), |c, t| c + RepCounts::of(t));
        assert!(c.rep_exact().iter().all(|&x| (0.0..=100.0).contains(&x)));
        assert!(c.unique.iter().zip(&c.counted).all(|(u, t)| u <= t));
        assert_eq!(self_bleu(&texts).is_some(), count >= 2);
        assert_eq!(self_bleu_of(&tokens).is_some(), count >= 2);
        assert!([self_bleu(&texts), self_bleu_of(&tokens)].iter().flatten().all(|&x| unit(x)));
        for n in 0..6 {
            assert!(texts.iter().all(|t| unit(seq_rep(t, n))) && unit(distinct_n(&texts, n)));
            assert!(tokens.iter().all(|t| unit(seq_rep_of(t, n))) && unit(distinct_of(&tokens, n)));
        }
    }
}
