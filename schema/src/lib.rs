//! # stencil-schema
//!
//! JSON Schema → Stencil's grammar IR ([`stencil_grammar::Grammar`]) → the same matcher as
//! GBNF, plus post-hoc validation of outputs with the `jsonschema` crate.
//!
//! - [`compile_schema`]: a schema and [`SchemaOptions`] → a [`CompiledSchema`] (the
//!   grammar, and the keywords left to post-hoc validation as [`Unenforced`] warnings), or
//!   a [`SchemaError`] naming the subschema's pointer.
//! - [`SchemaBatch`]: schemas compiled one after another into one grammar of the caller's,
//!   the rules they all use written once (a tool set's schemas, for one structural tag).
//! - [`SchemaOptions`]: the output style ([`Whitespace`], indentation, separators),
//!   [`PropertyOrder`], [`Mode`] (strict or lenient), the default [`Draft`], the
//!   [`Registry`] of documents that `$ref`s may name, and the [`SchemaLimits`].
//! - [`validate`] / [`Validator`]: check an instance after the fact.
//! - [`translate_pattern`], [`format_regex`], [`int_range_regex`]: the pieces the compiler
//!   uses for `pattern`, `format` and numeric bounds, on their own.
//!
//! # How a schema becomes rules
//!
//! 1. **Locate** (`locate.rs`, `resolve.rs`): every subschema the compile reads is interned
//!    once, with its draft; `$ref`s resolve to locations.
//! 2. **Normal form** (`dnf.rs`): a value position is a conjunction of subschemas;
//!    `allOf`/`$ref` add to it, `anyOf`/`oneOf`/`if` branch it.
//! 3. **Typed form** (`node.rs`): each branch's keywords merge into one node: a set of
//!    types, values, string and number constraints.
//! 4. **Emit** (`emit/`): one emitter per JSON type writes the node as rules, in the
//!    output style (`style.rs`); one rule per distinct conjunction, so recursion closes.
//!
//! Each compile runs inside a `schema_compile` [`tracing`] span (debug level) whose fields
//! give the sizes: documents, locations, rules, conjunctions, warnings.
//!
//! ```
//! use serde_json::json;
//! use stencil_schema::{compile_schema, validate, Registry, SchemaOptions};
//!
//! let schema = json!({
//!     "type": "object",
//!     "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
//!     "required": ["name"],
//!     "additionalProperties": false
//! });
//! let compiled = compile_schema(&schema, &SchemaOptions::compact()).unwrap();
//! assert!(compiled.warnings.is_empty());
//! // `compiled.grammar` goes to `stencil_mask::CompiledGrammar::new` like any GBNF grammar.
//! let text = r#"{"name":"Ada","age":36}"#;
//! let recognizer = stencil_grammar::reference::Recognizer::new(&compiled.grammar).unwrap();
//! assert!(recognizer.matches(text.as_bytes()));
//! // Outputs can be checked after the fact too:
//! let instance: serde_json::Value = serde_json::from_str(text).unwrap();
//! assert!(validate(&schema, &instance, &Registry::new()).is_ok());
//! ```
//!
//! ## What the grammar enforces
//! Types, `enum`/`const`, objects (`properties`, `required`, `additionalProperties`,
//! `patternProperties`, `unevaluatedProperties` (over the keys its subschema and what
//! that applies in place leave), `propertyNames` in simple forms,
//! `minProperties`/`maxProperties`, `dependentRequired`), arrays (`items`, `prefixItems`, `additionalItems`,
//! `minItems`/`maxItems`, `contains`, `uniqueItems` over small enum-like items), strings
//! (`minLength`/`maxLength` in code points, `pattern` translated from ECMA-262, `format`),
//! integer and decimal bounds, `multipleOf` for integers and powers of ten, `anyOf`, `oneOf`
//! (disjoint branches), `allOf` (merged), `not` and `if`/`then`/`else` in simple forms, and
//! `$ref` in every form (JSON pointers, `$anchor`, `$id`, remote documents from the
//! caller's [`Registry`], recursion). A keyword it cannot enforce is an error in
//! [`Mode::Strict`] and an [`Unenforced`] warning in [`Mode::Lenient`].
//!
//! ## Output shape
//! Objects put declared properties first, in schema order (build with serde_json's
//! `preserve_order`, which this crate enables, so "schema order" is the document's order),
//! then any extra properties allowed by `additionalProperties`/`patternProperties`, whose
//! names never repeat a declared one. Strings use serde_json's canonical escapes only:
//! `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u00XX` (lowercase hex) for the other control
//! characters, everything else literally. Numbers are JSON numbers; with bounds they are
//! written without an exponent.
//!
//! Whitespace is compact, flexible with a cap on each run, or exact indentation. With
//! `PropertyOrder::Any`, declared properties come in any order, presence and no
//! duplicates enforced for up to `SchemaLimits::max_any_order_properties` (8) declared
//! properties; beyond, lenient mode widens (required names tracked, the rest free).
//!
//! ## Where things are
//! Besides the steps above: `compile.rs` (the driver and the limits), `keyset.rs` and
//! `hirset.rs` (key languages of patterns, less the declared names), `not_in.rs` (keys
//! that are none of some names), `ecma.rs` (ECMA-262 patterns), `formats.rs`,
//! `numbers.rs` (exact integer ranges), `escape.rs` (JSON escaping), `memo.rs` (what a
//! compile computes once), `validate.rs` and `depth.rs` (post-hoc validation on a stack
//! sized for the schema). One rule per subschema (per distinct conjunction): `$ref`s are
//! rule references, so recursion works.
//!
//! ## Tests
//! The JSON-Schema-Test-Suite ratchet (`tests/test_suite.rs`, expectations in
//! `tests/expected/`, over the suite vendored in `fixtures/json-schema-test-suite/`); the
//! conformance run over a JSONSchemaBench split outside the repository
//! (`tests/jsonschemabench.rs`, not in `cargo test`: `scripts/conformance.sh --corpus
//! DIR`).

