//! Tools as Rust types: the [`Tool`] and [`Tools`] traits (what `#[derive(Tool)]`
//! implements), [`ToolDefinition`], and the argument schemas `schemars` gives them.

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::call::{CallError, ToolCall};

/// A tool's name, description and argument schema: what the model is shown, and what its
/// calls are constrained by and validated against.
///
/// Serialized as the inner object of an OpenAI tool (`{"name", "description",
/// "parameters"}`); [`ToolDefinition::to_openai`] wraps it in `{"type": "function",
/// "function": ...}`.
///
/// ```
/// use serde_json::json;
/// use stencil_tools::ToolDefinition;
/// let def = ToolDefinition::new("get_time", "The current time", json!({"type": "object", "properties": {}}));
/// assert_eq!(def.to_openai()["function"]["name"], "get_time");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Non-empty printable text of at most [`ToolSet::MAX_NAME_BYTES`](crate::ToolSet::MAX_NAME_BYTES)
    /// bytes, compared exactly (checked by [`ToolSet::check_name`](crate::ToolSet::check_name));
    /// OpenAI's API accepts only `[A-Za-z0-9_-]{1,64}` (see
    /// [`ToolSet::openai_incompatible_names`](crate::ToolSet::openai_incompatible_names)).
    pub name: String,
    /// What the tool does, for the model (may be empty).
    #[serde(default)]
    pub description: String,
    /// The JSON Schema (draft 2020-12 unless it says otherwise) of the `arguments`.
    #[serde(default = "empty_parameters")]
    pub parameters: Value,
}

/// The schema of a tool without arguments: the empty object.
pub(crate) fn empty_parameters() -> Value {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
}

impl ToolDefinition {
    /// A definition from its parts.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        ToolDefinition { name: name.into(), description: description.into(), parameters }
    }

    /// The OpenAI form: `{"type": "function", "function": {"name", "description",
    /// "parameters"}}` (what chat templates that support tools expect).
    pub fn to_openai(&self) -> Value {
        json!({
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        })
    }
}

/// One tool defined by a Rust type: its arguments are the type's fields. Implemented by
/// `#[derive(Tool)]` on a struct with named fields, which must also derive
/// `schemars::JsonSchema` and `serde::Deserialize`.
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use stencil_tools::Tool;
///
/// /// Current weather in a city.
/// #[derive(Tool, JsonSchema, Deserialize)]
/// struct GetWeather {
///     /// City name, e.g. "Paris".
///     city: String,
/// }
///
/// assert_eq!(GetWeather::NAME, "get_weather");
/// assert_eq!(GetWeather::DESCRIPTION, "Current weather in a city.");
/// let def = GetWeather::definition();
/// assert_eq!(def.parameters["properties"]["city"]["description"], "City name, e.g. \"Paris\".");
/// assert_eq!(def.parameters["required"][0], "city");
/// ```
pub trait Tool: JsonSchema + DeserializeOwned {
    /// The tool's name: the type name in snake case, or `#[tool(name = "...")]`.
    const NAME: &'static str;
    /// The tool's description: the type's doc comment, or `#[tool(description = "...")]`.
    const DESCRIPTION: &'static str;

    /// The definition: name, description and the argument schema from [`arguments_schema`].
    fn definition() -> ToolDefinition {
        ToolDefinition::new(Self::NAME, Self::DESCRIPTION, arguments_schema::<Self>())
    }
}

