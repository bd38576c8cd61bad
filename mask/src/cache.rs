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
//! Only suffixes whose first byte is in the rule's FOLLOW set are kept, which keeps the
//! uncertain trie small. Accepted sets are stored as a list or a bitmask. Entries are
//! computed on first use, once per state, and shared by all matchers and threads
//! (`CompiledGrammar::warm_up` fills them all at once).
//!
//! The walk, and what spares it:
//!
//! - The trie (`vocab/trie.rs`) is flattened in depth-first order, so a dead byte skips
//!   its subtree at once; the root's children are listed apart, so a walk visits only the
//!   first bytes its set can take, not hundreds of first-byte nodes of a big vocabulary.
//! - While the set is one item that predicts and completes nothing (inside strings,
//!   numbers, keys), a byte is one table lookup and the chart is not touched. So is a set
//!   of an item and the start of the one rule it calls, where that start predicts and
//!   completes nothing (`Automaton::steps_with_callee`: a key that is none of some names
//!   calls a shared rule for the rest of the string); items that can take nothing more
//!   (a finished callee) do not count.
//! - A subtree spelled only with the state's run bytes, no deeper than its run, is taken
//!   whole (its tokens are one contiguous range of the trie's ids); so is a plain subtree
//!   no deeper than the state's reach (see `automaton/text.rs` for runs and reaches).
//! - The text tokens are split once per vocabulary (`TextTokens`) into *plain text* (see
//!   `TextTokens` and `bytes.rs`: so a pattern's `.*` is a loop over plain text like a
//!   string's interior) and the rest. Where a state's reach covers every plain token (a
//!   string's interior), or its first byte moves it alone into such a state (a key that is
//!   none of some names, after its first letter), the plain tokens are set at once from a
//!   per-vocabulary mask and only the rest is walked (llguidance's slicer, exact here). A
//!   loop over all plain text walks the other tokens only from their first byte that is
//!   not plain text, where the loop is back in its state.
//! - At an exact reach (a count's end), and at a bounded one where no caller takes plain
//!   text after the rule (a string's last piece before its quote), the plain tokens are
//!   taken by length from per-vocabulary masks (up to 23 characters) and only the rest is
//!   walked; where the reach is long but finite, the plain tokens up to 23 characters come
//!   from their mask and only the rest and the long plain tokens are walked.
//! - Long counts split into rules have pieces whose ends are rule ends. A state where
//!   plain text reaches far only through a rule it calls, or a few characters on (a
//!   string's start, the next piece), is reached along the count
//!   (`reach_along_plain_text`). At a piece's end the plain tokens of at most `n`
//!   characters are taken at once, and the longer ones are left to the matcher
//!   (`StateMasks::plain_after`).
//! - A state whose run spans a wide ASCII class (a pattern's `[ -}]+`, its counted
//!   positions included, or a bounded `{1,64}` with at least 16 left) takes the tokens
//!   spelled with the class that the run takes whole from per-byte token masks
//!   (`TextTokens::run_split`, the result kept per class), and walks only the tokens whose
//!   first other byte the run's state at that offset takes (a closing quote: few), from
//!   that byte on, and those that outlast the run, from its end.
//! - Free text that stops only at a few ASCII bytes (a structural tag's `any_text` with
//!   `excludes`: a loop over every character but `<`), in the state or in the start of a
//!   rule it calls (`Automaton::text_loop`): the loop's item stays alive over any UTF-8
//!   token without those bytes, so those are set at once from a mask made per byte set
//!   and kept (`TextTokens::loop_split`), and only the others are walked (for a Hermes
//!   trigger on Gemma 3's 262k tokens: 33 ms → 0.2 ms for the first mask).

use crate::automaton::{Automaton, DEAD, NO_ORIGIN};
use crate::bitmask::{self, TokenSet};
use crate::bytes::{ByteSet, PLAIN_ASCII, PLAIN_FIRST_BYTES};
use crate::earley::{Chart, Item, Scratch};
use crate::limits::LimitKind;
use crate::vocab::trie::{RunSplit, TextTokens, TokenTrie};
use crate::vocab::Vocabulary;

