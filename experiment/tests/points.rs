//! Per-point metrics against hand-computed values, and the bootstrap intervals against
//! what sampling theory predicts.

use stencil_experiment::points::{points, Metric, Unit};
use stencil_experiment::stats::{Estimate, Resampler};
use stencil_experiment::{Failure, Sample};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn sample(prompt: &str, seed: u64, text: &str, tokens: &[u32]) -> Sample {
    Sample::text("M", "task", prompt, "T 1", seed, text, tokens)
}

#[test]
fn a_points_values_are_the_hand_computed_ones() {
    let mut samples = vec![
        sample("p1", 1, "a b c d", &[1, 2, 3, 4]),
        sample("p1", 2, "a b c d", &[1, 2, 3, 4]),
        sample("p2", 1, "x x x x x", &[5, 5, 5, 5, 5, 5]),
        sample("p2", 2, "y", &[6]),
    ];
    samples[2].stop = "length".into();
    for (s, (nll, coh)) in samples.iter_mut().zip([(1.0, 0.5), (2.0, 0.7), (3.0, 0.9), (0.0, 0.1)]) {
        s.nll = Some(nll);
        s.coherence = Some(coh);
    }
    samples[3].nll = None; // an empty score is left out, not counted as 0
    let p = &points(&samples)[0];
    assert_eq!((p.prompts, p.outputs, p.seeds, p.distinct_outputs, p.cut), (2, 4, 2, 2, 1));
    let v = |m: Metric| p.get(m).unwrap().value;
    // Lengths: tokens 4, 4, 6, 1 → 3.75; words 4, 4, 5, 1 → 3.5.
    assert_eq!((v(Metric::Length(Unit::Tokens)), v(Metric::Length(Unit::Words))), (3.75, 3.5));
    assert_eq!(v(Metric::Cut), 0.25);
    // Perplexity: exp of the mean NLL of the three scored outputs, (1 + 2 + 3)/3 = 2.
    assert!(close(v(Metric::Perplexity), 2f64.exp()));
    assert!(close(v(Metric::Coherence), (0.5 + 0.7 + 0.9 + 0.1) / 4.0));
    // Su's rep-2 on words: "a b c d" twice (2 counted, 2 distinct each), "x x x x x" (3 counted,
    // 1 distinct), "y" (none): 1 − 5/7 = 28.57 %. On tokens: 2+2 distinct of 2+2, and
    // 5 5 5 5 5 5 (4 counted, 1 distinct): 1 − 5/8 = 37.5 %.
    assert_eq!(v(Metric::Rep(2, Unit::Words)), 28.57);
    assert_eq!(v(Metric::Rep(2, Unit::Tokens)), 37.5);
    // Self-BLEU per prompt over its seeds, then the mean: p1's two identical texts score 1;
    // p2's "x x x x x" against "y" share no unigram: 0. Mean 0.5.
    assert_eq!(v(Metric::SelfBleu(Unit::Words)), 0.5);
    // distinct-1 over p1's seeds: {a b c d} of 8 = 0.5; p2: {x, y} of 6 = 1/3. Mean 5/12.
    assert!(close(v(Metric::Distinct(1, Unit::Words)), 5.0 / 12.0));
    // No schema: no parse, valid or correct rate.
    assert!(p.get(Metric::Valid).is_none() && p.get(Metric::Parse).is_none() && p.get(Metric::Correct).is_none());
    for m in Metric::all() {
        if let Some(e) = p.get(m) {
            assert!(e.lo <= e.hi && e.lo.is_finite() && e.hi.is_finite(), "{m:?}: {e:?}");
        }
    }
}

#[test]
fn schema_outcomes_are_counted_by_reason() {
    let mut samples: Vec<Sample> = (1..=5).map(|seed| sample("p", seed, "{}", &[1])).collect();
    let outcomes = [
        (true, true, "eos"),
        (true, false, "eos"),
        (false, false, "eos"),
        (false, false, "length"),
        (true, false, "length"),
    ];
    for (s, (parses, valid, stop)) in samples.iter_mut().zip(outcomes) {
        s.constrained = true;
        (s.parses, s.valid, s.stop) = (Some(parses), Some(valid), stop.into());
        s.correct = Some(valid);
    }
    let reasons: Vec<_> = samples.iter().map(Sample::outcome).collect();
    assert_eq!(
        reasons,
        [
            Some(Ok(())),
            Some(Err(Failure::SchemaViolation)),
            Some(Err(Failure::BadJson)),
            Some(Err(Failure::Cut)),
            Some(Err(Failure::Cut))
        ]
    );
    let p = &points(&samples)[0];
    assert_eq!(p.failures, [2, 1, 1]);
    assert_eq!((p.get(Metric::Parse).unwrap().value, p.get(Metric::Valid).unwrap().value), (0.6, 0.2));
    assert_eq!(p.get(Metric::Correct).unwrap().value, 0.2);
    assert!(p.key.constrained);
}