#![warn(missing_docs)]

mod batch;
mod compile;
mod depth;
mod dnf;
mod ecma;
mod emit;
mod escape;
mod formats;
mod hirset;
mod keyset;
mod locate;
mod memo;
mod node;
mod not_in;
mod numbers;
mod resolve;
mod style;
mod validate;

pub use batch::SchemaBatch;
pub use ecma::{translate_pattern, PatternError};
pub use formats::format_regex;
pub use numbers::{int_range_regex, Decimal};
pub use validate::{validate, InvalidSchema, ValidationIssue, Validator};

use serde_json::Value;
use stencil_grammar::Grammar;
use thiserror::Error;

/// Whitespace between JSON tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Whitespace {
    /// No whitespace except what [`SchemaOptions::item_separator`] and
    /// [`SchemaOptions::key_separator`] contain.
    Compact,
    /// Optional runs of at most `max_run` bytes from `[ \t\n]` around every structural
    /// token (`{ } [ ] , :`); the separators' own spaces are not forced. Small caps stop
    /// runaway whitespace.
    Flexible {
        /// The most whitespace bytes in one run.
        max_run: usize,
    },
}

/// Where declared properties may appear in an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PropertyOrder {
    /// Declared properties in the order of the schema's `properties` (then `required`
    /// names that `properties` lacks), extra properties after them.
    #[default]
    SchemaOrder,
    /// Declared properties in any order, each at most once, the required ones present;
    /// extra properties (`additionalProperties`/`patternProperties`) anywhere among them.
    /// The grammar needs one rule per subset of declared names already written (2^n), so
    /// this holds for objects of at most [`SchemaLimits::max_any_order_properties`]
    /// declared names; above it, strict mode refuses the schema
    /// ([`SchemaError::TooLarge`]) and lenient mode widens that object, with a warning:
    /// names in any order, up to that many required names tracked (present, once), the
    /// other names free to repeat, and counts and dependencies left to post-hoc validation.
    ///
    /// ```
    /// use stencil_schema::{compile_schema, PropertyOrder, SchemaOptions};
    /// let schema = serde_json::json!({
    ///     "type": "object",
    ///     "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    ///     "required": ["a"],
    ///     "additionalProperties": false
    /// });
    /// let options = SchemaOptions { property_order: PropertyOrder::Any, ..SchemaOptions::compact() };
    /// let compiled = compile_schema(&schema, &options).unwrap();
    /// let r = stencil_grammar::reference::Recognizer::new(&compiled.grammar).unwrap();
    /// assert!(r.matches(br#"{"b":2,"a":1}"#));
    /// assert!(!r.matches(br#"{"b":2}"#));
    /// assert!(!r.matches(br#"{"a":1,"a":1}"#));
    /// ```
    Any,
}

