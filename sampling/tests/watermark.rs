//! Statistical tests of the watermark that a wrong implementation fails: fixed seeds, enough
//! draws that each bound sits several standard deviations from the expected value.
//!
//! A flat "model" (every logit 0) over a vocabulary of `V` tokens, sampled through the real
//! [`Sampler`], makes the watermarked sequences; uniform random tokens the unwatermarked ones.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stencil_sampling::{
    Detection, Greenlist, Sampler, SamplingParams, Seeding, TokenHistory, WatermarkKey, WatermarkParams,
};

const V: usize = 1000;
const SEQUENCES: usize = 400;
const LENGTH: usize = 200;

fn watermark(key: &str) -> WatermarkParams {
    WatermarkParams::new(WatermarkKey::new(key))
}

/// A sequence of `LENGTH` tokens sampled from flat logits with `params`, after a one-token
/// prompt; `mask_at(i)` gives the mask of step `i` (None: every token).
fn generate(params: SamplingParams, mut mask_at: impl FnMut(usize) -> Option<Vec<u32>>) -> Vec<u32> {
    let mut sampler = Sampler::new(params).unwrap();
    let mut history = TokenHistory::with_prompt(&[0]);
    let logits = vec![0.0; V];
    for i in 0..LENGTH {
        let mask = mask_at(i);
        let token = sampler.sample(&logits, mask.as_deref(), &history).unwrap();
        history.push(token);
    }
    history.output().to_vec()
}

fn watermarked(w: &WatermarkParams, temperature: f32, seed: u64) -> Vec<u32> {
    generate(SamplingParams { temperature, seed: Some(seed), watermark: Some(w.clone()), ..Default::default() }, |_| {
        None
    })
}

/// Mean and (unbiased) variance.
fn moments(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    (mean, xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0))
}

/// Green tokens / scored tokens, pooled over detections.
fn pooled_green(ds: &[Detection]) -> f64 {
    ds.iter().map(|d| d.green).sum::<usize>() as f64 / ds.iter().map(|d| d.scored).sum::<usize>() as f64
}

/// `γe^δ / (γe^δ + 1 − γ)`: the chance of drawing a green token from a flat distribution.
fn expected_green(gamma: f64, delta: f64) -> f64 {
    gamma * delta.exp() / (gamma * delta.exp() + 1.0 - gamma)
}

#[track_caller]
fn assert_standard_normal(zs: &[f64], what: &str) {
    let (mean, var) = moments(zs);
    eprintln!("{what}: z mean {mean:.4}, variance {var:.4} over {} sequences", zs.len());
    // The mean's standard deviation is 1/√400 = 0.05; the variance's about √(2/399) = 0.071.
    assert!(mean.abs() < 0.15, "{what}: mean z {mean}");
    assert!(0.8 < var && var < 1.25, "{what}: variance of z {var}");
}

#[test]
fn unwatermarked_sequences_give_standard_normal_z_scores() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for (gamma, h, seeding) in [(0.25, 1, Seeding::LeftHash), (0.5, 3, Seeding::MinHash), (0.1, 0, Seeding::LeftHash)] {
        let zs: Vec<f64> = (0..SEQUENCES)
            .map(|i| {
                // With h = 0 one key has one greenlist, of Binomial(V, γ) tokens rather than
                // exactly γV: the null holds over keys, so each sequence gets its own.
                let key = if h == 0 { format!("key {i}") } else { "key".to_string() };
                let g = Greenlist::new(&WatermarkKey::new(key), gamma, h, seeding).unwrap();
                let tokens: Vec<u32> = (0..LENGTH).map(|_| rng.gen_range(0..V as u32)).collect();
                g.detect(&tokens).z
            })
            .collect();
        assert_standard_normal(&zs, &format!("random tokens, gamma {gamma}, h {h}, {seeding:?}"));
    }
}

