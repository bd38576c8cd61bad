//! Speculative sampling keeps the target's distribution: a mock target and a mock draft over
//! a 10-token vocabulary, with fixed and different logits, drafts of 1–5 tokens, 100,000
//! two-token continuations each. A chi-square test over the 100 (first, second) pairs must
//! accept the target's exact joint distribution and reject the draft's; the same under a
//! grammar mask (against the renormalized masked target) and with penalties on (the second
//! token's distribution then depends on the first, through the history).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stencil_sampling::speculative::{draw, verify, Verdict};
use stencil_sampling::{Sampler, SamplingParams, TokenHistory};
use stencil_test_support::stats::{chi_square, critical};

const VOCAB: usize = 10;
const DRAWS: usize = 100_000;
const TARGET: [f32; VOCAB] = [1.0, 0.2, 0.8, -0.3, 0.5, 0.0, 0.3, -0.5, 0.6, 0.1];
const DRAFT: [f32; VOCAB] = [0.1, 0.9, -0.2, 0.7, 0.0, 0.6, -0.4, 0.4, 0.2, 0.8];

/// One continuation of `len` tokens by speculative sampling with drafts of `k` tokens.
fn speculate(
    len: usize,
    k: usize,
    target: &mut Sampler,
    draft: &mut Sampler,
    mask: Option<&[u32]>,
    rng: &mut ChaCha8Rng,
) -> Vec<u32> {
    let mut history = TokenHistory::with_prompt(&[0, 1]);
    let start = history.tokens().len();
    while history.tokens().len() - start < len {
        // The draft: k tokens from q, each after the ones before it.
        let mut drafted = history.clone();
        let mut proposals = Vec::new();
        for _ in 0..k {
            let q = draft.distribution(&DRAFT, mask, &drafted);
            let d = draw(&q, rng.gen()).expect("q is not empty");
            drafted.push(d);
            proposals.push((d, q));
        }
        // Verification against p, position by position; the bonus token after a full accept.
        let mut all_accepted = true;
        for (d, q) in &proposals {
            let p = target.distribution(&TARGET, mask, &history);
            match verify(&p, Some(q), *d, target.uniform(), target.uniform()).expect("p is not empty") {
                Verdict::Accepted => history.push(*d),
                Verdict::Replaced(t) => {
                    history.push(t);
                    all_accepted = false;
                    break;
                }
            }
        }
        if all_accepted {
            let p = target.distribution(&TARGET, mask, &history);
            history.push(draw(&p, target.uniform()).expect("p is not empty"));
        }
    }
    history.tokens()[start..start + len].to_vec()
}

/// The exact joint distribution of the first two tokens under `sampler`'s pipeline.
fn joint(sampler: &mut Sampler, logits: &[f32], mask: Option<&[u32]>) -> Vec<f64> {
    let mut cells = vec![0.0; VOCAB * VOCAB];
    let history = TokenHistory::with_prompt(&[0, 1]);
    for (a, pa) in sampler.distribution(logits, mask, &history) {
        let mut h = history.clone();
        h.push(a);
        for (b, pb) in sampler.distribution(logits, mask, &h) {
            cells[a as usize * VOCAB + b as usize] = pa * pb;
        }
    }
    cells
}

fn check(name: &str, params: SamplingParams, mask: Option<&[u32]>) {
    for k in 1..=5 {
        let mut target = Sampler::new(SamplingParams { seed: Some(100 + k as u64), ..params.clone() }).unwrap();
        let mut draft = Sampler::new(SamplingParams { seed: Some(200 + k as u64), ..params.clone() }).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(300 + k as u64);
        let mut counts = vec![0usize; VOCAB * VOCAB];
        for _ in 0..DRAWS {
            let pair = speculate(2, k, &mut target, &mut draft, mask, &mut rng);
            counts[pair[0] as usize * VOCAB + pair[1] as usize] += 1;
        }
        let (stat, df) = chi_square(&counts, &joint(&mut target, &TARGET, mask));
        assert!(stat < critical(df), "{name}, k = {k}: chi-square {stat:.1} against the target, df {df}");
        // Infinite when the output holds pairs the draft cannot make (its own truncation).
        let (against_draft, draft_df) = chi_square(&counts, &joint(&mut draft, &DRAFT, mask));
        assert!(
            against_draft == f64::INFINITY || against_draft > 10.0 * critical(draft_df),
            "{name}, k = {k}: chi-square {against_draft:.1} against the draft"
        );
        eprintln!(
            "{name}, k = {k}: chi-square {stat:.1} (df {df}, critical {:.1}); against the draft {against_draft:.0}",
            critical(df)
        );
    }
}

#[test]
fn speculative_sampling_keeps_the_target_distribution() {
    check("plain", SamplingParams::default(), None);
}

#[test]
fn under_a_mask_it_keeps_the_masked_target() {
    // Tokens 2 and 7 forbidden: the renormalized target over the other eight.
    let mask = [0b11_0111_1011u32];
    check("masked", SamplingParams::default(), Some(&mask));
}

#[test]
fn with_penalties_and_truncation_it_keeps_the_target() {
    let params = SamplingParams {
        temperature: 0.8,
        top_k: 8,
        repetition_penalty: 1.5,
        presence_penalty: 0.7,
        ..SamplingParams::default()
    };
    check("penalties", params, None);
}