/// What to do with a keyword that constrains instances but that the grammar cannot enforce.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Refuse the schema: [`SchemaError::UnsupportedKeyword`] (or a more specific error).
    #[default]
    Strict,
    /// Compile anyway, list the keyword in [`CompiledSchema::warnings`]; check outputs with
    /// [`validate`].
    Lenient,
}

/// JSON Schema drafts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub enum Draft {
    /// Draft 4 (`id`, boolean `exclusiveMinimum`).
    Draft4,
    /// Draft 6.
    Draft6,
    /// Draft 7 (the last in which `$ref` overrides its siblings).
    Draft7,
    /// Draft 2019-09.
    Draft201909,
    /// Draft 2020-12 (`prefixItems`), the default.
    #[default]
    Draft202012,
}

impl Draft {
    /// The draft a `$schema` URI names, if it is a known meta-schema.
    pub fn from_uri(uri: &str) -> Option<Draft> {
        let u = uri.trim_end_matches('#').trim_start_matches("https://").trim_start_matches("http://");
        match u {
            "json-schema.org/draft-04/schema" => Some(Draft::Draft4),
            "json-schema.org/draft-06/schema" => Some(Draft::Draft6),
            "json-schema.org/draft-07/schema" => Some(Draft::Draft7),
            "json-schema.org/draft/2019-09/schema" => Some(Draft::Draft201909),
            "json-schema.org/draft/2020-12/schema" => Some(Draft::Draft202012),
            _ => None,
        }
    }
}

/// Documents that `$ref`s may name, by absolute URI. Filled by the caller (from files or
/// memory); nothing is ever fetched.
///
/// ```
/// let mut registry = stencil_schema::Registry::new();
/// registry.insert("http://example.com/int.json", serde_json::json!({"type": "integer"}));
/// assert!(registry.get("http://example.com/int.json").is_some());
/// ```
#[derive(Clone, Debug, Default)]
pub struct Registry {
    docs: std::collections::BTreeMap<String, Value>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }
    /// Registers `document` under `uri` (any fragment is dropped).
    pub fn insert(&mut self, uri: &str, document: Value) {
        self.docs.insert(resolve::normalize_uri(uri), document);
    }
    /// The document registered under `uri`.
    pub fn get(&self, uri: &str) -> Option<&Value> {
        self.docs.get(&resolve::normalize_uri(uri))
    }
    /// All registered documents.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.docs.iter().map(|(k, v)| (k.as_str(), v))
    }
}