/// What the cache knows about one state.
#[derive(Debug)]
pub(crate) struct StateMasks {
    /// Tokens allowed in every context.
    pub accepted: TokenSet,
    /// Suffixes, after a point where the state's rule may end, of the remaining tokens
    /// that the rule may end inside; `None` when there are none.
    /// (Boxed: most states have none, and an empty cache cell stays small.)
    pub uncertain: Option<Box<TokenTrie>>,
    /// At a count's end where the rule ends (see `TextFacts::text_end`): `Some(n)` when
    /// every plain token of more than `n` characters ends the rule after `n` of them, so
    /// that the rest of it depends on the callers (and none of those is in `accepted` or
    /// `uncertain`; see [`crate::Matcher`]).
    pub plain_after: Option<u32>,
}

/// What the walk knows at each depth of the current trie path (entries past the current
/// node's depth are stale).
struct Path {
    /// The set's only item, when it has one that steps alone (the common case inside
    /// strings and other terminals: a step is then one table lookup and the chart is not
    /// touched; see [`Path::record`] for the sets that count as one item); `state` is
    /// [`DEAD`] otherwise.
    single: Vec<Item>,
    /// The item the set is rebuilt from, where `single` is one: `single` itself, or the
    /// caller whose callee's start `single` is (see [`Path::record`]).
    chart_item: Vec<Item>,
    /// The bytes the set can take (kept where `single` is none).
    next_bytes: Vec<ByteSet>,
    /// Whether the state's rule may end there (an escape).
    escape: Vec<bool>,
    /// How many escapes the path has up to there.
    escapes_to: Vec<u32>,
    /// The byte on the edge into the path's node there.
    bytes: Vec<u8>,
    /// The chart holds the path's sets at depths `0..charted`; sets made by table lookups
    /// are added only when a full step needs them.
    charted: usize,
}

/// How the set at a node's depth comes from its parent's.
enum Step {
    Dead,
    /// The parent's one item moves, by table lookup, to this state and stays alone.
    Alone(u32),
    /// An Earley step.
    Full,
}

/// Runs over fewer bytes than this are walked as any other state (the walk over a narrow
/// class's tokens is short; a run's split starts with a pass over per-byte masks).
const MIN_RUN_BYTES: u32 = 48;
/// Bounded runs with less left than this are walked as any other state (the tokens longer
/// than what is left are cut too: most of a big vocabulary's, for a short rest).
const MIN_BOUNDED_RUN: u32 = 16;

