//! The text fast paths: what lets the mask cache (`cache.rs`) and the matcher decide
//! whole runs of plain text without an Earley step per byte.
//!
//! - [`facts`] computes, per state, the bytes it moves on (kept in the table, every
//!   reader needs them) and the [`TextFacts`](super::TextFacts):
//!   - *runs*: the ASCII bytes that move a state where `a` does, and how many of them in
//!     a row keep the item alive and alone ([`compute_runs`]; with non-ASCII characters
//!     too: `utf8_run`); unbounded for a string's loop, `maxLength - count` inside a
//!     counted string;
//!   - *reaches*: how many plain-text characters in a row, whichever they are, surely
//!     keep the item alive and alone ([`plain_reach`]), and whether no longer text does.
//!     Runs need every plain byte to go to one state; a reach does not: it is the
//!     distance, backwards over plain characters, to a state where one may fail
//!     (unbounded in an unanchored pattern's search, what is left of a `maxLength`
//!     count). A reach is *exact* where nothing longer gets through (a count's end), and
//!     *bounded* where the rule may end on the way;
//!   - *text ends*: at the end of a piece of a long count split into rules (`split.rs`),
//!     the `n` such that every plain text of `n` characters ends the rule.
//! - The per-state questions built on them, as methods of [`Automaton`]: whether a state
//!   loops over all plain text, its run, what plain text it takes after one byte, the one
//!   rule it waits for...
//!
//! Invariant: every fact is conservative. A run or a reach of `n` means that every input
//! it covers keeps the item alive (and alone, as said); a shorter value only costs the
//! cache a walk, never a wrong mask.

use super::classes::NON_ASCII_UTF8;
use super::rows::{group_into_rows, SmallSet};
use super::{Automaton, DEAD, NO_ORIGIN};
use crate::bytes::{ByteSet, PLAIN_ASCII, PLAIN_FIRST_BYTES, UTF8_LEADS};

/// The bytes each state moves on, its runs and its reaches (see the module doc).
pub(super) fn facts(a: &mut Automaton) {
    let _span = tracing::debug_span!("text_facts", states = a.n_states()).entered();
    // Per state: the bytes it moves on, and the ASCII bytes that take it where `a` does.
    let mut succ = Vec::with_capacity(a.n_states());
    (a.table.first_bytes, a.text.run_bytes) = (0..a.n_states())
        .map(|s| {
            let (row, classes) = (a.row(s), a.classes(s));
            let class_a = classes.of_byte[b'a' as usize] as usize;
            let (mut moves, mut like_a) = (ByteSet::EMPTY, 0u128);
            for (&t, bytes) in row.iter().zip(&classes.bytes) {
                if t != DEAD {
                    moves |= *bytes;
                    if t == row[class_a] {
                        like_a |= bytes.ascii();
                    }
                }
            }
            succ.push(row[class_a]);
            (moves, like_a)
        })
        .unzip();
    a.text.run_len = compute_runs(a, &succ, |_| true, |t| a.edges.calls[t].is_empty());
    a.text.run_len_simple = compute_runs(a, &succ, |_| true, |t| !a.table.is_final[t] && a.edges.calls[t].is_empty());
    // Where each state's non-ASCII characters lead (computed once: it is not cheap).
    let utf8_to: Vec<Option<SmallSet>> = (0..a.n_states()).map(|s| a.utf8_targets(s as u32)).collect();
    let utf8_like_a: Vec<bool> =
        (0..a.n_states()).map(|s| succ[s] != DEAD && utf8_to[s].is_some_and(|t| t.as_slice() == [succ[s]])).collect();
    a.text.utf8_run = compute_runs(a, &succ, |s| utf8_like_a[s], |t| a.edges.calls[t].is_empty());
    Reaches {
        plain: a.text.plain_reach,
        text: a.text.text_reach,
        text_bounded: a.text.text_reach_bounded,
        text_exact: a.text.text_reach_exact,
        text_end: a.text.text_end,
    } = plain_reach(a, &utf8_to);
}

