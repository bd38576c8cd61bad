//! Prompt lookup: drafts copied from where the latest tokens occurred before, in the prompt
//! or the output, and walked through the grammar.

use stencil_mask::{Matcher, Vocabulary};

use super::{Draft, PromptLookup};

/// A prompt-lookup proposal: the tokens that followed the match, and how it was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lookup {
    pub tokens: Vec<u32>,
    pub origin: LookupOrigin,
}

/// How a prompt-lookup draft was found (its first token's acceptance is counted apart for
/// each: see `crate::Speculation`'s module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LookupOrigin {
    /// Tokens of the matched suffix.
    pub matched: usize,
    /// The proposal is copied from the prompt (its first `prompt_len` tokens), not from
    /// the output.
    pub in_prompt: bool,
}

/// The tokens that followed the latest earlier occurrence of the longest suffix of
/// `tokens` (between `min_match` and `max_match` long), at most `limit` of them; `None`
/// when no suffix occurs earlier. `tokens` starts with the prompt's `prompt_len` tokens.
///
/// ```
/// # use stencil_runtime::speculate::{lookup, LookupOrigin, PromptLookup};
/// let p = PromptLookup { max_draft: 3, min_match: 2, max_match: 3, cut: true };
/// //           a  b  c  d  x  a  b
/// let tokens = [1, 2, 3, 4, 9, 1, 2];
/// let found = lookup(&tokens, 5, &p, 3).unwrap();
/// assert_eq!(found.tokens, vec![3, 4, 9]);
/// assert_eq!(found.origin, LookupOrigin { matched: 2, in_prompt: true });
/// assert!(lookup(&[1, 2, 3], 3, &p, 3).is_none());
/// ```
pub fn lookup(tokens: &[u32], prompt_len: usize, params: &PromptLookup, limit: usize) -> Option<Lookup> {
    let n = tokens.len();
    let limit = limit.min(params.max_draft);
    if limit == 0 {
        return None;
    }
    (params.min_match.max(1)..=params.max_match).rev().filter(|&len| len < n).find_map(|len| {
        let suffix = &tokens[n - len..];
        // The latest earlier occurrence whose continuation is not the suffix itself.
        let start = (0..n - len).rev().find(|&s| &tokens[s..s + len] == suffix)?;
        let from = start + len;
        Some(Lookup {
            tokens: tokens[from..(from + limit).min(n)].to_vec(),
            origin: LookupOrigin { matched: len, in_prompt: from < prompt_len },
        })
    })
}

/// `proposal` as a draft the grammar allows (see the module docs): cut at the first
/// refused token or EOS, forced tokens inserted, at most `limit` tokens in all.
/// `forced_room(k)` is how many forced tokens may follow a sampled token with `k` draft
/// tokens before it (what the decode loop would allow there without speculation: a draft
/// whose forced run would be cut ends before that token instead). `matcher` is the state
/// after the step's own tokens; it is forked, not changed.
pub(crate) fn grammar_draft(
    proposal: &[u32],
    matcher: Option<&Matcher>,
    vocab: &Vocabulary,
    fast_forward: bool,
    limit: usize,
    forced_room: impl Fn(usize) -> usize,
) -> Draft {
    let mut draft = Draft::default();
    let mut fork = matcher.map(Matcher::fork);
    let mut i = 0;
    while i < proposal.len() && draft.len() < limit {
        let token = proposal[i];
        if vocab.is_eos(token) {
            break;
        }
        let Some(m) = fork.as_mut() else {
            draft.push(token, false);
            i += 1;
            continue;
        };
        if m.must_end() || m.accept_token(token).is_err() {
            break;
        }
        let forced = if fast_forward { m.forced_tokens(forced_room(draft.len())) } else { Vec::new() };
        if draft.len() + 1 + forced.len() > limit || m.accept_tokens(&forced).is_err() {
            break;
        }
        draft.push(token, false);
        i += 1;
        forced.iter().for_each(|&f| draft.push(f, true));
        if !forced.is_empty() {
            // Copying goes on only where the copied text goes the grammar's way.
            if proposal.get(i..i + forced.len()) != Some(&forced[..]) {
                break;
            }
            i += forced.len();
        }
    }
    draft
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::speculate::Draft;

    #[test]
    fn lookup_takes_the_longest_suffix_and_its_latest_occurrence() {
        let p = PromptLookup { max_draft: 4, min_match: 1, max_match: 3, cut: true };
        let tokens = |found: Option<Lookup>| found.map(|f| f.tokens).unwrap_or_default();
        // "7 8" occurs twice; the latest occurrence (at 4) is followed by 5.
        let found = lookup(&[7, 8, 1, 2, 7, 8, 5, 6, 7, 8], 2, &p, 4).unwrap();
        assert_eq!(found.tokens, vec![5, 6, 7, 8]);
        assert_eq!(found.origin, LookupOrigin { matched: 2, in_prompt: false });
        // The 3-token suffix "1 7 8" beats the 2-token one; it lies in the prompt.
        let found = lookup(&[1, 7, 8, 9, 3, 7, 8, 4, 1, 7, 8], 8, &p, 2).unwrap();
        assert_eq!(found.tokens, vec![9, 3]);
        assert_eq!(found.origin, LookupOrigin { matched: 3, in_prompt: true });
        // Too short a match: nothing.
        let strict = PromptLookup { min_match: 3, ..p };
        assert!(lookup(&[5, 6, 1, 5, 6], 0, &strict, 4).is_none());
        assert!(tokens(lookup(&[], 0, &p, 4)).is_empty());
        assert!(lookup(&[1, 2, 1, 2], 0, &p, 0).is_none());
    }

    #[test]
    fn grammar_drafts_stop_at_refused_tokens_and_take_forced_ones() {
        let (vocab, tok) = stencil_test_support::fixtures::smollm2();
        let g = stencil_grammar::parse_gbnf(r#"root ::= "{\"name\": \"" [a-z]+ "\", \"age\": " [0-9]+ "}""#).unwrap();
        let g = stencil_mask::CompiledGrammar::new(&g, vocab.clone()).unwrap();
        let mut m = Matcher::new(g);
        m.accept_tokens(&tok.encode("{\"name\": \"").unwrap()).unwrap();
        // Copying `ada", "age": 3` (as the text would tokenize) is drafted up to the quote,
        // then the forced `", "age": ` goes in as forced.
        let proposal = tok.encode("ada\", \"age\": 36}").unwrap();
        let draft = grammar_draft(&proposal, Some(&m), &vocab, true, 32, |_| 64);
        let text: Vec<u8> = draft.tokens.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
        assert!(String::from_utf8_lossy(&text).starts_with("ada\""), "{:?}", String::from_utf8_lossy(&text));
        assert!(draft.forced.iter().any(|&f| f), "the grammar forces text after the name");
        // A proposal the grammar refuses at once gives nothing.
        let refused = tok.encode("42").unwrap();
        assert!(grammar_draft(&refused, Some(&m), &vocab, true, 8, |_| 64).is_empty());
        // EOS ends a draft; the limit holds.
        assert!(grammar_draft(&proposal, Some(&m), &vocab, true, 2, |_| 64).len() <= 2);
        assert_eq!(grammar_draft(&[vocab.eos_ids()[0]], None, &vocab, true, 8, |_| 64), Draft::default());
        assert_eq!(grammar_draft(&[5, 6], None, &vocab, true, 8, |_| 64).checkpoints(), vec![0, 1, 2]);
    }
}