/// Computes the [`StateMasks`] of `state` by walking `trie`.
pub(crate) fn compute(
    a: &Automaton,
    text: &TextTokens,
    vocab: &Vocabulary,
    state: u32,
    scratch: &mut Scratch,
) -> Result<StateMasks, LimitKind> {
    let (mut chart, info) = Chart::new(a, &[Item { state, origin: NO_ORIGIN }], scratch);
    if info.overflow {
        // A truncated first set would silently drop tokens.
        return Err(scratch.overflow_kind());
    }
    let follow = &a.rules.follow[a.table.state_rule[state as usize] as usize];
    // The longest count with a mask of its own.
    let short = text.plain_upto.len() - 1;
    let reach = a.text.text_reach[state as usize] as usize;
    let reach_along = if reach < short && (chart.last().len() > 1 || a.plain_text_successor(state).is_some()) {
        reach_along_plain_text(a, state, short, scratch)
    } else {
        reach
    };
    // (token, escape depth)
    let mut uncertain: Vec<(u32, u32)> = Vec::new();
    let all_roots = [true; 256];
    let mut walk_in = |trie: &TokenTrie, roots: &[bool; 256], accepted: &mut Vec<u32>| {
        walk(a, trie, roots, &mut chart, follow, accepted, &mut uncertain, None, scratch)
    };
    let end = a.text.text_end[state as usize] as usize;
    let plain_after = (1..=short).contains(&end).then_some(end as u32);
    let accepted = if plain_after.is_some() {
        // A count's end where its rule ends (a long count split into rules): the plain
        // tokens of at most `end` characters are allowed, the longer ones go on in the
        // callers after `end` characters (the matcher decides those); only the rest is
        // walked.
        let mut accepted = text.plain_upto[end].clone();
        walk_in(&text.rest, &all_roots, &mut accepted)?;
        accepted
    } else if reach <= short
        && (a.text.text_reach_exact[state as usize]
            || a.text.text_reach_bounded[state as usize] && !follow.intersects(PLAIN_FIRST_BYTES))
    {
        // A count's last characters: the plain tokens short enough are allowed, the
        // others not (where the rule may end on the way, no caller takes plain text after
        // it); only the rest is walked.
        let mut accepted = text.plain_upto[reach].clone();
        walk_in(&text.rest, &all_roots, &mut accepted)?;
        accepted
    } else if a.loops_over_plain_text(state) || a.waits_for(state).is_some_and(|s| a.loops_over_plain_text(s)) {
        // A loop over all plain text (a string's interior): every plain token is allowed,
        // and the others are walked only from their first byte that is not plain text,
        // where the loop is back in this state (most of them then die at once: a control
        // character, a broken UTF-8 sequence; a closing quote escapes).
        let mut accepted = text.plain.clone();
        let (rest, cut_at) = (&text.rest_cut, Some(&text.rest_cut_at));
        walk(a, rest, &all_roots, &mut chart, follow, &mut accepted, &mut uncertain, cut_at, scratch)?;
        accepted
    } else if let Some((ascii, non_ascii)) = a.plain_text_after(state, text.plain_max_len) {
        // Every plain token with certain first bytes is allowed whole (see
        // `Automaton::plain_text_after`): those are set at once, and the root's children
        // are split: under the others the walk visits every token, under those only the
        // rest.
        let mut accepted = text.plain.clone();
        // Plain tokens start with a plain ASCII byte or a non-ASCII one.
        let mut walk_all = [false; 256];
        for b in 0..=255u8 {
            walk_all[b as usize] = match b {
                0..0x80 => (PLAIN_ASCII & !ascii) >> b & 1 == 1,
                _ => !non_ascii,
            };
        }
        for b in (0..=255u8).filter(|&b| walk_all[b as usize]) {
            text.plain_by_first_byte(b).for_each(|t| bitmask::clear(&mut accepted, t));
        }
        walk_in(&text.rest, &walk_all.map(|w| !w), &mut accepted)?;
        walk_in(&text.all, &walk_all, &mut accepted)?;
        accepted
    } else if reach_along >= short {
        // Plain text reaches far, not for ever, from the state or a rule it calls (a long
        // count's first characters, or the next piece of a long count split into rules;
        // an unanchored pattern's search with a length bound): the short plain tokens are
        // allowed, the long ones walked with the rest.
        let mut accepted = text.plain_upto[short].clone();
        walk_in(&text.rest, &all_roots, &mut accepted)?;
        walk_in(&text.long_plain, &all_roots, &mut accepted)?;
        accepted
    } else if let Some((split, along)) = split_run(a, text, vocab, state) {
        // A run over many ASCII bytes (a pattern's `[a-z0-9_-]+`, or `{1,64}` with much
        // left): the tokens spelled with them that the run takes whole are allowed, and
        // of the others only those whose first other byte the run's state there takes,
        // or that outlast the run, are walked, from that byte or the run's end on.
        let mut accepted = split.within.as_ref().clone();
        for (k, trie) in &split.cut {
            let start = Item { state: along[*k as usize], origin: NO_ORIGIN };
            let (mut chart, _) = Chart::new(a, &[start], scratch);
            walk(a, trie, &all_roots, &mut chart, follow, &mut accepted, &mut uncertain, Some(&split.cut_at), scratch)?;
        }
        accepted
    } else if let Some(split) = a.text_loop(state).and_then(|leave| text.loop_split(vocab, leave)) {
        // Free text that leaves its loop at a few ASCII bytes only (the first bytes of
        // its end markers): every UTF-8 token without them is allowed whole, the others
        // are walked.
        let mut accepted = split.inside.clone();
        walk_in(&split.rest, &all_roots, &mut accepted)?;
        accepted
    } else {
        let mut accepted = bitmask::new_mask(vocab.mask_width());
        walk_in(&text.all, &all_roots, &mut accepted)?;
        accepted
    };
    // Tokens alive further down may also be uncertain through an escape above them: they
    // are accepted already, which is enough.
    let uncertain = (!uncertain.is_empty())
        .then(|| Box::new(TokenTrie::build(uncertain.iter().map(|&(t, j)| (&vocab.token_bytes(t)[j as usize..], t)))));
    Ok(StateMasks { accepted: TokenSet::from_mask(accepted), uncertain, plain_after })
}

