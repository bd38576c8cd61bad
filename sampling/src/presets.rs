//! [`Presets`]: named [`SamplingParams`], built in or read from a TOML file.
//!
//! # The file format
//!
//! ```toml
//! version = 1                      # optional; this build reads version 1
//!
//! [preset.json-strict]             # one table per preset
//! base = "extractor-greedy"        # optional: start from another preset (file or built-in)
//! max_tokens = 1024                # then any SamplingParams field
//! stop = ["\n\n"]
//! logit_bias = { "13" = -5.0 }     # token id → bias (TOML keys are strings)
//!
//! [preset.audited]
//! base = "creative"
//! watermark = { key = "…", gamma = 0.25, delta = 2.0 }  # a WatermarkParams table
//! ```
//!
//! A `watermark` table replaces the base's watermark as a whole (its `key` is required).
//! Without `base`, a preset starts from [`SamplingParams::default`]. Unknown keys are errors
//! with line and column; a file preset may not reuse a built-in name; every preset is
//! checked by [`SamplingParams::validate`]. `sampling/presets.example.toml` is a full example.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::{SamplingError, SamplingParams, WatermarkParams};

/// Greedy decoding, every other stage off: for extraction and structured output, where the
/// grammar does the constraining and the most likely valid token is wanted.
pub const EXTRACTOR_GREEDY: &str = "extractor-greedy";
/// Temperature 0.7, top-p 0.9: the usual chat setting. No repetition penalty: this crate's
/// (like Hugging Face's) counts every prompt token, so on a long prompt it pushes the model
/// away from the words of the question and from the punctuation structured output repeats.
pub const CHAT_NUCLEUS: &str = "chat-nucleus";
/// Temperature 1.0, top-p 0.95, min-p 0.05: the model's own distribution, minus the tail.
pub const CREATIVE: &str = "creative";
/// Contrastive search with Su et al.'s setting, `penalty_alpha` 0.6 and `top_k` 4: the
/// probable token least like the context, against greedy's repetition (deterministic).
pub const CONTRASTIVE: &str = "contrastive";

/// A set of named decoding presets.
///
/// # Example
///
/// ```
/// use stencil_sampling::Presets;
///
/// let presets = Presets::from_toml_str(r#"
///     [preset.terse]
///     base = "chat-nucleus"
///     max_tokens = 64
/// "#)?;
/// let terse = presets.get("terse")?;
/// assert_eq!((terse.temperature, terse.top_p, terse.max_tokens), (0.7, 0.9, 64));
/// assert_eq!(presets.get("extractor-greedy")?.temperature, 0.0); // built-ins stay
///
/// let err = presets.get("tres").unwrap_err();
/// assert_eq!(err.to_string(), "unknown preset `tres` (known: chat-nucleus, contrastive, creative, extractor-greedy, terse)");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Presets {
    presets: BTreeMap<String, SamplingParams>,
}

impl Presets {
    /// The built-in presets: [`EXTRACTOR_GREEDY`], [`CHAT_NUCLEUS`], [`CREATIVE`],
    /// [`CONTRASTIVE`].
    pub fn builtin() -> Presets {
        let d = SamplingParams::default;
        let presets = BTreeMap::from([
            (EXTRACTOR_GREEDY.to_string(), SamplingParams::greedy()),
            (CHAT_NUCLEUS.to_string(), SamplingParams { temperature: 0.7, top_p: 0.9, ..d() }),
            (CREATIVE.to_string(), SamplingParams { temperature: 1.0, top_p: 0.95, min_p: 0.05, ..d() }),
            (CONTRASTIVE.to_string(), SamplingParams { penalty_alpha: 0.6, top_k: 4, ..SamplingParams::greedy() }),
        ]);
        Presets { presets }
    }

    /// The built-in presets plus those of a TOML text (see the [module docs](self)).
    ///
    /// # Errors
    ///
    /// [`SamplingError::PresetSyntax`] for bad TOML, unknown keys and wrong types (with line
    /// and column); [`SamplingError::InvalidPreset`] for an unknown or cyclic `base`, a
    /// built-in name, or parameters that do not validate.
    pub fn from_toml_str(text: &str) -> Result<Presets, SamplingError> {
        let file: File = toml::from_str(text)
            .map_err(|e| SamplingError::PresetSyntax { path: None, message: e.to_string().trim_end().to_string() })?;
        if file.version.is_some_and(|v| v != 1) {
            let message = format!("unsupported version {} (this build reads version 1)", file.version.unwrap_or(0));
            return Err(SamplingError::PresetSyntax { path: None, message });
        }
        let mut out = Presets::builtin();
        if let Some(name) = file.preset.keys().find(|name| out.presets.contains_key(*name)) {
            return Err(invalid(name, "the name of a built-in preset".to_string()));
        }
        for name in file.preset.keys() {
            // Follow the `base` chain down to a resolved preset or to the defaults.
            let mut chain = vec![name.as_str()];
            let mut params = loop {
                let last = chain[chain.len() - 1];
                let Some(base) = file.preset[last].base.as_deref() else { break SamplingParams::default() };
                if let Some(resolved) = out.presets.get(base) {
                    break resolved.clone();
                }
                if !file.preset.contains_key(base) {
                    return Err(invalid(last, format!("unknown base `{base}` (known: {})", out.known(&file))));
                }
                if chain.contains(&base) {
                    return Err(invalid(last, format!("`base` cycle: {} -> {base}", chain.join(" -> "))));
                }
                chain.push(base);
            };
            for &name in chain.iter().rev() {
                file.preset[name].apply(&mut params);
                params.validate().map_err(|e| invalid(name, e.to_string()))?;
                out.presets.insert(name.to_string(), params.clone());
            }
        }
        Ok(out)
    }

