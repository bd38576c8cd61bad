//! The pseudorandom function against reference vectors and pinned outputs, the normal tail
//! against known values, validation, and redaction. The statistical tests (z-scores under
//! the null, green fractions under sampling) are in `sampling/tests/watermark.rs`.

use super::*;
use crate::{Sampler, SamplingParams};

fn key(text: &str) -> WatermarkKey {
    WatermarkKey::new(text)
}

fn greenlist(gamma: f64, h: u32, seeding: Seeding) -> Greenlist {
    Greenlist::new(&key("stencil"), gamma, h, seeding).unwrap()
}

/// The reference key 00 01 … 0f of the SipHash paper.
const REF_KEY: (u64, u64) = (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);

#[test]
fn siphash24_matches_the_reference_vectors() {
    let message: Vec<u8> = (0..64).collect();
    // From the SipHash paper (Appendix A) and the reference implementation's vector table.
    assert_eq!(siphash24(REF_KEY, &message[..0]), 0x726f_db47_dd0e_0e31);
    assert_eq!(siphash24(REF_KEY, &message[..1]), 0x74f8_39c5_93dc_67fd);
    assert_eq!(siphash24(REF_KEY, &message[..15]), 0xa129_ca61_49be_45e5);
}

#[test]
#[allow(deprecated)]
fn siphash24_matches_std() {
    use std::hash::{Hasher, SipHasher};
    // std's (deprecated) `SipHasher` is SipHash-2-4 on the bytes written.
    let mut state = 0x1234_5678_9abc_def0u64;
    for len in 0..80 {
        state = splitmix64(state);
        let (k0, k1) = (state, splitmix64(state ^ 1));
        let message: Vec<u8> = (0..len).map(|i| splitmix64(state.wrapping_add(i)) as u8).collect();
        let mut std = SipHasher::new_with_keys(k0, k1);
        std.write(&message);
        assert_eq!(siphash24((k0, k1), &message), std.finish(), "length {len}");
    }
}

#[test]
fn splitmix64_matches_the_reference_stream() {
    // SplitMix64 from state 0: the state advances by GOLDEN, then the output is mixed.
    let outputs: Vec<u64> = (1..=3).map(|n| splitmix64(GOLDEN.wrapping_mul(n))).collect();
    assert_eq!(outputs, [0xe220_a839_7b1d_cdaf, 0x6e78_9e6a_a1b9_65f4, 0x06c4_5d18_8009_454f]);
}

/// The greenlists are a stable format: detection of old texts must keep working, so these
/// values must never change (a change needs a new [`DOMAIN`] version).
#[test]
fn greenlists_are_pinned() {
    let g = greenlist(0.25, 1, Seeding::LeftHash);
    assert_eq!(key("stencil").sip_key(), PINNED_SIP_KEY);
    let seed = g.seed(&[17, 42]).unwrap();
    assert_eq!(seed, PINNED_SEED);
    let green: Vec<u32> = (0..64).filter(|&t| g.is_green(seed, t)).collect();
    assert_eq!(green, PINNED_GREEN);
    let m = greenlist(0.25, 3, Seeding::MinHash);
    assert_eq!(m.seed(&[1, 2, 3]).unwrap(), PINNED_MIN_SEED);
}

// Computed by an independent implementation of the module docs' definitions (Python).
const PINNED_SIP_KEY: (u64, u64) = (9104863993328407959, 4278350529691791170);
const PINNED_SEED: u64 = 12986572749383300239;
const PINNED_GREEN: [u32; 18] = [1, 4, 10, 14, 17, 19, 25, 26, 28, 29, 30, 32, 36, 46, 48, 49, 55, 60];
const PINNED_MIN_SEED: u64 = 9715039012881479504;

#[test]
fn seeds_follow_the_scheme() {
    let left = greenlist(0.25, 2, Seeding::LeftHash);
    let min = greenlist(0.25, 2, Seeding::MinHash);
    // Only the last h tokens count; fewer than h give no seed.
    assert_eq!(left.seed(&[9, 1, 2]), left.seed(&[5, 1, 2]));
    assert_eq!(left.seed(&[2]), None);
    assert_ne!(left.seed(&[1, 2]), left.seed(&[2, 1]), "left-hash depends on the order");
    assert_eq!(min.seed(&[1, 2]), min.seed(&[2, 1]), "min-hash does not");
    let one = |t: u32| siphash24(min.sip_key, &t.to_le_bytes());
    assert_eq!(min.seed(&[1, 2]), Some(one(1).min(one(2))));
    // With h = 1 the schemes agree (the hash of the one token).
    let left1 = greenlist(0.25, 1, Seeding::LeftHash);
    let min1 = greenlist(0.25, 1, Seeding::MinHash);
    assert_eq!(left1.seed(&[3, 7]), min1.seed(&[3, 7]));
    // h = 0: one seed for every context, even an empty one.
    let fixed = greenlist(0.25, 0, Seeding::LeftHash);
    assert_eq!(fixed.seed(&[]), fixed.seed(&[1, 2, 3]));
    assert!(fixed.seed(&[]).is_some());
    // Another key, other seeds.
    let other = Greenlist::new(&key("other"), 0.25, 2, Seeding::LeftHash).unwrap();
    assert_ne!(left.seed(&[1, 2]), other.seed(&[1, 2]));
}

#[test]
fn the_green_share_is_gamma() {
    for gamma in [0.1, 0.25, 0.5, 0.9] {
        let g = greenlist(gamma, 1, Seeding::LeftHash);
        let mut green = 0;
        for context in 0..20 {
            let seed = g.seed(&[context]).unwrap();
            green += (0..10_000).filter(|&t| g.is_green(seed, t)).count();
        }
        let share = green as f64 / 200_000.0;
        // Binomial standard deviation at most 0.0011.
        assert!((share - gamma).abs() < 0.005, "gamma {gamma}: {share}");
    }
}