/// How many plain-text characters in a row surely keep some item alive from `state`,
/// looking no further than `limit`: the set is stepped on plain text while every plain
/// character does the same to it (an item that takes one takes each to one state, the
/// others take none; a count, or a count's pieces when a long one was split into rules),
/// and at each step an item of the set may reach on (the next piece's start).
fn reach_along_plain_text(a: &Automaton, state: u32, limit: usize, scratch: &mut Scratch) -> usize {
    let farthest = |set: &[Item]| set.iter().map(|it| a.text.text_reach[it.state as usize] as usize).max().unwrap_or(0);
    let (mut chart, _) = Chart::new(a, &[Item { state, origin: NO_ORIGIN }], scratch);
    let mut reach = farthest(chart.last());
    for k in 1..=limit {
        let alike = |it: &Item| match a.next(it.state, b'a') {
            DEAD => !a.takes_plain_text(it.state),
            _ => a.plain_text_successor(it.state).is_some(),
        };
        if reach >= limit || !chart.last().iter().all(alike) {
            break;
        }
        let info = chart.scan_byte(a, b'a', scratch);
        if info.overflow || chart.last().is_empty() {
            break;
        }
        reach = reach.max(k.saturating_add(farthest(chart.last())));
    }
    reach
}

/// `state`'s run over at least [`MIN_RUN_BYTES`] ASCII bytes, endless or with at least
/// [`MIN_BOUNDED_RUN`] left, when it has one: the text tokens
/// split by it (see [`TextTokens::run_split`]), and the run's states as far as a token
/// reaches.
fn split_run(a: &Automaton, text: &TextTokens, vocab: &Vocabulary, state: u32) -> Option<(RunSplit, Vec<u32>)> {
    let (run, len) = a.run(state)?;
    if run.count_ones() < MIN_RUN_BYTES || len < MIN_BOUNDED_RUN {
        return None;
    }
    let reach = text.all.max_depth.min(len as usize);
    let along: Vec<u32> = std::iter::successors(Some(state), |&s| Some(a.next(s, b'a'))).take(reach + 1).collect();
    // What the run's states take besides the run.
    let mut next = ByteSet::EMPTY;
    for &s in &along {
        next |= a.table.first_bytes[s as usize];
    }
    let next = next.without_ascii(run);
    let takes = |k: usize, b: u8| a.table.first_bytes[along[k] as usize].contains(b);
    let split = text.run_split(vocab, run, len, &next, takes)?;
    Some((split, along))
}

