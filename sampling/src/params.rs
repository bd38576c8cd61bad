//! [`SamplingParams`]: every knob between the logits and the text, named as in vLLM's
//! `SamplingParams` and the OpenAI API.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{SamplingError, WatermarkParams};

/// The decoding parameters of one request.
///
/// Every field has a neutral default (the stage is off), except `max_tokens` (256). The
/// stages run in the order given in the [crate docs](crate#the-pipeline); each field's doc
/// gives its exact math. In serialized form (JSON, TOML) every field is optional and unknown
/// fields are an error.
///
/// # Example
///
/// ```
/// use stencil_sampling::SamplingParams;
///
/// let params: SamplingParams = serde_json::from_str(r#"{"temperature": 0.7, "top_p": 0.9}"#)?;
/// assert_eq!(params.top_p, 0.9);
/// assert_eq!(params.max_tokens, 256); // the default
/// params.validate()?;
///
/// assert!(serde_json::from_str::<SamplingParams>(r#"{"temprature": 0.7}"#).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplingParams {
    /// Divides every logit before the softmax: `p_i ∝ exp(l_i / temperature)`. Default 1.0.
    ///
    /// `0.0` means greedy: the argmax after every logit-changing stage (bias, penalties,
    /// mask), ties going to the lowest token id; top-k, top-p and min-p then change nothing.
    /// Must be finite and `>= 0`.
    pub temperature: f32,
    /// Keeps only the `top_k` tokens with the highest logits (ties: lowest id first).
    /// Default 0 = off.
    pub top_k: u32,
    /// Nucleus sampling: sorts by decreasing probability (after top-k, renormalized) and keeps
    /// the shortest prefix whose cumulative probability is `>= top_p`; the token that crosses
    /// the threshold is kept (as in vLLM and Hugging Face). Default 1.0 = off; must be in
    /// `(0, 1]`.
    pub top_p: f32,
    /// Keeps the tokens whose probability is `>= min_p * p_max`, `p_max` being the most likely
    /// token's probability (after top-k and top-p). Default 0.0 = off; must be in `[0, 1]`.
    pub min_p: f32,
    /// The multiplicative penalty of CTRL / Hugging Face: for every distinct token id in the
    /// prompt or the output so far, a logit `l > 0` becomes `l / repetition_penalty`, any
    /// other `l * repetition_penalty` (once per id, however often it occurs). Default 1.0 =
    /// off; must be finite and `> 0` (below 1 favours repetition).
    pub repetition_penalty: f32,
    /// OpenAI's frequency penalty: `l -= count * frequency_penalty`, `count` being how often
    /// the token occurs in the output so far (the prompt does not count). Default 0.0 = off;
    /// must be finite (negative values favour repetition).
    pub frequency_penalty: f32,
    /// OpenAI's presence penalty: `l -= presence_penalty` for every token that occurs in the
    /// output so far (the prompt does not count). Default 0.0 = off; must be finite.
    pub presence_penalty: f32,
    /// Hugging Face's `no_repeat_ngram_size`: with `n` > 0, a token that would complete an
    /// n-gram already present in the prompt + output so far gets `-inf`. As in Hugging Face,
    /// which scans the whole `input_ids`, the prompt counts. `n = 1` bans every token seen so
    /// far. Default 0 = off.
    pub no_repeat_ngram_size: u32,
    /// Added to the logit of each listed token id (OpenAI's `logit_bias`), before everything
    /// else. Ids outside the vocabulary are ignored; a bias never re-allows a masked token.
    /// Biases must be finite (use a large negative value to ban a token).
    pub logit_bias: BTreeMap<u32, f32>,
    /// The random seed. `None` draws one from the operating system; [`Sampler::seed`] reports
    /// it so the run can be replayed.
    ///
    /// [`Sampler::seed`]: crate::Sampler::seed
    pub seed: Option<u64>,
    /// The most tokens to generate. Default 256.
    pub max_tokens: u32,
    /// Stop strings: generation ends at the first occurrence of any of them, which is not
    /// part of the output (see [`StopStrings`](crate::StopStrings)). Must not be empty
    /// strings.
    pub stop: Vec<String>,
    /// Keep generating after an end-of-sequence token (benchmarks). Default false.
    pub ignore_eos: bool,
    /// A greenlist watermark ([stage 4](crate#the-pipeline)): `l += δ` for the allowed tokens
    /// that are green after the last h tokens (see [`watermark`](crate::watermark)).
    /// Default `None` = off; absent from the serialized form when off, and its key
    /// serializes as `"<redacted>"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watermark: Option<WatermarkParams>,
    /// Contrastive search (Su et al. 2022; Hugging Face's `penalty_alpha`): with `α > 0` and
    /// `top_k > 1`, each step picks, among the `top_k` most likely allowed tokens `v`, the
    /// one maximizing `(1 − α)·p(v) − α·max_j cos(h_v, h_j)` over the hidden states `h_j` of
    /// the prompt and output so far. Decoding is then deterministic: temperature, top-p and
    /// min-p do not apply (bias, penalties and the grammar's mask do). The decode runtime
    /// runs it (the sampler itself ignores it); `α = 0` or `top_k <= 1` is greedy decoding.
    /// Default 0.0 = off; must be in `[0, 1]`. Absent from the serialized form when off.
    #[serde(skip_serializing_if = "is_zero")]
    pub penalty_alpha: f32,
}

