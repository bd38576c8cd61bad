//! `stencil watermark detect` and `stencil generate --watermark-key`: detection on texts made
//! with the library (SmolLM2's vocabulary fixture, no model), then end to end with the real
//! default model (llama.cpp on one thread).

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{code, fixtures, generate, model, run, scratch, smollm2, stderr, stdout, BIN};
use serde_json::Value;
use stencil_runtime::sampling::{Sampler, SamplingParams, TokenHistory, WatermarkKey, WatermarkParams};

const KEY: &str = "cli-test-key-93d2";

/// A text of `words` SmolLM2 word tokens (` [a-z]{3,7}`, each its own canonical
/// tokenization) drawn uniformly through the sampler, watermarked with `key` when given.
fn text_of_words(key: Option<&str>, words: usize, seed: u64) -> String {
    let (vocab, tokenizer) = stencil_test_support::fixtures::smollm2();
    let mut mask = stencil_mask::bitmask::new_mask(vocab.mask_width());
    for id in 0..vocab.len() as u32 {
        let bytes = vocab.token_bytes(id);
        let word =
            bytes.len() >= 4 && bytes.len() <= 8 && bytes[0] == b' ' && bytes[1..].iter().all(u8::is_ascii_lowercase);
        if word && tokenizer.encode(std::str::from_utf8(bytes).unwrap()).ok().as_deref() == Some(&[id][..]) {
            stencil_mask::bitmask::set(&mut mask, id);
        }
    }
    let watermark = key.map(|k| WatermarkParams::new(WatermarkKey::new(k)));
    let mut sampler = Sampler::new(SamplingParams { seed: Some(seed), watermark, ..Default::default() }).unwrap();
    let logits = vec![0.0; vocab.mask_width()];
    let mut history = TokenHistory::new();
    let mut text = String::from("Once");
    history.push(tokenizer.encode("Once").unwrap()[0]);
    for _ in 0..words {
        let token = sampler.sample(&logits, Some(&mask), &history).unwrap();
        text.push_str(std::str::from_utf8(vocab.token_bytes(token)).unwrap());
        history.push(token);
    }
    assert_eq!(tokenizer.encode(&text).unwrap(), history.tokens(), "the text tokenizes back to its tokens");
    text
}

