//! [`ToolSet`]: the tools a model may call, each with its compiled argument grammar.

use serde_json::Value;
use stencil_grammar::Grammar;
use stencil_schema::{compile_schema, SchemaError, SchemaOptions, Unenforced};
use thiserror::Error;

use crate::call::{validate_arguments, CallError, ToolCall};
use crate::tool::{empty_parameters, ToolDefinition, Tools};

/// Why a tool cannot join a [`ToolSet`].
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ToolSetError {
    /// The tools file is not JSON.
    #[error("the tools are not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The JSON is not an OpenAI tool list (`index` is the tool's position in it).
    #[error("tool #{index}: {reason}")]
    Shape {
        /// Position in the array (0-based).
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// A name that is empty or blank, longer than [`ToolSet::MAX_NAME_BYTES`], or holds a
    /// character that is not printable (see [`NameError`]).
    #[error("tool name {name:?} is invalid: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        reason: NameError,
    },
    /// Two tools with the same name.
    #[error("two tools are named {0:?}")]
    DuplicateName(String),
    /// The argument schema cannot constrain decoding (in strict mode: a keyword the grammar
    /// cannot enforce; use [`SchemaOptions::lenient`] to leave it to validation).
    #[error("tool {name:?}: its parameters schema cannot be compiled: {source}")]
    Schema {
        /// The tool.
        name: String,
        /// The compiler's error, with the keyword's JSON pointer.
        source: Box<SchemaError>,
    },
    /// The validator rejects the argument schema.
    #[error("tool {name:?}: its parameters schema is invalid: {message}")]
    InvalidSchema {
        /// The tool.
        name: String,
        /// The validator's message.
        message: String,
    },
}

/// Why a tool name is refused (see [`ToolSet::check_name`]).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum NameError {
    /// The empty name.
    #[error("names must not be empty")]
    Empty,
    /// A name of spaces only.
    #[error("names must not be blank (only spaces)")]
    Blank,
    /// A name longer than [`ToolSet::MAX_NAME_BYTES`] (its length in bytes of UTF-8).
    #[error("names are at most {max} bytes of UTF-8, this one is {0}", max = ToolSet::MAX_NAME_BYTES)]
    TooLong(usize),
    /// A control character (Unicode category Cc: U+0000 to U+001F, U+007F to U+009F) or
    /// whitespace other than the space U+0020 (tab, line or paragraph separators, no-break
    /// spaces, ...), with its byte offset in the name.
    #[error("names are printable characters, without control characters or whitespace other than the space; {ch:?} (U+{code:04X}) at byte {offset} is not", code = u32::from(*.ch))]
    NotPrintable {
        /// The character.
        ch: char,
        /// Its byte offset in the name.
        offset: usize,
    },
}

/// One tool of a set: its definition and its arguments' grammar.
#[derive(Clone, Debug)]
pub struct ToolEntry {
    /// Name, description, schema.
    pub definition: ToolDefinition,
    /// The grammar of the arguments' JSON text (in the set's [`SchemaOptions`] style).
    pub grammar: Grammar,
    /// Keywords of the schema the grammar does not enforce (lenient mode only), left to
    /// the post-hoc validation every call goes through.
    pub warnings: Vec<Unenforced>,
}

