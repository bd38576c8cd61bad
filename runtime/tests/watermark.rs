//! The watermark on a real model (SmolLM2-135M-Instruct, fetched by
//! `scripts/fetch-models.sh`), llama.cpp on one thread: a watermarked generation is detected
//! with the key and not without it or with another key, from its tokens and from its text
//! re-tokenized; under a JSON Schema the output still validates, and the record counts the
//! steps that had a single allowed token.

use serde_json::Value;
use stencil_mask::vocab::Tokenizer;
use stencil_mask::CompiledGrammar;
use stencil_runtime::sampling::{Greenlist, SamplingParams, WatermarkKey, WatermarkParams};
use stencil_runtime::{ChatMessage, GenerateRequest, Generation, Prompt, SessionOptions};
use stencil_schema::{compile_schema, SchemaOptions};
use stencil_test_support::fixtures::read as fixture;
use stencil_test_support::fixtures::{model_path, SMOLLM2_MODEL_FILE};
use stencil_test_support::models::smollm2;

const KEY: &str = "runtime-test-key-4f1c";

fn watermark(key: &str) -> WatermarkParams {
    WatermarkParams::new(WatermarkKey::new(key))
}

fn generate(request: &GenerateRequest) -> Generation {
    let model = smollm2();
    let mut session = model.session(&SessionOptions { n_ctx: 1024, n_threads: 1, ..Default::default() }).unwrap();
    session.generate(request, |_| {}).unwrap()
}

#[test]
fn a_watermarked_generation_is_detected_with_the_key_only() {
    let prompt = Prompt::Chat(vec![ChatMessage::user("Write a long story about a lighthouse keeper and a storm.")]);
    let params = |w: Option<WatermarkParams>| SamplingParams {
        temperature: 1.0,
        seed: Some(11),
        max_tokens: 150,
        ignore_eos: true,
        watermark: w,
        ..Default::default()
    };
    let marked = generate(&GenerateRequest::new(prompt.clone()).with_params(params(Some(watermark(KEY)))));
    let plain = generate(&GenerateRequest::new(prompt).with_params(params(None)));
    assert_eq!(marked.tokens.len(), 150);
    assert_ne!(marked.tokens, plain.tokens, "the watermark changes what is sampled");

    let key = watermark(KEY).greenlist().unwrap();
    let wrong = watermark("another-key").greenlist().unwrap();
    let tokenizer = Tokenizer::from_gguf(model_path(SMOLLM2_MODEL_FILE)).unwrap();
    let retokenized = tokenizer.encode(&marked.text).unwrap();
    let same = marked.tokens.iter().zip(&retokenized).take_while(|(a, b)| a == b).count();

    let detections = [
        ("watermarked, key, tokens", key.detect(&marked.tokens)),
        ("watermarked, key, text re-tokenized", key.detect(&retokenized)),
        ("watermarked, wrong key", wrong.detect(&marked.tokens)),
        ("unwatermarked, key", key.detect(&plain.tokens)),
        ("unwatermarked, key, text re-tokenized", key.detect(&tokenizer.encode(&plain.text).unwrap())),
    ];
    for (what, d) in &detections {
        eprintln!(
            "{what}: {} tokens, {} scored, green {:.3}, z {:.2}, p {:.2e}",
            d.tokens, d.scored, d.green_fraction, d.z, d.p_value
        );
    }
    eprintln!("re-tokenized: {} tokens, the first {same} as generated", retokenized.len());
    let z = |i: usize| detections[i].1.z;
    assert!(z(0) > 4.0 && z(1) > 4.0, "detected with the key");
    assert!(z(2) < 4.0 && z(3) < 4.0 && z(4) < 4.0, "not detected otherwise");

    // The key is in no record.
    let line = marked.record.to_json_line();
    assert!(!line.contains(KEY) && line.contains(r#""key":"<redacted>""#), "{line}");
    assert!(!format!("{:?}", marked.record).contains(KEY));
    assert_eq!(marked.record.single_choice_steps, 0, "free text: every step has a choice");
}

#[test]
fn watermarked_schema_outputs_validate_and_count_single_choices() {
    let model = smollm2();
    let schema: Value = serde_json::from_str(&fixture("schemas/person.json")).unwrap();
    let compiled = compile_schema(&schema, &SchemaOptions::default()).unwrap();
    let grammar = CompiledGrammar::new(&compiled.grammar, model.vocab().clone()).unwrap();
    let prompt = Prompt::Chat(vec![ChatMessage::user(fixture("prompts/person.txt"))]);
    let greenlist: Greenlist = watermark(KEY).greenlist().unwrap();
    for (seed, fast_forward) in [(1, true), (2, true), (3, false)] {
        let params = SamplingParams {
            temperature: 0.7,
            seed: Some(seed),
            max_tokens: 200,
            watermark: Some(watermark(KEY)),
            ..Default::default()
        };
        let mut request =
            GenerateRequest::new(prompt.clone()).with_params(params).with_grammar(grammar.clone(), "json-schema");
        request.fast_forward = fast_forward;
        let out = generate(&request);
        assert!(out.stop_reason.is_natural(), "seed {seed}: {:?} {}", out.stop_reason, out.text);
        let instance: Value = serde_json::from_str(&out.text).unwrap_or_else(|e| panic!("{e}: {}", out.text));
        assert!(stencil_schema::validate(&schema, &instance, &Default::default()).is_ok(), "{}", out.text);

        let r = &out.record;
        let all = greenlist.detect(&out.tokens);
        // Sampled with a choice: forced tokens have no log-probability, single choices 0.
        let sampled = greenlist.detect_where(&out.tokens, |i| out.logprobs[i].is_some_and(|lp| lp < 0.0));
        eprintln!(
            "seed {seed}, fast-forward {fast_forward}: {} tokens, {} forced, {} single-choice steps; z {:.2} \
             over all {} scored (green {:.3}), {:.2} over the {} sampled with a choice (green {:.3})",
            r.generated_tokens,
            r.forced_tokens,
            r.single_choice_steps,
            all.z,
            all.scored,
            all.green_fraction,
            sampled.z,
            sampled.scored,
            sampled.green_fraction
        );
        if fast_forward {
            assert!(r.forced_tokens > 0, "the schema's keys are forced");
        } else {
            assert_eq!(r.forced_tokens, 0);
            assert!(r.single_choice_steps > 0, "some steps had one allowed token");
        }
    }
}
