//! A table-driven model for the decode loop's tests: its logits are a fixed function of the
//! whole context a sequence holds in its KV cache, so the exact distribution of any short
//! output can be computed by enumeration, and any slip of the loop's cache bookkeeping
//! (a position skipped, a rejected draft left in place, a copy from the wrong sequence)
//! changes the logits or fails loudly.

use std::collections::HashMap;

use stencil_runtime::decode::{Forward, Row};
use stencil_runtime::{Result, RuntimeError};

/// Logits over `n_vocab` tokens that depend on the context (the last two tokens and the
/// length), drawn once from `seed`; token 0 (EOS) gets `eos_bias` on top.
///
/// ```
/// use stencil_test_support::table::TableModel;
/// use stencil_runtime::decode::{Forward, Row};
/// let mut m = TableModel::new(5, 1, 0.5);
/// m.decode(&[Row { token: 1, pos: 0, seq: 0, logits: true }]).unwrap();
/// assert_eq!(m.logits(0), &m.logits_after(&[1])[..]);
/// ```
#[derive(Clone, Debug)]
pub struct TableModel {
    n_vocab: usize,
    seed: u64,
    eos_bias: f32,
    /// Added to the logits of some tokens in every context.
    bias: Vec<(u32, f32)>,
    /// Per KV sequence: the tokens it holds, position by position.
    cache: HashMap<i32, Vec<u32>>,
    /// The last pass's logits, per row (empty rows where none were asked for).
    out: Vec<Vec<f32>>,
    /// Forward passes run.
    pub passes: usize,
}

impl TableModel {
    /// A model over `n_vocab` tokens whose table is drawn from `seed`.
    pub fn new(n_vocab: usize, seed: u64, eos_bias: f32) -> TableModel {
        TableModel { n_vocab, seed, eos_bias, bias: Vec::new(), cache: HashMap::new(), out: Vec::new(), passes: 0 }
    }

    /// The same model with `bias` added to `token`'s logit in every context (a draft that
    /// favours what the target does not, say).
    pub fn favouring(mut self, token: u32, bias: f32) -> TableModel {
        self.bias.push((token, bias));
        self
    }

    /// The logits after `context` (the prompt and the output so far).
    pub fn logits_after(&self, context: &[u32]) -> Vec<f32> {
        let last = |k: usize| context.len().checked_sub(k).map_or(u64::MAX, |i| u64::from(context[i]));
        let key = self.seed
            ^ last(1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ last(2).rotate_left(17)
            ^ ((context.len() % 3) as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        let mut next = crate::rng::xorshift(key | 1);
        let mut logits: Vec<f32> = (0..self.n_vocab).map(|_| (next() % 10_000) as f32 / 2_500.0 - 2.0).collect();
        logits[0] += self.eos_bias;
        for &(t, b) in &self.bias {
            logits[t as usize] += b;
        }
        logits
    }

    /// The tokens KV sequence `seq` holds.
    pub fn held(&self, seq: i32) -> &[u32] {
        self.cache.get(&seq).map_or(&[], Vec::as_slice)
    }
}

fn fail(message: String) -> RuntimeError {
    RuntimeError::Decode(format!("table model: {message}"))
}

impl Forward for TableModel {
    fn decode(&mut self, rows: &[Row]) -> Result<()> {
        self.passes += 1;
        self.out.clear();
        for row in rows {
            let held = self.cache.entry(row.seq).or_default();
            if row.pos != held.len() {
                return Err(fail(format!(
                    "row at position {} of sequence {}, which holds {}",
                    row.pos,
                    row.seq,
                    held.len()
                )));
            }
            if row.token as usize >= self.n_vocab {
                return Err(fail(format!("token {} out of the vocabulary", row.token)));
            }
            held.push(row.token);
            let logits = if row.logits { self.logits_after(&self.cache[&row.seq]) } else { Vec::new() };
            self.out.push(logits);
        }
        Ok(())
    }

    fn logits(&self, row: usize) -> &[f32] {
        let logits = &self.out[row];
        assert!(!logits.is_empty(), "row {row} did not ask for logits");
        logits
    }

    fn remove(&mut self, seq: i32, from: usize, to: Option<usize>) -> bool {
        let held = self.cache.entry(seq).or_default();
        match to {
            Some(to) if to < held.len() => false,
            _ => {
                held.truncate(from);
                true
            }
        }
    }

    fn copy(&mut self, src: i32, dst: i32, from: usize, to: Option<usize>) -> Result<()> {
        let source = self.held(src).to_vec();
        let to = to.unwrap_or(source.len()).min(source.len());
        let held = self.cache.entry(dst).or_default();
        if held.len() != from || from > to {
            return Err(fail(format!("copy of {from}..{to} into sequence {dst}, which holds {}", held.len())));
        }
        held.extend_from_slice(&source[from..to]);
        Ok(())
    }

    fn clear(&mut self) {
        self.cache.clear();
    }

    fn n_ctx(&self) -> usize {
        1 << 20
    }
}
