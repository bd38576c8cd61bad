//! `#[derive(Tool)]` end to end, without a model: names, descriptions, schemas (every derived
//! schema compiles in strict mode and for a real vocabulary), typed calls, no coercion.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use stencil_mask::CompiledGrammar;
use stencil_schema::{compile_schema, SchemaOptions};
use stencil_test_support::fixtures;
use stencil_tools::{CallError, Tool, ToolCall, ToolSet, Tools};

/// Look up the weather.
///
/// Returns the temperature and the sky.
#[derive(Tool, JsonSchema, Deserialize, Debug, PartialEq)]
struct GetWeather {
    /// The city, e.g. "Paris".
    city: String,
    /// Days ahead (0 = today).
    days: Option<u8>,
    unit: Unit,
}

#[derive(JsonSchema, Deserialize, Debug, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Unit {
    Celsius,
    Fahrenheit,
}

/// Search.
#[derive(Tool, JsonSchema, Deserialize, Debug, PartialEq)]
#[tool(name = "search")]
struct WebSearch {
    query: String,
    #[serde(default)]
    max_results: u32,
    filters: Vec<Filter>,
}

#[derive(JsonSchema, Deserialize, Debug, PartialEq)]
struct Filter {
    /// A site to restrict the search to.
    site: String,
    exclude: bool,
}

#[derive(Tool, JsonSchema, Deserialize, Debug, PartialEq)]
#[tool(description = "Do the maths.")]
struct Calculate {
    a: f64,
    b: i32,
    op: Op,
    tags: BTreeMap<String, i64>,
}

/// An operation, internally tagged.
#[derive(JsonSchema, Deserialize, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Op {
    Add,
    Scale { factor: f32 },
}

/// The current time.
#[derive(Tool, JsonSchema, Deserialize, Debug, PartialEq)]
struct Now {}

/// A recursive argument.
#[derive(Tool, JsonSchema, Deserialize, Debug, PartialEq)]
struct MakeTree {
    root: Node,
}

#[derive(JsonSchema, Deserialize, Debug, PartialEq)]
struct Node {
    label: String,
    children: Vec<Node>,
}

#[derive(Tool, Debug, PartialEq)]
enum Everything {
    Weather(GetWeather),
    Search(WebSearch),
    Calc(Calculate),
    Now(Now),
    Tree(MakeTree),
}

#[test]
fn names_and_descriptions() {
    assert_eq!(GetWeather::NAME, "get_weather");
    assert_eq!(GetWeather::DESCRIPTION, "Look up the weather.\n\nReturns the temperature and the sky.");
    assert_eq!(WebSearch::NAME, "search");
    assert_eq!(Calculate::DESCRIPTION, "Do the maths.");
    assert_eq!(MakeTree::NAME, "make_tree");
    let names: Vec<String> = Everything::definitions().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["get_weather", "search", "calculate", "now", "make_tree"]);
}

#[test]
fn field_docs_become_property_descriptions() {
    let schema = GetWeather::definition().parameters;
    assert_eq!(schema["properties"]["city"]["description"], "The city, e.g. \"Paris\".");
    assert_eq!(schema["properties"]["days"]["description"], "Days ahead (0 = today).");
    assert_eq!(schema["required"], json!(["city", "unit"]));
    assert_eq!(schema["properties"]["days"]["maximum"], 255);
    // The root's title and description are the tool's, not the schema's.
    assert!(schema.get("title").is_none() && schema.get("description").is_none());
}