/// How to compile a schema. [`SchemaOptions::default`] is flexible whitespace (runs of at
/// most 2 bytes), separators `", "` and `": "` (used only by the compact and indented
/// styles), schema order, strict mode, draft 2020-12 when `$schema` is absent.
#[derive(Clone, Debug)]
pub struct SchemaOptions {
    /// Whitespace between tokens (when [`SchemaOptions::indent`] is unset).
    pub whitespace: Whitespace,
    /// Pretty-printing with this many spaces per level, exactly as serde_json's
    /// `to_string_pretty` does for 2; overrides [`SchemaOptions::whitespace`] when set.
    pub indent: Option<usize>,
    /// Between array items and between object members (compact style); in the indented
    /// style its trailing spaces are dropped before the newline.
    pub item_separator: String,
    /// Between a key and its value (compact and indented styles).
    pub key_separator: String,
    /// Where declared properties may appear in an object.
    pub property_order: PropertyOrder,
    /// What to do with keywords the grammar cannot enforce.
    pub mode: Mode,
    /// The documents `$ref`s may name besides the schema itself.
    pub registry: Registry,
    /// The draft of documents without `$schema`.
    pub default_draft: Draft,
    /// Enforce `format` (the default; the 2020-12 test suite's main `format.json` treats it as
    /// an annotation, its `optional/format` as an assertion).
    pub assert_formats: bool,
    /// Nesting depth of the indented style beyond which recursive schemas stop (the grammar
    /// needs one rule per depth).
    pub max_indent_depth: usize,
    /// Bounds on the compiler's work; exceeding one is [`SchemaError::TooLarge`].
    pub limits: SchemaLimits,
}

/// Bounds on the work of compiling a schema, each a named setting with a sane default.
/// Exceeding one is [`SchemaError::TooLarge`], whose [`SchemaLimit`] names the limit and
/// whose pointer locates the subschema. `LIMITS.md` at the repository root lists them with the
/// engine's.
///
/// ```
/// use stencil_schema::{compile_schema, SchemaError, SchemaLimit, SchemaLimits, SchemaOptions};
/// let options = SchemaOptions { limits: SchemaLimits { max_repetition: 100, ..SchemaLimits::default() }, ..SchemaOptions::default() };
/// let schema = serde_json::json!({"type": "object", "properties": {"tags": {"type": "array", "maxItems": 1000}}});
/// match compile_schema(&schema, &options) {
///     Err(SchemaError::TooLarge { limit, value, pointer, .. }) => {
///         assert_eq!((limit, value), (SchemaLimit::Repetition, 100));
///         assert_eq!(limit.to_string(), "max_repetition");
///         assert_eq!(pointer, "/properties/tags");
///     }
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaLimits {
    /// The depth of the compile's walk: a value nested in another (`properties`, `items`,
    /// ...) is one level deeper, and so is each reference or applicator followed to reach
    /// a subschema (`$ref`, `$dynamicRef`, `allOf`, `anyOf`, `oneOf`, `if`); a recursive
    /// schema counts each distinct subschema once, so recursion itself is not limited.
    /// Default 4,096: a chain of 2,000 `$ref`s compiles. The walk needs no more stack than
    /// the caller's thread has (it continues on new segments), but the `jsonschema`
    /// validator recurses once per level too, and [`Validator`] refuses schemas deeper
    /// than this default.
    pub max_depth: usize,
    /// Branches of one value after expanding `anyOf`/`oneOf` (and their products through
    /// `allOf` and `$ref`). Default 1024.
    pub max_branches: usize,
    /// Grammar rules made. Default 200,000.
    pub max_rules: usize,
    /// The largest count that becomes a grammar repetition: `minLength`/`maxLength`,
    /// `minItems`/`maxItems`. Default 10,000 (each counted item or character becomes
    /// automaton states). In lenient mode a larger bound is left to post-hoc validation
    /// (a warning) instead.
    pub max_repetition: u64,
    /// Wall-clock time compiling may take. Default 10 s.
    pub max_compile_time: std::time::Duration,
    /// With [`PropertyOrder::Any`], the most declared names (`properties`, `required`,
    /// dependency names) an object may have: its grammar has one rule per subset of them
    /// (2^n), times the extra-property counts that `minProperties`/`maxProperties` make it
    /// track (at most 16 of those). Default 8. Above it: [`SchemaError::TooLarge`] in
    /// strict mode, schema order with a warning in lenient mode.
    pub max_any_order_properties: usize,
}