/// A closed set of tools known at compile time, whose calls deserialize into `Self`: one
/// derived tool struct (a set of one), or an enum whose variants each wrap one tool type,
/// with `#[derive(Tool)]`.
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use serde_json::json;
/// use stencil_tools::{Tool, ToolCall, Tools};
///
/// /// Current weather in a city.
/// #[derive(Tool, JsonSchema, Deserialize, Debug, PartialEq)]
/// struct GetWeather { city: String }
///
/// /// Search the web.
/// #[derive(Tool, JsonSchema, Deserialize, Debug, PartialEq)]
/// #[tool(name = "search")]
/// struct WebSearch { query: String }
///
/// #[derive(Tool, Debug, PartialEq)]
/// enum Assistant {
///     Weather(GetWeather),
///     Search(WebSearch),
/// }
///
/// let names: Vec<String> = Assistant::definitions().into_iter().map(|d| d.name).collect();
/// assert_eq!(names, ["get_weather", "search"]);
/// let call = ToolCall::new("search", json!({"query": "rust"}));
/// assert_eq!(call.parse::<Assistant>()?, Assistant::Search(WebSearch { query: "rust".into() }));
/// // A name outside the set is an error, never a guess.
/// assert!(ToolCall::new("weather", json!({"city": "Oslo"})).parse::<Assistant>().is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Tools: Sized {
    /// The definitions of the tools in the set, in declaration order.
    fn definitions() -> Vec<ToolDefinition>;

    /// The call as `Self`: the tool named `call.name`, its arguments deserialized (serde,
    /// no coercion). Use [`ToolCall::parse`], which also validates the arguments against
    /// the tool's schema first.
    ///
    /// # Errors
    /// [`CallError::UnknownTool`] for a name outside the set, [`CallError::Deserialize`]
    /// when serde refuses the arguments.
    fn from_call(call: &ToolCall) -> Result<Self, CallError>;
}

/// Deserializes a call's arguments into the tool type `T` (the name must be `T::NAME`):
/// what the derived [`Tools::from_call`] runs.
///
/// ```
/// # use schemars::JsonSchema; use serde::Deserialize; use stencil_tools::Tool;
/// #[derive(Tool, JsonSchema, Deserialize)]
/// struct Ping { host: String }
/// let call = stencil_tools::ToolCall::new("ping", serde_json::json!({"host": "example.org"}));
/// assert_eq!(stencil_tools::deserialize_call::<Ping>(&call)?.host, "example.org");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`CallError::UnknownTool`] when the call names another tool, [`CallError::Deserialize`]
/// when serde refuses the arguments.
pub fn deserialize_call<T: Tool>(call: &ToolCall) -> Result<T, CallError> {
    if call.name != T::NAME {
        return Err(CallError::UnknownTool { name: call.name.clone(), known: vec![T::NAME.to_string()] });
    }
    T::deserialize(&call.arguments)
        .map_err(|e| CallError::Deserialize { name: call.name.clone(), message: e.to_string() })
}

/// The argument schema of `T`, as `schemars` writes it for deserialization (draft 2020-12,
/// subschemas inlined where they are not recursive), then normalized for tool calling:
///
/// - the root's `title` and `description` are removed (the description is the tool's own);
/// - integer formats (`int8` … `uint64`, `int`, `uint`) get the `minimum`/`maximum` of their
///   Rust type when the schema has none (`u32` gives `"minimum": 0` only): the grammar then
///   keeps numbers inside the type, instead of leaving overflow to serde;
/// - object schemas (`"type": "object"` or `properties`) without `additionalProperties` (or
///   `patternProperties`/`unevaluatedProperties`) get `"additionalProperties": false`, as
///   OpenAI's strict mode does — except directly under `allOf`, where it would change the
///   meaning. serde would ignore unknown fields, so writing them is always a mistake.
///
/// Only ever narrower than what serde accepts, never wider.
///
/// ```
/// # use schemars::JsonSchema; use serde::Deserialize;
/// #[derive(JsonSchema, Deserialize)]
/// struct Args { count: u32 }
/// let schema = stencil_tools::arguments_schema::<Args>();
/// assert_eq!(schema["properties"]["count"]["maximum"], u32::MAX);
/// assert_eq!(schema["additionalProperties"], false);
/// assert!(schema.get("title").is_none() && schema.get("$schema").is_none());
/// ```
pub fn arguments_schema<T: JsonSchema + ?Sized>() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.meta_schema = None;
        s.inline_subschemas = true;
    });
    let mut schema = settings.into_generator().into_root_schema_for::<T>().to_value();
    if let Value::Object(root) = &mut schema {
        root.remove("title");
        root.remove("description");
    }
    normalize(&mut schema, false);
    schema
}

