//! `Compiler` and `Grammar`: JSON Schema, GBNF, regexes, tool sets and any-JSON compiled
//! against one vocabulary into an immutable grammar that matchers share.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use serde_json::{json, Value};
use stencil_grammar::{Expr, Grammar, Regex};
use stencil_mask::CompiledGrammar;
use stencil_schema::{Mode, PropertyOrder, Registry, SchemaOptions, Whitespace};

use crate::errors::compile_error;
use crate::vocab::PyVocab;

/// What a grammar was compiled from.
#[derive(Clone, Copy)]
enum SourceKind {
    JsonSchema,
    Gbnf,
    Regex,
    Tools,
    Json,
    StructuralTag,
}

impl SourceKind {
    fn name(self) -> &'static str {
        match self {
            SourceKind::JsonSchema => "json_schema",
            SourceKind::Gbnf => "gbnf",
            SourceKind::Regex => "regex",
            SourceKind::Tools => "tools",
            SourceKind::Json => "json",
            SourceKind::StructuralTag => "structural_tag",
        }
    }
}

/// A grammar compiled against one vocabulary. Immutable and thread-safe: any number of
/// matchers on any threads share it.
///
/// ```python
/// grammar = compiler.compile_json_schema({"type": "object"})
/// matcher = stencil.Matcher(grammar)
/// ```
#[pyclass(frozen, name = "Grammar", module = "stencil._stencil")]
pub struct PyGrammar {
    pub compiled: Arc<CompiledGrammar>,
    vocab: Py<PyVocab>,
    ir: Grammar,
    kind: SourceKind,
    /// The JSON Schema whose instances the grammar writes (schemas, tools and any JSON).
    schema: Option<Value>,
    warnings: Vec<String>,
}

#[pymethods]
impl PyGrammar {
    /// The vocabulary it was compiled against.
    #[getter]
    fn vocab(&self, py: Python<'_>) -> Py<PyVocab> {
        self.vocab.clone_ref(py)
    }

    /// JSON Schema keywords the grammar does not enforce (lenient mode only).
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    /// "json_schema", "gbnf", "regex", "tools", "json" or "structural_tag".
    #[getter]
    fn source_kind(&self) -> &'static str {
        self.kind.name()
    }

    /// Post-hoc check of `text`: for grammars from a JSON Schema (tools and any JSON
    /// included) its validation errors, a JSON parse error being one; for GBNF and regex
    /// grammars whether the reference recognizer accepts the text. Empty when valid.
    fn validate(&self, py: Python<'_>, text: &str) -> Vec<String> {
        py.detach(|| match &self.schema {
            Some(schema) => match serde_json::from_str::<Value>(text) {
                Err(e) => vec![format!("not JSON: {e}")],
                Ok(instance) => match stencil_schema::validate(schema, &instance, &Registry::new()) {
                    Ok(()) => Vec::new(),
                    Err(issues) => issues
                        .iter()
                        .map(|i| format!("at {:?}: `{}`: {}", i.instance_pointer, i.keyword, i.message))
                        .collect(),
                },
            },
            None => match stencil_grammar::reference::Recognizer::new(&self.ir) {
                Err(e) => vec![format!("cannot check: {e}")],
                Ok(r) if r.matches(text.as_bytes()) => Vec::new(),
                Ok(_) => vec!["the grammar does not match the text".to_string()],
            },
        })
    }

    /// Computes every state's token-mask cache now (in parallel, the GIL released), so
    /// that no later mask pays a first-visit cost.
    fn warm_up(&self, py: Python<'_>) {
        let compiled = &self.compiled;
        py.detach(|| compiled.warm_up());
    }

    /// Sizes: rules, states, byte classes, token terminals.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.compiled.stats();
        let d = PyDict::new(py);
        d.set_item("rules", s.rules)?;
        d.set_item("states", s.states)?;
        d.set_item("byte_classes", s.byte_classes)?;
        d.set_item("token_terminals", s.token_terminals)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        let s = self.compiled.stats();
        format!("Grammar(kind={:?}, rules={}, states={})", self.kind.name(), s.rules, s.states)
    }
}

/// Compiles grammars against one vocabulary (the shape of XGrammar's `GrammarCompiler`).
/// Making one indexes the vocabulary's tokens, once per vocabulary and shared by every
/// grammar compiled against it, so compile times do not include it. Compiling releases
/// the GIL.
///
/// ```python
/// compiler = stencil.Compiler(vocab)
/// grammar = compiler.compile_json_schema('{"type": "integer"}')
/// ```
#[pyclass(frozen, name = "Compiler", module = "stencil._stencil")]
pub struct PyCompiler {
    vocab: Py<PyVocab>,
}

