//! Scoring a given text (`runtime/src/score.rs`): continuation log-probabilities against
//! the table model's own logits and against what a real model's sampler reported while
//! generating, the reuse of a scored context, the errors, and mean-pooled hidden states.

use std::cell::Cell;
use std::rc::Rc;

use stencil_runtime::decode::{Forward, Row};
use stencil_runtime::sampling::SamplingParams;
use stencil_runtime::{GenerateRequest, Prompt, RuntimeError, Session, SessionOptions};
use stencil_test_support::models::smollm2;
use stencil_test_support::table::TableModel;
use stencil_test_support::toy;

/// The table model, counting the rows it evaluates, in a context of `n_ctx` cells.
struct Counting {
    inner: TableModel,
    rows: Rc<Cell<usize>>,
    n_ctx: usize,
}

impl Forward for Counting {
    fn decode(&mut self, rows: &[Row]) -> stencil_runtime::Result<()> {
        self.rows.set(self.rows.get() + rows.len());
        self.inner.decode(rows)
    }
    fn logits(&self, row: usize) -> &[f32] {
        self.inner.logits(row)
    }
    fn remove(&mut self, seq: i32, from: usize, to: Option<usize>) -> bool {
        self.inner.remove(seq, from, to)
    }
    fn copy(&mut self, src: i32, dst: i32, from: usize, to: Option<usize>) -> stencil_runtime::Result<()> {
        self.inner.copy(src, dst, from, to)
    }
    fn clear(&mut self) {
        self.inner.clear()
    }
    fn n_ctx(&self) -> usize {
        self.n_ctx
    }
}

const SEED: u64 = 11;

fn table_session(n_ctx: usize, n_batch: u32) -> (Session<'static>, Rc<Cell<usize>>) {
    let vocab = toy::words(&["a", "b", "c", "d", "e"]);
    let rows = Rc::new(Cell::new(0));
    let model = Counting { inner: TableModel::new(vocab.len(), SEED, 0.5), rows: rows.clone(), n_ctx };
    let options = SessionOptions { n_batch, ..SessionOptions::default() };
    (Session::over(Box::new(model), vocab, options), rows)
}

/// ln softmax of the table model's logits after `context`, at `token`.
fn oracle(context: &[u32], token: u32) -> f64 {
    let logits = TableModel::new(6, SEED, 0.5).logits_after(context);
    let total: f64 = logits.iter().map(|&l| f64::from(l).exp()).sum();
    f64::from(logits[token as usize]) - total.ln()
}

#[test]
fn continuation_logprobs_are_the_models_and_reuse_the_context() {
    // A batch of 3 splits the 7 tokens across passes.
    let (mut session, rows) = table_session(64, 3);
    let context = [1, 2, 3, 4];
    let continuation = [5, 1, 1];
    let got = session.continuation_logprobs(&context, &continuation).unwrap();
    let full = [&context[..], &continuation[..]].concat();
    let want: Vec<f64> = (0..3).map(|i| oracle(&full[..context.len() + i], continuation[i])).collect();
    assert_eq!(got.len(), 3);
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() < 1e-9, "{got:?} vs {want:?}");
    }
    assert_eq!(rows.get(), 7);
    // The same context again: only its last token and the new continuation are evaluated.
    let other = session.continuation_logprobs(&context, &[2, 3]).unwrap();
    assert_eq!(rows.get(), 7 + 1 + 2);
    assert!((other[1] - oracle(&[1, 2, 3, 4, 2], 3)).abs() < 1e-9);
    // A different context shares nothing past its common prefix.
    let third = session.continuation_logprobs(&[1, 2, 5], &[4]).unwrap();
    assert_eq!(rows.get(), 10 + 2);
    assert!((third[0] - oracle(&[1, 2, 5], 4)).abs() < 1e-9);
    // An empty continuation has no log-probabilities.
    assert!(session.continuation_logprobs(&context, &[]).unwrap().is_empty());
}

#[test]
fn scoring_errors_are_typed() {
    let (mut session, _) = table_session(8, 512);
    assert!(matches!(session.continuation_logprobs(&[], &[1]), Err(RuntimeError::EmptyPrompt)));
    assert!(matches!(
        session.continuation_logprobs(&[1], &[99]),
        Err(RuntimeError::PromptToken { token: 99, n_vocab: 6 })
    ));
    assert!(matches!(
        session.continuation_logprobs(&[1, 2, 3, 4, 5], &[1, 2, 3, 4]),
        Err(RuntimeError::ContextOverflow { prompt: 5, max_tokens: 4, n_ctx: 8 })
    ));
    // The table model has no hidden states.
    assert!(matches!(session.mean_hidden(&[1, 2]), Err(RuntimeError::Decode(_))));
    // The session still scores after the errors.
    assert_eq!(session.continuation_logprobs(&[1, 2], &[3]).unwrap().len(), 1);
}

