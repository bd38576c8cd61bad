//! The decode loop on a table-driven model, checked against enumeration.
//!
//! Beam search: a beam wide enough to hold every path finds the best-scoring output; every
//! beam's log-probability is the sum of its tokens' log-probabilities at temperature 1 among
//! the tokens the grammar allows (the request's temperature does not apply); beams share
//! the loop with other sequences. Records: the mean log-probability best-of-N ranks by
//! counts only the tokens sampled with a choice.

use std::collections::HashMap;

use stencil_mask::{bitmask, CompiledGrammar, Matcher};
use stencil_runtime::beam::{Beam, BeamParams};
use stencil_runtime::sampling::SamplingParams;
use stencil_runtime::{GenerateRequest, Prompt, Session, SessionOptions};
use stencil_test_support::table::TableModel;
use stencil_test_support::toy;

const WORDS: [&str; 5] = ["a", "b", "c", ",", "-"];
const GRAMMAR: &str = r#"root ::= item ("," item)*
item ::= "a" | "b" "-" | "c""#;
const SEED: u64 = 5;
const PROMPT: [u32; 3] = [1, 4, 2];

fn session(n_seq: u32) -> Session<'static> {
    let vocab = toy::words(&WORDS);
    let options = SessionOptions { n_seq_max: n_seq, n_batch: 512, ..SessionOptions::default() };
    Session::over(Box::new(TableModel::new(vocab.len(), SEED, 0.5)), vocab, options)
}

fn request(session: &Session<'_>, temperature: f32, max_tokens: u32) -> GenerateRequest {
    let g = stencil_grammar::parse_gbnf(GRAMMAR).unwrap();
    let grammar = CompiledGrammar::new(&g, session.vocab().clone()).unwrap();
    GenerateRequest::new(Prompt::Tokens(PROMPT.to_vec()))
        .with_params(SamplingParams { temperature, max_tokens, ..SamplingParams::default() })
        .with_grammar(grammar, "gbnf")
}

/// Every output the grammar allows within `max_tokens`, with its log-probability at
/// temperature 1 and whether it ended (EOS or a complete grammar) or was cut.
fn enumerate(session: &Session<'_>, max_tokens: usize) -> Vec<(Vec<u32>, f64, bool)> {
    let vocab = session.vocab().clone();
    let model = TableModel::new(vocab.len(), SEED, 0.5);
    let g = stencil_grammar::parse_gbnf(GRAMMAR).unwrap();
    let mut out = Vec::new();
    let mut stack = vec![(Vec::<u32>::new(), 0.0f64, Matcher::new(CompiledGrammar::new(&g, vocab.clone()).unwrap()))];
    while let Some((tokens, logprob, matcher)) = stack.pop() {
        let mut mask = bitmask::new_mask(vocab.mask_width());
        matcher.clone().fill_mask(&mut mask).unwrap();
        let mut context = PROMPT.to_vec();
        context.extend(&tokens);
        let logits = model.logits_after(&context);
        let allowed: Vec<u32> = bitmask::allowed(&mask).collect();
        let max = allowed.iter().map(|&t| f64::from(logits[t as usize])).fold(f64::MIN, f64::max);
        let log_total = allowed.iter().map(|&t| (f64::from(logits[t as usize]) - max).exp()).sum::<f64>().ln();
        for t in allowed {
            let lp = logprob + f64::from(logits[t as usize]) - max - log_total;
            if vocab.is_eos(t) {
                out.push((tokens.clone(), lp, true));
                continue;
            }
            let mut m = matcher.clone();
            m.accept_token(t).unwrap();
            let mut next = tokens.clone();
            next.push(t);
            if m.must_end() {
                out.push((next, lp, true));
            } else if next.len() == max_tokens {
                out.push((next, lp, false));
            } else {
                stack.push((next, lp, m));
            }
        }
    }
    out
}

fn score(logprob: f64, len: usize, penalty: f64) -> f64 {
    logprob / (len.max(1) as f64).powf(penalty)
}

#[test]
fn a_beam_wider_than_the_tree_finds_the_best_output_and_the_exact_logprobs() {
    let max_tokens = 4;
    let mut s = session(128);
    let paths = enumerate(&s, max_tokens);
    let exact: HashMap<Vec<u32>, f64> = paths.iter().map(|(t, lp, _)| (t.clone(), *lp)).collect();
    for penalty in [0.0, 1.0] {
        let params = BeamParams { n_beams: 32, length_penalty: penalty };
        let beams = s.beam_search(&request(&s, 0.7, max_tokens as u32), &params).unwrap();
        // Finished beams rank first, then by score: the best finished path of all.
        let best = paths.iter().filter(|p| p.2).map(|(t, lp, _)| score(*lp, t.len(), penalty)).fold(f64::MIN, f64::max);
        assert!(beams[0].finished);
        assert!((beams[0].score - best).abs() < 1e-9, "penalty {penalty}: {} against {best}", beams[0].score);
        for b in &beams {
            let want = exact[&b.tokens];
            assert!((b.logprob - want).abs() < 1e-9, "{:?}: {} against {want}", b.tokens, b.logprob);
        }
    }
}