#[test]
fn every_derived_schema_compiles_in_strict_mode_and_for_a_real_vocabulary() {
    let (vocab, _) = fixtures::smollm2();
    for def in Everything::definitions() {
        let compiled = compile_schema(&def.parameters, &SchemaOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}\n{:#}", def.name, def.parameters));
        assert!(compiled.warnings.is_empty(), "{}: {:?}", def.name, compiled.warnings);
        CompiledGrammar::new(&compiled.grammar, vocab.clone()).unwrap_or_else(|e| panic!("{}: {e}", def.name));
    }
    let set = ToolSet::from_tools::<Everything>().unwrap();
    assert_eq!(set.len(), 5);
}

#[test]
fn calls_deserialize_into_the_enum() {
    let call = ToolCall::new(
        "calculate",
        json!({"a": 1.5, "b": -2, "op": {"kind": "scale", "factor": 2.0}, "tags": {"x": 1}}),
    );
    let Everything::Calc(calc) = call.parse::<Everything>().unwrap() else { panic!() };
    assert_eq!(calc.op, Op::Scale { factor: 2.0 });
    assert_eq!(ToolCall::new("now", json!({})).parse::<Everything>().unwrap(), Everything::Now(Now {}));
    let tree = json!({"root": {"label": "a", "children": [{"label": "b", "children": []}]}});
    let Everything::Tree(t) = ToolCall::new("make_tree", tree).parse::<Everything>().unwrap() else { panic!() };
    assert_eq!(t.root.children[0].label, "b");
}

#[test]
fn nothing_is_coerced() {
    let cases = [
        // A string where a number goes.
        ToolCall::new("get_weather", json!({"city": "Oslo", "days": "2", "unit": "celsius"})),
        // Out of the Rust type's range (the schema says so: `u8` has maximum 255).
        ToolCall::new("get_weather", json!({"city": "Oslo", "days": 300, "unit": "celsius"})),
        // Not one of the enum's values.
        ToolCall::new("get_weather", json!({"city": "Oslo", "unit": "kelvin"})),
        // Unknown fields are refused (derived objects are closed), not ignored.
        ToolCall::new("get_weather", json!({"city": "Oslo", "unit": "celsius", "country": "NO"})),
        // A missing required field.
        ToolCall::new("search", json!({"filters": []})),
        // Arguments for a tool that takes none.
        ToolCall::new("now", json!({"x": 1})),
        // A fraction for an integer.
        ToolCall::new("calculate", json!({"a": 1, "b": 2.5, "op": {"kind": "add"}, "tags": {}})),
    ];
    for call in cases {
        match call.parse::<Everything>() {
            Err(CallError::InvalidArguments { issues, .. }) => assert!(!issues.is_empty()),
            other => panic!("{}: {other:?}", call.to_json()),
        }
    }
    // `#[serde(default)]` fields may be left out.
    let search = ToolCall::new("search", json!({"query": "rust", "filters": []})).parse::<WebSearch>().unwrap();
    assert_eq!(search.max_results, 0);
}

#[test]
fn unknown_names_are_errors_with_the_known_names() {
    let err = ToolCall::new("weather", json!({})).parse::<Everything>().unwrap_err();
    let CallError::UnknownTool { name, known } = &err else { panic!("{err}") };
    assert_eq!(name, "weather");
    assert_eq!(known.len(), 5);
    assert!(err.feedback().contains("\"get_weather\""), "{}", err.feedback());
}

#[test]
fn sets_mix_derived_and_json_tools_and_refuse_duplicates() {
    let mut set = ToolSet::from_tools::<GetWeather>().unwrap();
    set.add_tools::<WebSearch>().unwrap();
    let json_tools = ToolSet::from_openai_json(include_str!("../../fixtures/tools/tools.json")).unwrap();
    for entry in json_tools.entries() {
        if entry.definition.name != "get_weather" {
            set.add(entry.definition.clone()).unwrap();
        }
    }
    assert_eq!(
        set.names().collect::<Vec<_>>(),
        ["get_weather", "search", "web_search", "send_email", "convert_currency"]
    );
    assert!(matches!(set.add_tools::<GetWeather>(), Err(stencil_tools::ToolSetError::DuplicateName(_))));
    assert_eq!(set.len(), 5);
}

/// Read a file.
#[derive(Tool, JsonSchema, Deserialize, Debug, PartialEq)]
#[tool(name = "fs/read_file")]
struct ReadFile {
    path: String,
}

/// Look up a key.
#[derive(Tool, JsonSchema, Deserialize, Debug, PartialEq)]
#[tool(name = r#"kv["get"]"#)]
struct KvGet {
    key: String,
}

#[derive(Tool, Debug, PartialEq)]
enum Namespaced {
    Read(ReadFile),
    Get(KvGet),
}

#[test]
fn derived_tools_take_namespaced_and_escaped_names() {
    let set = ToolSet::from_tools::<Namespaced>().unwrap();
    assert_eq!(set.names().collect::<Vec<_>>(), ["fs/read_file", r#"kv["get"]"#]);
    assert_eq!(set.openai_incompatible_names().len(), 2);
    // A call read back from the envelope (the name JSON-escaped there) parses exactly.
    let env = stencil_tools::Envelope::fallback();
    let text = env.write(&[ToolCall::new(r#"kv["get"]"#, json!({"key": "k"}))]);
    assert!(text.contains(r#""name": "kv[\"get\"]""#), "{text}");
    let stencil_tools::Reply::Calls(calls) = env.parse(&text).unwrap() else { panic!("{text}") };
    assert_eq!(calls[0].parse::<Namespaced>().unwrap(), Namespaced::Get(KvGet { key: "k".into() }));
    let read = ToolCall::new("fs/read_file", json!({"path": "/etc/hosts"}));
    assert_eq!(read.parse::<Namespaced>().unwrap(), Namespaced::Read(ReadFile { path: "/etc/hosts".into() }));
    // Compared exactly: neither an unescaped spelling nor a near miss is the tool.
    for wrong in [r#"kv[\"get\"]"#, "fs/read_file ", "fs.read_file"] {
        let err = ToolCall::new(wrong, json!({"path": "x"})).parse::<Namespaced>().unwrap_err();
        assert!(matches!(err, CallError::UnknownTool { .. }), "{wrong}: {err}");
        assert!(set.check(&ToolCall::new(wrong, json!({"path": "x"}))).is_err(), "{wrong}");
    }
}
