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

use crate::automaton::{Automaton, DEAD};
use crate::bitmask::{self, TokenSet};
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
    let mut accepted = bitmask::new_mask(vocab.mask_width());
    let mut uncertain: Vec<(u32, u32)> = Vec::new(); // (token, escape depth)
                                                     // Per depth on the current path (entries past the current node's depth are stale):
                                                     // - the set's only item, when it has one that steps alone (the common case inside
                                                     //   strings and other terminals: a step is then one table lookup and the chart is
                                                     //   not touched); otherwise `single_state` is DEAD and `next_bytes` holds the bytes
                                                     //   the set can take;
                                                     // - whether the rule may end there (an escape), and how many escapes the path has up
                                                     //   to there.
    let depths = trie.max_depth + 1;
    let mut single_state = vec![DEAD; depths];
    let mut single_origin = vec![NO_ORIGIN; depths];
    let mut next_bytes = vec![[0u64; 4]; depths];
    let mut escape = vec![false; depths];
    let mut escapes_to = vec![0u32; depths];
    if let [it] = chart.last() {
        if a.steps_alone(it.state, it.origin) {
            (single_state[0], single_origin[0]) = (it.state, it.origin);
        }
    }
    next_bytes[0] = chart.next_bytes(a);
    // The chart holds the current path's sets at depths `0..charted`; sets made by table
    // lookups are added only when a full step needs them.
    let mut charted = 1;
    let mut i = 1;
    while i < trie.nodes.len() {
        let node = trie.nodes[i];
        let depth = node.depth as usize;
        let parent = depth - 1;
        charted = charted.min(depth);
        let (p, origin) = (single_state[parent], single_origin[parent]);
        let alive;
        if p != DEAD {
            // A subtree spelled only with bytes that keep the item alive and alone for as
            // many steps as the subtree is deep (most of a string's interior: its run
            // bytes, and in a loop, well-formed non-ASCII characters) is alive throughout:
            // its tokens are one run, taken at once (escapes inside it change nothing for
            // tokens that are alive).
            if trie.subtree_ascii[i] & !a.run_bytes[p as usize] == 0 {
                let run = if origin == NO_ORIGIN { a.run_len[p as usize] } else { a.run_len_simple[p as usize] };
                let whole = if node.ascii {
                    node.height as u32 <= run
                } else if node.utf8 {
                    // Other characters too, where each takes the state where `a` does.
                    let utf8_run = a.utf8_run[p as usize];
                    if origin == NO_ORIGIN {
                        node.height as u32 <= utf8_run
                    } else {
                        run == u32::MAX && utf8_run == u32::MAX
                    }
                } else {
                    false
                };
                if whole {
                    trie.subtree_ids(i).iter().for_each(|&t| bitmask::set(&mut accepted, t));
                    i = node.subtree_end as usize;
                    continue;
                }
            }
            let t = a.next(p, node.byte);
            alive = t != DEAD;
            escape[depth] = false;
            single_state[depth] = DEAD;
            if alive {
                if a.steps_alone(t, origin) {
                    single_state[depth] = t;
                    single_origin[depth] = origin;
                    escape[depth] = origin == NO_ORIGIN && a.is_final[t as usize];
                } else {
                    // A full step, from the one item.
                    chart.truncate(charted);
                    materialize(&mut chart, a, &single_state, &single_origin, charted..depth, scratch);
                    let it = Item { state: p, origin };
                    debug_assert_eq!(chart.last(), &[it]);
                    full_step(
                        &mut chart,
                        a,
                        node.byte,
                        depth,
                        scratch,
                        &mut single_state,
                        &mut single_origin,
                        &mut next_bytes,
                        &mut escape,
                    )?;
                    charted = depth + 1;
                }
            }
        } else if !has_byte(&next_bytes[parent], node.byte) {
            alive = false;
            escape[depth] = false;
        } else {
            chart.truncate(charted);
            materialize(&mut chart, a, &single_state, &single_origin, charted..depth, scratch);
            alive = full_step(
                &mut chart,
                a,
                node.byte,
                depth,
                scratch,
                &mut single_state,
                &mut single_origin,
                &mut next_bytes,
                &mut escape,
            )?;
            charted = depth + 1;
        }
        escapes_to[depth] = escapes_to[parent] + escape[depth] as u32;
        if alive {
            trie.tokens(i).iter().for_each(|&t| bitmask::set(&mut accepted, t));
            i += 1;
            continue;
        }
        // Dead end: only the escapes on this path can still carry the subtree's tokens.
        if escapes_to[depth] > 0 {
            let on_path: Vec<u32> = (1..=depth).filter(|&j| escape[j]).map(|j| j as u32).collect();
            for (m, token) in trie.subtree_tokens(i) {
                if m == i && escape[depth] {
                    bitmask::set(&mut accepted, token);
                    continue;
                }
                // A suffix whose first byte no caller can ever take is never allowed.
                let bytes = vocab.token_bytes(token);
                uncertain.extend(on_path.iter().filter(|&&j| has_byte(follow, bytes[j as usize])).map(|&j| (token, j)));
            }
        }
        i = node.subtree_end as usize;
    }
    // Tokens alive further down may also be uncertain through an escape above them: they
    // are accepted already, which is enough.
    let uncertain = (!uncertain.is_empty())
        .then(|| TokenTrie::build(uncertain.iter().map(|&(t, j)| (&vocab.token_bytes(t)[j as usize..], t))));
    Ok(StateMasks { accepted: TokenSet::from_mask(accepted), uncertain })
}

/// Adds to the chart the sets at `depths`, each the one item a table lookup made.
fn materialize(
    chart: &mut Chart,
    a: &Automaton,
    single_state: &[u32],
    single_origin: &[u32],
    depths: std::ops::Range<usize>,
    scratch: &mut Scratch,
) {
    for k in depths {
        debug_assert_ne!(single_state[k], DEAD, "sets left out of the chart have one item");
        let it = Item { state: single_state[k], origin: single_origin[k] };
        chart.push_set(a, [it], scratch);
    }
}

/// One Earley step on `byte` into the set at `depth`, recording what the walk needs;
/// whether the set is non-empty.
#[allow(clippy::too_many_arguments)]
fn full_step(
    chart: &mut Chart,
    a: &Automaton,
    byte: u8,
    depth: usize,
    scratch: &mut Scratch,
    single_state: &mut [u32],
    single_origin: &mut [u32],
    next_bytes: &mut [[u64; 4]],
    escape: &mut [bool],
) -> Result<bool, LimitKind> {
    let info = chart.scan_byte(a, byte, scratch);
    if info.overflow {
        return Err(scratch.overflow_kind());
    }
    escape[depth] = info.escaped;
    single_state[depth] = DEAD;
    match chart.last() {
        [] => return Ok(false),
        [it] if a.steps_alone(it.state, it.origin) => {
            single_state[depth] = it.state;
            single_origin[depth] = it.origin;
        }
        _ => next_bytes[depth] = chart.next_bytes(a),
    }
    Ok(true)
}

#[inline]
pub(crate) fn has_byte(set: &[u64; 4], b: u8) -> bool {
    set[b as usize >> 6] >> (b & 63) & 1 == 1
}
