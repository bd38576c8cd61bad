//! Tool calling with the real model (SmolLM2-135M-Instruct, fetched by
//! `scripts/fetch-models.sh`; a missing model fails with that instruction). llama.cpp runs
//! on one thread, decoding is greedy.

use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use stencil_mask::vocab::fixtures::{model_path, SMOLLM2_MODEL_FILE};
use stencil_runtime::sampling::SamplingParams;
use stencil_runtime::{ChatMessage, Model, ModelOptions, Session, SessionOptions};
use stencil_schema::SchemaOptions;
use stencil_tools::{
    CallError, CallOptions, PromptStyle, Strategy, Tool, ToolCaller, ToolChoice, ToolDefinition, ToolError, ToolSet,
};

fn smollm2() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| Model::load(model_path(SMOLLM2_MODEL_FILE), &ModelOptions::default()).unwrap())
}

fn session(model: &Model) -> Session<'_> {
    model.session(&SessionOptions { n_ctx: 4096, n_threads: 1, ..Default::default() }).unwrap()
}

fn fixture(rel: &str) -> String {
    let path = format!("{}/../fixtures/tools/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn fixture_tools() -> ToolSet {
    ToolSet::from_openai_json(&fixture("tools.json")).unwrap()
}

/// `(prompt, expected tool)` from `eval.jsonl`.
fn fixture_prompts() -> Vec<(String, String)> {
    fixture("eval.jsonl")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["prompt"].as_str().unwrap().to_string(), v["tool"].as_str().unwrap().to_string())
        })
        .collect()
}

/// Greedy, at most 512 tokens per generation: enough for any call of the fixture tools, whose
/// strings are all bounded.
fn options(choice: ToolChoice, strategy: Strategy) -> CallOptions {
    CallOptions {
        choice,
        strategy,
        params: SamplingParams { max_tokens: 512, ..SamplingParams::greedy() },
        ..CallOptions::default()
    }
}

/// At most 96 tokens: for replies that may be free text.
fn short(mut options: CallOptions) -> CallOptions {
    options.params.max_tokens = 96;
    options
}

fn user(text: &str) -> Vec<ChatMessage> {
    vec![ChatMessage::user(text)]
}

#[test]
fn smollm2_template_has_no_tool_support_so_the_fallback_is_used() {
    let model = smollm2();
    assert_eq!(PromptStyle::detect(model), PromptStyle::Fallback);
    let caller = ToolCaller::new(model, fixture_tools());
    let prompt = caller.render(model, &user("Hi"), &CallOptions::default()).unwrap();
    assert!(prompt.starts_with("<|im_start|>system\n# Tools\n"), "{prompt}");
    assert!(prompt.contains("{\"name\": \"convert_currency\", \"description\": "), "{prompt}");
    assert!(prompt.ends_with("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"), "{prompt}");
    // `none` does not show the tools.
    let none = caller.render(model, &user("Hi"), &options(ToolChoice::None, Strategy::MultiStage)).unwrap();
    assert!(!none.contains("# Tools"), "{none}");
}

/// Every fixture prompt, multi-stage and `required`: each reply is a call of a real tool
/// whose arguments validate (checked again here, independently of the caller).
#[test]
fn every_required_call_names_a_real_tool_and_validates() {
    let model = smollm2();
    let tools = fixture_tools();
    let caller = ToolCaller::new(model, tools.clone());
    let mut session = session(model);
    let mut correct = 0;
    let prompts = fixture_prompts();
    for (prompt, expected) in &prompts {
        let turn = caller
            .call(&mut session, &user(prompt), &options(ToolChoice::Required, Strategy::MultiStage))
            .unwrap_or_else(|e| panic!("{prompt}: {e}"));
        assert_eq!(turn.calls.len(), 1, "{prompt}: {}", turn.text);
        assert!(turn.content.is_none());
        let call = &turn.calls[0];
        let def = tools.get(&call.name).unwrap_or_else(|| panic!("{prompt}: unknown tool {}", call.name));
        stencil_schema::validate(&def.parameters, &call.arguments, &Default::default())
            .unwrap_or_else(|issues| panic!("{prompt}: {} {issues:?}", call.arguments));
        // The reply text is the envelope, and reads back as the same call.
        assert_eq!(caller.envelope().parse(&turn.text).unwrap(), stencil_tools::Reply::Calls(turn.calls.clone()));
        correct += usize::from(call.name == *expected);
    }
    // Not a property of the method but of the model: a floor that catches a broken prompt.
    assert!(correct * 2 >= prompts.len(), "only {correct}/{} calls named the expected tool", prompts.len());
}