#[test]
fn watermarked_sequences_checked_with_another_key_give_standard_normal_z_scores() {
    let w = watermark("the key");
    let wrong = watermark("not the key").greenlist().unwrap();
    let right = w.greenlist().unwrap();
    let (mut zs, mut right_zs) = (Vec::new(), Vec::new());
    for seed in 0..SEQUENCES as u64 {
        let tokens = watermarked(&w, 1.0, seed);
        zs.push(wrong.detect(&tokens).z);
        right_zs.push(right.detect(&tokens).z);
    }
    assert_standard_normal(&zs, "watermarked, wrong key");
    let (mean, _) = moments(&right_zs);
    let detected = right_zs.iter().filter(|&&z| z > 4.0).count();
    eprintln!("watermarked, right key: z mean {mean:.2}, {detected}/{SEQUENCES} detected at z > 4");
    assert_eq!(detected, SEQUENCES);
}

#[test]
fn the_green_fraction_of_flat_logits_matches_theory() {
    // γe^δ / (γe^δ + 1 − γ); the temperature divides δ (the bias comes before it).
    for (gamma, delta, temperature) in [(0.25, 2.0, 1.0), (0.25, 2.0, 0.5), (0.5, 1.0, 1.0)] {
        let w = WatermarkParams { gamma, delta, ..watermark("k") };
        let g = w.greenlist().unwrap();
        let ds: Vec<Detection> = (0..SEQUENCES as u64).map(|s| g.detect(&watermarked(&w, temperature, s))).collect();
        let measured = pooled_green(&ds);
        let expected = expected_green(gamma, f64::from(delta / temperature));
        eprintln!("gamma {gamma}, delta {delta}, T {temperature}: green {measured:.4}, theory {expected:.4}");
        // About 80,000 scored tokens: the standard deviation is under 0.002. Bias after the
        // temperature would give 0.711 at T = 0.5 instead of 0.948; δ applied to red tokens
        // 1 − 0.711.
        assert!((measured - expected).abs() < 0.01, "{measured} vs {expected}");
    }
    assert!((expected_green(0.25, 2.0) - 0.7112).abs() < 1e-4);
}

#[test]
fn a_large_delta_makes_every_token_green() {
    let w = WatermarkParams { delta: 60.0, ..watermark("k") };
    let g = w.greenlist().unwrap();
    for seed in 0..20 {
        let d = g.detect(&watermarked(&w, 1.0, seed));
        let limit = (d.scored as f64 * 0.75 / 0.25).sqrt();
        assert_eq!(d.green, d.scored);
        assert!((d.z - limit).abs() < 1e-9, "z {} vs √(T(1 − γ)/γ) = {limit}", d.z);
        assert!(d.scored > 190 && d.p_value < 1e-40, "{d:?}");
    }
}

#[test]
fn greedy_takes_the_argmax_of_the_biased_logits() {
    let w = watermark("k");
    let g = w.greenlist().unwrap();
    let history = TokenHistory::with_prompt(&[7]);
    let seed = g.seed(history.tokens()).unwrap();
    let green = (0..V as u32).find(|&t| g.is_green(seed, t)).unwrap();
    let red = (0..V as u32).find(|&t| !g.is_green(seed, t)).unwrap();
    let mut logits = vec![-10.0; V];
    logits[red as usize] = 1.0;
    logits[green as usize] = 1.0 - 1.5; // within δ = 2 of the best
    let params = SamplingParams { watermark: Some(w.clone()), ..SamplingParams::greedy() };
    assert_eq!(Sampler::new(params.clone()).unwrap().sample(&logits, None, &history).unwrap(), green);
    logits[green as usize] = 1.0 - 2.5; // beyond δ
    assert_eq!(Sampler::new(params).unwrap().sample(&logits, None, &history).unwrap(), red);
    let unmarked = Sampler::new(SamplingParams::greedy()).unwrap().sample(&logits, None, &history).unwrap();
    assert_eq!(unmarked, red);
}

