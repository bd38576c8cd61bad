//! Why a structural tag could not be compiled: every error names the JSON pointer of the
//! format (or field) in the tag where it happened.

use thiserror::Error;

/// A structural tag that could not be parsed or compiled. The pointer is a JSON pointer
/// into the tag as given (`/format/elements/1/content` …), `""` for the tag itself.
///
/// ```
/// use stencil_structural::{compile_json, CompileOptions, ErrorKind};
/// let tag = serde_json::json!({"type": "structural_tag",
///     "format": {"type": "sequence", "elements": [{"type": "any_tokens"}]}});
/// let err = compile_json(&tag, &CompileOptions::default()).unwrap_err();
/// assert_eq!(err.pointer, "/format/elements/0");
/// assert!(matches!(err.kind, ErrorKind::Unsupported { .. }));
/// assert_eq!(err.to_string(), "at /format/elements/0: `any_tokens` is not supported: \
///     a run of arbitrary tokens has no text to constrain; use `any_text` or `exclude_token` in a `star`");
/// ```
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("at {}: {kind}", display_pointer(.pointer))]
pub struct StructuralError {
    /// JSON pointer of the format or field at fault.
    pub pointer: String,
    /// What is wrong.
    pub kind: ErrorKind,
}

/// What is wrong with a structural tag.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The text is not JSON.
    #[error("not JSON: {0}")]
    Json(String),
    /// A field is missing or has the wrong type or value.
    #[error("{0}")]
    Invalid(String),
    /// An XGrammar format, field or value that Stencil does not support (never ignored).
    #[error("`{feature}` is not supported: {reason}")]
    Unsupported {
        /// The format type, field or value, as the tag spells it.
        feature: String,
        /// Why, or what to use instead.
        reason: String,
    },
    /// The JSON Schema of a `json_schema` format did not compile.
    #[error("{0}")]
    Schema(stencil_schema::SchemaError),
    /// A `regex` pattern that cannot be used.
    #[error("regex {pattern:?}: {reason}")]
    Regex {
        /// The pattern.
        pattern: String,
        /// Why.
        reason: String,
    },
    /// A `grammar` format's GBNF that does not parse.
    #[error("GBNF grammar: {0}")]
    Gbnf(String),
    /// A token named by text that is not one token of the vocabulary, or any token named by
    /// text or id where a feature needs a vocabulary and none was given.
    #[error("{0}")]
    Token(String),
    /// A bound of [`Limits`](crate::Limits) was passed.
    #[error("{what} needs {value}, more than the limit of {limit} (limit {name})")]
    TooLarge {
        /// What grew.
        what: String,
        /// How big it would be.
        value: u64,
        /// The limit.
        limit: u64,
        /// The [`Limits`](crate::Limits) field's name.
        name: &'static str,
    },
}

pub(crate) fn display_pointer(p: &str) -> String {
    if p.is_empty() {
        "the root".into()
    } else {
        p.to_string()
    }
}

impl StructuralError {
    pub(crate) fn new(pointer: &str, kind: ErrorKind) -> Self {
        StructuralError { pointer: pointer.to_string(), kind }
    }

    pub(crate) fn invalid(pointer: &str, reason: impl Into<String>) -> Self {
        Self::new(pointer, ErrorKind::Invalid(reason.into()))
    }

    pub(crate) fn unsupported(pointer: &str, feature: &str, reason: &str) -> Self {
        Self::new(pointer, ErrorKind::Unsupported { feature: feature.into(), reason: reason.into() })
    }
}
