//! `stencil generate --tools` end to end with the real default model (SmolLM2-135M-Instruct,
//! from the model cache; `scripts/fetch-models.sh` fetches it). llama.cpp runs on one thread.

mod common;

use common::{code, fixtures, run, scratch, stderr, stdout};
use serde_json::Value;

fn generate_tools(extra: &[&str]) -> std::process::Output {
    let model = stencil_mask::vocab::fixtures::model_path(stencil_mask::vocab::fixtures::SMOLLM2_MODEL_FILE);
    let tools = fixtures().join("tools/tools.json");
    let mut args = vec!["generate", "--model", model.to_str().unwrap(), "--threads", "1", "--quiet"];
    args.extend_from_slice(&["--tools", tools.to_str().unwrap()]);
    args.extend_from_slice(extra);
    if !extra.contains(&"--max-tokens") {
        // Enough for any call of the fixture tools (their strings are bounded).
        args.extend_from_slice(&["--max-tokens", "512"]);
    }
    run(args)
}

fn lines(out: &std::process::Output) -> Vec<Value> {
    stdout(out).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"))).collect()
}

#[test]
fn required_prints_one_valid_call_per_line() {
    let out = generate_tools(&["--prompt", "Convert 100 US dollars to euros.", "--tool-choice", "required"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let calls = lines(&out);
    assert_eq!(calls.len(), 1, "{}", stdout(&out));
    let tools: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("tools/tools.json")).unwrap()).unwrap();
    let name = calls[0]["name"].as_str().unwrap();
    let def = tools.as_array().unwrap().iter().find(|t| t["function"]["name"] == name).expect("a tool of the file");
    assert!(
        stencil_schema::validate(&def["function"]["parameters"], &calls[0]["arguments"], &Default::default()).is_ok()
    );
}

#[test]
fn named_tool_and_single_grammar() {
    let out = generate_tools(&[
        "--prompt",
        "Is it snowing in Oslo?",
        "--tool-choice",
        "get_weather",
        "--tool-strategy",
        "single-grammar",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let calls = lines(&out);
    assert_eq!(calls[0]["name"], "get_weather", "{}", stdout(&out));
}

#[test]
fn none_prints_the_text_reply() {
    let out = generate_tools(&["--prompt", "Say hello.", "--tool-choice", "none", "--max-tokens", "24"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let replies = lines(&out);
    assert_eq!(replies.len(), 1);
    assert!(replies[0]["content"].is_string(), "{}", stdout(&out));
}

#[test]
fn bad_tool_files_and_choices_are_usage_errors() {
    let bad = scratch("bad-tools.json", br#"[{"type": "function", "function": {"name": "has space"}}]"#);
    let model = stencil_mask::vocab::fixtures::model_path(stencil_mask::vocab::fixtures::SMOLLM2_MODEL_FILE);
    let out = run(["generate", "--model", model.to_str().unwrap(), "--tools", bad.to_str().unwrap(), "--prompt", "x"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("tool name \"has space\" is invalid"), "{}", stderr(&out));

    let out = generate_tools(&["--prompt", "x", "--tool-choice", "no_such_tool"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("\"no_such_tool\""), "{}", stderr(&out));

    let out = generate_tools(&["--prompt", "x", "--tool-strategy", "fast"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));

    // --tools excludes the other constraints; the tool flags need --tools.
    let out = generate_tools(&["--prompt", "x", "--regex", "a"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let out = run(["generate", "--prompt", "x", "--tool-choice", "auto"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
}
