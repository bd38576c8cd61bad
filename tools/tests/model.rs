//! Tool calling with the real model (SmolLM2-135M-Instruct, fetched by
//! `scripts/fetch-models.sh`; a missing model fails with that instruction). llama.cpp runs
//! on one thread, decoding is greedy.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use stencil_runtime::sampling::SamplingParams;
use stencil_runtime::{ChatMessage, Model, Session};
use stencil_schema::SchemaOptions;
use stencil_test_support::models::smollm2;
use stencil_tools::{
    CallError, CallOptions, PromptStyle, Strategy, Tool, ToolCaller, ToolChoice, ToolDefinition, ToolError, ToolSet,
};

fn session(model: &Model) -> Session<'_> {
    stencil_test_support::models::session(model, 4096)
}

/// The text of `fixtures/tools/<rel>`.
fn fixture(rel: &str) -> String {
    stencil_test_support::fixtures::read(&format!("tools/{rel}"))
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

/// Speculation (prompt lookup) applies to every generation of a reply: greedy, the calls
/// are the calls without it, and the arguments copied from the prompt are drafted.
#[test]
fn prompt_lookup_keeps_the_calls_and_drafts_their_arguments() {
    let model = smollm2();
    let caller = ToolCaller::new(model, fixture_tools());
    let plain = options(ToolChoice::Required, Strategy::MultiStage);
    let fast = CallOptions { speculation: Some(stencil_runtime::Speculation::prompt_lookup()), ..plain.clone() };
    let (mut drafted, mut accepted) = (0, 0);
    for (prompt, _) in fixture_prompts().iter().step_by(4) {
        // Fresh sessions: a prompt evaluated from a cached prefix rounds otherwise than one
        // evaluated whole, which alone can flip a near-tie.
        let a = caller.call(&mut session(model), &user(prompt), &plain).unwrap_or_else(|e| panic!("{prompt}: {e}"));
        let b = caller.call(&mut session(model), &user(prompt), &fast).unwrap_or_else(|e| panic!("{prompt}: {e}"));
        assert_eq!(b.text, a.text, "{prompt}");
        assert_eq!(b.calls, a.calls, "{prompt}");
        assert!(a.records.iter().all(|r| r.speculation.is_none()));
        for stats in b.records.iter().map(|r| r.speculation.expect("every generation speculates")) {
            (drafted, accepted) = (drafted + stats.drafted, accepted + stats.accepted);
        }
    }
    assert!(accepted > 0 && accepted <= drafted, "drafted {drafted}, accepted {accepted}");
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

/// The tools of `namespaced.json`: names with `.`, `/`, `:`, quotes and a backslash, one
/// a prefix of another.
fn namespaced_tools() -> ToolSet {
    ToolSet::from_openai_json(&fixture("namespaced.json")).unwrap()
}

/// A request per namespaced tool (the tool it is about, for the named choice).
const NAMESPACED_PROMPTS: [(&str, &str); 7] = [
    ("Open an issue in rust-lang/rust titled \"Crash on startup\".", "github.create_issue"),
    ("Show me the contents of /etc/hosts.", "fs/read_file"),
    ("What's the weather like in Paris right now?", "mcp:weather.get"),
    ("Search the web for Rust tutorials.", "search.web"),
    ("Find news articles about the Olympics from the last 3 days.", "search.web.news"),
    ("Look up the value of the key user_42 in the store.", "kv[\"get\"]"),
    ("What time is it?", "tools\\clock.now"),
];

/// What a constrained reply must hold: each call names a tool of the set exactly (after
/// JSON unescaping), its arguments validate against that tool's schema (checked here,
/// independently of the caller), the reply text writes each name JSON-escaped, and reads
/// back as the same calls.
fn assert_exact_valid_calls(tools: &ToolSet, caller: &ToolCaller, turn: &stencil_tools::ToolTurn, what: &str) {
    assert!(turn.content.is_none(), "{what}: {}", turn.text);
    for call in &turn.calls {
        let def = tools.get(&call.name).unwrap_or_else(|| panic!("{what}: unknown tool {:?}", call.name));
        assert_eq!(def.name, call.name);
        stencil_schema::validate(&def.parameters, &call.arguments, &Default::default())
            .unwrap_or_else(|issues| panic!("{what}: {:?} {} {issues:?}", call.name, call.arguments));
        let written = format!("{{\"name\": {}, \"arguments\": ", Value::String(call.name.clone()));
        assert!(turn.text.contains(&written), "{what}: {written} not in {}", turn.text);
    }
    assert_eq!(
        caller.envelope().parse(&turn.text).unwrap(),
        stencil_tools::Reply::Calls(turn.calls.clone()),
        "{what}: {}",
        turn.text
    );
}

/// Dotted, slashed, namespaced and escaped names, multi-stage and single grammar, every
/// tool choice (`required`, each tool by name, `auto`) and parallel calls: each call names
/// a tool exactly (after JSON unescaping) and validates, and the reply writes the name
/// escaped.
#[test]
fn namespaced_names_decode_and_validate_with_the_constrained_strategies() {
    let model = smollm2();
    let tools = namespaced_tools();
    assert_eq!(tools.len(), 7);
    assert_eq!(tools.openai_incompatible_names().len(), 7, "none is an OpenAI name");
    let caller = ToolCaller::new(model, tools.clone());
    let mut session = session(model);
    let prompt = caller.render(model, &user("Hi"), &CallOptions::default()).unwrap();
    assert!(prompt.contains(r#"{"name": "kv[\"get\"]", "description": "#), "{prompt}");
    assert!(prompt.contains(r#"{"name": "tools\\clock.now", "description": "#), "{prompt}");
    let mut named_right_total = 0;
    for strategy in [Strategy::MultiStage, Strategy::SingleGrammar] {
        let mut named_right = 0;
        for (text, expected) in NAMESPACED_PROMPTS {
            let what = format!("{strategy}, {text:?}");
            // required: one call of some tool of the set.
            let turn = caller
                .call(&mut session, &user(text), &options(ToolChoice::Required, strategy))
                .unwrap_or_else(|e| panic!("{what}, required: {e}"));
            assert_eq!(turn.calls.len(), 1, "{what}, required: {}", turn.text);
            assert_exact_valid_calls(&tools, &caller, &turn, &format!("{what}, required"));
            named_right += usize::from(turn.calls[0].name == expected);

            // named: that tool exactly, even `search.web` whose name is a prefix of another's.
            let turn = caller
                .call(&mut session, &user(text), &options(ToolChoice::Named(expected.into()), strategy))
                .unwrap_or_else(|e| panic!("{what}, named: {e}"));
            assert_eq!(turn.calls.len(), 1, "{what}, named: {}", turn.text);
            assert_eq!(turn.calls[0].name, expected, "{what}, named: {}", turn.text);
            assert_exact_valid_calls(&tools, &caller, &turn, &format!("{what}, named"));

            // auto: a call or text; calls as above, text not a call.
            let turn = caller
                .call(&mut session, &user(text), &short(options(ToolChoice::Auto, strategy)))
                .unwrap_or_else(|e| panic!("{what}, auto: {e}"));
            if turn.calls.is_empty() {
                let content = turn.content.as_deref().expect("text when no call");
                assert!(!content.trim_start().starts_with("<tool_call>"), "{what}, auto: {content}");
            } else {
                assert_eq!(turn.calls.len(), 1, "{what}, auto: {}", turn.text);
                assert_exact_valid_calls(&tools, &caller, &turn, &format!("{what}, auto"));
            }
        }
        eprintln!("{strategy}: {named_right}/7 required calls named the expected tool");
        named_right_total += named_right;

        // Parallel calls: the next-call stage decides between names too.
        let mut parallel = options(ToolChoice::Required, strategy);
        parallel.parallel = true;
        parallel.max_parallel_calls = 3;
        let turn = caller.call(&mut session, &user("Show me /etc/hosts and /etc/passwd."), &parallel).unwrap();
        assert!((1..=3).contains(&turn.calls.len()), "{strategy}: {}", turn.text);
        assert_exact_valid_calls(&tools, &caller, &turn, &format!("{strategy}, parallel"));
    }

    // Not a property of the method but of the model (SmolLM2-135M picks 5 of 14 here,
    // chance is 2): a floor that catches names the model cannot read at all.
    assert!(named_right_total >= 3, "only {named_right_total}/14 required calls named the expected tool");
}

/// Two tools, one name a prefix of the other: stage 1 (and the single grammar) decide
/// `search.web` by its closing quote and `search.web.news` by what follows the prefix; the
/// arguments then follow the chosen tool's schema (`days` is required by one only).
#[test]
fn a_name_that_is_a_prefix_of_another_decodes_exactly() {
    let model = smollm2();
    let tools = namespaced_tools();
    let mut session = session(model);
    let search = ToolSet::from_openai_value(&Value::Array(
        tools
            .to_openai_json()
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["function"]["name"].as_str().unwrap().starts_with("search."))
            .cloned()
            .collect(),
    ))
    .unwrap();
    assert_eq!(search.names().collect::<Vec<_>>(), ["search.web", "search.web.news"]);
    let search_caller = ToolCaller::new(model, search.clone());
    let mut chosen = std::collections::BTreeSet::new();
    for strategy in [Strategy::MultiStage, Strategy::SingleGrammar] {
        for (text, _) in &NAMESPACED_PROMPTS[3..5] {
            let what = format!("{strategy}, search, {text:?}");
            let turn = search_caller.call(&mut session, &user(text), &options(ToolChoice::Required, strategy)).unwrap();
            assert_eq!(turn.calls.len(), 1, "{what}: {}", turn.text);
            assert_exact_valid_calls(&search, &search_caller, &turn, &what);
            chosen.insert(turn.calls[0].name.clone());
        }
    }
    // After an exchange that shows a call of one of the two, the model calls that one again:
    // both sides of the prefix are then decided by stage 1 (and by the single grammar).
    for strategy in [Strategy::MultiStage, Strategy::SingleGrammar] {
        for (name, args) in [
            ("search.web", serde_json::json!({"query": "Python tutorials"})),
            ("search.web.news", serde_json::json!({"query": "elections", "days": 7})),
        ] {
            let what = format!("{strategy}, after a call of {name}");
            let conversation = [
                ChatMessage::user("Search for Python things."),
                ChatMessage::assistant(search_caller.envelope().write(&[stencil_tools::ToolCall::new(name, args)])),
                ChatMessage::user("Now search for Rust things."),
            ];
            let turn = search_caller
                .call(&mut session, &conversation, &options(ToolChoice::Required, strategy))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(turn.calls.len(), 1, "{what}: {}", turn.text);
            assert_exact_valid_calls(&search, &search_caller, &turn, &what);
            chosen.insert(turn.calls[0].name.clone());
        }
    }
    // Of the model (greedy SmolLM2-135M), not the method, but what makes this test decide
    // both sides of the prefix for real.
    assert_eq!(chosen.len(), 2, "only {chosen:?} were chosen");
    // Named, each one is written (multi-stage: not decoded, nothing to choose) and its
    // arguments decoded under its own schema.
    for strategy in [Strategy::MultiStage, Strategy::SingleGrammar] {
        for name in ["search.web", "search.web.news"] {
            let what = format!("{strategy}, {name}");
            let turn = search_caller
                .call(&mut session, &user("Search for Rust news."), &options(ToolChoice::Named(name.into()), strategy))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(turn.calls.len(), 1, "{what}: {}", turn.text);
            assert_eq!(turn.calls[0].name, name, "{what}: {}", turn.text);
            assert_exact_valid_calls(&search, &search_caller, &turn, &what);
        }
    }
}

/// Unconstrained decoding with the namespaced tools, every tool choice: whatever the model
/// writes is parsed (names JSON-unescaped) and checked against the set exactly; a call is
/// never accepted with a name outside it. A first exchange that shows a call of the tool
/// (as `Envelope::write` writes it, the name escaped) gets the small model to write calls
/// at all.
#[test]
fn namespaced_names_are_read_and_compared_exactly_when_unconstrained() {
    let model = smollm2();
    let tools = namespaced_tools();
    let caller = ToolCaller::new(model, tools.clone());
    let mut session = session(model);
    let examples: [(&str, serde_json::Value, &str); 7] = [
        (
            "Open an issue in rust-lang/cargo titled \"Slow build\".",
            serde_json::json!({"repo": "rust-lang/cargo", "title": "Slow build"}),
            "Now open one in rust-lang/rust titled \"Crash on startup\".",
        ),
        ("Show me the contents of /etc/passwd.", serde_json::json!({"path": "/etc/passwd"}), "Now show me /etc/hosts."),
        ("What's the weather like in London?", serde_json::json!({"city": "London"}), "And in Paris?"),
        (
            "Search the web for Python tutorials.",
            serde_json::json!({"query": "Python tutorials"}),
            "Now search the web for Rust tutorials.",
        ),
        (
            "Find news about the elections from the last 7 days.",
            serde_json::json!({"query": "elections", "days": 7}),
            "Now news about the Olympics from the last 3 days.",
        ),
        ("Look up the key user_7 in the store.", serde_json::json!({"key": "user_7"}), "Now look up the key user_42."),
        ("What time is it?", serde_json::json!({}), "And now?"),
    ];
    let mut unconstrained_calls = 0;
    for ((first, args, second), (_, expected)) in examples.iter().zip(NAMESPACED_PROMPTS) {
        let shown = stencil_tools::ToolCall::new(expected, args.clone());
        tools.check(&shown).unwrap();
        let conversation = vec![
            ChatMessage::user(*first),
            ChatMessage::assistant(caller.envelope().write(std::slice::from_ref(&shown))),
            ChatMessage::user(*second),
        ];
        for choice in [ToolChoice::Required, ToolChoice::Named(expected.into()), ToolChoice::Auto] {
            let what = format!("unconstrained, {choice}, {second:?}");
            match caller.call(&mut session, &conversation, &short(options(choice.clone(), Strategy::Unconstrained))) {
                Ok(turn) => {
                    if turn.calls.is_empty() {
                        assert_eq!(choice, ToolChoice::Auto, "{what}: text for a required call: {}", turn.text);
                        assert!(turn.content.is_some());
                        continue;
                    }
                    unconstrained_calls += turn.calls.len();
                    assert_exact_valid_calls(&tools, &caller, &turn, &what);
                    if let ToolChoice::Named(name) = &choice {
                        assert!(turn.calls.iter().all(|c| c.name == *name), "{what}: {}", turn.text);
                    }
                }
                Err(ToolError::InvalidCall { error, text: reply, .. }) => {
                    // A name is compared exactly: `search.web.news.Olympics` is not `search.web.news`.
                    if let CallError::UnknownTool { name, known } = &error {
                        assert!(tools.get(name).is_none() && !known.contains(name), "{what}: {error}");
                        assert_eq!(known.len(), tools.len());
                    }
                    // If the reply reads as calls, the error must be about the set or the choice.
                    if let Ok(stencil_tools::Reply::Calls(calls)) = caller.envelope().parse(&reply) {
                        let checked: Result<(), CallError> = calls.iter().try_for_each(|c| tools.check(c));
                        assert!(
                            checked.is_err()
                                || matches!(
                                    error,
                                    CallError::NotAllowed { .. }
                                        | CallError::TooManyCalls { .. }
                                        | CallError::Truncated(_)
                                ),
                            "{what}: {error} for {reply}"
                        );
                    }
                    assert!(!error.feedback().is_empty());
                }
                Err(e) => panic!("{what}: {e}"),
            }
        }
    }
    // With the example exchange the model writes calls, escaped names included (14 of the
    // 21 replies are valid calls; a floor, as above).
    eprintln!("unconstrained: {unconstrained_calls} valid calls of namespaced tools");
    assert!(unconstrained_calls >= 7, "only {unconstrained_calls}/21 unconstrained replies were valid calls");
}