#[test]
fn normal_tail_matches_known_values() {
    let known = [
        (0.0, 0.5),
        (1.0, 0.15865525393145707),
        (1.96, 0.024997895148220435),
        (4.0, 3.1671241833119965e-05),
        (6.0, 9.865876450377012e-10),
        (10.0, 7.619853024160593e-24),
        (20.0, 2.7536241186063314e-89),
        (-2.0, 0.9772498680518208),
    ];
    for (z, p) in known {
        let got = normal_tail(z);
        assert!(((got - p) / p).abs() < 2e-7, "Q({z}) = {got}, expected {p}");
    }
    assert_eq!(normal_tail(f64::INFINITY), 0.0);
    assert_eq!(normal_tail(f64::NEG_INFINITY), 1.0);
    assert!(normal_tail(f64::NAN).is_nan());
}

#[test]
fn detection_counts_and_edge_cases() {
    let g = greenlist(0.25, 1, Seeding::LeftHash);
    let empty = g.detect(&[]);
    assert_eq!((empty.scored, empty.z, empty.p_value, empty.green_fraction), (0, 0.0, 1.0, 0.0));
    assert!(!empty.is_watermarked(-1.0), "nothing scored is never a detection");
    assert_eq!(g.detect(&[5]).scored, 0, "the first token has no context");
    let d = g.detect(&[1, 2, 3, 1, 2, 3]);
    assert_eq!((d.tokens, d.scored, d.repeated), (6, 3, 2));
    let h3 = greenlist(0.25, 3, Seeding::LeftHash).detect(&[1, 2, 3, 4, 5]);
    assert_eq!(h3.scored, 2);
    // All green: z = √(T(1 − γ)/γ).
    let all = Detection::from_counts(10, 10, 10, 0, 0, 0.25);
    assert!((all.z - 30f64.sqrt()).abs() < 1e-12 && all.green_fraction == 1.0);
}

#[test]
fn validation_names_the_field_and_hides_the_key() {
    let field = |w: WatermarkParams| match w.validate() {
        Err(SamplingError::InvalidParam { field, value, .. }) => {
            assert!(!value.contains("secret"), "{value}");
            field
        }
        other => panic!("expected InvalidParam, got {other:?}"),
    };
    let w = || WatermarkParams::new(key("secret"));
    w().validate().unwrap();
    assert_eq!(field(WatermarkParams { key: key(""), ..w() }), "watermark.key");
    assert_eq!(field(WatermarkParams { key: key(REDACTED), ..w() }), "watermark.key");
    for gamma in [0.0, 1.0, -0.1, f64::NAN] {
        assert_eq!(field(WatermarkParams { gamma, ..w() }), "watermark.gamma");
    }
    for delta in [-1.0, f32::NAN, f32::INFINITY] {
        assert_eq!(field(WatermarkParams { delta, ..w() }), "watermark.delta");
    }
    assert_eq!(field(WatermarkParams { context_width: 65, ..w() }), "watermark.context_width");
    WatermarkParams { context_width: 0, delta: 0.0, gamma: 0.999, ..w() }.validate().unwrap();
    let params = SamplingParams { watermark: Some(WatermarkParams { gamma: 2.0, ..w() }), ..Default::default() };
    assert!(params.validate().is_err() && Sampler::new(params).is_err());
}

#[test]
fn the_key_never_shows() {
    let watermark = WatermarkParams { seeding: Seeding::MinHash, ..WatermarkParams::new(key("s3cr3t-k3y")) };
    let params = SamplingParams { watermark: Some(watermark.clone()), seed: Some(3), ..Default::default() };
    let json = serde_json::to_string(&params).unwrap();
    assert!(
        json.contains(
            r#""watermark":{"key":"<redacted>","gamma":0.25,"delta":2.0,"context_width":1,"seeding":"min_hash"}"#
        ),
        "{json}"
    );
    let sampler = Sampler::new(params.clone()).unwrap();
    for shown in [
        json,
        format!("{params:?}"),
        format!("{sampler:?}"),
        format!("{:?}", watermark.greenlist().unwrap()),
        format!("{params:#?}"),
    ] {
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains(REDACTED), "{shown}");
    }
    // Read back from a record, the placeholder is refused rather than used as a key.
    let back: SamplingParams = serde_json::from_str(&serde_json::to_string(&params).unwrap()).unwrap();
    assert!(back.validate().is_err());
    // Without a watermark the serialized form has no `watermark` field (as before).
    assert!(!serde_json::to_string(&SamplingParams::default()).unwrap().contains("watermark"));
}

#[test]
fn serde_reads_defaults_and_rejects_unknown_fields() {
    let w: WatermarkParams =
        serde_json::from_str(r#"{"key": "k", "seeding": "min_hash", "context_width": 4}"#).unwrap();
    assert_eq!((w.gamma, w.delta, w.context_width, w.seeding), (0.25, 2.0, 4, Seeding::MinHash));
    assert_eq!(w.key, key("k"));
    assert!(serde_json::from_str::<WatermarkParams>(r#"{"gamma": 0.5}"#).unwrap_err().to_string().contains("key"));
    assert!(serde_json::from_str::<WatermarkParams>(r#"{"key": "k", "bias": 1}"#).is_err());
    let p: SamplingParams = serde_json::from_str(r#"{"watermark": {"key": "k"}}"#).unwrap();
    assert_eq!(p.watermark, Some(WatermarkParams::new(key("k"))));
}