/// The tools a model may call: unique names, schemas compiled (strict by default) into the
/// grammars that constrain the arguments.
///
/// A name is any non-empty text of printable characters up to
/// [`ToolSet::MAX_NAME_BYTES`] bytes ([`ToolSet::check_name`]): namespaced names such as
/// `github.create_issue`, `fs/read_file` or `mcp:weather.get` are accepted, and so are
/// spaces, quotes and backslashes (they are JSON-escaped wherever a name is written: in the
/// prompt, in the grammars, in [`Envelope::write`](crate::Envelope::write)). Names are
/// compared exactly, after JSON unescaping of what the model wrote. OpenAI's API is
/// narrower (`[A-Za-z0-9_-]{1,64}`); [`ToolSet::openai_incompatible_names`] lists the
/// names it would refuse, for callers that promise OpenAI compatibility.
///
/// Tools come from Rust types ([`ToolSet::from_tools`], [`ToolSet::add_tools`]), from
/// OpenAI-style JSON ([`ToolSet::from_openai_json`]), or from definitions
/// ([`ToolSet::add`]).
///
/// ```
/// let tools = stencil_tools::ToolSet::from_openai_json(r#"[
///   {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
///    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
/// ]"#)?;
/// assert_eq!(tools.names().collect::<Vec<_>>(), ["get_weather"]);
/// // Invalid sets are typed errors:
/// use stencil_tools::{ToolSet, ToolSetError};
/// let twice = r#"[{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "a"}}]"#;
/// assert!(matches!(ToolSet::from_openai_json(twice), Err(ToolSetError::DuplicateName(n)) if n == "a"));
/// let tab = r#"[{"type": "function", "function": {"name": "get\tweather"}}]"#;
/// assert!(matches!(ToolSet::from_openai_json(tab), Err(ToolSetError::InvalidName { .. })));
/// // Namespaced names are fine (but not for OpenAI's API):
/// let ns = ToolSet::from_openai_json(r#"[{"type": "function", "function": {"name": "github.create_issue"}}]"#)?;
/// assert_eq!(ns.openai_incompatible_names(), ["github.create_issue"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct ToolSet {
    tools: Vec<ToolEntry>,
    options: SchemaOptions,
}

impl Default for ToolSet {
    fn default() -> Self {
        ToolSet::new()
    }
}

impl ToolSet {
    /// The longest tool name, in bytes of UTF-8: 256.
    pub const MAX_NAME_BYTES: usize = 256;

    /// An empty set whose schemas compile with [`SchemaOptions::default`] (strict; JSON with
    /// optional runs of at most 2 whitespace bytes around punctuation).
    pub fn new() -> Self {
        ToolSet::with_options(SchemaOptions::default())
    }

    /// An empty set whose schemas compile with `options` (for example
    /// `SchemaOptions::default().lenient()` to accept schemas with keywords that only
    /// post-hoc validation checks).
    pub fn with_options(options: SchemaOptions) -> Self {
        ToolSet { tools: Vec::new(), options }
    }

    /// The set of `T`'s tools (a derived tool struct, or a derived enum of tools).
    ///
    /// ```
    /// # use schemars::JsonSchema; use serde::Deserialize;
    /// use stencil_tools::{Tool, ToolSet};
    /// /// Adds two numbers.
    /// #[derive(Tool, JsonSchema, Deserialize)]
    /// struct Add { a: i64, b: i64 }
    /// let tools = ToolSet::from_tools::<Add>()?;
    /// assert_eq!(tools.get("add").unwrap().description, "Adds two numbers.");
    /// # Ok::<(), stencil_tools::ToolSetError>(())
    /// ```
    ///
    /// # Errors
    /// As [`ToolSet::add`].
    pub fn from_tools<T: Tools>() -> Result<Self, ToolSetError> {
        let mut set = ToolSet::new();
        set.add_tools::<T>()?;
        Ok(set)
    }

    /// Adds `T`'s tools.
    ///
    /// # Errors
    /// As [`ToolSet::add`]; the set is unchanged on error.
    pub fn add_tools<T: Tools>(&mut self) -> Result<&mut Self, ToolSetError> {
        self.add_all(T::definitions())
    }

    /// Tools from OpenAI-style JSON: an array of `{"type": "function", "function": {"name",
    /// "description", "parameters"}}` (a single such object is accepted too). A missing
    /// `description` is empty, missing `parameters` mean no arguments (the empty object);
    /// other members (such as `strict`) are ignored.
    ///
    /// # Errors
    /// [`ToolSetError::Json`], [`ToolSetError::Shape`], and as [`ToolSet::add`].
    pub fn from_openai_json(text: &str) -> Result<Self, ToolSetError> {
        Self::from_openai_value(&serde_json::from_str(text)?)
    }