#[test]
fn temperature_does_not_apply_to_beams() {
    let mut s = session(8);
    let params = BeamParams { n_beams: 3, length_penalty: 1.0 };
    let run = |s: &mut Session<'_>, t: f32| -> Vec<Beam> { s.beam_search(&request(s, t, 6), &params).unwrap() };
    let (cold, hot) = (run(&mut s, 0.3), run(&mut s, 1.8));
    assert_eq!(cold.len(), 3);
    for (a, b) in cold.iter().zip(&hot) {
        assert_eq!((&a.tokens, a.logprob, a.finished), (&b.tokens, b.logprob, b.finished));
    }
}

#[test]
fn beams_share_the_loop_with_samples() {
    let mut s = session(16);
    let params = BeamParams { n_beams: 2, length_penalty: 1.0 };
    let alone = s.beam_search(&request(&s, 1.0, 6), &params).unwrap();
    let sample_request = request(&s, 1.0, 6);
    let mut decoder = s.decoder();
    let samples = decoder.add_samples(&sample_request, 3).unwrap();
    let search = decoder.add_beams(&sample_request, &params).unwrap();
    let mut finished = decoder.take_finished(|_, _| {});
    let mut beams = None;
    while beams.is_none() || !decoder.is_idle() {
        finished.extend(decoder.step(|_, _| {}).unwrap());
        beams = beams.or_else(|| decoder.take_beams(search));
    }
    assert_eq!(finished.len(), samples.len());
    let together = beams.unwrap().unwrap();
    assert_eq!(
        together.iter().map(|b| (&b.tokens, b.logprob)).collect::<Vec<_>>(),
        alone.iter().map(|b| (&b.tokens, b.logprob)).collect::<Vec<_>>()
    );
}

#[test]
fn beams_need_two_sequences_each() {
    let mut s = session(3);
    let err = s.beam_search(&request(&s, 1.0, 4), &BeamParams { n_beams: 2, length_penalty: 1.0 }).unwrap_err();
    assert!(matches!(err, stencil_runtime::RuntimeError::TooManySequences { n: 4, free: 3, .. }), "{err}");
}

#[test]
fn the_mean_logprob_leaves_out_single_choice_steps() {
    let mut s = session(4);
    let mut r = request(&s, 1.0, 12);
    // Without fast-forward the `-` after `b` is sampled, from a mask of one token.
    r.fast_forward = false;
    // No EOS: every output runs to `max_tokens`, and its mean is over its tokens alone.
    r.params.ignore_eos = true;
    let mut seen_single = false;
    for seed in 0..20 {
        r.params.seed = Some(seed);
        let g = s.generate(&r, |_| {}).unwrap();
        // Replay the grammar: which steps had a choice.
        let mut m = Matcher::new(r.grammar.clone().unwrap());
        let mut with_choice = Vec::new();
        for (&t, lp) in g.tokens.iter().zip(&g.logprobs) {
            let mut mask = bitmask::new_mask(s.vocab().mask_width());
            m.fill_mask(&mut mask).unwrap();
            bitmask::clear(&mut mask, 0); // ignore_eos
            if bitmask::count(&mask) > 1 {
                with_choice.push(f64::from(lp.expect("every token was sampled")));
            } else {
                seen_single = true;
                assert_eq!(*lp, Some(0.0));
            }
            m.accept_token(t).unwrap();
        }
        if with_choice.is_empty() {
            continue;
        }
        let want = with_choice.iter().sum::<f64>() / with_choice.len() as f64;
        let got = g.record.mean_logprob.unwrap();
        assert_eq!(g.tokens.len(), 12);
        assert!((got - want).abs() < 1e-5, "seed {seed}: {got} against {want}");
    }
    assert!(seen_single, "no single-choice step was sampled");
}