/// Walks the subtrees of `trie`'s root children whose byte `roots` marks, from the
/// chart's first set, into `accepted` and `uncertain`. The trie's keys are whole tokens,
/// or the tokens from `cut_at[token]` on.
#[allow(clippy::too_many_arguments)]
fn walk(
    a: &Automaton,
    trie: &TokenTrie,
    roots: &[bool; 256],
    chart: &mut Chart,
    follow: &ByteSet,
    accepted: &mut [u32],
    uncertain: &mut Vec<(u32, u32)>,
    cut_at: Option<&rustc_hash::FxHashMap<u32, u32>>,
    scratch: &mut Scratch,
) -> Result<(), LimitKind> {
    chart.truncate(1);
    let depths = trie.max_depth + 1;
    let mut path = Path {
        single: vec![Item { state: DEAD, origin: NO_ORIGIN }; depths],
        chart_item: vec![Item { state: DEAD, origin: NO_ORIGIN }; depths],
        next_bytes: vec![ByteSet::EMPTY; depths],
        escape: vec![false; depths],
        escapes_to: vec![0u32; depths],
        bytes: vec![0u8; depths],
        charted: 1,
    };
    path.record(a, chart, 0);
    // The first bytes the start set can take: a root child on another byte is dead, and
    // with nothing before it on its path to carry its tokens.
    let first = match path.single[0] {
        Item { state: DEAD, .. } => path.next_bytes[0],
        it => a.item_bytes(it.state),
    };
    for &(byte, child) in &trie.root_children {
        if !roots[byte as usize] || !first.contains(byte) {
            continue;
        }
        // The child's subtree, depth first.
        let end = trie.nodes[child as usize].subtree_end as usize;
        let mut i = child as usize;
        while i < end {
            let node = trie.nodes[i];
            let depth = node.depth as usize;
            path.bytes[depth] = node.byte;
            let parent = path.single[depth - 1];
            path.charted = path.charted.min(depth);
            let step = if parent.state != DEAD {
                if whole_subtree_alive(a, trie, i, parent) {
                    trie.subtree_ids(i).iter().for_each(|&t| bitmask::set(accepted, t));
                    i = node.subtree_end as usize;
                    continue;
                }
                match a.next(parent.state, node.byte) {
                    // A byte that the parent's callee takes (see `Path::record`).
                    _ if !a.is_simple(parent.state) && callee_takes(a, parent.state, node.byte) => Step::Full,
                    DEAD => Step::Dead,
                    t if a.steps_alone(t, parent.origin) || a.steps_with_callee(t).is_some() => Step::Alone(t),
                    _ => Step::Full,
                }
            } else if path.next_bytes[depth - 1].contains(node.byte) {
                Step::Full
            } else {
                Step::Dead
            };
            let alive = match step {
                Step::Dead => {
                    path.escape[depth] = false;
                    false
                }
                Step::Alone(t) => {
                    let it = Item { state: t, origin: parent.origin };
                    path.chart_item[depth] = it;
                    path.single[depth] = match a.waits_for(t) {
                        Some(callee) => Item { state: callee, origin: depth as u32 },
                        None => it,
                    };
                    path.escape[depth] = parent.origin == NO_ORIGIN && a.table.is_final[t as usize];
                    true
                }
                Step::Full => {
                    // Bring the chart up to the parent's set, then step.
                    chart.truncate(path.charted);
                    for k in path.charted..depth {
                        debug_assert_ne!(path.chart_item[k].state, DEAD, "sets left out of the chart have one item");
                        chart.push_set(a, [path.chart_item[k]], scratch);
                    }
                    let info = chart.scan_byte(a, node.byte, scratch);
                    if info.overflow {
                        return Err(scratch.overflow_kind());
                    }
                    path.charted = depth + 1;
                    path.escape[depth] = info.escaped;
                    path.record(a, chart, depth)
                }
            };
            path.escapes_to[depth] = path.escapes_to[depth - 1] + path.escape[depth] as u32;
            if alive {
                trie.tokens(i).iter().for_each(|&t| bitmask::set(accepted, t));
                i += 1;
                continue;
            }
            // Dead end: only the escapes on this path can still carry the subtree's tokens.
            if path.escapes_to[depth] > 0 {
                // A token ending here ends with the rule when the rule may end here.
                if path.escape[depth] {
                    trie.tokens(i).iter().for_each(|&t| bitmask::set(accepted, t));
                }
                // The others may go on in a caller after an escape at `j`, when some
                // caller can take the byte after it (a suffix whose first byte no caller
                // can ever take is never allowed): on the path for `j < depth`, the
                // first byte below this node for `j = depth`.
                let at = |t: u32| cut_at.map_or(0, |c| c[&t]);
                for j in (1..=depth).filter(|&j| path.escape[j]) {
                    if j < depth {
                        if follow.contains(path.bytes[j + 1]) {
                            // The subtree's ids start with those ending here.
                            let ending_here = if path.escape[depth] { trie.tokens(i).len() } else { 0 };
                            let others = &trie.subtree_ids(i)[ending_here..];
                            uncertain.extend(others.iter().map(|&t| (t, at(t) + j as u32)));
                        }
                    } else {
                        for c in trie.children(i).filter(|&c| follow.contains(trie.nodes[c].byte)) {
                            uncertain.extend(trie.subtree_ids(c).iter().map(|&t| (t, at(t) + j as u32)));
                        }
                    }
                }
            }
            i = node.subtree_end as usize;
        }
    }
    Ok(())
}