impl Automaton {
    /// Whether `state` takes some byte a plain-text character may start with (see
    /// [`crate::vocab::trie::TextTokens`]).
    pub(crate) fn takes_plain_text(&self, state: u32) -> bool {
        self.table.first_bytes[state as usize].intersects(PLAIN_FIRST_BYTES)
    }

    /// The one state every plain-text character takes `state` to, if there is one (a
    /// count's next position).
    pub(crate) fn plain_text_successor(&self, state: u32) -> Option<u32> {
        let to = self.next(state, b'a');
        let ascii = self.text.run_bytes[state as usize] & PLAIN_ASCII == PLAIN_ASCII;
        (to != DEAD && ascii && self.utf8_leads_to(state, to)).then_some(to)
    }

    /// Whether every non-ASCII character takes `state` to `to`, each byte before the last
    /// into a state that predicts and completes nothing. Conservative: `false` also when
    /// the bytes of one range lead to many states.
    fn utf8_leads_to(&self, state: u32, to: u32) -> bool {
        self.utf8_targets(state).is_some_and(|t| t.as_slice() == [to])
    }

    /// The states every non-ASCII character takes `state` to, each byte before the last
    /// into a state that predicts and completes nothing; `None` when some character dies,
    /// or (conservative) when there are many states.
    fn utf8_targets(&self, state: u32) -> Option<SmallSet> {
        // Most states (keys, numbers, literals) take no lead byte at all.
        if !self.table.first_bytes[state as usize].contains_all(UTF8_LEADS) {
            return None;
        }
        let mut targets = SmallSet::default();
        for seq in &NON_ASCII_UTF8.sequences {
            let mut states = SmallSet::default();
            states.insert(state)?;
            for (i, &range) in seq.iter().enumerate() {
                let last = i + 1 == seq.len();
                let mut next = SmallSet::default();
                for &x in states.as_slice() {
                    let (row, classes) = (self.row(x as usize), self.classes(x as usize));
                    for &c in classes.utf8_range_classes(range) {
                        let t = row[c as usize];
                        if t == DEAD
                            || (!last && (self.table.is_final[t as usize] || !self.edges.calls[t as usize].is_empty()))
                        {
                            return None;
                        }
                        next.insert(t)?;
                    }
                }
                states = next;
            }
            for &t in states.as_slice() {
                targets.insert(t)?;
            }
        }
        Some(targets)
    }

    /// Whether every plain-text token (see [`crate::vocab::trie::TextTokens`]) of at most `len`
    /// bytes keeps the item `(state, unknown caller)` alive and alone: the state's text
    /// reach is that long (a run over all plain text is such a reach, so runs need no
    /// check of their own here).
    pub fn reaches_over_plain_text(&self, state: u32, len: u32) -> bool {
        self.text.text_reach[state as usize] >= len
    }

    /// The first bytes after which every plain-text token of at most `len` bytes keeps
    /// the item `(state, unknown caller)` alive and alone: the plain ASCII bytes that
    /// move it, alone, into a state whose reach covers plain text, and whether every
    /// non-ASCII character does too (an object key that is not one of some names: all
    /// but the names' first letters). `None` when none does.
    pub fn plain_text_after(&self, state: u32, len: u32) -> Option<(u128, bool)> {
        if self.reaches_over_plain_text(state, len) {
            return Some((PLAIN_ASCII, true));
        }
        let rest = len.saturating_sub(1);
        let reaches_from = |t: u32| {
            t != DEAD
                && match self.waits_for(t) {
                    Some(callee) => self.reaches_over_plain_text(callee, rest),
                    None => self.steps_alone(t, NO_ORIGIN) && self.reaches_over_plain_text(t, rest),
                }
        };
        let mut ascii = 0u128;
        for b in (0..0x80u8).filter(|&b| PLAIN_ASCII >> b & 1 == 1) {
            if reaches_from(self.next(state, b)) {
                ascii |= 1 << b;
            }
        }
        if ascii == 0 {
            return None;
        }
        // Where the smallest non-ASCII character leads: all of them must lead there, from
        // the state or from the start of the rule it calls (a key that is none of some
        // names takes its other characters in a shared rule).
        let non_ascii_from = |s: u32| {
            let after = self.next(s, 0xC2);
            let to = if after == DEAD { DEAD } else { self.next(after, 0x80) };
            reaches_from(to) && self.utf8_leads_to(s, to)
        };
        let non_ascii = non_ascii_from(state) || self.callee_start(state).is_some_and(non_ascii_from);
        Some((ascii, non_ascii))
    }

