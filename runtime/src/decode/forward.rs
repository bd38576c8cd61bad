//! What the decode loop needs of a model: [`Forward`], a forward pass over rows of
//! several sequences and a KV cache it can trim and share. llama.cpp's context implements
//! it (`LlamaForward`); so can a test double or another inference library.

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;

use crate::error::{Result, RuntimeError};

/// One token of a forward pass: `token` at position `pos` of KV sequence `seq`, with its
/// logits (and hidden state) kept when `logits` is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    pub token: u32,
    pub pos: usize,
    pub seq: i32,
    pub logits: bool,
}

/// A model as the decode loop drives it: one forward pass over many sequences' tokens,
/// each appended to its sequence's KV cache, and the cache trimmed, copied and cleared.
///
/// The loop keeps every sequence's cache contiguous: a row's `pos` is the number of
/// positions its sequence holds. Speculation removes rejected drafts (`remove`), N samples
/// share a prompt (`copy`), contrastive search reads hidden states (`hidden`).
///
/// ```
/// use stencil_runtime::decode::{Forward, Row};
///
/// /// Every position predicts token 1.
/// struct Ones(Vec<f32>);
/// impl Forward for Ones {
///     fn decode(&mut self, _rows: &[Row]) -> stencil_runtime::Result<()> { Ok(()) }
///     fn logits(&self, _row: usize) -> &[f32] { &self.0 }
///     fn remove(&mut self, _seq: i32, _from: usize, _to: Option<usize>) -> bool { true }
///     fn copy(&mut self, _: i32, _: i32, _: usize, _: Option<usize>) -> stencil_runtime::Result<()> { Ok(()) }
///     fn clear(&mut self) {}
///     fn n_ctx(&self) -> usize { 64 }
/// }
/// let mut model = Ones(vec![0.0, 5.0]);
/// model.decode(&[Row { token: 0, pos: 0, seq: 0, logits: true }]).unwrap();
/// assert_eq!(model.logits(0), &[0.0, 5.0]);
/// ```
pub trait Forward {
    /// Evaluates `rows` in one pass, each appended to its sequence's cache.
    fn decode(&mut self, rows: &[Row]) -> Result<()>;
    /// The logits of row `row` of the last pass (a row that asked for them).
    fn logits(&self, row: usize) -> &[f32];
    /// The last hidden state of row `row` of the last pass (contrastive search).
    fn hidden(&self, row: usize) -> Result<&[f32]> {
        let _ = row;
        Err(RuntimeError::Decode("this model gives no hidden states".into()))
    }
    /// Removes positions `from..to` (`to` `None`: to the end) of sequence `seq`; false when
    /// the cache cannot remove a part of a sequence (then nothing was removed).
    fn remove(&mut self, seq: i32, from: usize, to: Option<usize>) -> bool;
    /// Makes `dst` hold `src`'s positions `from..to` (`to` `None`: to the end) too, sharing
    /// their cells.
    fn copy(&mut self, src: i32, dst: i32, from: usize, to: Option<usize>) -> Result<()>;
    /// Forgets every sequence.
    fn clear(&mut self);
    /// KV cells in all.
    fn n_ctx(&self) -> usize;
}

/// [`Forward`] on a llama.cpp context.
pub(crate) struct LlamaForward<'m> {
    pub(crate) ctx: LlamaContext<'m>,
    batch: LlamaBatch<'static>,
}

impl<'m> LlamaForward<'m> {
    pub(crate) fn new(ctx: LlamaContext<'m>, n_batch: usize, n_seq: usize) -> Self {
        LlamaForward { ctx, batch: LlamaBatch::new(n_batch.max(1), n_seq.max(1) as i32) }
    }
}

impl Forward for LlamaForward<'_> {
    fn decode(&mut self, rows: &[Row]) -> Result<()> {
        self.batch.clear();
        for row in rows {
            self.batch
                .add(LlamaToken(row.token as i32), row.pos as i32, &[row.seq], row.logits)
                .map_err(|e| RuntimeError::Decode(e.to_string()))?;
        }
        self.ctx.decode(&mut self.batch).map_err(|e| match e {
            llama_cpp_2::DecodeError::NoKvCacheSlot => RuntimeError::KvCacheFull,
            e => RuntimeError::Decode(e.to_string()),
        })
    }

    fn logits(&self, row: usize) -> &[f32] {
        self.ctx.get_logits_ith(row as i32)
    }

    fn hidden(&self, row: usize) -> Result<&[f32]> {
        self.ctx.embeddings_ith(row as i32).map_err(|e| {
            RuntimeError::Decode(format!("hidden states: {e} (contrastive search needs a session with `embeddings`)"))
        })
    }

    fn remove(&mut self, seq: i32, from: usize, to: Option<usize>) -> bool {
        self.ctx.clear_kv_cache_seq(Some(seq as u32), Some(from as u32), to.map(|t| t as u32)).unwrap_or(false)
    }

    fn copy(&mut self, src: i32, dst: i32, from: usize, to: Option<usize>) -> Result<()> {
        self.ctx
            .copy_kv_cache_seq(src, dst, Some(from as u32), to.map(|t| t as u32))
            .map_err(|e| RuntimeError::Decode(format!("KV cache: {e}")))
    }

    fn clear(&mut self) {
        self.ctx.clear_kv_cache();
    }

    fn n_ctx(&self) -> usize {
        self.ctx.n_ctx() as usize
    }
}

/// Clears sequence `seq` whole.
pub(crate) fn clear_seq(forward: &mut dyn Forward, seq: i32) {
    forward.remove(seq, 0, None);
}