impl Path {
    /// Records the chart's last set as the set at `depth`; whether it is non-empty. Items
    /// that can take nothing more (a callee that has ended, its caller moved on) are left
    /// out. A set of one item that steps alone is kept as that item. So is a set of an
    /// item and the start of its one callee ([`Automaton::steps_with_callee`]): as the
    /// item, whose bytes are its own but for those its callee takes (the walk steps the
    /// chart on those), or, when the item only waits for its callee, as the callee's
    /// item (the caller stays in the chart for the callee's end).
    fn record(&mut self, a: &Automaton, chart: &Chart, depth: usize) -> bool {
        self.single[depth].state = DEAD;
        let set = chart.last();
        if set.is_empty() {
            return false;
        }
        let mut live = set.iter().filter(|it| !a.is_inert(it.state));
        match (live.next(), live.next(), live.next()) {
            (Some(&it), None, _) if a.steps_alone(it.state, it.origin) => {
                (self.single[depth], self.chart_item[depth]) = (it, it);
            }
            (Some(&caller), Some(&it), None)
                if it.origin as usize == depth && a.steps_with_callee(caller.state) == Some(it.state) =>
            {
                let single = if a.has_byte_edges(caller.state) { caller } else { it };
                (self.single[depth], self.chart_item[depth]) = (single, caller);
            }
            _ => self.next_bytes[depth] = chart.next_bytes(a),
        }
        true
    }
}

/// Whether the callee of `state` (see [`Automaton::steps_with_callee`]) takes `byte`.
#[inline]
fn callee_takes(a: &Automaton, state: u32, byte: u8) -> bool {
    a.steps_with_callee(state).is_some_and(|callee| a.table.first_bytes[callee as usize].contains(byte))
}

/// Whether every token in node `i`'s subtree keeps the one item `parent` alive and alone:
/// the subtree is spelled with the state's run bytes (and, where every character takes
/// the state where `a` does, well-formed non-ASCII characters) and is no deeper than the
/// run (most of a string's interior). Escapes inside it change nothing for tokens that
/// are alive.
#[inline]
fn whole_subtree_alive(a: &Automaton, trie: &TokenTrie, i: usize, parent: Item) -> bool {
    let (node, p) = (&trie.nodes[i], parent.state as usize);
    if parent.origin == NO_ORIGIN && trie.subtree_ascii[i] & !PLAIN_ASCII == 0 {
        let reach = if node.ascii {
            a.text.plain_reach[p]
        } else if node.utf8 {
            a.text.text_reach[p]
        } else {
            0
        };
        if node.height as u32 <= reach {
            return true;
        }
    }
    if trie.subtree_ascii[i] & !a.text.run_bytes[p] != 0 {
        return false;
    }
    let run = if parent.origin == NO_ORIGIN { a.text.run_len[p] } else { a.text.run_len_simple[p] };
    if node.ascii {
        node.height as u32 <= run
    } else if !node.utf8 {
        false
    } else if parent.origin == NO_ORIGIN {
        node.height as u32 <= a.text.utf8_run[p]
    } else {
        run == u32::MAX && a.text.utf8_run[p] == u32::MAX
    }
}