#[pymethods]
impl PyCompiler {
    #[new]
    fn new(py: Python<'_>, vocab: Py<PyVocab>) -> Self {
        let inner = vocab.get().inner.clone();
        py.detach(|| inner.prepare());
        PyCompiler { vocab }
    }

    /// The vocabulary grammars are compiled against.
    #[getter]
    fn vocab(&self, py: Python<'_>) -> Py<PyVocab> {
        self.vocab.clone_ref(py)
    }

    /// A JSON Schema (text or a parsed value) → the grammar of its instances' JSON text.
    // The keyword arguments of the Python call, one by one.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (schema, *, whitespace = "compact", indent = None, separators = None, strict = true, property_order = "schema"))]
    fn compile_json_schema(
        &self,
        py: Python<'_>,
        schema: &Bound<'_, PyAny>,
        whitespace: &str,
        indent: Option<usize>,
        separators: Option<(String, String)>,
        strict: bool,
        property_order: &str,
    ) -> PyResult<PyGrammar> {
        let document = json_value(schema, "schema")?;
        let options = schema_options(whitespace, indent, separators, strict, property_order)?;
        self.compile_schema_value(py, document, &options, SourceKind::JsonSchema)
    }

    /// A GBNF grammar (llama.cpp's dialect, with its `root` rule).
    fn compile_grammar(&self, py: Python<'_>, gbnf: &str) -> PyResult<PyGrammar> {
        let ir = py.detach(|| stencil_grammar::parse_gbnf(gbnf)).map_err(compile_error)?;
        self.finish(py, ir, SourceKind::Gbnf, None, Vec::new())
    }

    /// A regular expression (Rust `regex` syntax), anchored at both ends.
    fn compile_regex(&self, py: Python<'_>, pattern: &str) -> PyResult<PyGrammar> {
        let mut ir = Grammar::new();
        ir.root = ir.add_rule("root", Expr::Regex(Regex::new(pattern)));
        self.finish(py, ir, SourceKind::Regex, None, Vec::new())
    }

    /// Any JSON value, compact.
    fn compile_builtin_json(&self, py: Python<'_>) -> PyResult<PyGrammar> {
        self.compile_schema_value(py, Value::Bool(true), &SchemaOptions::compact(), SourceKind::Json)
    }

    /// OpenAI-style tools → a compact JSON call `{"name": ..., "arguments": {...}}` naming
    /// one of them (the name first); `parallel`: an array of one or more calls.
    #[pyo3(signature = (tools, *, parallel = false, strict = true))]
    fn compile_tools(
        &self,
        py: Python<'_>,
        tools: &Bound<'_, PyAny>,
        parallel: bool,
        strict: bool,
    ) -> PyResult<PyGrammar> {
        let tools = json_value(tools, "tools")?;
        let schema = tools_schema(&tools, parallel)?;
        let options =
            SchemaOptions { mode: if strict { Mode::Strict } else { Mode::Lenient }, ..SchemaOptions::compact() };
        self.compile_schema_value(py, schema, &options, SourceKind::Tools)
    }

    /// A structural tag (XGrammar's and vLLM's `{"type": "structural_tag", "format": ...}`,
    /// or the legacy `structures` + `triggers`; text or a Python value) → one grammar of
    /// the whole reply: free text, reasoning and constrained segments. Tokens named by text
    /// are resolved in this compiler's vocabulary; `json_schema` contents compile with
    /// flexible whitespace, strict unless `strict=False` (then unenforced keywords are in
    /// `warnings`).
    #[pyo3(signature = (tag, *, strict = true))]
    fn compile_structural_tag(&self, py: Python<'_>, tag: &Bound<'_, PyAny>, strict: bool) -> PyResult<PyGrammar> {
        let tag = json_value(tag, "structural tag")?;
        let mut options =
            stencil_structural::CompileOptions { vocab: Some(self.vocab.get().inner.clone()), ..Default::default() };
        options.schema.mode = if strict { Mode::Strict } else { Mode::Lenient };
        let compiled = py.detach(|| stencil_structural::compile_json(&tag, &options)).map_err(compile_error)?;
        let warnings = compiled.warnings.iter().map(|(p, w)| format!("{p}: {w}")).collect();
        self.finish(py, compiled.grammar, SourceKind::StructuralTag, None, warnings)
    }

