//! What constrains a request's output (`response_format`, `grammar`, `regex`, or the
//! grammar of a reply with tool calls), compiled against the model's vocabulary, and the
//! cache that compiles a repeated one only once.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use stencil_grammar::{Expr, Grammar};
use stencil_mask::{CompiledGrammar, Vocabulary};
use stencil_schema::{SchemaOptions, Unenforced};
use stencil_structural::CompiledTag;
use stencil_tools::format::{CompiledFormat, FormatError, ReasoningMode, ToolFormat};
use stencil_tools::{CallOptions, ToolCaller, ToolChoice, ToolError, ToolSet};

use crate::error::ApiError;

/// A request's constraint, before compiling.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstraintSpec {
    /// Free text.
    None,
    /// Any JSON object (`response_format: {"type": "json_object"}`).
    JsonObject,
    /// JSON valid against `schema`; `strict` refuses keywords the mask cannot enforce.
    Schema {
        /// The JSON Schema.
        schema: Value,
        /// Strict (refuse) or lenient (compile, validate after the fact).
        strict: bool,
    },
    /// A GBNF grammar (the `grammar` extension field).
    Gbnf(String),
    /// A regular expression the whole output matches (the `regex` extension field).
    Regex(String),
    /// A structural tag (`response_format: {"type": "structural_tag", …}`), the whole object.
    StructuralTag(Value),
}

impl ConstraintSpec {
    /// The label in generation records.
    pub fn label(&self) -> &'static str {
        match self {
            ConstraintSpec::None => "none",
            ConstraintSpec::JsonObject => "json-object",
            ConstraintSpec::Schema { .. } => "json-schema",
            ConstraintSpec::Gbnf(_) => "gbnf",
            ConstraintSpec::Regex(_) => "regex",
            ConstraintSpec::StructuralTag(_) => "structural-tag",
        }
    }

    /// The request field it came from, for errors.
    pub fn param(&self) -> &'static str {
        match self {
            ConstraintSpec::None | ConstraintSpec::JsonObject | ConstraintSpec::StructuralTag(_) => "response_format",
            ConstraintSpec::Schema { .. } => "response_format.json_schema.schema",
            ConstraintSpec::Gbnf(_) => "grammar",
            ConstraintSpec::Regex(_) => "regex",
        }
    }

    /// The constraint as the answer of a reply in a tool format (after its reasoning):
    /// a structural-tag format (`json_schema`, `grammar`, `regex`); `None` for free text.
    ///
    /// ```
    /// use stencil_server::constraint::ConstraintSpec;
    /// let spec = ConstraintSpec::Regex("[0-9]+".into());
    /// assert_eq!(spec.answer_format().unwrap(), Some(serde_json::json!({"type": "regex", "pattern": "[0-9]+"})));
    /// assert_eq!(ConstraintSpec::None.answer_format().unwrap(), None);
    /// ```
    ///
    /// # Errors
    ///
    /// A 400 for a structural tag (it defines its own segments: put the reasoning in it).
    pub fn answer_format(&self) -> Result<Option<Value>, ApiError> {
        Ok(Some(match self {
            ConstraintSpec::None => return Ok(None),
            ConstraintSpec::JsonObject => serde_json::json!({"type": "json_schema", "json_schema": {"type": "object"}}),
            ConstraintSpec::Schema { schema, .. } => serde_json::json!({"type": "json_schema", "json_schema": schema}),
            ConstraintSpec::Gbnf(g) => serde_json::json!({"type": "grammar", "grammar": g}),
            ConstraintSpec::Regex(r) => serde_json::json!({"type": "regex", "pattern": r}),
            ConstraintSpec::StructuralTag(_) => {
                return Err(ApiError::invalid(
                    "a structural tag cannot follow tools or `reasoning`: it defines its own segments (put the \
                     reasoning in the tag)",
                    Some("response_format"),
                ))
            }
        }))
    }

    /// The cache key: the kind, the mode and the text.
    fn key(&self) -> Option<String> {
        Some(match self {
            ConstraintSpec::None => return None,
            ConstraintSpec::JsonObject => "json_object".to_string(),
            ConstraintSpec::Schema { schema, strict } => format!("schema\0{strict}\0{schema}"),
            ConstraintSpec::Gbnf(g) => format!("gbnf\0{g}"),
            ConstraintSpec::Regex(r) => format!("regex\0{r}"),
            ConstraintSpec::StructuralTag(t) => format!("structural_tag\0{t}"),
        })
    }
}