    /// [`ToolSet::from_openai_json`] from parsed JSON.
    ///
    /// # Errors
    /// As [`ToolSet::from_openai_json`].
    pub fn from_openai_value(value: &Value) -> Result<Self, ToolSetError> {
        let items = match value {
            Value::Array(items) => items.as_slice(),
            Value::Object(_) => std::slice::from_ref(value),
            _ => return Err(ToolSetError::Shape { index: 0, reason: "expected an array of tools".into() }),
        };
        let mut defs = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            defs.push(openai_definition(index, item)?);
        }
        let mut set = ToolSet::new();
        set.add_all(defs)?;
        Ok(set)
    }

    /// Whether `name` can name a tool: 1 to [`ToolSet::MAX_NAME_BYTES`] bytes of UTF-8, not
    /// only spaces, without control characters (Unicode Cc) or whitespace other than the
    /// space U+0020. Any other character is accepted (`.`, `/`, `:`, `"`, `\`, non-ASCII
    /// letters, ...).
    ///
    /// ```
    /// use stencil_tools::{NameError, ToolSet};
    /// assert!(ToolSet::check_name("fs/read_file").is_ok());
    /// assert!(ToolSet::check_name("say \"hi\"").is_ok());
    /// assert_eq!(ToolSet::check_name(""), Err(NameError::Empty));
    /// assert_eq!(ToolSet::check_name("a\nb"), Err(NameError::NotPrintable { ch: '\n', offset: 1 }));
    /// assert_eq!(ToolSet::check_name(&"x".repeat(257)), Err(NameError::TooLong(257)));
    /// ```
    ///
    /// # Errors
    /// What is wrong with the name.
    pub fn check_name(name: &str) -> Result<(), NameError> {
        if name.is_empty() {
            return Err(NameError::Empty);
        }
        if name.len() > Self::MAX_NAME_BYTES {
            return Err(NameError::TooLong(name.len()));
        }
        if let Some((offset, ch)) =
            name.char_indices().find(|&(_, c)| c.is_control() || (c.is_whitespace() && c != ' '))
        {
            return Err(NameError::NotPrintable { ch, offset });
        }
        if name.bytes().all(|b| b == b' ') {
            return Err(NameError::Blank);
        }
        Ok(())
    }

    /// Whether OpenAI's API accepts `name` as a function name: `[A-Za-z0-9_-]{1,64}`.
    ///
    /// ```
    /// use stencil_tools::ToolSet;
    /// assert!(ToolSet::is_openai_compatible_name("get_weather-2"));
    /// assert!(!ToolSet::is_openai_compatible_name("search.web"));
    /// assert!(!ToolSet::is_openai_compatible_name(&"a".repeat(65)));
    /// ```
    pub fn is_openai_compatible_name(name: &str) -> bool {
        (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    /// The names of the set that OpenAI's API would refuse (outside `[A-Za-z0-9_-]{1,64}`),
    /// in order: what a server that promises OpenAI compatibility can warn about. Stencil
    /// itself handles every name the set accepts.
    pub fn openai_incompatible_names(&self) -> Vec<&str> {
        self.names().filter(|n| !Self::is_openai_compatible_name(n)).collect()
    }

    /// Adds one tool: checks its name ([`ToolSet::check_name`]) and compiles its schema.
    ///
    /// # Errors
    /// [`ToolSetError::InvalidName`], [`ToolSetError::DuplicateName`],
    /// [`ToolSetError::Schema`], [`ToolSetError::InvalidSchema`]; the set is unchanged on
    /// error.
    pub fn add(&mut self, definition: ToolDefinition) -> Result<&mut Self, ToolSetError> {
        let entry = self.entry(definition)?;
        self.tools.push(entry);
        Ok(self)
    }

    fn add_all(&mut self, definitions: Vec<ToolDefinition>) -> Result<&mut Self, ToolSetError> {
        let before = self.tools.len();
        for def in definitions {
            if let Err(e) = self.add(def) {
                self.tools.truncate(before);
                return Err(e);
            }
        }
        Ok(self)
    }

    fn entry(&self, definition: ToolDefinition) -> Result<ToolEntry, ToolSetError> {
        let name = &definition.name;
        if let Err(reason) = Self::check_name(name) {
            return Err(ToolSetError::InvalidName { name: name.clone(), reason });
        }
        if self.get(name).is_some() {
            return Err(ToolSetError::DuplicateName(name.clone()));
        }
        // The validator must accept the schema too (calls are validated after decoding).
        if let Err(issues) = stencil_schema::validate(&definition.parameters, &Value::Null, &self.options.registry) {
            if let Some(bad) = issues.iter().find(|i| i.keyword == "schema") {
                return Err(ToolSetError::InvalidSchema { name: name.clone(), message: bad.message.clone() });
            }
        }
        let compiled = compile_schema(&definition.parameters, &self.options)
            .map_err(|e| ToolSetError::Schema { name: name.clone(), source: Box::new(e) })?;
        Ok(ToolEntry { definition, grammar: compiled.grammar, warnings: compiled.warnings })
    }

    /// How many tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True for a set without tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tool names, in the order they were added.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.definition.name.as_str())
    }

    /// The definition of the tool named `name`.
    pub fn get(&self, name: &str) -> Option<&ToolDefinition> {
        self.entry_named(name).map(|e| &e.definition)
    }

    /// The tools with their grammars, in order.
    pub fn entries(&self) -> &[ToolEntry] {
        &self.tools
    }

    pub(crate) fn entry_named(&self, name: &str) -> Option<&ToolEntry> {
        self.tools.iter().find(|t| t.definition.name == name)
    }

    /// The options the schemas were compiled with.
    pub fn schema_options(&self) -> &SchemaOptions {
        &self.options
    }

    /// The tools in OpenAI form (an array), as chat templates that support tools take them.
    pub fn to_openai_json(&self) -> Value {
        Value::Array(self.tools.iter().map(|t| t.definition.to_openai()).collect())
    }

    /// Checks a call: the name must be in the set and the arguments must validate against
    /// the tool's schema.
    ///
    /// ```
    /// use serde_json::json;
    /// let tools = stencil_tools::ToolSet::from_openai_json(
    ///     r#"[{"type": "function", "function": {"name": "wait",
    ///          "parameters": {"type": "object", "properties": {"s": {"type": "integer", "maximum": 60}}}}}]"#,
    /// )?;
    /// assert!(tools.check(&stencil_tools::ToolCall::new("wait", json!({"s": 5}))).is_ok());
    /// let err = tools.check(&stencil_tools::ToolCall::new("wait", json!({"s": 99}))).unwrap_err();
    /// assert!(err.feedback().contains("/s"), "{}", err.feedback());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`CallError::UnknownTool`] or [`CallError::InvalidArguments`].
    pub fn check(&self, call: &ToolCall) -> Result<(), CallError> {
        let entry = self.entry_named(&call.name).ok_or_else(|| CallError::UnknownTool {
            name: call.name.clone(),
            known: self.names().map(str::to_string).collect(),
        })?;
        validate_arguments(&call.name, &entry.definition.parameters, &call.arguments, &self.options.registry)
    }
}

