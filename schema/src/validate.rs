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
    pub message: String,
}

impl std::fmt::Display for ValidationIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at {:?}: {} (`{}` at {:?})", self.instance_pointer, self.message, self.keyword, self.schema_pointer)
    }
}

struct RegistryRetriever(Arc<BTreeMap<String, Value>>);

impl jsonschema::Retrieve for RegistryRetriever {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let key = crate::resolve::normalize_uri(uri.as_str());
        self.0.get(&key).cloned().ok_or_else(|| format!("{key} is not in the registry").into())
    }
}

pub(crate) fn build_validator(schema: &Value, registry: &Registry) -> Result<jsonschema::Validator, String> {
    let docs: BTreeMap<String, Value> = registry.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    jsonschema::options()
        .with_retriever(RegistryRetriever(Arc::new(docs)))
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| e.to_string())
}

/// Validates `instance` against `schema` (formats asserted), `$ref`s to other documents
/// resolved through `registry` only.
///
/// ```
/// use serde_json::json;
/// let schema = json!({"properties": {"n": {"type": "integer"}}});
/// let issues = stencil_schema::validate(&schema, &json!({"n": "x"}), &Default::default()).unwrap_err();
/// assert_eq!(issues[0].instance_pointer, "/n");
/// assert_eq!(issues[0].keyword, "type");
/// ```
pub fn validate(schema: &Value, instance: &Value, registry: &Registry) -> Result<(), Vec<ValidationIssue>> {
    let validator = build_validator(schema, registry).map_err(|message| {
        vec![ValidationIssue { instance_pointer: String::new(), keyword: "schema".into(), schema_pointer: String::new(), message }]
    })?;
    let issues: Vec<ValidationIssue> = validator
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
        .collect();
    if issues.is_empty() {
        Ok(())
    } else {
        Err(issues)
    }
}