/// A reply with tools, before compiling: the tools it may call, how, and in which format
/// (the caller from [`compile_tools`]; the grammar of the whole reply, text, reasoning and
/// calls, from [`stencil_tools::ToolCaller::format_grammar`] once the prompt is rendered).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// The OpenAI tool list (possibly empty).
    pub tools: Value,
    /// `tool_choice`.
    pub choice: ToolChoice,
    /// `parallel_tool_calls` (OpenAI's default: true).
    pub parallel: bool,
    /// The tool-call format's name (`tool_format`, else the server's `--tool-format`);
    /// `None`: the one recognized from the chat template, else the envelope.
    pub format: Option<String>,
    /// Reasoning before the reply (`reasoning`); `None`: as the template and prompt say.
    pub reasoning: Option<ReasoningMode>,
    /// The most tokens the reasoning may take (`reasoning_budget`).
    pub reasoning_budget: Option<u32>,
}

impl ToolSpec {
    /// How the reply is decoded: any number of calls with `parallel` (up to
    /// [`CallOptions::max_parallel_calls`]), else one, each under its tool's schema;
    /// text beside them under `auto`; the reasoning within its budget.
    ///
    /// ```
    /// use stencil_server::constraint::ToolSpec;
    /// use stencil_tools::ToolChoice;
    /// let spec = ToolSpec { tools: serde_json::json!([]), choice: ToolChoice::Auto, parallel: false,
    ///                       format: None, reasoning: None, reasoning_budget: Some(64) };
    /// let options = spec.call_options();
    /// assert!(!options.parallel);
    /// assert_eq!(options.reasoning_budget, Some(64));
    /// ```
    pub fn call_options(&self) -> CallOptions {
        let empty = self.tools.as_array().map_or(true, Vec::is_empty);
        CallOptions {
            choice: if empty { ToolChoice::None } else { self.choice.clone() },
            parallel: self.parallel,
            reasoning: self.reasoning,
            reasoning_budget: self.reasoning_budget,
            ..CallOptions::default()
        }
    }

    /// The cache key of the caller: the format and the tools (each caller keeps its
    /// grammars per choice, parallel flag, reasoning and budget).
    fn key(&self) -> String {
        format!("tools\0{}\0{}", self.format.as_deref().unwrap_or(""), self.tools)
    }
}

/// A compiled constraint.
#[derive(Debug)]
pub struct Constraint {
    /// The grammar, compiled against the model's vocabulary (none for tools whose reply is
    /// free text: `tool_choice: none`, or no tools).
    pub grammar: Option<Arc<CompiledGrammar>>,
    /// The label in generation records.
    pub label: &'static str,
    /// For schemas: the document to validate outputs against, and the keywords the
    /// grammar leaves to that validation.
    pub schema: Option<(Value, Vec<Unenforced>)>,
    /// For tool calls: what renders the prompt and reads the reply back.
    pub tools: Option<Arc<ToolCaller>>,
    /// For a structural tag: the compiled tag (its reasoning budgets, counted by the
    /// decode loop).
    pub tag: Option<Arc<CompiledTag>>,
    /// For tool calls: the format compiled for this request, which reads the reply back
    /// (content, reasoning, calls) whole or streamed, from the grammar's own captures.
    pub format: Option<Arc<CompiledFormat>>,
}

impl Constraint {
    /// Where `text` fails the schema (empty when valid, or when there is no schema).
    pub fn validation_errors(&self, text: &str) -> Vec<String> {
        let Some((document, _)) = &self.schema else {
            return Vec::new();
        };
        let instance: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => return vec![format!("the output is not JSON: {e}")],
        };
        match stencil_schema::validate(document, &instance, &stencil_schema::Registry::new()) {
            Ok(()) => Vec::new(),
            Err(issues) => issues.iter().map(ToString::to_string).collect(),
        }
    }
}

