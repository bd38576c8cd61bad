//! Post-hoc validation with the `jsonschema` crate, references resolved only through the
//! caller's [`Registry`].

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::Registry;

/// One reason an instance is invalid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationIssue {
    /// JSON pointer into the instance.
    pub instance_pointer: String,
    /// The failing keyword (`"type"`, `"required"`, ...); `"schema"` when the schema itself
    /// could not be used.
    pub keyword: String,
    /// JSON pointer of the keyword in the schema.
    pub schema_pointer: String,
    /// What is wrong, as the `jsonschema` crate says it.
    pub message: String,
}

impl std::fmt::Display for ValidationIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at {:?}: {} (`{}` at {:?})", self.instance_pointer, self.message, self.keyword, self.schema_pointer)
    }
}

#[derive(Clone)]
struct RegistryRetriever(Arc<BTreeMap<String, Value>>);

impl jsonschema::Retrieve for RegistryRetriever {
    fn retrieve(&self, uri: &jsonschema::Uri<String>) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let key = crate::resolve::normalize_uri(uri.as_str());
        self.0.get(&key).cloned().ok_or_else(|| format!("{key} is not in the registry").into())
    }
}

fn retriever(registry: &Registry) -> RegistryRetriever {
    RegistryRetriever(Arc::new(registry.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()))
}

/// Runs `f` (the `jsonschema` crate, which recurses once per level of the schema) where
/// at least `stack` bytes of stack are left: in place when the caller's thread has them, on
/// a new segment otherwise (see [`crate::depth::stack_for`]).
pub(crate) fn on_stack<T>(stack: usize, f: impl FnOnce() -> T) -> T {
    stacker::maybe_grow(stack, stack, f)
}

/// The depth of `schema` for the `jsonschema` crate (see [`crate::depth`]), within
/// the default [`crate::SchemaLimits`].
fn checked_depth(schema: &Value, registry: &Registry) -> Result<usize, InvalidSchema> {
    let mut res = crate::resolve::Resources::new(schema, crate::Draft::default());
    let start = (0, String::new());
    let walk = crate::depth::Depths::default().walk(&mut res, registry, start, &crate::SchemaLimits::default());
    walk.map(|w| w.depth).map_err(|e| match e {
        crate::SchemaError::TooLarge { pointer, reason, .. } => {
            InvalidSchema { message: format!("the schema at #{pointer} is too big to validate: {reason}") }
        }
        other => InvalidSchema { message: other.to_string() },
    })
}

/// Documents read once for many validators: a schema compile checks enum values against
/// dozens of subschemas of one (possibly large) document, and building each validator from
/// scratch copied and indexed every document again.
pub(crate) struct PreparedDocs {
    retriever: RegistryRetriever,
    registry: jsonschema::Registry<'static>,
}

impl PreparedDocs {
    /// `docs` under their URIs; anything else through `registry`.
    pub fn new(
        docs: impl IntoIterator<Item = (String, Arc<Value>)>,
        registry: &Registry,
    ) -> Result<PreparedDocs, String> {
        let retriever = retriever(registry);
        let docs = docs.into_iter().map(|(uri, doc)| (crate::resolve::normalize_uri(&uri), doc));
        let registry = jsonschema::Registry::new()
            .retriever(retriever.clone())
            .extend(docs)
            .and_then(|b| b.prepare())
            .map_err(|e| e.to_string())?;
        Ok(PreparedDocs { retriever, registry })
    }

    /// A validator (formats asserted) for `schema`, its references resolved in these
    /// documents, built where `stack` bytes of stack are left ([`on_stack`]).
    pub fn validator(&self, schema: &Value, stack: usize) -> Result<jsonschema::Validator, String> {
        on_stack(stack, || {
            jsonschema::options()
                .with_retriever(self.retriever.clone())
                .with_registry(&self.registry)
                .should_validate_formats(true)
                .build(schema)
                .map_err(|e| e.to_string())
        })
    }
}

/// The schema given to [`Validator::new`] cannot be used for validation (the `jsonschema`
/// crate rejects it: an unknown `$ref`, a bad regular expression, a keyword of the wrong
/// type...), or is too big for it (see [`Validator::new`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidSchema {
    /// The validator's explanation.
    pub message: String,
}

