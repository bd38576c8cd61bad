//! The crate's one error type.

use std::path::PathBuf;

use thiserror::Error;

/// Everything that can go wrong in this crate: bad parameters, nothing to sample, presets.
///
/// Messages are lowercase, without a final period, and name the offending field or preset.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SamplingError {
    /// A [`SamplingParams`](crate::SamplingParams) field is out of its range.
    #[error("invalid sampling parameter `{field}` = {value}: {expected}")]
    InvalidParam {
        /// The field's name, as in the serialized form (`top_p`, `logit_bias[17]`, `stop[0]`).
        field: String,
        /// The rejected value, as text.
        value: String,
        /// What the field accepts.
        expected: &'static str,
    },
    /// The mask allows no token, or every allowed token's logit is `-inf` or NaN (after
    /// bias and penalties).
    #[error("no candidate token: the mask allows none, or every allowed logit is -inf or NaN")]
    NoCandidates,
    /// [`Presets::get`](crate::Presets::get) was asked for a name it does not hold.
    #[error("unknown preset `{name}` (known: {known})")]
    UnknownPreset {
        /// The requested name.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// A presets file is not valid TOML or does not have the expected shape (unknown key,
    /// wrong type); the message gives line, column and a caret.
    #[error("presets file{}: {message}", path_suffix(.path))]
    PresetSyntax {
        /// The file, when read from one.
        path: Option<PathBuf>,
        /// The TOML parser's located message.
        message: String,
    },
    /// A preset in a file is wrong as a whole: an unknown or cyclic `base`, a name taken by
    /// a built-in preset, or parameters that [`SamplingParams::validate`] rejects.
    ///
    /// [`SamplingParams::validate`]: crate::SamplingParams::validate
    #[error("preset `{name}`: {reason}")]
    InvalidPreset {
        /// The preset's name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A presets file could not be read.
    #[error("cannot read presets file {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

fn path_suffix(path: &Option<PathBuf>) -> String {
    path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default()
}

impl SamplingError {
    pub(crate) fn invalid(field: impl Into<String>, value: impl ToString, expected: &'static str) -> Self {
        SamplingError::InvalidParam { field: field.into(), value: value.to_string(), expected }
    }
}