#[test]
fn a_real_models_scores_are_what_its_sampler_reported() {
    let model = smollm2();
    let mut session = model.session(&SessionOptions { n_ctx: 1024, n_threads: 1, ..Default::default() }).unwrap();
    let prompt = Prompt::Text("The three primary colours are".into());
    let params = SamplingParams { temperature: 1.0, seed: Some(3), max_tokens: 24, ..SamplingParams::default() };
    let generation = session.generate(&GenerateRequest::new(prompt.clone()).with_params(params), |_| {}).unwrap();
    assert!(generation.tokens.len() >= 8, "{:?}", generation.text);
    let context = model.encode_prompt(&prompt).unwrap();
    let scored = session.continuation_logprobs(&context, &generation.tokens).unwrap();
    assert_eq!(scored.len(), generation.tokens.len());
    for (i, (s, g)) in scored.iter().zip(&generation.logprobs).enumerate() {
        let g = f64::from(g.expect("sampled"));
        // One pass over all the tokens against one pass per token: rounding only.
        assert!((s - g).abs() < 0.02, "token {i}: scored {s}, sampled with {g}");
    }
    // The continuation tokenized from the text gives the same score when it round-trips.
    let retokenized = model.tokenize_continuation(&generation.text);
    if retokenized == generation.tokens {
        assert_eq!(session.continuation_logprobs(&context, &retokenized).unwrap(), scored);
    }
}

#[test]
fn mean_hidden_is_the_mean_of_causal_hidden_states() {
    let model = smollm2();
    let options = SessionOptions { n_ctx: 512, n_threads: 1, embeddings: true, ..Default::default() };
    let mut session = model.session(&options).unwrap();
    let tokens = model.tokenize("Grammar-constrained decoding keeps every output valid.");
    let n = tokens.len();
    assert!(n >= 6);
    // Each token's hidden state sees only those before it, so the mean over the first k
    // tokens, times k, minus that over the first k - 1, times k - 1, is token k's state;
    // their mean is the whole text's mean.
    let means: Vec<Vec<f32>> = (1..=n).map(|k| session.mean_hidden(&tokens[..k]).unwrap()).collect();
    let width = means[0].len();
    assert_eq!(width, model.llama().n_embd() as usize);
    for d in (0..width).step_by(37) {
        let states: Vec<f64> = (0..n)
            .map(|k| {
                let before = if k == 0 { 0.0 } else { k as f64 * f64::from(means[k - 1][d]) };
                (k + 1) as f64 * f64::from(means[k][d]) - before
            })
            .collect();
        let mean = states.iter().sum::<f64>() / n as f64;
        let got = f64::from(means[n - 1][d]);
        assert!((mean - got).abs() < 1e-2 * (1.0 + got.abs()), "dimension {d}: {mean} vs {got}");
    }
    // Different texts, different embeddings; the same text, the same one.
    let other = session.mean_hidden(&model.tokenize("Bananas are yellow.")).unwrap();
    assert_ne!(other, means[n - 1]);
    assert_eq!(session.mean_hidden(&tokens).unwrap(), means[n - 1]);
}

#[test]
fn a_reading_is_the_logprobs_and_the_mean_hidden_state_of_the_continuation() {
    let model = smollm2();
    let options = SessionOptions { n_ctx: 512, n_threads: 1, embeddings: true, ..Default::default() };
    let mut session = model.session(&options).unwrap();
    let context = model.tokenize("Constrained decoding");
    let continuation = model.tokenize_continuation(" keeps every output valid.");
    let reading = session.read_continuation(&context, &continuation).unwrap();
    let logprobs = session.continuation_logprobs(&context, &continuation).unwrap();
    assert_eq!(reading.logprobs.len(), continuation.len());
    for (r, l) in reading.logprobs.iter().zip(&logprobs) {
        assert!((r - l).abs() < 1e-3, "{:?} vs {logprobs:?}", reading.logprobs);
    }
    // The continuation's states, each seeing the context: the whole text's mean times its
    // length, less the context's mean times its length, over the continuation's length.
    let whole = session.mean_hidden(&[context.clone(), continuation.clone()].concat()).unwrap();
    let prefix = session.mean_hidden(&context).unwrap();
    let (n, k) = ((context.len() + continuation.len()) as f64, context.len() as f64);
    assert_eq!(reading.mean_hidden.len(), whole.len());
    for d in (0..whole.len()).step_by(29) {
        let want = (n * f64::from(whole[d]) - k * f64::from(prefix[d])) / (n - k);
        let got = f64::from(reading.mean_hidden[d]);
        assert!((want - got).abs() < 2e-2 * (1.0 + got.abs()), "dimension {d}: {want} vs {got}");
    }
    assert!(session.read_continuation(&context, &[]).unwrap().mean_hidden.is_empty());
}