/// Walks every subschema (keyword-aware enough for what schemars writes), applying the
/// integer bounds and closing objects.
fn normalize(schema: &mut Value, under_all_of: bool) {
    let Value::Object(map) = schema else { return };
    integer_bounds(map);
    let open_keys = ["additionalProperties", "patternProperties", "unevaluatedProperties"];
    let is_object = map.contains_key("properties") || map.get("type").is_some_and(|t| t == "object");
    if !under_all_of && is_object && !open_keys.iter().any(|k| map.contains_key(*k)) {
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    for (key, value) in map.iter_mut() {
        match key.as_str() {
            // Maps of name → subschema.
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                if let Value::Object(m) = value {
                    m.values_mut().for_each(|v| normalize(v, false));
                }
            }
            // Arrays of subschemas.
            "allOf" => {
                if let Value::Array(a) = value {
                    a.iter_mut().for_each(|v| normalize(v, true));
                }
            }
            "anyOf" | "oneOf" | "prefixItems" => {
                if let Value::Array(a) = value {
                    a.iter_mut().for_each(|v| normalize(v, false));
                }
            }
            // One subschema (or, for `items` in old drafts, an array of them).
            "items"
            | "additionalProperties"
            | "unevaluatedProperties"
            | "additionalItems"
            | "contains"
            | "not"
            | "if"
            | "then"
            | "else"
            | "propertyNames" => match value {
                Value::Array(a) => a.iter_mut().for_each(|v| normalize(v, false)),
                v => normalize(v, false),
            },
            _ => {}
        }
    }
}

fn integer_bounds(map: &mut Map<String, Value>) {
    let is_integer = match map.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
        _ => false,
    };
    if !is_integer {
        return;
    }
    let (min, max): (Value, Value) = match map.get("format").and_then(Value::as_str) {
        Some("int8") => (i8::MIN.into(), i8::MAX.into()),
        Some("int16") => (i16::MIN.into(), i16::MAX.into()),
        Some("int32") => (i32::MIN.into(), i32::MAX.into()),
        Some("int64" | "int") => (i64::MIN.into(), i64::MAX.into()),
        Some("uint8") => (0.into(), u8::MAX.into()),
        Some("uint16") => (0.into(), u16::MAX.into()),
        Some("uint32") => (0.into(), u32::MAX.into()),
        Some("uint64" | "uint") => (0.into(), u64::MAX.into()),
        _ => return,
    };
    if !map.contains_key("minimum") && !map.contains_key("exclusiveMinimum") {
        map.insert("minimum".into(), min);
    }
    if !map.contains_key("maximum") && !map.contains_key("exclusiveMaximum") {
        map.insert("maximum".into(), max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_closes_objects_but_not_all_of_branches() {
        let mut s = json!({
            "type": "object",
            "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer", "format": "int8"}}}},
            "allOf": [{"properties": {"c": {"type": "string"}}}],
            "anyOf": [{"properties": {"d": {"type": "string"}}, "additionalProperties": true}]
        });
        normalize(&mut s, false);
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(s["properties"]["a"]["additionalProperties"], false);
        assert_eq!(s["properties"]["a"]["properties"]["b"]["minimum"], -128);
        assert_eq!(s["properties"]["a"]["properties"]["b"]["maximum"], 127);
        assert!(s["allOf"][0].get("additionalProperties").is_none());
        assert_eq!(s["anyOf"][0]["additionalProperties"], true);
    }

    #[test]
    fn structs_are_closed_and_maps_stay_open() {
        #[derive(JsonSchema)]
        #[allow(dead_code)]
        struct NoArgs {}
        #[derive(JsonSchema)]
        #[allow(dead_code)]
        struct Maps {
            counts: std::collections::HashMap<String, u8>,
            anything: serde_json::Map<String, Value>,
            value: Value,
        }
        assert_eq!(arguments_schema::<NoArgs>()["additionalProperties"], false);
        let maps = arguments_schema::<Maps>();
        assert_eq!(maps["additionalProperties"], false);
        assert_eq!(maps["properties"]["counts"]["additionalProperties"]["maximum"], 255);
        assert_ne!(maps["properties"]["anything"]["additionalProperties"], false, "{maps}");
        assert_ne!(maps["properties"]["value"].get("additionalProperties"), Some(&Value::Bool(false)), "{maps}");
    }

    #[test]
    fn existing_bounds_are_kept() {
        let mut s = json!({"type": ["integer", "null"], "format": "uint32", "minimum": 1, "exclusiveMaximum": 10});
        normalize(&mut s, false);
        assert_eq!(s, json!({"type": ["integer", "null"], "format": "uint32", "minimum": 1, "exclusiveMaximum": 10}));
    }
}