#[test]
fn single_grammar_calls_validate_too() {
    let model = smollm2();
    let caller = ToolCaller::new(model, fixture_tools());
    let mut session = session(model);
    for (prompt, _) in fixture_prompts().iter().step_by(4) {
        let turn = caller
            .call(&mut session, &user(prompt), &options(ToolChoice::Required, Strategy::SingleGrammar))
            .unwrap_or_else(|e| panic!("{prompt}: {e}"));
        assert_eq!(turn.calls.len(), 1, "{prompt}: {}", turn.text);
        assert_eq!(turn.records.len(), 1, "one generation for the whole reply");
        caller.tools().check(&turn.calls[0]).unwrap();
    }
}

#[test]
fn tool_choice_modes_behave_as_documented() {
    let model = smollm2();
    let caller = ToolCaller::new(model, fixture_tools());
    let mut session = session(model);
    let prompt = user("What's the weather like in Paris right now?");
    for strategy in [Strategy::MultiStage, Strategy::SingleGrammar] {
        // none: plain text, never a call (cut short: the text itself does not matter).
        let turn = caller.call(&mut session, &prompt, &short(options(ToolChoice::None, strategy))).unwrap();
        assert!(turn.calls.is_empty(), "{strategy}: {}", turn.text);
        let content = turn.content.as_deref().unwrap();
        assert!(!content.trim_start().starts_with("<tool_call>"), "{strategy}: {content}");

        // required: a call.
        let turn = caller.call(&mut session, &prompt, &options(ToolChoice::Required, strategy)).unwrap();
        assert_eq!(turn.calls.len(), 1, "{strategy}: {}", turn.text);

        // named: that tool, even when the request is about something else.
        let named = ToolChoice::Named("convert_currency".into());
        let turn = caller.call(&mut session, &prompt, &options(named, strategy)).unwrap();
        assert_eq!(turn.calls.len(), 1, "{strategy}: {}", turn.text);
        assert_eq!(turn.calls[0].name, "convert_currency");
        caller.tools().check(&turn.calls[0]).unwrap();

        // auto: either, and whatever it is, valid.
        let turn = caller.call(&mut session, &prompt, &short(options(ToolChoice::Auto, strategy))).unwrap();
        assert_eq!(turn.calls.is_empty(), turn.content.is_some(), "{strategy}: {}", turn.text);
        for call in &turn.calls {
            caller.tools().check(call).unwrap();
        }
    }
    // Choices the set cannot meet are errors before any decoding.
    let unknown = caller.call(&mut session, &prompt, &options(ToolChoice::Named("nope".into()), Strategy::MultiStage));
    assert!(matches!(unknown, Err(ToolError::UnknownTool(n)) if n == "nope"));
    let empty = ToolCaller::new(model, ToolSet::new());
    let required = empty.call(&mut session, &prompt, &options(ToolChoice::Required, Strategy::MultiStage));
    assert!(matches!(required, Err(ToolError::NoTools(_))));
}

#[test]
fn parallel_calls_parse() {
    let model = smollm2();
    let caller = ToolCaller::new(model, fixture_tools());
    let mut session = session(model);
    let prompt = user("What is the weather in Paris, and what is the weather in London?");
    for strategy in [Strategy::MultiStage, Strategy::SingleGrammar] {
        let mut opts = options(ToolChoice::Required, strategy);
        opts.parallel = true;
        opts.max_parallel_calls = 3;
        let turn = caller.call(&mut session, &prompt, &opts).unwrap();
        assert!((1..=3).contains(&turn.calls.len()), "{strategy}: {}", turn.text);
        for call in &turn.calls {
            caller.tools().check(call).unwrap();
        }
        assert_eq!(caller.envelope().parse(&turn.text).unwrap(), stencil_tools::Reply::Calls(turn.calls.clone()));
    }
}

/// Typed results: the derived enum of the fixture-like tools.
mod typed {
    use super::*;

    /// Get the current weather in a city.
    #[derive(Tool, JsonSchema, Deserialize, Debug)]
    pub struct GetWeather {
        /// The city name, e.g. Paris.
        pub city: String,
        pub unit: Option<Unit>,
    }

    #[derive(JsonSchema, Deserialize, Debug, PartialEq)]
    #[serde(rename_all = "lowercase")]
    pub enum Unit {
        Celsius,
        Fahrenheit,
    }