/// Compiles `spec` against `vocab`: a 400 naming the field, and for a schema the keyword and
/// its JSON pointer, when it does not compile.
///
/// # Errors
///
/// [`ApiError`] with status 400 and code `invalid_schema`, `invalid_grammar`,
/// `invalid_regex` or `invalid_structural_tag`.
pub fn compile(spec: &ConstraintSpec, vocab: &Arc<Vocabulary>) -> Result<Option<Constraint>, ApiError> {
    let param = Some(spec.param());
    let mut tag = None;
    let (grammar, schema, code) = match spec {
        ConstraintSpec::None => return Ok(None),
        ConstraintSpec::JsonObject => {
            let document = serde_json::json!({"type": "object"});
            let compiled = stencil_schema::compile_schema(&document, &SchemaOptions::default())
                .map_err(|e| ApiError::internal(format!("json_object: {e}")))?;
            (compiled.grammar, Some((document, Vec::new())), "invalid_schema")
        }
        ConstraintSpec::Schema { schema, strict } => {
            let options = if *strict { SchemaOptions::default() } else { SchemaOptions::default().lenient() };
            let compiled = stencil_schema::compile_schema(schema, &options).map_err(|e| {
                let hint = if *strict {
                    "; with \"strict\": false such keywords are left to validation after generation"
                } else {
                    ""
                };
                ApiError::invalid(format!("invalid JSON schema: {e}{hint}"), param).with_code("invalid_schema")
            })?;
            (compiled.grammar, Some((schema.clone(), compiled.warnings)), "invalid_schema")
        }
        ConstraintSpec::Gbnf(text) => {
            let grammar = stencil_grammar::parse_gbnf(text).map_err(|e| {
                ApiError::invalid(format!("invalid GBNF grammar: {e}"), param).with_code("invalid_grammar")
            })?;
            (grammar, None, "invalid_grammar")
        }
        ConstraintSpec::Regex(pattern) => {
            let mut grammar = Grammar::new();
            grammar.add_rule("root", Expr::Regex(pattern.as_str().into()));
            (grammar, None, "invalid_regex")
        }
        ConstraintSpec::StructuralTag(definition) => {
            let options = stencil_structural::CompileOptions { vocab: Some(vocab.clone()), ..Default::default() };
            let compiled = stencil_structural::compile_json(definition, &options).map_err(|e| {
                ApiError::invalid(format!("invalid structural tag: {e}"), param).with_code("invalid_structural_tag")
            })?;
            let grammar = compiled.grammar.clone();
            tag = Some(Arc::new(compiled));
            (grammar, None, "invalid_structural_tag")
        }
    };
    let compiled = CompiledGrammar::new(&grammar, vocab.clone()).map_err(|e| {
        let what = match spec {
            ConstraintSpec::Regex(_) => "regular expression",
            ConstraintSpec::Gbnf(_) => "GBNF grammar",
            ConstraintSpec::StructuralTag(_) => "structural tag",
            _ => "JSON schema",
        };
        ApiError::invalid(format!("the {what} cannot be compiled: {e}"), param).with_code(code)
    })?;
    Ok(Some(Constraint { grammar: Some(compiled), label: spec.label(), schema, tools: None, tag, format: None }))
}