    /// [`from_toml_str`](Presets::from_toml_str) on a file's contents.
    ///
    /// # Errors
    ///
    /// As `from_toml_str`, with the path in syntax errors, and [`SamplingError::Io`] when the
    /// file cannot be read.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<Presets, SamplingError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| SamplingError::Io { path: path.into(), source })?;
        Presets::from_toml_str(&text).map_err(|e| match e {
            SamplingError::PresetSyntax { message, .. } => {
                SamplingError::PresetSyntax { path: Some(path.into()), message }
            }
            other => other,
        })
    }

    /// The preset called `name`.
    ///
    /// # Errors
    ///
    /// [`SamplingError::UnknownPreset`], listing the known names.
    pub fn get(&self, name: &str) -> Result<&SamplingParams, SamplingError> {
        self.presets.get(name).ok_or_else(|| SamplingError::UnknownPreset {
            name: name.to_string(),
            known: self.names().collect::<Vec<_>>().join(", "),
        })
    }

    /// The preset names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.presets.keys().map(String::as_str)
    }

    /// The presets, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &SamplingParams)> {
        self.presets.iter().map(|(name, params)| (name.as_str(), params))
    }

    /// Every name known while reading `file`, sorted.
    fn known(&self, file: &File) -> String {
        let mut names: Vec<&str> = self.names().chain(file.preset.keys().map(String::as_str)).collect();
        names.sort_unstable();
        names.dedup();
        names.join(", ")
    }
}

fn invalid(name: &str, reason: String) -> SamplingError {
    SamplingError::InvalidPreset { name: name.to_string(), reason }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: Option<u32>,
    #[serde(default)]
    preset: BTreeMap<String, FilePreset>,
}

/// One `[preset.NAME]` table: `base` and any [`SamplingParams`] field, each overriding the
/// base's value. (Kept in step with `SamplingParams` by the `every_field_is_accepted` test.)
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePreset {
    base: Option<String>,
    temperature: Option<f32>,
    top_k: Option<u32>,
    top_p: Option<f32>,
    min_p: Option<f32>,
    repetition_penalty: Option<f32>,
    frequency_penalty: Option<f32>,
    presence_penalty: Option<f32>,
    no_repeat_ngram_size: Option<u32>,
    logit_bias: Option<BTreeMap<u32, f32>>,
    seed: Option<u64>,
    max_tokens: Option<u32>,
    stop: Option<Vec<String>>,
    ignore_eos: Option<bool>,
    watermark: Option<WatermarkParams>,
    penalty_alpha: Option<f32>,
}

impl FilePreset {
    fn apply(&self, p: &mut SamplingParams) {
        fn set<T: Clone>(field: &mut T, value: &Option<T>) {
            if let Some(value) = value {
                *field = value.clone();
            }
        }
        set(&mut p.temperature, &self.temperature);
        set(&mut p.top_k, &self.top_k);
        set(&mut p.top_p, &self.top_p);
        set(&mut p.min_p, &self.min_p);
        set(&mut p.repetition_penalty, &self.repetition_penalty);
        set(&mut p.frequency_penalty, &self.frequency_penalty);
        set(&mut p.presence_penalty, &self.presence_penalty);
        set(&mut p.no_repeat_ngram_size, &self.no_repeat_ngram_size);
        set(&mut p.logit_bias, &self.logit_bias);
        if self.seed.is_some() {
            p.seed = self.seed;
        }
        set(&mut p.max_tokens, &self.max_tokens);
        set(&mut p.stop, &self.stop);
        set(&mut p.ignore_eos, &self.ignore_eos);
        if self.watermark.is_some() {
            p.watermark.clone_from(&self.watermark);
        }
        set(&mut p.penalty_alpha, &self.penalty_alpha);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Presets::from_toml_str(text).unwrap_err().to_string()
    }

    #[test]
    fn builtins_are_valid() {
        let presets = Presets::builtin();
        assert_eq!(presets.names().collect::<Vec<_>>(), [CHAT_NUCLEUS, CONTRASTIVE, CREATIVE, EXTRACTOR_GREEDY]);
        for (_, params) in presets.iter() {
            params.validate().unwrap();
        }
        assert!(presets.get(EXTRACTOR_GREEDY).unwrap().is_greedy());
        assert_eq!(Presets::from_toml_str("").unwrap(), presets);
    }