#[test]
fn forced_tokens_dilute_the_z_score_as_predicted() {
    // Every third step the "grammar" allows one random token: it is forced, never biased.
    let w = watermark("k");
    let g = w.greenlist().unwrap();
    let (mut all, mut sampled) = (Vec::new(), Vec::new());
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for seed in 0..SEQUENCES as u64 {
        let forced: Vec<Option<u32>> = (0..LENGTH).map(|i| (i % 3 == 2).then(|| rng.gen_range(0..V as u32))).collect();
        let mask_of = |t: u32| {
            let mut mask = vec![0u32; V.div_ceil(32)];
            mask[t as usize / 32] |= 1 << (t % 32);
            mask
        };
        let params = SamplingParams { seed: Some(seed), watermark: Some(w.clone()), ..Default::default() };
        let tokens = generate(params, |i| forced[i].map(mask_of));
        all.push(g.detect(&tokens));
        sampled.push(g.detect_where(&tokens, |i| forced[i].is_none()));
    }
    let q = pooled_green(&sampled);
    let z = |ds: &[Detection]| moments(&ds.iter().map(|d| d.z).collect::<Vec<_>>()).0;
    let (z_all, z_sampled) = (z(&all), z(&sampled));
    // E[z] ≈ S(q − γ) / √((S + F)γ(1 − γ)) with S sampled and F forced tokens scored.
    let (s, f) =
        (mean_count(&sampled, |d| d.scored), mean_count(&all, |d| d.scored) - mean_count(&sampled, |d| d.scored));
    let predicted = s * (q - 0.25) / ((s + f) * 0.25 * 0.75).sqrt();
    eprintln!(
        "forced 1/3: z {z_all:.2} scoring everything (predicted {predicted:.2}), {z_sampled:.2} scoring the \
         sampled tokens only; ratio {:.3} vs √(S/(S+F)) = {:.3}",
        z_all / z_sampled,
        (s / (s + f)).sqrt()
    );
    assert!((z_all - predicted).abs() < 0.3, "{z_all} vs {predicted}");
    assert!((z_all / z_sampled - (s / (s + f)).sqrt()).abs() < 0.03);
    assert!((q - expected_green(0.25, 2.0)).abs() < 0.01, "{q}");
}

fn mean_count(ds: &[Detection], count: impl Fn(&Detection) -> usize) -> f64 {
    ds.iter().map(count).sum::<usize>() as f64 / ds.len() as f64
}

#[test]
fn repeated_ngrams_are_scored_once() {
    let w = watermark("k");
    let g = w.greenlist().unwrap();
    let phrase = watermarked(&w, 1.0, 3)[..40].to_vec();
    let once = g.detect(&phrase);
    let repeated: Vec<u32> = phrase.iter().copied().cycle().take(400).collect();
    let many = g.detect(&repeated);
    // The repeats add only the pair across the junction (last token, first token).
    assert!(many.scored <= once.scored + 1 && many.repeated >= 400 - 41, "{once:?} {many:?}");
    assert!((many.z - once.z).abs() < 1.0, "{} vs {}", many.z, once.z);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the logits, mask, key, δ and temperature, the sampled token and the whole
    /// final distribution stay inside the mask.
    #[test]
    fn a_masked_token_never_becomes_allowed(
        logits in prop::collection::vec(prop_oneof![-20.0f32..20.0, Just(f32::NEG_INFINITY)], 1..200),
        mask_bits in prop::collection::vec(any::<u32>(), 7),
        key in "[a-z]{1,8}",
        delta in prop_oneof![0.0f32..10.0, Just(1e30f32)],
        temperature in prop_oneof![Just(0.0f32), 0.1f32..3.0],
        h in 0u32..4,
        prompt in prop::collection::vec(0u32..200, 0..5),
        seed in any::<u64>(),
    ) {
        let n = logits.len();
        let allowed = |t: u32| (t as usize) < n && mask_bits[t as usize / 32] >> (t % 32) & 1 == 1;
        let w = WatermarkParams { delta, context_width: h, ..watermark(&key) };
        let params = SamplingParams { temperature, seed: Some(seed), top_k: 5, watermark: Some(w), ..Default::default() };
        let mut sampler = Sampler::new(params).unwrap();
        let history = TokenHistory::with_prompt(&prompt);
        let any_allowed = (0..n as u32).any(|t| allowed(t) && logits[t as usize] > f32::NEG_INFINITY);
        match sampler.sample(&logits, Some(&mask_bits), &history) {
            Ok(t) => prop_assert!(allowed(t) && logits[t as usize] > f32::NEG_INFINITY, "token {t}"),
            Err(_) => prop_assert!(!any_allowed),
        }
        for (t, p) in sampler.distribution(&logits, Some(&mask_bits), &history) {
            prop_assert!(allowed(t) && p.is_finite(), "token {t} with {p}");
        }
    }
}