/// The tool caller for `spec`: its tools, its format (the one asked for, else recognized
/// from the chat template, else the envelope) and the prompt style. The reply's grammar
/// depends on the rendered prompt (whether the template opened the reasoning): see
/// [`crate::request::build`].
///
/// # Errors
///
/// A 400 for a tool list that is not OpenAI's shape or whose parameter schemas do not
/// compile (param `tools`), an unknown format (param `tool_format`), or a tool name the
/// format cannot carry (param `tools`).
pub fn compile_tools(spec: &ToolSpec, model: &stencil_runtime::Model) -> Result<Constraint, ApiError> {
    let set = ToolSet::from_openai_value(&spec.tools)
        .map_err(|e| ApiError::invalid(format!("invalid tools: {e}"), Some("tools")).with_code("invalid_tools"))?;
    let mut caller = ToolCaller::new(model, set);
    if let Some(name) = &spec.format {
        let format: ToolFormat =
            name.parse().map_err(|e: FormatError| ApiError::invalid(e.to_string(), Some("tool_format")))?;
        caller = caller
            .with_format(format)
            .map_err(|e| ApiError::invalid(e.to_string(), Some("tools")).with_code("invalid_tools"))?;
    }
    Ok(Constraint {
        grammar: None,
        label: "tools",
        schema: None,
        tools: Some(Arc::new(caller)),
        tag: None,
        format: None,
    })
}

/// The constraint of one reply with tools: `caller`'s format compiled for `options` and the
/// rendered `prompt` (cached in the caller).
///
/// # Errors
///
/// A 400 for a `tool_choice` the tools cannot meet (param `tool_choice`) or a format that
/// cannot be compiled for them (param `tools`).
pub fn tool_reply(caller: &Arc<ToolCaller>, options: &CallOptions, prompt: &str) -> Result<Constraint, ApiError> {
    let compiled = caller.format_grammar(options, prompt).map_err(|e| match e {
        ToolError::Format(FormatError::UnknownTool(_) | FormatError::NoTools(_))
        | ToolError::UnknownTool(_)
        | ToolError::NoTools(_) => ApiError::invalid(e.to_string(), Some("tool_choice")),
        other => ApiError::invalid(other.to_string(), Some("tools")).with_code("invalid_tools"),
    })?;
    Ok(Constraint {
        grammar: Some(compiled.grammar.clone()),
        label: "tools",
        schema: None,
        tools: Some(caller.clone()),
        tag: Some(compiled.format.compiled_tag().clone()),
        format: Some(compiled.format),
    })
}

/// Compiled constraints by content: a repeated schema, grammar or regex is compiled once.
/// Bounded by entry count and by the bytes of the keys; the oldest entry goes first.
#[derive(Debug)]
pub struct GrammarCache {
    inner: Mutex<CacheInner>,
    max_entries: usize,
    max_key_bytes: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Debug, Default)]
struct CacheInner {
    map: HashMap<String, Arc<Constraint>>,
    order: VecDeque<String>,
    key_bytes: usize,
}