    /// The start state of the one rule that `state` calls, when that start predicts and
    /// completes nothing.
    pub fn callee_start(&self, state: u32) -> Option<u32> {
        match self.edges.calls[state as usize] {
            [(rule, _)] => {
                let start = self.rules.start[rule as usize];
                self.closures.simple[start as usize].then_some(start)
            }
            _ => None,
        }
    }

    /// [`Automaton::callee_start`] of a state that cannot end and takes no token: an item
    /// reaching it by a byte makes a set with nothing but the callee's start (a key that
    /// is none of some names, inside their trie, calls a shared rule for a character that
    /// is not plain text).
    pub fn steps_with_callee(&self, state: u32) -> Option<u32> {
        let s = state as usize;
        (!self.table.is_final[s] && self.edges.token_edges[s].is_empty()).then(|| self.callee_start(state)).flatten()
    }

    /// [`Automaton::steps_with_callee`] when `state` takes no byte either: it only waits
    /// for its callee (a key that is none of some names, once it left their trie, waits
    /// for the shared rest of any string). While the callee runs, the item is its callee's.
    pub fn waits_for(&self, state: u32) -> Option<u32> {
        if self.has_byte_edges(state) {
            None
        } else {
            self.steps_with_callee(state)
        }
    }

    /// Whether an item in `state` can take nothing more: no byte, no token, no call (a
    /// rule's end, once completed).
    pub fn is_inert(&self, state: u32) -> bool {
        let s = state as usize;
        !self.has_byte_edges(state) && self.edges.calls[s].is_empty() && self.edges.token_edges[s].is_empty()
    }

    /// The bytes an item in `state` can take next, itself or through
    /// [`Automaton::steps_with_callee`].
    pub fn item_bytes(&self, state: u32) -> ByteSet {
        let mut bytes = self.table.first_bytes[state as usize];
        if let Some(callee) = self.steps_with_callee(state) {
            bytes |= self.table.first_bytes[callee as usize];
        }
        bytes
    }

    /// Whether `state` is a loop over all plain text (a JSON string's interior): every
    /// plain character (see [`crate::vocab::trie::TextTokens`]) takes the item `(state, any
    /// caller)` back to `state`, alone and unfinished, each byte of a non-ASCII one
    /// through states that predict and complete nothing.
    pub fn loops_over_plain_text(&self, state: u32) -> bool {
        let s = state as usize;
        self.next(state, b'a') == state
            && self.text.run_bytes[s] & PLAIN_ASCII == PLAIN_ASCII
            && self.text.run_len_simple[s] == u32::MAX
            && self.text.utf8_run[s] == u32::MAX
    }

    /// The ASCII bytes that leave a loop over all text in `state`'s first set: `state`, or
    /// the start of a rule it calls, takes every other ASCII byte back to itself, and
    /// every non-ASCII character (each byte before the last into a state that predicts
    /// and completes nothing). Free text that stops only at the first bytes of its end
    /// markers (`any_text` with `excludes`: `<`). An item there stays alive over any
    /// token spelled with the loop's characters, whatever else the set holds.
    pub fn text_loop(&self, state: u32) -> Option<u128> {
        let callees = self.edges.calls[state as usize].iter().map(|&(rule, _)| self.rules.start[rule as usize]);
        std::iter::once(state)
            .chain(callees)
            .filter(|&s| self.utf8_leads_to(s, s))
            .map(|s| (0..0x80u8).filter(|&b| self.next(s, b) != s).fold(0u128, |m, b| m | 1 << b))
            .min_by_key(|leave| leave.count_ones())
    }

