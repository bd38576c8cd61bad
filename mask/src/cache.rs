//! The token-mask cache: for one automaton state, which tokens are allowed whatever the
//! context, and which depend on it.
//!
//! Starting from the single item `(state, NO_ORIGIN)`, a walk over the vocabulary trie runs
//! the Earley parser byte by byte. A token whose bytes all stay inside the state's rule (or
//! rules it calls) is *accepted*: allowed in every context. When the rule itself can end
//! after `j` bytes of a token (an escape), the rest of the token, `bytes[j..]`, depends on
//! the callers: the token is *uncertain*, kept in a trie of such suffixes. At mask time the
//! matcher checks only those suffixes, from the real callers (see [`crate::Matcher`]). A
//! rule ending exactly at the end of the token needs no check: callers always exist.

use crate::automaton::Automaton;
use crate::bitmask::TokenSet;
use crate::earley::{Chart, Item, Scratch, NO_ORIGIN};
use crate::limits::LimitKind;
use crate::trie::TokenTrie;

/// What the cache knows about one state.
#[derive(Debug)]
pub(crate) struct StateMasks {
    /// Tokens allowed in every context.
    pub accepted: TokenSet,
    /// Suffixes, after a point where the state's rule may end, of the remaining tokens
    /// that the rule may end inside; `None` when there are none.
    pub uncertain: Option<TokenTrie>,
}

/// Computes the [`StateMasks`] of `state` by walking `trie`.
pub(crate) fn compute(
    a: &Automaton,
    trie: &TokenTrie,
    vocab: &crate::vocab::Vocabulary,
    state: u32,
    scratch: &mut Scratch,
) -> Result<StateMasks, LimitKind> {
    let (mut chart, info) = Chart::new(a, &[Item { state, origin: NO_ORIGIN }], scratch);
    if info.overflow {
        // A truncated first set would silently drop tokens.
        return Err(scratch.overflow_kind());
    }
    let follow = &a.follow[a.state_rule[state as usize] as usize];
    let mut accepted: Vec<u32> = Vec::new();
    let mut uncertain: Vec<(u32, u32)> = Vec::new(); // (token, escape depth)
    let mut escapes: Vec<u32> = Vec::new(); // depths on the current path where the rule may end
                                            // next_bytes[d]: the bytes the set after d bytes can take.
    let mut next_bytes: Vec<[u64; 4]> = vec![chart.next_bytes(a)];
    let mut i = 1;
    while i < trie.nodes.len() {
        let node = trie.nodes[i];
        let depth = node.depth as usize;
        while escapes.last().is_some_and(|&j| j as usize >= depth) {
            escapes.pop();
        }
        let (alive, escaped) = if has_byte(&next_bytes[depth - 1], node.byte) {
            chart.truncate(depth);
            let info = chart.scan_byte(a, node.byte, scratch);
            if info.overflow {
                return Err(scratch.overflow_kind());
            }
            (!chart.last().is_empty(), info.escaped)
        } else {
            (false, false)
        };
        if escaped {
            escapes.push(depth as u32);
        }
        if alive {
            accepted.extend_from_slice(trie.tokens(i));
            next_bytes.truncate(depth);
            next_bytes.push(chart.next_bytes(a));
            i += 1;
            continue;
        }
        // Dead end: only the escapes on this path can still carry the subtree's tokens.
        if !escapes.is_empty() {
            for (m, token) in trie.subtree_tokens(i) {
                if m == i && escaped {
                    accepted.push(token);
                    continue;
                }
                // A suffix whose first byte no caller can ever take is never allowed.
                let bytes = vocab.token_bytes(token);
                uncertain.extend(escapes.iter().filter(|&&j| has_byte(follow, bytes[j as usize])).map(|&j| (token, j)));
            }
        }
        i = node.subtree_end as usize;
    }
    // Tokens alive further down may also be uncertain through an escape above them: they
    // are accepted already, which is enough.
    let uncertain = (!uncertain.is_empty())
        .then(|| TokenTrie::build(uncertain.iter().map(|&(t, j)| (&vocab.token_bytes(t)[j as usize..], t))));
    Ok(StateMasks { accepted: TokenSet::from_ids(accepted, vocab.mask_width()), uncertain })
}

#[inline]
pub(crate) fn has_byte(set: &[u64; 4], b: u8) -> bool {
    set[b as usize >> 6] >> (b & 63) & 1 == 1
}