/// A structural tag `<t>` any text `</t>` then `ok`, the text's budget `max_tokens`.
fn think_then_ok(s: &Session<'_>, max_tokens: u32) -> GenerateRequest {
    let tag = serde_json::json!({"format": {"type": "sequence", "elements": [
        {"type": "tag", "begin": "<t>", "content": {"type": "any_text", "max_tokens": max_tokens}, "end": "</t>"},
        {"type": "const_string", "value": "ok"}]}});
    let tag = std::sync::Arc::new(stencil_structural::compile_json(&tag, &Default::default()).unwrap());
    GenerateRequest::new(Prompt::Tokens(vec![1, 2]))
        .with_params(SamplingParams { temperature: 1.0, max_tokens: 60, ..SamplingParams::default() })
        .with_structural_tag(tag, s.vocab())
        .unwrap()
}

/// Tokens the model sampled (not forced) that put text between `<t>` and `</t>`.
fn thinking_tokens(vocab: &stencil_mask::Vocabulary, g: &stencil_runtime::Generation) -> usize {
    let mut text: Vec<u8> = Vec::new();
    let mut inside = 0;
    for (&t, lp) in g.tokens.iter().zip(&g.logprobs) {
        let closed = text.windows(4).any(|w| w == b"</t>");
        text.extend_from_slice(vocab.token_bytes(t));
        let open = text.windows(3).position(|w| w == b"<t>").map(|i| i + 3);
        if lp.is_some() && !closed && open.is_some_and(|o| text.len() > o) {
            inside += 1;
        }
    }
    inside
}

#[test]
fn a_reasoning_budget_closes_the_thinking_after_its_tokens() {
    // Bytes and a few words, so the table model babbles inside `<t>` until told to stop.
    let mut words: Vec<String> = (b'a'..=b'z').map(|b| (b as char).to_string()).collect();
    words.extend(["<", ">", "/", " ", "<t>", "</t>", "ok", "t"].map(String::from));
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let vocab = toy::words(&words);
    let options = SessionOptions { n_seq_max: 8, n_batch: 512, ..SessionOptions::default() };
    let mut s = Session::over(Box::new(TableModel::new(vocab.len(), 9, -3.0)), vocab.clone(), options);
    let draft = TableModel::new(vocab.len(), 9, -3.0).favouring(7, 1.0);
    s.attach_draft_forward(Box::new(draft), &vocab).unwrap();
    for budget in [1u32, 4, 9] {
        for speculate in [false, true] {
            let mut r = think_then_ok(&s, budget);
            if speculate {
                r.speculation =
                    Some(stencil_runtime::Speculation::DraftModel(stencil_runtime::speculate::DraftModel {
                        max_draft: 5,
                    }));
            }
            for seed in 0..8 {
                r.params.seed = Some(seed);
                let g = s.generate(&r, |_| {}).unwrap();
                assert!(g.stop_reason.is_natural(), "{:?} {:?}", g.stop_reason, g.text);
                assert!(g.text.starts_with("<t>") && g.text.ends_with("</t>ok"), "{:?}", g.text);
                let spent = thinking_tokens(&vocab, &g);
                assert!(
                    spent <= budget as usize,
                    "budget {budget}, speculate {speculate}: {spent} tokens in {:?}",
                    g.text
                );
            }
        }
    }
}

/// Under a structural tag, the control tokens its grammar takes are text of the reply (so
/// that the tag's captures read it back); under another grammar they are not.
#[test]
fn a_structural_tags_control_token_markers_are_in_the_text() {
    let vocab = toy::printable();
    let options = SessionOptions { n_seq_max: 1, n_batch: 512, ..SessionOptions::default() };
    let mut session = Session::over(Box::new(TableModel::new(vocab.len(), SEED, 0.5)), vocab.clone(), options);
    let tag = serde_json::json!({"format": {"type": "sequence", "elements": [
        {"type": "token", "token": "<think>"}, {"type": "const_string", "value": "ok"}]}});
    let compile = stencil_structural::CompileOptions { vocab: Some(vocab.clone()), ..Default::default() };
    let tag = std::sync::Arc::new(stencil_structural::compile_json(&tag, &compile).unwrap());
    let request = GenerateRequest::new(Prompt::Tokens(vec![2])).with_structural_tag(tag, &vocab).unwrap();
    let mut streamed = String::new();
    let g = session.generate(&request, |piece| streamed.push_str(piece)).unwrap();
    assert_eq!(g.tokens[0], 1, "the marker is the control token");
    assert_eq!((g.text.as_str(), streamed.as_str()), ("<think>ok", "<think>ok"));
    let gbnf = stencil_grammar::parse_gbnf(r#"root ::= <think> "ok""#).unwrap();
    let grammar = CompiledGrammar::new(&gbnf, vocab.clone()).unwrap();
    let request = GenerateRequest::new(Prompt::Tokens(vec![2])).with_grammar(grammar, "gbnf");
    let g = session.generate(&request, |_| {}).unwrap();
    assert_eq!((g.tokens[0], g.text.as_str()), (1, "ok"));
}