    fn __repr__(&self) -> String {
        format!("Compiler(vocab_size={})", self.vocab.get().inner.mask_width())
    }
}

impl PyCompiler {
    fn compile_schema_value(
        &self,
        py: Python<'_>,
        document: Value,
        options: &SchemaOptions,
        kind: SourceKind,
    ) -> PyResult<PyGrammar> {
        let compiled = py.detach(|| stencil_schema::compile_schema(&document, options)).map_err(compile_error)?;
        let warnings = compiled.warnings.iter().map(ToString::to_string).collect();
        self.finish(py, compiled.grammar, kind, Some(document), warnings)
    }

    fn finish(
        &self,
        py: Python<'_>,
        ir: Grammar,
        kind: SourceKind,
        schema: Option<Value>,
        warnings: Vec<String>,
    ) -> PyResult<PyGrammar> {
        let vocab = self.vocab.get().inner.clone();
        let compiled = py.detach(|| CompiledGrammar::new(&ir, vocab)).map_err(compile_error)?;
        Ok(PyGrammar { compiled, vocab: self.vocab.clone_ref(py), ir, kind, schema, warnings })
    }
}

/// A JSON document given as text, or as a Python value (dict, list, bool...) that
/// `json.dumps` writes.
fn json_value(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    let text: String = if let Ok(s) = value.cast::<PyString>() {
        s.to_str()?.to_owned()
    } else {
        let json = value.py().import("json")?;
        json.call_method1("dumps", (value,))
            .map_err(|e| compile_error(format!("the {what} is neither JSON text nor a JSON-serializable value: {e}")))?
            .extract()?
    };
    serde_json::from_str(&text).map_err(|e| compile_error(format!("the {what} is not valid JSON: {e}")))
}

fn schema_options(
    whitespace: &str,
    indent: Option<usize>,
    separators: Option<(String, String)>,
    strict: bool,
    property_order: &str,
) -> PyResult<SchemaOptions> {
    let mut options = match whitespace {
        "compact" => SchemaOptions::compact(),
        "flexible" => SchemaOptions::default(),
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "whitespace must be \"compact\" or \"flexible\", not {other:?}"
            )))
        }
    };
    if let Some(n) = indent {
        options = SchemaOptions { indent: Some(n), ..SchemaOptions::default() };
        options.whitespace = Whitespace::Compact;
    }
    if let Some((item, key)) = separators {
        options.item_separator = item;
        options.key_separator = key;
    }
    options.mode = if strict { Mode::Strict } else { Mode::Lenient };
    options.property_order = match property_order {
        "schema" => PropertyOrder::SchemaOrder,
        "any" => PropertyOrder::Any,
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "property_order must be \"schema\" or \"any\", not {other:?}"
            )))
        }
    };
    Ok(options)
}

/// The JSON Schema of one call (or, `parallel`, an array of calls) of OpenAI-style tools:
/// each tool `{"type": "function", "function": {"name", "parameters"}}` (or the bare
/// `{"name", "parameters"}`) becomes `{"name": <const>, "arguments": <parameters>}`.
fn tools_schema(tools: &Value, parallel: bool) -> PyResult<Value> {
    let list = tools.as_array().ok_or_else(|| compile_error("tools must be a JSON array of tool definitions"))?;
    if list.is_empty() {
        return Err(compile_error("tools is empty: there is nothing to call"));
    }
    let mut calls = Vec::with_capacity(list.len());
    let mut names = Vec::new();
    for (i, tool) in list.iter().enumerate() {
        let function = tool.get("function").unwrap_or(tool);
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| compile_error(format!("tools/{i}: no \"name\" (a non-empty string)")))?;
        if names.contains(&name) {
            return Err(compile_error(format!("tools/{i}: the name {name:?} is used twice")));
        }
        names.push(name);
        let parameters = function.get("parameters").cloned().unwrap_or_else(|| json!({"type": "object"}));
        calls.push(json!({
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": parameters},
            "required": ["name", "arguments"],
            "additionalProperties": false
        }));
    }
    let call = if calls.len() == 1 { calls.pop().unwrap() } else { json!({"anyOf": calls}) };
    Ok(if parallel { json!({"type": "array", "items": call, "minItems": 1}) } else { call })
}