impl Default for SchemaLimits {
    fn default() -> Self {
        SchemaLimits {
            max_depth: 4096,
            max_branches: 1024,
            max_rules: 200_000,
            max_repetition: 10_000,
            max_compile_time: std::time::Duration::from_secs(10),
            max_any_order_properties: 8,
        }
    }
}

impl Default for SchemaOptions {
    fn default() -> Self {
        SchemaOptions {
            whitespace: Whitespace::Flexible { max_run: 2 },
            indent: None,
            item_separator: ", ".into(),
            key_separator: ": ".into(),
            property_order: PropertyOrder::SchemaOrder,
            mode: Mode::Strict,
            registry: Registry::new(),
            default_draft: Draft::Draft202012,
            assert_formats: true,
            max_indent_depth: 24,
            limits: SchemaLimits::default(),
        }
    }
}

impl SchemaOptions {
    /// No whitespace at all: `{"a":1,"b":[1,2]}` — serde_json's `to_string`.
    pub fn compact() -> Self {
        SchemaOptions {
            whitespace: Whitespace::Compact,
            item_separator: ",".into(),
            key_separator: ":".into(),
            ..Default::default()
        }
    }
    /// serde_json's `to_string_pretty`: two spaces per level.
    pub fn pretty() -> Self {
        SchemaOptions { indent: Some(2), ..Default::default() }
    }
    /// The same options in lenient mode.
    pub fn lenient(mut self) -> Self {
        self.mode = Mode::Lenient;
        self
    }
}

/// A keyword that the grammar does not enforce (lenient mode): outputs must be checked with
/// [`validate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unenforced {
    /// The keyword, as the schema spells it.
    pub keyword: String,
    /// JSON pointer of the subschema holding the keyword (with the document URI when it is
    /// not the root document).
    pub pointer: String,
    /// What part of the keyword is not enforced.
    pub reason: String,
    /// Whether the grammar is narrower here (it refuses some valid values, such as keys it
    /// does not generate) rather than wider (the keyword left to post-hoc validation).
    pub narrows: bool,
}