#[test]
fn one_seed_per_prompt_has_no_across_seed_metrics() {
    let samples: Vec<Sample> =
        (0..4).map(|i| Sample::text("M", "t", &format!("p{i}"), "T 0", 1, "a b c d e", &[1, 2, 3])).collect();
    let p = &points(&samples)[0];
    assert_eq!((p.prompts, p.seeds), (4, 1));
    assert!(p.get(Metric::SelfBleu(Unit::Words)).is_none() && p.get(Metric::Distinct(2, Unit::Tokens)).is_none());
    // Identical outputs: every resample gives the same value, a zero-width interval.
    let d = p.get(Metric::Diversity(Unit::Words)).unwrap();
    assert_eq!((d.lo, d.value, d.hi), (1.0, 1.0, 1.0));
}

#[test]
fn points_come_in_sample_order_and_are_reproducible() {
    let samples = vec![
        Sample::text("B", "t", "p", "T 1", 1, "z", &[1]),
        Sample::text("A", "t", "p", "T 0", 1, "z", &[1]),
        Sample::text("B", "t", "p", "T 1", 2, "y", &[2]),
    ];
    let a = points(&samples);
    let keys: Vec<(&str, &str, usize)> =
        a.iter().map(|p| (p.key.model.as_str(), p.key.setting.as_str(), p.outputs)).collect();
    assert_eq!(keys, [("B", "T 1", 2), ("A", "T 0", 1)]);
    assert_eq!(a, points(&samples));
    assert!(points(&[]).is_empty());
}

#[test]
fn the_bootstrap_interval_of_a_mean_has_the_textbook_width() {
    // 20 prompts, one output each, values 1..=20: mean 10.5, population sd √33.25, so the
    // standard error is √33.25/√20 ≈ 1.289 and a 95 % interval about ±2.53.
    let r = Resampler::new(&[1; 20], 4000, 11);
    let e = r.estimate(|draw| Some(draw.map(|(p, _)| (p + 1) as f64).sum::<f64>() / 20.0)).unwrap();
    assert_eq!(e.value, 10.5);
    assert!((e.lo - 7.97).abs() < 0.35 && (e.hi - 13.03).abs() < 0.35, "{e:?}");
    // Two-stage: prompt means 0 and 10, seeds spread ±1 around them. Most of the
    // uncertainty is between prompts: the interval spans most of 0..10.
    let values = [[-1.0, 0.0, 1.0], [9.0, 10.0, 11.0]];
    let r = Resampler::new(&[3, 3], 2000, 3);
    let e = r
        .estimate(|draw| {
            let v: Vec<f64> = draw.map(|(p, s)| values[p][s]).collect();
            Some(v.iter().sum::<f64>() / v.len() as f64)
        })
        .unwrap();
    assert_eq!(e.value, 5.0);
    assert!(e.lo < 1.0 && e.hi > 9.0, "{e:?}");
    // Prompt-level statistics draw prompts only.
    let e = r.estimate_prompts(|draw| Some(draw.map(|p| p as f64).sum::<f64>())).unwrap();
    assert_eq!((e.value, e.lo, e.hi), (1.0, 0.0, 2.0));
    // Same seed, same interval.
    let again = Resampler::new(&[3, 3], 2000, 3).estimate_prompts(|draw| Some(draw.map(|p| p as f64).sum::<f64>()));
    assert_eq!(again, Some(e));
}

#[test]
fn differences_need_disjoint_intervals() {
    let a = Estimate { value: 0.5, lo: 0.4, hi: 0.6 };
    assert!(!a.differs(&a));
    assert!(!a.differs(&Estimate { value: 0.65, lo: 0.6, hi: 0.7 }), "touching intervals overlap");
    assert!(a.differs(&Estimate { value: 0.7, lo: 0.61, hi: 0.8 }));
    assert!(Estimate { value: 0.2, lo: 0.1, hi: 0.39 }.differs(&a));
}