    #[test]
    fn the_example_file_loads() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/presets.example.toml");
        let presets = Presets::from_toml_file(path).unwrap();
        let json = presets.get("json-extract").unwrap();
        assert!(json.is_greedy());
        assert_eq!(json.max_tokens, 1024);
        let story = presets.get("story").unwrap();
        assert_eq!((story.temperature, story.top_p, story.min_p, story.seed), (0.9, 0.95, 0.05, Some(42)));
        let short = presets.get("short-story").unwrap();
        assert_eq!((short.temperature, short.max_tokens, short.stop.len()), (0.9, 200, 2));
        assert_eq!(presets.get("chat-quiet").unwrap().logit_bias.get(&13), Some(&-5.0));
    }

    #[test]
    fn every_field_is_accepted() {
        let full = SamplingParams {
            temperature: 0.5,
            top_k: 7,
            top_p: 0.8,
            min_p: 0.1,
            repetition_penalty: 1.3,
            frequency_penalty: 0.25,
            presence_penalty: -0.5,
            no_repeat_ngram_size: 3,
            logit_bias: BTreeMap::from([(5, 1.5)]),
            seed: Some(9),
            max_tokens: 12,
            stop: vec!["x".into()],
            ignore_eos: true,
            // Serialized redacted, so tested apart (`a_preset_carries_a_watermark`).
            watermark: None,
            penalty_alpha: 0.4,
        };
        // Serialize the map keys as TOML wants them (strings) via JSON.
        let value: toml::Value = serde_json::from_value(serde_json::to_value(&full).unwrap()).unwrap();
        let text = toml::to_string(&toml::Table::from_iter([(
            "preset".to_string(),
            toml::Value::Table(toml::Table::from_iter([("full".to_string(), value)])),
        )]))
        .unwrap();
        assert_eq!(Presets::from_toml_str(&text).unwrap().get("full").unwrap(), &full, "{text}");
    }

    #[test]
    fn a_preset_carries_a_watermark() {
        let presets = Presets::from_toml_str(
            "[preset.marked]\nbase = \"creative\"\nwatermark = { key = \"k\", delta = 3.0 }\n\
             [preset.child]\nbase = \"marked\"\nmax_tokens = 9\n",
        )
        .unwrap();
        let child = presets.get("child").unwrap();
        let w = child.watermark.as_ref().unwrap();
        assert_eq!((w.gamma, w.delta, child.top_p), (0.25, 3.0, 0.95));
        assert_eq!(w.key, crate::WatermarkKey::new("k"));
        assert!(err("[preset.m]\nwatermark = { gamma = 0.5 }\n").contains("key"));
        assert_eq!(
            err("[preset.m]\nwatermark = { key = \"k\", gamma = 2.0 }\n"),
            "preset `m`: invalid sampling parameter `watermark.gamma` = 2: expected 0 < gamma < 1"
        );
    }

    #[test]
    fn bases_chain_in_any_order() {
        let presets = Presets::from_toml_str(
            "[preset.c]\nbase = \"b\"\ntop_k = 3\n[preset.a]\nbase = \"creative\"\nmax_tokens = 9\n\
             [preset.b]\nbase = \"a\"\ntemperature = 0.5\n[preset.plain]\nseed = 1\n",
        )
        .unwrap();
        let c = presets.get("c").unwrap();
        assert_eq!((c.temperature, c.top_p, c.max_tokens, c.top_k), (0.5, 0.95, 9, 3));
        let plain = presets.get("plain").unwrap();
        assert_eq!(plain, &SamplingParams { seed: Some(1), ..SamplingParams::default() });
    }

    #[test]
    fn errors_are_located_or_named() {
        let unknown = err("[preset.a]\ntemperature = 0.5\ntop_n = 3\n");
        assert!(unknown.contains("line 3") && unknown.contains("top_n"), "{unknown}");
        let wrong_type = err("[preset.a]\ntop_k = \"many\"\n");
        assert!(wrong_type.contains("line 2") && wrong_type.contains("top_k"), "{wrong_type}");
        assert!(err("[presets.a]\n").contains("presets"));
        assert_eq!(
            err("[preset.a]\nbase = \"nope\"\n"),
            "preset `a`: unknown base `nope` (known: a, chat-nucleus, contrastive, creative, extractor-greedy)"
        );
        assert_eq!(
            err("[preset.a]\nbase = \"b\"\n[preset.b]\nbase = \"a\"\n"),
            "preset `b`: `base` cycle: a -> b -> a"
        );
        assert_eq!(err("[preset.a]\nbase = \"a\"\n"), "preset `a`: `base` cycle: a -> a");
        assert_eq!(err("[preset.creative]\n"), "preset `creative`: the name of a built-in preset");
        assert_eq!(
            err("[preset.hot]\ntop_p = 1.5\n"),
            "preset `hot`: invalid sampling parameter `top_p` = 1.5: expected 0 < top_p <= 1"
        );
        assert!(err("version = 2\n").contains("unsupported version 2"));
        Presets::from_toml_str("version = 1\n").unwrap();
        let missing = Presets::from_toml_file("/nonexistent/presets.toml").unwrap_err();
        assert!(matches!(missing, SamplingError::Io { .. }));
    }
}