impl std::fmt::Display for Unenforced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` at {} is not enforced: {}", self.keyword, display_pointer(&self.pointer), self.reason)
    }
}

/// The narrowings as `keyword` at pointer: reason, joined by "; ".
fn list_narrowings(n: &[Unenforced]) -> String {
    let v: Vec<String> =
        n.iter().map(|u| format!("`{}` at {}: {}", u.keyword, display_pointer(&u.pointer), u.reason)).collect();
    v.join("; ")
}

fn display_pointer(p: &str) -> String {
    if p.is_empty() {
        "#".into()
    } else {
        format!("#{p}")
    }
}

/// A compiled schema: the grammar and what it leaves to post-hoc validation.
#[derive(Clone, Debug)]
pub struct CompiledSchema {
    /// The grammar of the valid instances' JSON text.
    pub grammar: Grammar,
    /// The keywords the grammar does not enforce (lenient mode; empty in strict mode).
    pub warnings: Vec<Unenforced>,
}

/// Why a schema could not be compiled. Every variant names the JSON pointer of the
/// subschema involved.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaError {
    /// A keyword the grammar cannot enforce (strict mode).
    #[error("`{keyword}` at {} cannot be enforced by a grammar: {reason}", display_pointer(.pointer))]
    UnsupportedKeyword {
        /// The keyword.
        keyword: String,
        /// JSON pointer of the subschema holding it.
        pointer: String,
        /// What cannot be enforced.
        reason: String,
    },
    /// A keyword whose value is not what the specification allows.
    #[error("`{keyword}` at {} has an invalid value: {reason}", display_pointer(.pointer))]
    InvalidKeyword {
        /// The keyword (`schema` for a subschema that is neither an object nor a boolean).
        keyword: String,
        /// JSON pointer of the subschema holding it.
        pointer: String,
        /// What is wrong with the value.
        reason: String,
    },
    /// A `pattern` (or `patternProperties` key) that cannot be translated to a grammar.
    #[error("`pattern` {pattern:?} at {} cannot be used: {reason}", display_pointer(.pointer))]
    BadPattern {
        /// JSON pointer of the subschema holding it.
        pointer: String,
        /// The pattern (empty when the failure is in a language built from patterns).
        pattern: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// A `$ref` whose target is not in the schema or the [`Registry`].
    #[error("`$ref` {reference:?} at {} does not resolve: {reason}", display_pointer(.pointer))]
    UnresolvableRef {
        /// JSON pointer of the subschema holding it.
        pointer: String,
        /// The reference, as written.
        reference: String,
        /// Why it does not resolve.
        reason: String,
    },
    /// A schema no JSON value satisfies (the engine has no grammar for the empty language).
    #[error("the schema at {} admits no value: {reason}", display_pointer(.pointer))]
    Unsatisfiable {
        /// JSON pointer of the subschema.
        pointer: String,
        /// Why.
        reason: String,
    },
    /// No value is left once the grammar's narrowings apply (lenient mode): the schema
    /// itself may admit values, but every one of them is among those the listed narrowings
    /// refuse. [`SchemaError::Unsatisfiable`] is for a schema that admits none.
    #[error("the grammar of the schema at {} admits no value once narrowed (the schema itself may admit some): {}", display_pointer(.pointer), list_narrowings(.narrowings))]
    Narrowed {
        /// JSON pointer of the subschema.
        pointer: String,
        /// The narrowings of this compile (each with [`Unenforced::narrows`] set).
        narrowings: Vec<Unenforced>,
    },
    /// Compiling exceeded one of the [`SchemaLimits`].
    #[error("compiling the schema at {} exceeded a limit: {reason}", display_pointer(.pointer))]
    TooLarge {
        /// Which limit.
        limit: SchemaLimit,
        /// The limit's setting (milliseconds for [`SchemaLimit::CompileTime`]).
        value: u64,
        /// JSON pointer of the subschema being compiled.
        pointer: String,
        /// What exceeded it; ends with `(limit NAME)` (`NAME` being `limit` displayed), or
        /// `(with limit NAME)` where the bound is a fixed one tied to that limit.
        reason: String,
    },
}

/// The [`SchemaLimits`] setting that a [`SchemaError::TooLarge`] names; displays as the
/// field's name (`max_rules`, ...), as the engine's `LimitKind` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchemaLimit {
    /// [`SchemaLimits::max_depth`].
    Depth,
    /// [`SchemaLimits::max_branches`].
    Branches,
    /// [`SchemaLimits::max_rules`].
    Rules,
    /// [`SchemaLimits::max_repetition`].
    Repetition,
    /// [`SchemaLimits::max_compile_time`] (its value in milliseconds).
    CompileTime,
    /// [`SchemaLimits::max_any_order_properties`].
    AnyOrderProperties,
}

impl std::fmt::Display for SchemaLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SchemaLimit::Depth => "max_depth",
            SchemaLimit::Branches => "max_branches",
            SchemaLimit::Rules => "max_rules",
            SchemaLimit::Repetition => "max_repetition",
            SchemaLimit::CompileTime => "max_compile_time",
            SchemaLimit::AnyOrderProperties => "max_any_order_properties",
        })
    }
}

/// Compiles `schema` into a grammar whose language is JSON text (in the options' style)
/// of instances valid against the schema (up to the keywords listed as warnings).
///
/// ```
/// use stencil_schema::{compile_schema, Mode, SchemaError, SchemaOptions};
/// let schema = serde_json::json!({"type": "string", "pattern": "(a)\\1"});
/// match compile_schema(&schema, &SchemaOptions::default()) {
///     Err(SchemaError::BadPattern { pointer, .. }) => assert_eq!(pointer, ""),
///     other => panic!("{other:?}"),
/// }
/// ```
pub fn compile_schema(schema: &Value, options: &SchemaOptions) -> Result<CompiledSchema, SchemaError> {
    compile::compile(schema, options)
}