fn is_zero(x: &f32) -> bool {
    *x == 0.0
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            no_repeat_ngram_size: 0,
            logit_bias: BTreeMap::new(),
            seed: None,
            max_tokens: 256,
            stop: Vec::new(),
            ignore_eos: false,
            watermark: None,
            penalty_alpha: 0.0,
        }
    }
}

impl SamplingParams {
    /// Greedy decoding (temperature 0), everything else at its default.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(stencil_sampling::SamplingParams::greedy().temperature, 0.0);
    /// ```
    pub fn greedy() -> Self {
        SamplingParams { temperature: 0.0, ..SamplingParams::default() }
    }

    /// Whether decoding is greedy (`temperature == 0`).
    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0
    }

    /// The contrastive search this asks for: `(penalty_alpha, top_k)` when `α > 0` and
    /// `top_k > 1`; `None` otherwise (with `α = 0` or one candidate, contrastive search
    /// is greedy decoding).
    ///
    /// # Example
    ///
    /// ```
    /// use stencil_sampling::SamplingParams;
    /// let p = SamplingParams { penalty_alpha: 0.6, top_k: 4, ..SamplingParams::default() };
    /// assert_eq!(p.contrastive(), Some((0.6, 4)));
    /// assert_eq!(SamplingParams { top_k: 1, ..p.clone() }.contrastive(), None);
    /// ```
    pub fn contrastive(&self) -> Option<(f32, usize)> {
        (self.penalty_alpha > 0.0 && self.top_k > 1).then_some((self.penalty_alpha, self.top_k as usize))
    }

    /// Checks every field's range.
    ///
    /// # Errors
    ///
    /// [`SamplingError::InvalidParam`], naming the first bad field and its value: a NaN,
    /// infinite or negative `temperature`, `top_p` outside `(0, 1]`, `min_p` outside
    /// `[0, 1]`, a `repetition_penalty` that is not finite and `> 0`, a non-finite
    /// frequency or presence penalty or bias, an empty stop string, a watermark that
    /// [`WatermarkParams::validate`] rejects, a `penalty_alpha` outside `[0, 1]`.
    ///
    /// # Example
    ///
    /// ```
    /// use stencil_sampling::{SamplingError, SamplingParams};
    ///
    /// let params = SamplingParams { top_p: 0.0, ..SamplingParams::default() };
    /// let err = params.validate().unwrap_err();
    /// assert!(matches!(&err, SamplingError::InvalidParam { field, .. } if field == "top_p"));
    /// assert_eq!(err.to_string(), "invalid sampling parameter `top_p` = 0: expected 0 < top_p <= 1");
    /// ```
    pub fn validate(&self) -> Result<(), SamplingError> {
        let t = self.temperature;
        if !(t.is_finite() && t >= 0.0) {
            return Err(SamplingError::invalid("temperature", t, "expected a finite temperature >= 0"));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(SamplingError::invalid("top_p", self.top_p, "expected 0 < top_p <= 1"));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return Err(SamplingError::invalid("min_p", self.min_p, "expected 0 <= min_p <= 1"));
        }
        let r = self.repetition_penalty;
        if !(r.is_finite() && r > 0.0) {
            return Err(SamplingError::invalid("repetition_penalty", r, "expected a finite penalty > 0"));
        }
        if !self.frequency_penalty.is_finite() {
            return Err(SamplingError::invalid(
                "frequency_penalty",
                self.frequency_penalty,
                "expected a finite penalty",
            ));
        }
        if !self.presence_penalty.is_finite() {
            return Err(SamplingError::invalid("presence_penalty", self.presence_penalty, "expected a finite penalty"));
        }
        if let Some((id, bias)) = self.logit_bias.iter().find(|(_, b)| !b.is_finite()) {
            return Err(SamplingError::invalid(format!("logit_bias[{id}]"), bias, "expected a finite bias"));
        }
        if let Some(i) = self.stop.iter().position(String::is_empty) {
            return Err(SamplingError::invalid(format!("stop[{i}]"), "\"\"", "expected a non-empty stop string"));
        }
        if let Some(w) = &self.watermark {
            w.validate()?;
        }
        if !(0.0..=1.0).contains(&self.penalty_alpha) {
            return Err(SamplingError::invalid(
                "penalty_alpha",
                self.penalty_alpha,
                "expected 0 <= penalty_alpha <= 1",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(params: SamplingParams) -> String {
        match params.validate() {
            Err(SamplingError::InvalidParam { field, .. }) => field,
            other => panic!("expected InvalidParam, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_valid_and_neutral() {
        let p = SamplingParams::default();
        p.validate().unwrap();
        assert_eq!((p.temperature, p.top_k, p.top_p, p.min_p), (1.0, 0, 1.0, 0.0));
        assert_eq!(p.max_tokens, 256);
        assert!(!p.is_greedy() && SamplingParams::greedy().is_greedy());
    }

    #[test]
    fn validate_names_the_field() {
        let d = SamplingParams::default;
        assert_eq!(field_of(SamplingParams { temperature: f32::NAN, ..d() }), "temperature");
        assert_eq!(field_of(SamplingParams { temperature: -0.5, ..d() }), "temperature");
        assert_eq!(field_of(SamplingParams { temperature: f32::INFINITY, ..d() }), "temperature");
        assert_eq!(field_of(SamplingParams { top_p: 1.01, ..d() }), "top_p");
        assert_eq!(field_of(SamplingParams { top_p: f32::NAN, ..d() }), "top_p");
        assert_eq!(field_of(SamplingParams { min_p: -0.1, ..d() }), "min_p");
        assert_eq!(field_of(SamplingParams { min_p: f32::NAN, ..d() }), "min_p");
        assert_eq!(field_of(SamplingParams { repetition_penalty: 0.0, ..d() }), "repetition_penalty");
        assert_eq!(field_of(SamplingParams { frequency_penalty: f32::NAN, ..d() }), "frequency_penalty");
        assert_eq!(field_of(SamplingParams { presence_penalty: f32::INFINITY, ..d() }), "presence_penalty");
        let bias = BTreeMap::from([(3, 1.0), (7, f32::NEG_INFINITY)]);
        assert_eq!(field_of(SamplingParams { logit_bias: bias, ..d() }), "logit_bias[7]");
        assert_eq!(field_of(SamplingParams { stop: vec!["x".into(), String::new()], ..d() }), "stop[1]");
    }

    #[test]
    fn boundaries_are_accepted() {
        let d = SamplingParams::default;
        for p in [
            SamplingParams { temperature: 0.0, ..d() },
            SamplingParams { top_p: 1.0, min_p: 1.0, ..d() },
            SamplingParams { min_p: 0.0, repetition_penalty: 0.5, frequency_penalty: -2.0, ..d() },
        ] {
            p.validate().unwrap();
        }
    }

    #[test]
    fn serde_round_trip_and_unknown_fields() {
        let p = SamplingParams {
            temperature: 0.5,
            logit_bias: BTreeMap::from([(42, -3.5)]),
            seed: Some(7),
            stop: vec!["\n\n".into()],
            ..SamplingParams::default()
        };
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<SamplingParams>(&json).unwrap(), p);
        let err = serde_json::from_str::<SamplingParams>(r#"{"top_n": 3}"#).unwrap_err();
        assert!(err.to_string().contains("top_n"), "{err}");
    }
}