fn openai_definition(index: usize, item: &Value) -> Result<ToolDefinition, ToolSetError> {
    let shape = |reason: &str| ToolSetError::Shape { index, reason: reason.to_string() };
    let obj =
        item.as_object().ok_or_else(|| shape("expected an object {\"type\": \"function\", \"function\": {...}}"))?;
    match obj.get("type") {
        Some(Value::String(t)) if t == "function" => {}
        Some(Value::String(t)) => return Err(shape(&format!("unsupported tool type {t:?} (only \"function\")"))),
        Some(_) => return Err(shape("`type` must be the string \"function\"")),
        None => return Err(shape("missing `type` (\"function\")")),
    }
    let function = obj
        .get("function")
        .ok_or_else(|| shape("missing `function`"))?
        .as_object()
        .ok_or_else(|| shape("`function` must be an object"))?;
    let name = match function.get("name") {
        Some(Value::String(n)) => n.clone(),
        Some(_) => return Err(shape("`function.name` must be a string")),
        None => return Err(shape("missing `function.name`")),
    };
    let description = match function.get("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(d)) => d.clone(),
        Some(_) => return Err(shape("`function.description` must be a string")),
    };
    let parameters = match function.get("parameters") {
        None | Some(Value::Null) => empty_parameters(),
        Some(p @ (Value::Object(_) | Value::Bool(_))) => p.clone(),
        Some(_) => return Err(shape("`function.parameters` must be a JSON Schema (an object)")),
    };
    Ok(ToolDefinition { name, description, parameters })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, parameters: Value) -> Value {
        json!({"type": "function", "function": {"name": name, "parameters": parameters}})
    }

    #[test]
    fn shapes_are_typed_errors_with_the_index() {
        let cases = [
            (json!("x"), "expected an array"),
            (json!([1]), "expected an object"),
            (json!([{"function": {"name": "a"}}]), "missing `type`"),
            (json!([{"type": "retrieval"}]), "unsupported tool type"),
            (json!([{"type": "function"}]), "missing `function`"),
            (json!([{"type": "function", "function": {}}]), "missing `function.name`"),
            (json!([{"type": "function", "function": {"name": 3}}]), "must be a string"),
            (json!([{"type": "function", "function": {"name": "a", "parameters": []}}]), "must be a JSON Schema"),
        ];
        for (value, needle) in cases {
            let err = ToolSet::from_openai_value(&value).unwrap_err().to_string();
            assert!(err.contains(needle), "{value}: {err}");
        }
        let err = ToolSet::from_openai_value(&json!([tool("a", json!({})), {"type": "x"}])).unwrap_err();
        assert!(matches!(err, ToolSetError::Shape { index: 1, .. }), "{err}");
        assert!(matches!(ToolSet::from_openai_json("[").unwrap_err(), ToolSetError::Json(_)));
    }

    #[test]
    fn names_and_schemas_are_checked() {
        let bad_name = ToolSet::from_openai_value(&json!([tool("get\tweather", json!({}))])).unwrap_err();
        assert!(
            matches!(&bad_name, ToolSetError::InvalidName { name, reason: NameError::NotPrintable { ch: '\t', offset: 3 } } if name == "get\tweather"),
            "{bad_name}"
        );
        assert_eq!(
            bad_name.to_string(),
            "tool name \"get\\tweather\" is invalid: names are printable characters, without control characters \
             or whitespace other than the space; '\\t' (U+0009) at byte 3 is not"
        );
        let long = "a".repeat(ToolSet::MAX_NAME_BYTES + 1);
        assert!(matches!(
            ToolSet::from_openai_value(&json!([tool(&long, json!({}))])),
            Err(ToolSetError::InvalidName { reason: NameError::TooLong(257), .. })
        ));
        // A keyword the grammar cannot enforce is refused in strict mode...
        let hard = json!({"type": "string", "pattern": "(a)\\1"});
        let err = ToolSet::from_openai_value(&json!([tool("t", hard.clone())])).unwrap_err();
        assert!(matches!(err, ToolSetError::Schema { .. }), "{err}");
        // ... and a schema the validator rejects is refused too.
        let err = ToolSet::from_openai_value(&json!([tool("t", json!({"type": 12}))])).unwrap_err();
        assert!(matches!(err, ToolSetError::InvalidSchema { .. } | ToolSetError::Schema { .. }), "{err}");
    }

    #[test]
    fn any_printable_name_up_to_the_limit_is_accepted() {
        let names = [
            "search.web",
            "github.create_issue",
            "fs/read_file",
            "mcp:weather.get",
            "get weather",
            "say \"hi\"",
            "C:\\tools\\run",
            "météo.prévision",
            "天気",
            "a",
            "-",
            " padded ",
        ];
        let longest = "é".repeat(ToolSet::MAX_NAME_BYTES / 2);
        let mut set = ToolSet::new();
        for name in names.iter().copied().chain([longest.as_str()]) {
            set.add(ToolDefinition::new(name, "", json!({}))).unwrap_or_else(|e| panic!("{name:?}: {e}"));
        }
        assert_eq!(
            set.names().collect::<Vec<_>>(),
            names.iter().copied().chain([longest.as_str()]).collect::<Vec<_>>()
        );
        // Exactly the name: no trimming, no normalization.
        assert!(set.get("padded").is_none() && set.get(" padded ").is_some());
        assert!(set.get("search_web").is_none());
    }

    #[test]
    fn empty_long_and_unprintable_names_are_refused() {
        let cases: [(&str, NameError); 9] = [
            ("", NameError::Empty),
            ("   ", NameError::Blank),
            ("a\nb", NameError::NotPrintable { ch: '\n', offset: 1 }),
            ("\0", NameError::NotPrintable { ch: '\0', offset: 0 }),
            ("del\u{7f}", NameError::NotPrintable { ch: '\u{7f}', offset: 3 }),
            ("c1\u{85}", NameError::NotPrintable { ch: '\u{85}', offset: 2 }),
            ("é\u{a0}", NameError::NotPrintable { ch: '\u{a0}', offset: 2 }),
            ("line\u{2028}", NameError::NotPrintable { ch: '\u{2028}', offset: 4 }),
            ("\t", NameError::NotPrintable { ch: '\t', offset: 0 }),
        ];
        for (name, reason) in cases {
            assert_eq!(ToolSet::check_name(name), Err(reason.clone()), "{name:?}");
            let err = ToolSet::new().add(ToolDefinition::new(name, "", json!({}))).unwrap_err();
            assert!(
                matches!(&err, ToolSetError::InvalidName { name: n, reason: r } if n == name && *r == reason),
                "{err}"
            );
        }
        // 256 bytes is the limit, counted in bytes: 129 two-byte characters are too many.
        assert_eq!(ToolSet::check_name(&"x".repeat(256)), Ok(()));
        assert_eq!(ToolSet::check_name(&"é".repeat(129)), Err(NameError::TooLong(258)));
        assert!(NameError::Empty.to_string().contains("empty"));
        assert!(NameError::TooLong(300).to_string().contains("at most 256 bytes"), "{}", NameError::TooLong(300));
    }

    #[test]
    fn openai_incompatible_names_are_listed_not_refused() {
        let set = ToolSet::from_openai_value(&json!([
            tool("get_weather", json!({})),
            tool("search.web", json!({})),
            tool("Web-Search_2", json!({})),
            tool("fs/read_file", json!({})),
            tool(&"a".repeat(64), json!({})),
            tool(&"b".repeat(65), json!({})),
            tool("get weather", json!({})),
        ]))
        .unwrap();
        let long = "b".repeat(65);
        assert_eq!(set.openai_incompatible_names(), ["search.web", "fs/read_file", long.as_str(), "get weather"]);
        assert!(ToolSet::new().openai_incompatible_names().is_empty());
    }

    /// What unconstrained decoding does with a reply: the envelope's JSON is unescaped
    /// (any escape), then the name must be a tool's exactly.
    #[test]
    fn replies_are_unescaped_then_compared_exactly() {
        let set = ToolSet::from_openai_value(&json!([
            tool("fs/read_file", json!({})),
            tool("kv[\"get\"]", json!({})),
            tool("tools\\clock.now", json!({})),
        ]))
        .unwrap();
        let env = crate::Envelope::fallback();
        let call = |name_json: &str| {
            let text = format!("<tool_call>{{\"name\": {name_json}, \"arguments\": {{}}}}</tool_call>");
            match env.parse(&text).unwrap() {
                crate::Reply::Calls(calls) => calls.into_iter().next().unwrap(),
                other => panic!("{other:?}"),
            }
        };
        for (written, name) in [
            (r#""fs/read_file""#, "fs/read_file"),
            (r#""fs\/read_file""#, "fs/read_file"),
            (r#""kv[\"get\"]""#, "kv[\"get\"]"),
            (r#""kv[\u0022get\u0022]""#, "kv[\"get\"]"),
            (r#""tools\\clock.now""#, "tools\\clock.now"),
        ] {
            let c = call(written);
            assert_eq!(c.name, name, "{written}");
            set.check(&c).unwrap_or_else(|e| panic!("{written}: {e}"));
        }
        for written in
            [r#""fs/read_file ""#, r#""FS/read_file""#, r#""kv[get]""#, r#""tools\\clock""#, r#""fs/read_file.x""#]
        {
            let err = set.check(&call(written)).unwrap_err();
            assert!(matches!(err, CallError::UnknownTool { .. }), "{written}: {err}");
        }
    }

    #[test]
    fn a_failed_add_leaves_the_set_unchanged() {
        let mut set = ToolSet::new();
        set.add(ToolDefinition::new("a", "", json!({}))).unwrap();
        let defs = vec![ToolDefinition::new("b", "", json!({})), ToolDefinition::new("a", "", json!({}))];
        assert!(set.add_all(defs).is_err());
        assert_eq!(set.names().collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn missing_parameters_mean_no_arguments() {
        let set = ToolSet::from_openai_value(&json!({"type": "function", "function": {"name": "now"}})).unwrap();
        assert_eq!(set.get("now").unwrap().parameters, empty_parameters());
        assert_eq!(set.to_openai_json()[0]["function"]["name"], "now");
    }
}
