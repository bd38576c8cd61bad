//! Contrastive search: the ranking against hand-computed scores, greedy at `α = 0` or
//! `k = 1` on both real models, outputs inside the grammar, deterministic in and out of a
//! batch, and clear errors. llama.cpp runs on one thread.

use std::sync::Arc;

use serde_json::Value;
use stencil_mask::CompiledGrammar;
use stencil_runtime::contrastive::{contrastive_pick, contrastive_score, max_cosine};
use stencil_runtime::sampling::SamplingParams;
use stencil_runtime::speculate::PromptLookup;
use stencil_runtime::{GenerateRequest, Generation, Model, Prompt, RuntimeError, Session, SessionOptions, Speculation};
use stencil_schema::{compile_schema, validate, Registry, SchemaOptions};
use stencil_test_support::models::{gemma3, smollm2};

const BULLETS: &str = "Write three bullet points explaining why decoding parameters matter in production LLM systems:";

fn session(model: &Model, n_seq_max: u32, embeddings: bool) -> Session<'_> {
    let options = SessionOptions { n_ctx: 2048, n_threads: 1, n_seq_max, embeddings, ..Default::default() };
    model.session(&options).unwrap()
}

fn params(penalty_alpha: f32, top_k: u32, max_tokens: u32) -> SamplingParams {
    SamplingParams { penalty_alpha, top_k, max_tokens, ..SamplingParams::greedy() }
}

fn request(model: &Model, text: &str, params: SamplingParams) -> GenerateRequest {
    GenerateRequest::new(Prompt::user_or_text(model, text)).with_params(params)
}

fn generate(session: &mut Session<'_>, request: &GenerateRequest) -> Generation {
    let mut streamed = String::new();
    let g = session.generate(request, |piece| streamed.push_str(piece)).unwrap();
    assert_eq!(streamed, g.text, "the streamed text is the output");
    g
}

#[test]
fn the_pick_follows_the_hand_computed_ranking() {
    // Context: two unit hidden states, e1 and e2 (width 3).
    let context = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0];
    // A: p 0.5, repeats e1 (similarity 1); B: p 0.3, new (e3, similarity 0);
    // C: p 0.2, between e1 and e2 (similarity 1/√2).
    let (a, b, c): (&[f32], &[f32], &[f32]) = (&[2.0, 0.0, 0.0], &[0.0, 0.0, 5.0], &[1.0, 1.0, 0.0]);
    let probs = [0.5, 0.3, 0.2];
    assert_eq!(max_cosine(a, &context), 1.0);
    assert_eq!(max_cosine(b, &context), 0.0);
    assert!((max_cosine(c, &context) - 0.5f64.sqrt()).abs() < 1e-7);
    // α = 0.6: A 0.4·0.5 − 0.6 = −0.4; B 0.4·0.3 − 0 = 0.12; C 0.08 − 0.6/√2 ≈ −0.344.
    assert!((contrastive_score(0.6, 0.5, 1.0) + 0.4).abs() < 1e-12);
    assert_eq!(contrastive_pick(&probs, &[a, b, c], &context, 0.6), Some(1));
    // α = 0.1: A 0.45 − 0.1 = 0.35; B 0.27; C 0.18 − 0.0707 ≈ 0.109: the likeliest wins.
    assert_eq!(contrastive_pick(&probs, &[a, b, c], &context, 0.1), Some(0));
    // α = 1: only dissimilarity counts: B (0), then C (0.707), then A (1).
    assert_eq!(contrastive_pick(&probs, &[a, b, c], &context, 1.0), Some(1));
    assert_eq!(contrastive_pick(&probs, &[a, c], &context, 1.0), Some(1));
    // α = 0 is the probability; ties go to the first (the likelier) candidate.
    assert_eq!(contrastive_pick(&[0.4, 0.4], &[a, b], &context, 0.0), Some(0));
    assert_eq!(contrastive_pick(&[], &[], &context, 0.6), None);
}

/// `α = 0` and `k = 1` decode exactly as greedy does, on a session with hidden states too.
fn alpha_zero_and_one_candidate_are_greedy(model: &Model) {
    let greedy = generate(&mut session(model, 1, false), &request(model, BULLETS, params(0.0, 0, 48)));
    assert!(greedy.tokens.len() >= 16, "{:?}", greedy.text);
    for (alpha, k) in [(0.0, 4), (0.6, 1)] {
        for embeddings in [false, true] {
            let mut s = session(model, 6, embeddings);
            let g = generate(&mut s, &request(model, BULLETS, params(alpha, k, 48)));
            assert_eq!(g.text, greedy.text, "alpha {alpha}, k {k}, hidden states {embeddings}");
            assert_eq!(g.tokens, greedy.tokens);
            assert!(g.record.contrastive.is_none(), "no candidate passes");
        }
    }
}