/// A schema compiled for post-hoc validation, to check many instances: build it once, then
/// call [`Validator::validate`] per instance. It is `Send + Sync`, so threads can share it.
///
/// ```
/// use serde_json::json;
/// use stencil_schema::{Registry, Validator};
///
/// let schema = json!({"type": "object", "required": ["n"]});
/// let validator = Validator::new(&schema, &Registry::new())?;
/// assert!(validator.validate(&json!({"n": 1})).is_ok());
/// let issues = validator.validate(&json!({})).unwrap_err();
/// assert_eq!(issues[0].keyword, "required");
///
/// // A schema the validator cannot use is an error here, not a failing instance.
/// assert!(Validator::new(&json!({"pattern": "("}), &Registry::new()).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Validator {
    inner: jsonschema::Validator,
    /// The stack the crate needs to validate against this schema.
    stack: usize,
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validator").finish_non_exhaustive()
    }
}

impl Validator {
    /// Compiles `schema` (formats asserted), `$ref`s to other documents resolved through
    /// `registry` only.
    ///
    /// The `jsonschema` crate recurses once per level of the schema, building and
    /// validating, and may walk every path through the schema's subschemas and references
    /// (an instance that fails every `anyOf` branch): a schema whose subschemas and
    /// references nest deeper than [`crate::SchemaLimits::max_depth`]'s default (4,096), or
    /// with more than `max_branches`² (1,048,576) such paths from one subschema, is
    /// refused, and the crate runs on a stack sized for the depth (in place when the
    /// caller's thread has it, on a new segment otherwise), so that no schema overflows
    /// the caller's stack or takes exponential time.
    ///
    /// ```
    /// use stencil_schema::{Registry, Validator};
    /// let mut defs = serde_json::Map::new();
    /// for i in 0..5000 {
    ///     defs.insert(format!("d{i}"), serde_json::json!({"$ref": format!("#/$defs/d{}", i + 1)}));
    /// }
    /// let chain = serde_json::json!({"$defs": defs, "$ref": "#/$defs/d0"});
    /// let e = Validator::new(&chain, &Registry::new()).unwrap_err();
    /// assert!(e.message.ends_with("(limit max_depth)"), "{e}");
    /// ```
    ///
    /// # Errors
    /// [`InvalidSchema`] when the `jsonschema` crate rejects the schema, or it is too deep.
    pub fn new(schema: &Value, registry: &Registry) -> Result<Validator, InvalidSchema> {
        let stack = crate::depth::stack_for(checked_depth(schema, registry)?);
        let inner = on_stack(stack, || {
            jsonschema::options()
                .with_retriever(retriever(registry))
                .should_validate_formats(true)
                .build(schema)
                .map_err(|e| InvalidSchema { message: e.to_string() })
        })?;
        Ok(Validator { inner, stack })
    }

    /// Every reason `instance` is invalid (none: `Ok`).
    pub fn validate(&self, instance: &Value) -> Result<(), Vec<ValidationIssue>> {
        let issues: Vec<ValidationIssue> = on_stack(self.stack, || self.issues(instance));
        if issues.is_empty() {
            Ok(())
        } else {
            Err(issues)
        }
    }

    fn issues(&self, instance: &Value) -> Vec<ValidationIssue> {
        self.inner
            .iter_errors(instance)
            .map(|e| {
                let schema_pointer = e.schema_path().to_string();
                let keyword = schema_pointer.rsplit('/').next().unwrap_or("").to_string();
                ValidationIssue {
                    instance_pointer: e.instance_path().to_string(),
                    keyword,
                    schema_pointer,
                    message: e.to_string(),
                }
            })
            .collect()
    }

    /// Whether `instance` is valid (faster than [`Validator::validate`]: no issues are
    /// collected).
    pub fn is_valid(&self, instance: &Value) -> bool {
        on_stack(self.stack, || self.inner.is_valid(instance))
    }
}

/// Validates `instance` against `schema` (formats asserted), `$ref`s to other documents
/// resolved through `registry` only. This compiles the schema on every call: to check many
/// instances, build a [`Validator`] once.
///
/// A schema the validator rejects gives one issue with keyword `"schema"` and empty
/// pointers.
///
/// ```
/// use serde_json::json;
/// let schema = json!({"properties": {"n": {"type": "integer"}}});
/// let issues = stencil_schema::validate(&schema, &json!({"n": "x"}), &Default::default()).unwrap_err();
/// assert_eq!(issues[0].instance_pointer, "/n");
/// assert_eq!(issues[0].keyword, "type");
/// ```
pub fn validate(schema: &Value, instance: &Value, registry: &Registry) -> Result<(), Vec<ValidationIssue>> {
    let validator = Validator::new(schema, registry).map_err(|e| {
        vec![ValidationIssue {
            instance_pointer: String::new(),
            keyword: "schema".into(),
            schema_pointer: String::new(),
            message: e.message,
        }]
    })?;
    validator.validate(instance)
}
