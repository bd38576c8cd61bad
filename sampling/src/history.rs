//! [`TokenHistory`]: the prompt and the tokens generated so far, with per-token counts.

use std::collections::HashMap;

/// How often one token id occurs in a [`TokenHistory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenCount {
    /// The token id.
    pub token: u32,
    /// Occurrences in the prompt.
    pub prompt: u32,
    /// Occurrences in the generated output.
    pub output: u32,
}

/// The prompt tokens followed by the generated tokens, with per-token counts kept up to date
/// on every [`push`](TokenHistory::push), so the penalties look at the distinct tokens only
/// instead of rescanning the sequence.
///
/// `Clone` is a plain copy: beam search gives each beam its own history.
///
/// # Example
///
/// ```
/// use stencil_sampling::{TokenCount, TokenHistory};
///
/// let mut history = TokenHistory::with_prompt(&[5, 9, 5]);
/// history.push(9);
/// history.push(9);
/// assert_eq!(history.tokens(), &[5, 9, 5, 9, 9]);
/// assert_eq!(history.output(), &[9, 9]);
/// assert_eq!(history.count(9), TokenCount { token: 9, prompt: 1, output: 2 });
/// assert_eq!(history.distinct().len(), 2);
/// ```
#[derive(Clone, Debug, Default)]
pub struct TokenHistory {
    tokens: Vec<u32>,
    prompt_len: usize,
    /// One entry per distinct token, in order of first occurrence.
    counts: Vec<TokenCount>,
    /// Token id → index in `counts`.
    index: HashMap<u32, usize>,
}

impl TokenHistory {
    /// An empty history: no prompt, no output.
    pub fn new() -> Self {
        TokenHistory::default()
    }

    /// A history holding `prompt`, with no output yet.
    pub fn with_prompt(prompt: &[u32]) -> Self {
        let mut history = TokenHistory::new();
        for &token in prompt {
            let count = history.count_mut(token);
            count.prompt = count.prompt.saturating_add(1);
        }
        history.tokens.extend_from_slice(prompt);
        history.prompt_len = prompt.len();
        history
    }

    /// Appends one generated token. Amortized O(1).
    pub fn push(&mut self, token: u32) {
        let count = self.count_mut(token);
        count.output = count.output.saturating_add(1);
        self.tokens.push(token);
    }

    fn count_mut(&mut self, token: u32) -> &mut TokenCount {
        let counts = &mut self.counts;
        let i = *self.index.entry(token).or_insert_with(|| {
            counts.push(TokenCount { token, prompt: 0, output: 0 });
            counts.len() - 1
        });
        &mut self.counts[i]
    }

    /// The prompt, then the output.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The prompt tokens.
    pub fn prompt(&self) -> &[u32] {
        &self.tokens[..self.prompt_len]
    }

    /// The generated tokens.
    pub fn output(&self) -> &[u32] {
        &self.tokens[self.prompt_len..]
    }

    /// Number of tokens, prompt and output.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether there is neither prompt nor output.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The counts of every distinct token, in order of first occurrence.
    pub fn distinct(&self) -> &[TokenCount] {
        &self.counts
    }

    /// The counts of `token` (zeros if it never occurred).
    pub fn count(&self, token: u32) -> TokenCount {
        match self.index.get(&token) {
            Some(&i) => self.counts[i],
            None => TokenCount { token, prompt: 0, output: 0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_a_recount() {
        let mut h = TokenHistory::with_prompt(&[1, 2, 2, 3]);
        for t in [3, 3, 4, 1] {
            h.push(t);
        }
        let beam = h.clone();
        h.push(4);
        for t in 0..6 {
            let prompt = h.prompt().iter().filter(|&&x| x == t).count() as u32;
            let output = h.output().iter().filter(|&&x| x == t).count() as u32;
            assert_eq!(h.count(t), TokenCount { token: t, prompt, output });
        }
        let order: Vec<u32> = h.distinct().iter().map(|c| c.token).collect();
        assert_eq!(order, [1, 2, 3, 4]);
        assert_eq!(beam.count(4).output, 1, "a clone is independent");
        assert_eq!((h.len(), h.prompt().len(), h.output().len()), (9, 4, 5));
        assert!(TokenHistory::new().is_empty());
    }
}