    /// The run from `state`, when it has one: its ASCII bytes, and how many of them in a
    /// row (`u32::MAX`: any number) keep the item `(state, any caller)` alive, alone and
    /// unfinished (a pattern's `[a-z0-9_-]+`; the counted characters of `{30,}`, or of
    /// `{1,64}`, with what is left of the count). Each byte takes the item where `a` does.
    /// A state that calls a rule has none: the callee may take the same bytes elsewhere
    /// (`r{1,3} [0-{]+` with a nullable `r ::= "" | [a-}]`), so the item is not alone.
    pub fn run(&self, state: u32) -> Option<(u128, u32)> {
        let (s, run) = (state as usize, self.text.run_bytes[state as usize]);
        (run != 0 && self.text.run_len_simple[s] > 0 && self.edges.calls[s].is_empty())
            .then_some((run, self.text.run_len_simple[s]))
    }
}

/// How many bytes of `run_bytes[s]` in a row, from each state `s` that passes `from`,
/// lead through states that are alive and pass `ok` (`u32::MAX`: any number). `succ[s]` is where those bytes
/// lead; a run continues into `succ[s]` while its bytes are a subset of the successor's
/// (a counted string: `maxLength - count` more characters; a loop: unbounded).
fn compute_runs(a: &Automaton, succ: &[u32], from: impl Fn(usize) -> bool, ok: impl Fn(usize) -> bool) -> Vec<u32> {
    let mut len = vec![0u32; a.n_states()];
    // Successors mostly come later in the numbering: fill from the end.
    for s in (0..a.n_states()).rev() {
        let t = succ[s];
        len[s] = if t == DEAD || !from(s) || !ok(t as usize) {
            0
        } else if t as usize == s {
            u32::MAX
        } else if t as usize > s && a.text.run_bytes[s] & !a.text.run_bytes[t as usize] == 0 {
            len[t as usize].saturating_add(1)
        } else {
            1
        };
    }
    len
}