    /// Convert an amount of money from one currency to another.
    #[derive(Tool, JsonSchema, Deserialize, Debug)]
    pub struct ConvertCurrency {
        pub amount: f64,
        /// ISO 4217 code, e.g. USD.
        pub from: String,
        /// ISO 4217 code, e.g. EUR.
        pub to: String,
    }

    #[derive(Tool, Debug)]
    pub enum Assistant {
        Weather(GetWeather),
        Convert(ConvertCurrency),
    }
}

#[test]
fn typed_results_deserialize() {
    use typed::*;
    let model = smollm2();
    let caller = ToolCaller::new(model, ToolSet::from_tools::<Assistant>().unwrap());
    let mut session = session(model);
    let turn = caller
        .call(
            &mut session,
            &user("Convert 100 US dollars to euros."),
            &options(ToolChoice::Required, Strategy::MultiStage),
        )
        .unwrap();
    let calls: Vec<Assistant> = turn.parse().unwrap();
    assert_eq!(calls.len(), 1);
    match &calls[0] {
        Assistant::Convert(c) => assert!(c.amount >= 0.0 && !c.from.is_empty() && !c.to.is_empty(), "{c:?}"),
        Assistant::Weather(w) => {
            assert!(!w.city.is_empty(), "{w:?}");
            assert!(matches!(w.unit, None | Some(Unit::Celsius | Unit::Fahrenheit)));
        }
    }
    // One struct alone is a set too.
    let turn = caller
        .call(
            &mut session,
            &user("Is it snowing in Oslo?"),
            &options(ToolChoice::Named("get_weather".into()), Strategy::SingleGrammar),
        )
        .unwrap();
    let weather: GetWeather = turn.calls[0].parse().unwrap();
    assert!(!weather.city.is_empty());
    // A call of the other tool does not parse as this one.
    assert!(matches!(turn.calls[0].parse::<ConvertCurrency>(), Err(CallError::UnknownTool { .. })));
}

/// A keyword the grammar leaves to validation (lenient mode): the post-hoc check catches
/// the call, and the retry feeds the error back to the model.
#[test]
fn invalid_calls_are_structured_errors_and_are_retried_with_feedback() {
    let model = smollm2();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"minutes": {"type": "integer", "not": {"minimum": 0}}},
        "required": ["minutes"],
        "additionalProperties": false
    });
    let mut tools = ToolSet::with_options(SchemaOptions::default().lenient());
    tools.add(ToolDefinition::new("set_timer", "Set a timer.", schema)).unwrap();
    assert!(!tools.entries()[0].warnings.is_empty(), "`not` is left to validation");
    let caller = ToolCaller::new(model, tools);
    let mut session = session(model);
    let prompt = user("Set a timer for 10 minutes.");

    let err = caller.call(&mut session, &prompt, &options(ToolChoice::Required, Strategy::MultiStage)).unwrap_err();
    let ToolError::InvalidCall { error, attempts, text, .. } = err else { panic!("{err}") };
    assert_eq!(attempts, 1, "no retry by default");
    let CallError::InvalidArguments { name, issues } = &error else { panic!("{error}") };
    assert_eq!(name, "set_timer");
    assert_eq!(issues[0].instance_pointer, "/minutes");
    assert!(error.feedback().contains("at /minutes"), "{}", error.feedback());
    assert!(text.starts_with("<tool_call>{\"name\": \"set_timer\""), "{text}");

    let mut retrying = options(ToolChoice::Required, Strategy::MultiStage);
    retrying.retries = 1;
    match caller.call(&mut session, &prompt, &retrying) {
        // The model may correct itself after the feedback...
        Ok(turn) => assert_eq!(turn.attempts, 2),
        // ... or fail again: either way it was asked twice.
        Err(ToolError::InvalidCall { attempts, records, .. }) => {
            assert_eq!(attempts, 2);
            assert!(records.len() >= 2);
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn unconstrained_replies_are_parsed_and_checked_never_coerced() {
    let model = smollm2();
    let caller = ToolCaller::new(model, fixture_tools());
    let mut session = session(model);
    for (prompt, _) in fixture_prompts().iter().step_by(5) {
        match caller.call(&mut session, &user(prompt), &short(options(ToolChoice::Required, Strategy::Unconstrained))) {
            Ok(turn) => {
                assert!(!turn.calls.is_empty());
                for call in &turn.calls {
                    caller.tools().check(call).unwrap();
                }
            }
            Err(ToolError::InvalidCall { error, .. }) => assert!(!error.feedback().is_empty()),
            Err(e) => panic!("{prompt}: {e}"),
        }
    }
}
