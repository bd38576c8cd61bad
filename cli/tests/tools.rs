//! `stencil generate --tools` end to end with the real default model (SmolLM2-135M-Instruct,
//! from the model cache; `scripts/fetch-models.sh` fetches it). llama.cpp runs on one thread.

mod common;

use common::{code, fixtures, model, run, scratch, stderr, stdout};
use serde_json::Value;

fn generate_tools(extra: &[&str]) -> std::process::Output {
    generate_with("tools/tools.json", extra)
}

/// `generate --tools FIXTURE` (a path under `fixtures/`) with the default model.
fn generate_with(fixture: &str, extra: &[&str]) -> std::process::Output {
    let model = model();
    let tools = fixtures().join(fixture);
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

/// `--speculate prompt-lookup` speculates in every generation of the reply (the log's
/// records count the drafts), and the call is the call without it.
#[test]
fn prompt_lookup_speculates_in_tool_calls() {
    let prompt = ["--prompt", "Convert 100 US dollars to euros.", "--tool-choice", "required"];
    let plain = generate_tools(&prompt);
    assert_eq!(code(&plain), 0, "{}", stderr(&plain));
    let log = scratch("tools-speculation.jsonl", b"");
    let mut args = prompt.to_vec();
    args.extend_from_slice(&["--speculate", "prompt-lookup", "--log", log.to_str().unwrap()]);
    let fast = generate_tools(&args);
    assert_eq!(code(&fast), 0, "{}", stderr(&fast));
    assert_eq!(lines(&fast), lines(&plain));
    let records: Vec<Value> =
        std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(!records.is_empty());
    for record in &records {
        assert!(record["speculation"]["drafted"].is_u64(), "{record}");
    }
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

/// Names that OpenAI's API would refuse (`search.web`, `fs/read_file`, `kv["get"]`, ...) are
/// accepted, chosen by name, decoded exactly, and printed as they are; no warning about
/// OpenAI compatibility on the command line.
#[test]
fn namespaced_tool_names_are_accepted_and_called_exactly() {
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("tools/namespaced.json")).unwrap()).unwrap();
    let names: Vec<&str> = file.as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    for (prompt, choice, strategy) in [
        ("Search the web for Rust tutorials.", "search.web", "multi-stage"),
        ("Look up the key user_42 in the store.", "kv[\"get\"]", "single-grammar"),
        ("What time is it?", "tools\\clock.now", "multi-stage"),
        ("Show me the contents of /etc/hosts.", "required", "single-grammar"),
    ] {
        let what = format!("{choice} ({strategy})");
        let out = generate_with(
            "tools/namespaced.json",
            &["--prompt", prompt, "--tool-choice", choice, "--tool-strategy", strategy],
        );
        assert_eq!(code(&out), 0, "{what}: {}", stderr(&out));
        assert!(!stderr(&out).to_lowercase().contains("openai"), "{what}: {}", stderr(&out));
        let calls = lines(&out);
        assert_eq!(calls.len(), 1, "{what}: {}", stdout(&out));
        let name = calls[0]["name"].as_str().unwrap();
        if choice == "required" {
            assert!(names.contains(&name), "{what}: {name:?}");
        } else {
            assert_eq!(name, choice, "{what}");
        }
        let def = file.as_array().unwrap().iter().find(|t| t["function"]["name"] == name).unwrap();
        assert!(
            stencil_schema::validate(&def["function"]["parameters"], &calls[0]["arguments"], &Default::default())
                .is_ok(),
            "{what}: {}",
            stdout(&out)
        );
    }
}

#[test]
fn bad_tool_files_and_choices_are_usage_errors() {
    let model = model();
    // Names are any printable text: a control character or the empty name is refused.
    for (file, json, needle) in [
        (
            "bad-tools.json",
            &br#"[{"type": "function", "function": {"name": "has\ttab"}}]"#[..],
            r#"tool name "has\ttab" is invalid: names are printable characters"#,
        ),
        (
            "empty-name.json",
            br#"[{"type": "function", "function": {"name": ""}}]"#,
            r#"tool name "" is invalid: names must not be empty"#,
        ),
    ] {
        let bad = scratch(file, json);
        let out =
            run(["generate", "--model", model.to_str().unwrap(), "--tools", bad.to_str().unwrap(), "--prompt", "x"]);
        assert_eq!(code(&out), 2, "{}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{}", stderr(&out));
    }

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