/// Per state, how many plain-text characters (see [`crate::vocab::trie::TextTokens`]) in a row
/// surely keep the item `(state, unknown caller)` alive and alone, whichever characters
/// they are (`u32::MAX`: any number): plain ASCII ones only, and non-ASCII ones too.
/// Unlike runs, the characters may lead to different states: an unanchored pattern's
/// search, or a `maxLength` string's count. It is the distance, over plain characters
/// and backwards, to a state where some plain character may fail. A reach is *exact*
/// when no plain text longer than it gets through either (a count's end), *bounded* when
/// that holds where the rule may end on the way (a count's end where every count may end
/// the rule: plain text may go on in a caller). A reach is an
/// *end* when every plain text as long as it ends the rule, which ends nowhere before and
/// takes no more plain text (a count's end where a long count was split into rules).
fn plain_reach(a: &Automaton, utf8_to: &[Option<SmallSet>]) -> Reaches {
    let n = a.n_states();
    // Per class map, the classes of plain ASCII bytes.
    let plain_classes: Vec<Vec<usize>> = a
        .table
        .class_maps
        .iter()
        .map(|m| {
            let mut classes: Vec<usize> =
                (0..0x80u8).filter(|&b| PLAIN_ASCII >> b & 1 == 1).map(|b| m.of_byte[b as usize] as usize).collect();
            classes.dedup();
            classes
        })
        .collect();
    let ok = |t: u32| t != DEAD && a.edges.calls[t as usize].is_empty();
    // Where a plain ASCII (non-ASCII) character may fail, and where they lead: edges
    // `(to, from)`.
    let (mut ascii_fails, mut non_ascii_fails) = (vec![true; n], vec![true; n]);
    let (mut edges, mut non_ascii_edges) = (Vec::<(u32, u32)>::new(), Vec::<(u32, u32)>::new());
    for s in 0..n {
        if a.table.first_bytes[s].ascii() & PLAIN_ASCII != PLAIN_ASCII {
            continue;
        }
        non_ascii_fails[s] = false;
        let (row, plain_classes) = (a.row(s), &plain_classes[a.table.rows[s].classes as usize]);
        let first_edge = edges.len();
        if plain_classes.iter().all(|&c| ok(row[c])) {
            for &c in plain_classes {
                if edges.len() == first_edge || edges.last().unwrap().0 != row[c] {
                    edges.push((row[c], s as u32));
                }
            }
            ascii_fails[s] = false;
        }
        match utf8_to[s] {
            Some(targets) if targets.as_slice().iter().all(|&t| ok(t)) => {
                non_ascii_edges.extend(targets.as_slice().iter().map(|&t| (t, s as u32)));
            }
            _ => non_ascii_fails[s] = true,
        }
    }
    let (mut first, mut from) = (Vec::new(), Vec::new());
    // Breadth first, backwards from the failing states; also gives the states in order.
    let mut distances = |with_non_ascii: bool| {
        let non_ascii = if with_non_ascii { &non_ascii_edges[..] } else { &[] };
        group_into_rows(n, || edges.iter().chain(non_ascii).copied(), &mut first, &mut from);
        let mut reach = vec![u32::MAX; n];
        let mut order: Vec<u32> = (0..n as u32)
            .filter(|&s| ascii_fails[s as usize] || with_non_ascii && non_ascii_fails[s as usize])
            .collect();
        order.iter().for_each(|&s| reach[s as usize] = 0);
        let mut next = 0;
        while let Some(&t) = order.get(next) {
            next += 1;
            let d = reach[t as usize] + 1;
            for &s in &from[first[t as usize] as usize..first[t as usize + 1] as usize] {
                if reach[s as usize] == u32::MAX {
                    reach[s as usize] = d;
                    order.push(s);
                }
            }
        }
        (reach, order)
    };
    let (plain, _) = distances(false);
    let (text, order) = distances(true);
    // Exact: a state that takes no plain character, or whose plain characters all lead
    // to exact states one nearer (forward edges now); neither calling nor ending, where
    // other items could take the text on.
    group_into_rows(n, || edges.iter().chain(&non_ascii_edges).map(|&(t, s)| (s, t)), &mut first, &mut from);
    let takes_none = |s: usize| !a.takes_plain_text(s as u32);
    // Bounded: the same, where the state and those one nearer may end (a count whose
    // every character may end the rule). Exact: bounded, and neither calling nor ending,
    // where other items could take the text on. Ends: a final state that takes no plain
    // character (0), or a state that does not end whose plain characters all lead to ends
    // one nearer.
    let (mut text_bounded, mut text_exact, mut text_end) = (vec![false; n], vec![false; n], vec![u32::MAX; n]);
    for &s in &order {
        let (s, r) = (s as usize, text[s as usize]);
        if !a.edges.calls[s].is_empty() {
            continue;
        }
        let ends = a.table.is_final[s];
        if r == 0 {
            text_bounded[s] = takes_none(s);
            text_exact[s] = text_bounded[s] && !ends;
            if text_bounded[s] && ends {
                text_end[s] = 0;
            }
            continue;
        }
        // The states one plain character on, all one nearer to where plain text fails.
        let on = &from[first[s] as usize..first[s + 1] as usize];
        if on.iter().all(|&t| text[t as usize] == r - 1) {
            let all = |facts: &[bool]| on.iter().all(|&t| facts[t as usize]);
            (text_bounded[s], text_exact[s]) = (all(&text_bounded), !ends && all(&text_exact));
            if !ends && on.iter().all(|&t| text_end[t as usize] == r - 1) {
                text_end[s] = r;
            }
        }
    }
    Reaches { plain, text, text_bounded, text_exact, text_end }
}

/// See [`plain_reach`].
struct Reaches {
    plain: Vec<u32>,
    text: Vec<u32>,
    text_bounded: Vec<bool>,
    text_exact: Vec<bool>,
    text_end: Vec<u32>,
}