impl GrammarCache {
    /// A cache of at most `max_entries` constraints whose sources total at most
    /// `max_key_bytes`.
    pub fn new(max_entries: usize, max_key_bytes: usize) -> Self {
        GrammarCache {
            inner: Mutex::new(CacheInner::default()),
            max_entries,
            max_key_bytes,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The compiled `spec`, from the cache or compiled now (and kept). A compile error is
    /// not cached.
    ///
    /// # Errors
    ///
    /// As [`compile`].
    pub fn get_or_compile(
        &self,
        spec: &ConstraintSpec,
        vocab: &Arc<Vocabulary>,
    ) -> Result<Option<Arc<Constraint>>, ApiError> {
        let Some(key) = spec.key() else {
            return Ok(None);
        };
        self.get_or_build(key, || Ok(compile(spec, vocab)?.expect("a constraint"))).map(Some)
    }

    /// The compiled tools of `spec` (see [`compile_tools`]), from the cache or compiled now.
    ///
    /// # Errors
    ///
    /// As [`compile_tools`].
    pub fn get_or_compile_tools(
        &self,
        spec: &ToolSpec,
        model: &stencil_runtime::Model,
    ) -> Result<Arc<Constraint>, ApiError> {
        self.get_or_build(spec.key(), || compile_tools(spec, model))
    }

    /// The entry under `key`, or `build`'s result, kept (errors are not kept).
    fn get_or_build(
        &self,
        key: String,
        build: impl FnOnce() -> Result<Constraint, ApiError>,
    ) -> Result<Arc<Constraint>, ApiError> {
        if let Some(hit) = self.lock().map.get(&key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(hit.clone());
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let compiled = Arc::new(build()?);
        let mut inner = self.lock();
        if key.len() <= self.max_key_bytes && !inner.map.contains_key(&key) {
            inner.key_bytes += key.len();
            inner.order.push_back(key.clone());
            inner.map.insert(key, compiled.clone());
            while inner.map.len() > self.max_entries || inner.key_bytes > self.max_key_bytes {
                let Some(old) = inner.order.pop_front() else { break };
                inner.key_bytes -= old.len();
                inner.map.remove(&old);
            }
        }
        Ok(compiled)
    }

    /// Lookups answered from the cache.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Lookups that compiled.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// No entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        // A panic while holding the lock cannot leave the map inconsistent (each update is
        // a few plain operations), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 256 single bytes and an end-of-sequence token.
    fn vocab() -> Arc<Vocabulary> {
        let mut tokens: Vec<_> = (0..=255u8).map(|b| (vec![b], stencil_mask::TokenKind::Normal)).collect();
        tokens.push((b"</s>".to_vec(), stencil_mask::TokenKind::Control));
        Arc::new(Vocabulary::new(tokens, vec![256]).unwrap())
    }

    #[test]
    fn schema_errors_name_keyword_and_pointer() {
        let spec = ConstraintSpec::Schema {
            schema: serde_json::json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(x)\\1"}}}),
            strict: true,
        };
        let e = compile(&spec, &vocab()).unwrap_err();
        assert_eq!(e.status.as_u16(), 400);
        assert_eq!(e.param.as_deref(), Some("response_format.json_schema.schema"));
        assert_eq!(e.code.as_deref(), Some("invalid_schema"));
        assert!(e.message.contains("/properties/a"), "{}", e.message);
    }

    #[test]
    fn gbnf_and_regex_errors_are_located() {
        let e = compile(&ConstraintSpec::Gbnf("root ::= (\"a\"".into()), &vocab()).unwrap_err();
        assert_eq!((e.param.as_deref(), e.code.as_deref()), (Some("grammar"), Some("invalid_grammar")));
        assert!(e.message.contains("line 1"), "{}", e.message);
        let e = compile(&ConstraintSpec::Regex("a(".into()), &vocab()).unwrap_err();
        assert_eq!((e.param.as_deref(), e.code.as_deref()), (Some("regex"), Some("invalid_regex")));
    }

    #[test]
    fn the_cache_compiles_once() {
        let cache = GrammarCache::new(2, 1 << 20);
        let spec = ConstraintSpec::Regex("[ab]{2}".into());
        let a = cache.get_or_compile(&spec, &vocab()).unwrap().unwrap();
        let b = cache.get_or_compile(&spec, &vocab()).unwrap().unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!((cache.hits(), cache.misses()), (1, 1));
        for r in ["c", "d", "e"] {
            cache.get_or_compile(&ConstraintSpec::Regex(r.into()), &vocab()).unwrap();
        }
        assert_eq!(cache.len(), 2);
        assert!(cache.get_or_compile(&ConstraintSpec::None, &vocab()).unwrap().is_none());
    }

    #[test]
    fn lenient_schemas_are_validated_after_the_fact() {
        let schema = serde_json::json!({"type": "array", "items": {"type": "integer"}, "uniqueItems": true});
        let strict = compile(&ConstraintSpec::Schema { schema: schema.clone(), strict: true }, &vocab()).unwrap_err();
        assert!(
            strict.message.contains("uniqueItems") && strict.message.contains("\"strict\": false"),
            "{}",
            strict.message
        );
        let c = compile(&ConstraintSpec::Schema { schema, strict: false }, &vocab()).unwrap().unwrap();
        assert!(!c.schema.as_ref().unwrap().1.is_empty());
        assert!(c.validation_errors("[1, 2]").is_empty());
        assert!(!c.validation_errors("[1, 1]").is_empty());
        assert!(!c.validation_errors("[1,").is_empty());
    }
}