fn detect(extra: &[&str]) -> std::process::Output {
    let vocab = smollm2();
    let mut args = vec!["watermark", "detect", "--vocab", vocab.to_str().unwrap()];
    args.extend_from_slice(extra);
    run(args)
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn detect_finds_the_watermark_with_the_key_only() {
    let marked = scratch("marked.txt", format!("{}\n", text_of_words(Some(KEY), 120, 1)).as_bytes());
    let out = detect(&["--key", KEY, path_str(&marked)]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let line = stdout(&out);
    assert!(line.contains("marked.txt: 121 tokens, 120 scored") && line.ends_with(": watermarked\n"), "{line}");
    assert!(stderr(&out).contains("1 of 1 text watermarked (z >= 4)"), "{}", stderr(&out));

    let wrong = detect(&["--key", "another-key", path_str(&marked)]);
    assert_eq!(code(&wrong), 1, "{}", stdout(&wrong));
    assert!(stdout(&wrong).ends_with(": not detected\n"), "{}", stdout(&wrong));

    // The key from a file, the text from standard input.
    let key_file = scratch("key.txt", format!("{KEY}\n").as_bytes());
    let vocab = smollm2();
    let mut child = Command::new(BIN)
        .args(["watermark", "detect", "--key-file", path_str(&key_file), "--vocab", path_str(&vocab), "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&std::fs::read(&marked).unwrap()).unwrap();
    let piped = child.wait_with_output().unwrap();
    assert_eq!(code(&piped), 0, "{}", stderr(&piped));
    assert!(stdout(&piped).starts_with("-: 121 tokens"), "{}", stdout(&piped));
}

#[test]
fn detect_reports_each_jsonl_record() {
    let marked = text_of_words(Some(KEY), 100, 2);
    let plain = text_of_words(None, 100, 2);
    let lines = [
        serde_json::json!({ "id": 1, "text": marked }).to_string(),
        String::new(),
        serde_json::to_string(&plain).unwrap(),
        marked.clone(),
    ];
    let file = scratch("records.jsonl", lines.join("\n").as_bytes());
    let out = detect(&["--key", KEY, "--jsonl", "--format", "json", path_str(&file)]);
    assert_eq!(code(&out), 1, "one record is not watermarked: {}", stderr(&out));
    let records: Vec<Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let verdicts: Vec<(u64, bool)> =
        records.iter().map(|r| (r["line"].as_u64().unwrap(), r["watermarked"].as_bool().unwrap())).collect();
    assert_eq!(verdicts, [(1, true), (3, false), (4, true)]);
    assert_eq!(records[0]["z"], records[2]["z"], "the same text, from a field or as the line");
    assert!(records[1]["z"].as_f64().unwrap() < 4.0 && records[0]["p_value"].as_f64().unwrap() < 1e-6);
    assert_eq!(records[0]["tokens"], 101);
    assert!(stderr(&out).contains("2 of 3 texts watermarked"), "{}", stderr(&out));

    // A lower threshold, another gamma: the verdicts follow.
    let low = detect(&["--key", KEY, "--jsonl", "--threshold", "-100", path_str(&file)]);
    assert_eq!(code(&low), 0, "{}", stdout(&low));
    let other_gamma = detect(&["--key", KEY, "--jsonl", "--gamma", "0.5", path_str(&file)]);
    assert!(stdout(&other_gamma).lines().count() == 3, "{}", stdout(&other_gamma));
}

#[test]
fn bad_detect_arguments_are_usage_errors() {
    let marked = scratch("short.txt", b"Once upon a time");
    let bad_gamma = detect(&["--key", KEY, "--gamma", "1.5", path_str(&marked)]);
    assert_eq!(code(&bad_gamma), 2);
    assert!(stderr(&bad_gamma).contains("watermark.gamma"), "{}", stderr(&bad_gamma));
    assert_eq!(code(&detect(&[path_str(&marked)])), 2, "a key is required");
    let empty_key = detect(&["--key", "", path_str(&marked)]);
    assert_eq!(code(&empty_key), 2, "{}", stderr(&empty_key));
    let not_utf8 = scratch("latin1.txt", b"caf\xe9");
    assert_eq!(code(&detect(&["--key", KEY, path_str(&not_utf8)])), 2);
    let missing = detect(&["--key", KEY, "/nonexistent/text.txt"]);
    assert_eq!(code(&missing), 2);
    assert!(!stderr(&missing).contains(KEY) && !stderr(&empty_key).contains(KEY));
}

#[test]
fn generate_with_a_watermark_key_is_detected_and_never_logged() {
    let log = scratch("watermark-runs.jsonl", b"");
    let prompt = ["--prompt", "Write a long story about a lighthouse keeper and a storm."];
    let sampling = ["--temperature", "1", "--max-tokens", "120", "--ignore-eos", "--seed", "3"];
    let out = generate(&[&prompt[..], &sampling, &["--watermark-key", KEY, "--log", path_str(&log)]].concat());
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = scratch("generated.txt", &out.stdout);

    let m = model();
    let found = run(["watermark", "detect", "--key", KEY, "--model", path_str(&m), path_str(&text)]);
    assert_eq!(code(&found), 0, "{}{}", stdout(&found), stderr(&found));
    let not_found = run(["watermark", "detect", "--key", "nope", "--model", path_str(&m), path_str(&text)]);
    assert_eq!(code(&not_found), 1, "{}", stdout(&not_found));

    let record = std::fs::read_to_string(&log).unwrap();
    assert!(!record.contains(KEY), "{record}");
    let record: Value = serde_json::from_str(record.trim()).unwrap();
    assert_eq!(record["params"]["watermark"]["key"], "<redacted>");
    assert_eq!(record["params"]["watermark"]["gamma"], 0.25);
    assert_eq!(record["single_choice_steps"], 0);

    // Settings without a key are refused before the model loads.
    let no_key = generate(&[&prompt[..], &["--watermark-delta", "3"]].concat());
    assert_eq!(code(&no_key), 2);
    assert!(stderr(&no_key).contains("need --watermark-key"), "{}", stderr(&no_key));
}

#[test]
fn a_watermarked_schema_output_validates_and_its_forced_tokens_are_left_out() {
    let schema = fixtures().join("schemas/person.json");
    let prompt = fixtures().join("prompts/person.txt");
    let log = scratch("watermark-schema.jsonl", b"");
    let out = generate(&[
        "--schema",
        path_str(&schema),
        "--prompt-file",
        path_str(&prompt),
        "--temperature",
        "0.7",
        "--seed",
        "4",
        "--watermark-key",
        KEY,
        "--watermark-delta",
        "4",
        "--log",
        path_str(&log),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("valid: the output validates"), "{}", stderr(&out));
    let record: Value = serde_json::from_str(std::fs::read_to_string(&log).unwrap().trim()).unwrap();
    assert_eq!(record["params"]["watermark"]["delta"], 4.0);
    assert!(record["forced_tokens"].as_u64().unwrap() > 0, "{record}");

    let text = scratch("person.json", &out.stdout);
    let m = model();
    let args = ["watermark", "detect", "--key", KEY, "--model", path_str(&m), "--format", "json"];
    let plain = run([&args[..], &[path_str(&text)]].concat());
    let unforced = run([&args[..], &["--schema", path_str(&schema), path_str(&text)]].concat());
    assert!(code(&plain) < 2 && code(&unforced) < 2, "{}{}", stderr(&plain), stderr(&unforced));
    let plain: Value = serde_json::from_str(stdout(&plain).trim()).unwrap();
    let unforced: Value = serde_json::from_str(stdout(&unforced).trim()).unwrap();
    eprintln!("schema output, every token: {plain}\nschema output, forced tokens left out: {unforced}");
    assert_eq!(plain["forced"], 0);
    assert!(unforced["forced"].as_u64().unwrap() > 0 && unforced["leaves_grammar_at_token"].is_null(), "{unforced}");
    assert!(unforced["scored"].as_u64() < plain["scored"].as_u64());
}
