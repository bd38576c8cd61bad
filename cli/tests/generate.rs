//! `stencil generate` end to end with the real default model (SmolLM2-135M-Instruct, from
//! the model cache; `scripts/fetch-models.sh` fetches it). llama.cpp runs on one thread.

mod common;

use common::{fixtures, generate, run, scratch};
use serde_json::Value;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn schema_generation_prints_valid_json_and_logs_a_record() {
    let schema = fixtures().join("schemas/person.json");
    let prompt = fixtures().join("prompts/person.txt");
    let log = scratch("runs.jsonl", b"");
    let args = ["--schema", schema.to_str().unwrap(), "--prompt-file", prompt.to_str().unwrap()];
    let out = generate(&[&args[..], &["--log", log.to_str().unwrap(), "--seed", "5"]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    let schema_doc: Value = serde_json::from_str(&std::fs::read_to_string(&schema).unwrap()).unwrap();
    assert!(stencil_schema::validate(&schema_doc, &json, &Default::default()).is_ok(), "{json}");
    assert!(text(&out.stderr).contains("valid: the output validates"), "{}", text(&out.stderr));

    // Streaming prints the same text; the log now holds two records.
    let streamed = generate(&[&args[..], &["--stream", "--log", log.to_str().unwrap()]].concat());
    assert!(streamed.status.success(), "{}", text(&streamed.stderr));
    assert_eq!(streamed.stdout, out.stdout, "greedy: the same output, streamed");
    let records: Vec<Value> =
        std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["seed"], 5);
    assert_eq!(records[0]["preset"], "extractor-greedy");
    assert_eq!(records[0]["constraint"], "json-schema");
    assert_eq!(records[0]["params"]["temperature"], 0.0);
    assert!(records[0]["timings"]["tokens_per_second"].as_f64().unwrap() > 0.0);
}

#[test]
fn regex_and_grammar_generation_follow_the_constraint() {
    let out = generate(&["--regex", "[0-9]{4}-[0-9]{2}-[0-9]{2}", "--prompt", "When did Apollo 11 land?"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let date = text(&out.stdout);
    let date = date.trim_end();
    assert_eq!(date.len(), 10, "{date:?}");
    assert!(date.chars().enumerate().all(|(i, c)| if i == 4 || i == 7 { c == '-' } else { c.is_ascii_digit() }));

    let grammar = fixtures().join("gbnf/arithmetic.gbnf");
    let out = generate(&["--grammar", grammar.to_str().unwrap(), "--prompt", "2+2", "--max-tokens", "40"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn sampling_flags_override_the_preset_and_seeds_reproduce() {
    let args = ["--prompt", "Tell me a joke.", "--preset", "creative", "--max-tokens", "16", "--seed", "9"];
    let a = generate(&args);
    let b = generate(&args);
    assert!(a.status.success(), "{}", text(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    let stop = generate(&["--prompt", "Count: 1, 2, 3,", "--raw", "--max-tokens", "30", "--stop", ","]);
    assert!(stop.status.success(), "{}", text(&stop.stderr));
    assert!(!text(&stop.stdout).contains(','), "{:?}", text(&stop.stdout));
}

#[test]
fn bad_input_is_a_clear_error() {
    let missing = run(["generate", "--model", "/nonexistent/model.gguf", "--prompt", "x"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("does not exist"), "{}", text(&missing.stderr));

    let preset = generate(&["--prompt", "x", "--preset", "nope"]);
    assert_eq!(preset.status.code(), Some(2));
    assert!(text(&preset.stderr).contains("extractor-greedy"), "lists known presets: {}", text(&preset.stderr));

    let temperature = generate(&["--prompt", "x", "--temperature", "-1"]);
    assert_eq!(temperature.status.code(), Some(2));
    assert!(text(&temperature.stderr).contains("temperature"), "{}", text(&temperature.stderr));

    let regex = generate(&["--prompt", "x", "--regex", "(unclosed"]);
    assert_eq!(regex.status.code(), Some(2));
    assert!(text(&regex.stderr).contains("--regex"), "{}", text(&regex.stderr));
}

#[test]
fn beam_search_prints_the_best_valid_beam() {
    let schema = fixtures().join("schemas/shape.json");
    let out = generate(&["--schema", schema.to_str().unwrap(), "--prompt", "A red circle of radius 2", "--beams", "3"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(serde_json::from_slice::<Value>(&out.stdout).is_ok(), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains("beam 2:"), "{}", text(&out.stderr));
}

/// The majority answer, ties to the answer first seen (the documented tie-break).
fn majority(answers: &[Option<String>]) -> Option<String> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for a in answers.iter().flatten() {
        match counts.iter_mut().find(|(x, _)| x == a) {
            Some((_, c)) => *c += 1,
            None => counts.push((a.clone(), 1)),
        }
    }
    let best = counts.iter().map(|(_, c)| *c).max()?;
    counts.into_iter().find(|(_, c)| *c == best).map(|(a, _)| a)
}

#[test]
fn self_consistency_prints_the_majority_answer_and_logs_every_sample() {
    let schema = fixtures().join("schemas/answer.json");
    let log = scratch("vote.jsonl", b"");
    let prompt = "Ana has 12 apples and gets 7 more. How many apples does she have? Answer in JSON.";
    let args = ["--schema", schema.to_str().unwrap(), "--prompt", prompt, "--temperature", "0.9", "--seed", "3"];
    let flags = ["--n", "4", "--vote", "/answer", "--no-early-stop", "--max-tokens", "200"];
    let out = generate(&[&args[..], &flags[..], &["--log", log.to_str().unwrap()]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed: Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    let line: Value = serde_json::from_str(std::fs::read_to_string(&log).unwrap().trim()).unwrap();
    let samples = line["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 4);
    let seeds: Vec<u64> = samples.iter().map(|r| r["seed"].as_u64().unwrap()).collect();
    assert_eq!(seeds, [3, 4, 5, 6], "sample i is seeded SEED + i");
    // The oracle: each logged text's /answer, counted by hand.
    let answers: Vec<Option<String>> = line["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| serde_json::from_str::<Value>(t.as_str().unwrap()).ok().and_then(|v| v["answer"].as_i64()))
        .map(|a| a.map(|a| a.to_string()))
        .collect();
    let winner = majority(&answers).expect("an answer");
    assert_eq!(line["selection"]["vote"]["winner"], winner.as_str());
    assert_eq!(printed["answer"].as_i64().map(|a| a.to_string()), Some(winner));
    let selected = line["selected"].as_u64().unwrap() as usize;
    assert_eq!(line["texts"][selected].as_str().unwrap().trim(), text(&out.stdout).trim());

    let missing = generate(&[&args[..], &["--n", "3"]].concat());
    assert!(!missing.status.success());
    assert!(text(&missing.stderr).contains("--vote POINTER"), "{}", text(&missing.stderr));
}

#[test]
fn best_of_prints_the_valid_sample_the_scorer_ranks_first() {
    let schema = fixtures().join("schemas/answer.json");
    let log = scratch("best.jsonl", b"");
    let prompt = "Ben has 9 coins and finds 4 more. How many coins now? Answer in JSON.";
    let args = ["--schema", schema.to_str().unwrap(), "--prompt", prompt, "--temperature", "0.9", "--seed", "8"];
    // The scorer: the candidate's length in bytes, so the longest valid sample wins.
    let flags = ["--best-of", "3", "--scorer", "wc -c", "--max-tokens", "200", "--log", log.to_str().unwrap()];
    let out = generate(&[&args[..], &flags[..]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let line: Value = serde_json::from_str(std::fs::read_to_string(&log).unwrap().trim()).unwrap();
    let schema_doc: Value = serde_json::from_str(&std::fs::read_to_string(&schema).unwrap()).unwrap();
    let longest_valid = line["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .filter(|t| {
            serde_json::from_str::<Value>(t)
                .is_ok_and(|v| stencil_schema::validate(&schema_doc, &v, &Default::default()).is_ok())
        })
        .max_by_key(|t| t.len())
        .expect("a valid sample");
    assert_eq!(text(&out.stdout).trim_end(), longest_valid);
    let reason = line["selection"]["decision"]["reason"].as_str().unwrap();
    assert!(reason.contains("valid under the schema") && reason.contains("scorer"), "{reason}");
}