#[test]
fn alpha_zero_and_one_candidate_are_greedy_on_smollm2() {
    alpha_zero_and_one_candidate_are_greedy(smollm2());
}

#[test]
fn alpha_zero_and_one_candidate_are_greedy_on_gemma3() {
    alpha_zero_and_one_candidate_are_greedy(gemma3());
}

#[test]
fn contrastive_search_changes_greedy_text_and_is_deterministic() {
    let model = smollm2();
    let greedy = generate(&mut session(model, 1, false), &request(model, BULLETS, params(0.0, 0, 64)));
    let contrastive = request(model, BULLETS, params(0.6, 4, 64));
    let mut s = session(model, 12, true);
    let first = generate(&mut s, &contrastive);
    assert_ne!(first.text, greedy.text, "α 0.6 changes some pick in 64 tokens");
    let again = generate(&mut s, &contrastive);
    assert_eq!(again.text, first.text, "deterministic");
    let stats = first.record.contrastive.clone().expect("the record has the search's cost");
    assert_eq!((stats.penalty_alpha, stats.top_k), (0.6, 4));
    assert!(stats.candidate_steps > 0 && stats.candidate_rows <= 4 * stats.candidate_steps, "{stats:?}");
    assert!(stats.candidate_steps <= first.tokens.len());
    assert!(first.record.mean_logprob.is_some());
    // Two sequences in one batch, each with its own candidates, give the same text.
    let both = s.generate_n(&contrastive, 2, |_, _| {}).unwrap();
    for g in &both {
        assert_eq!(g.text, first.text, "in a batch of two");
    }
}

fn person(model: &Model) -> (Value, Arc<CompiledGrammar>) {
    let path = format!("{}/../fixtures/schemas/person.json", env!("CARGO_MANIFEST_DIR"));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let compiled = compile_schema(&schema, &SchemaOptions::default()).unwrap();
    (schema, CompiledGrammar::new(&compiled.grammar, model.vocab().clone()).unwrap())
}

/// Inside the grammar: the candidates are the top-k of the masked distribution.
fn outputs_validate(model: &Model) {
    let (schema, grammar) = person(model);
    let prompt =
        Prompt::user_or_text(model, "Extract the person as JSON: Ada Lovelace, 36, mathematician, ada@example.org.");
    let mut s = session(model, 6, true);
    for alpha in [0.3, 0.6, 0.9] {
        let req = GenerateRequest::new(prompt.clone())
            .with_params(params(alpha, 4, 200))
            .with_grammar(grammar.clone(), "json-schema");
        let g = generate(&mut s, &req);
        let value: Value = serde_json::from_str(&g.text).unwrap_or_else(|e| panic!("{e}: {}", g.text));
        assert!(validate(&schema, &value, &Registry::default()).is_ok(), "alpha {alpha}: {}", g.text);
        let stats = g.record.contrastive.expect("contrastive");
        assert!(stats.candidate_steps > 0, "{stats:?}");
        assert!(g.record.forced_tokens > 0, "the grammar's forced tokens are chain steps");
    }
}

#[test]
fn outputs_validate_on_smollm2() {
    outputs_validate(smollm2());
}

#[test]
fn outputs_validate_on_gemma3() {
    outputs_validate(gemma3());
}

#[test]
fn what_contrastive_search_cannot_do_is_an_error() {
    let model = smollm2();
    let req = request(model, "Hello", params(0.6, 4, 8));
    let err = session(model, 5, false).generate(&req, |_| {}).unwrap_err();
    assert!(matches!(err, RuntimeError::ContrastiveNeedsEmbeddings), "{err}");
    let mut spec = req.clone();
    spec.speculation = Some(Speculation::PromptLookup(PromptLookup::default()));
    let err = session(model, 6, true).generate(&spec, |_| {}).unwrap_err();
    assert!(matches!(err, RuntimeError::ContrastiveUnsupported(_)), "{err}");
    // Four candidates need five more KV sequences.
    let err = session(model, 5, true).generate(&req, |_| {}).unwrap_err();
    assert!(matches!(err, RuntimeError::TooManySequences { .. }), "{err}");
    let bad = SamplingParams { penalty_alpha: 1.5, ..params(0.0, 4, 8) };
    assert!(bad.validate().is_err());
}
