//! The analyses of the whole table, once every rule's automaton is in it.
//!
//! - [`fixpoint_rules`]: nullable rules (their start reaches a final state over calls of
//!   nullable rules) and productive rules (over bytes and tokens too).
//! - [`trim`]: edges into states that cannot reach their rule's end go, and so do calls
//!   of unproductive rules.
//! - [`compute_closures`]: per state, what the Earley parser adds along with it: the
//!   states reached over nullable calls (same origin) and the states it predicts.
//! - [`follow_bytes`]: per rule, the bytes that can come right after it ends (FOLLOW),
//!   in any context: they bound what the mask cache must keep (after a number, `" the"`
//!   cannot continue in any context, so it is dropped at cache time).
//!
//! Invariant: after [`trim`], every state that an edge or call reaches can reach its
//! rule's final state, so a non-empty Earley item set means a viable prefix; the closures
//! and FOLLOW sets are computed on the trimmed table.

use super::rows::{Rows, StampSet};
use super::split::Rules;
use super::{Automaton, DEAD};
use crate::bytes::ByteSet;
use crate::error::CompileError;
use crate::limits::{LimitKind, Limits};

/// Least fixpoint of a per-rule flag: a rule gets the flag when its start state reaches a
/// final state over its calls of flagged rules and, when `terminals`, its byte and token
/// edges too (so: nullable rules without, productive rules with).
///
/// Linear in the automaton: each state is explored once; a call of a rule not (yet)
/// flagged waits in that rule's list until it gets the flag.
pub(super) fn fixpoint_rules(a: &Automaton, successors: &Successors, terminals: bool) -> Vec<bool> {
    let _span = tracing::debug_span!("fixpoint", terminals, rules = a.rules.start.len()).entered();
    let n_rules = a.rules.start.len();
    let mut flags = vec![false; n_rules];
    let mut reached = vec![false; a.n_states()];
    // Per rule, the states waiting for it: a list through `waiting`, `(state, next)`.
    let mut first_waiting = vec![u32::MAX; n_rules];
    let mut waiting: Vec<(u32, u32)> = Vec::new();
    let mut newly: Vec<u32> = Vec::new();
    let mut stack: Vec<u32> = Vec::new();
    let mut explore = |from: u32,
                       flags: &mut Vec<bool>,
                       waits: (&mut Vec<u32>, &mut Vec<(u32, u32)>),
                       newly: &mut Vec<u32>,
                       stack: &mut Vec<u32>| {
        let (first_waiting, waiting) = waits;
        stack.push(from);
        while let Some(s) = stack.pop() {
            let su = s as usize;
            if std::mem::replace(&mut reached[su], true) {
                continue;
            }
            let rule = a.table.state_rule[su] as usize;
            if a.table.is_final[su] && !flags[rule] {
                flags[rule] = true;
                newly.push(rule as u32);
            }
            if terminals {
                stack.extend(successors.of_state(s));
            }
            for &(callee, t) in &a.edges.calls[su] {
                if flags[callee as usize] {
                    stack.push(t);
                } else {
                    waiting.push((t, first_waiting[callee as usize]));
                    first_waiting[callee as usize] = waiting.len() as u32 - 1;
                }
            }
        }
    };
    for r in 0..n_rules {
        let start = a.rules.start[r];
        if start != DEAD {
            explore(start, &mut flags, (&mut first_waiting, &mut waiting), &mut newly, &mut stack);
        }
    }
    while let Some(r) = newly.pop() {
        let mut next = std::mem::replace(&mut first_waiting[r as usize], u32::MAX);
        while next != u32::MAX {
            let (t, after) = waiting[next as usize];
            next = after;
            explore(t, &mut flags, (&mut first_waiting, &mut waiting), &mut newly, &mut stack);
        }
    }
    flags
}

/// Each state's distinct targets over bytes and tokens (not calls), in compressed rows:
/// the global transition rows are long and mostly runs of one target.
pub(super) struct Successors {
    start: Vec<u32>,
    targets: Vec<u32>,
}

impl Successors {
    pub(super) fn of(a: &Automaton) -> Self {
        let _span = tracing::debug_span!("successors", states = a.n_states()).entered();
        let mut start = Vec::with_capacity(a.n_states() + 1);
        let mut targets = Vec::new();
        start.push(0);
        for s in 0..a.n_states() {
            let (first, mut last) = (targets.len(), DEAD);
            for &t in a.row(s) {
                // Neighbouring classes mostly go to the same state.
                if t != last && t != DEAD && !targets[first..].contains(&t) {
                    targets.push(t);
                }
                last = t;
            }
            targets.extend(a.edges.token_edges[s].iter().map(|&(_, t)| t));
            start.push(targets.len() as u32);
        }
        Successors { start, targets }
    }

    fn of_state(&self, s: u32) -> impl Iterator<Item = u32> + '_ {
        self.targets[self.start[s as usize] as usize..self.start[s as usize + 1] as usize].iter().copied()
    }
}

/// Removes edges into states that cannot reach their rule's final state, and calls of
/// unproductive rules.
pub(super) fn trim(a: &mut Automaton, successors: &Successors, productive: &[bool]) {
    let _span = tracing::debug_span!("trim", states = a.n_states()).entered();
    let n = a.n_states();
    a.edges.calls.retain(|(r, _)| productive[*r as usize]);
    // Predecessors in compressed rows, then a search backwards from the final states.
    // Listed once (walked twice below; a chain of iterators per state was slower).
    let mut reversed = Vec::with_capacity(successors.targets.len() + a.edges.calls.items.len());
    for s in 0..n as u32 {
        reversed.extend(successors.of_state(s).map(|t| (t, s)));
        reversed.extend(a.edges.calls[s as usize].iter().map(|&(_, t)| (t, s)));
    }
    let preds = Rows::grouped(n, || reversed.iter().copied());
    let mut live = vec![false; n];
    let mut stack: Vec<u32> = (0..n as u32).filter(|&s| a.table.is_final[s as usize]).collect();
    while let Some(s) = stack.pop() {
        if !std::mem::replace(&mut live[s as usize], true) {
            stack.extend(&preds[s as usize]);
        }
    }
    if live.iter().all(|&l| l) {
        return;
    }
    for s in 0..n {
        for t in a.row_mut(s) {
            if *t != DEAD && !live[*t as usize] {
                *t = DEAD;
            }
        }
    }
    a.edges.calls.retain(|&(_, t)| live[t as usize]);
    a.edges.token_edges.retain(|&(_, t)| live[t as usize]);
}

/// `same_origin`, `predicted` and `simple` for every state (see [`super::Closures`]).
pub(super) fn compute_closures(
    a: &mut Automaton,
    rules: &Rules,
    limits: &Limits,
    deadline: std::time::Instant,
) -> Result<(), CompileError> {
    let _span = tracing::debug_span!("closures", states = a.n_states()).entered();
    let n = a.n_states();
    // What the closures may add to the transition table's memory (4 bytes an entry): they
    // can be quadratic in a rule's states (`root ::= x x x ...` with a nullable `x`).
    let mut budget = limits.max_automaton_bytes.saturating_sub(a.table.trans.len() * 4) / 4;
    let over = |a: &Automaton, s: usize, what: LimitKind| CompileError::LimitExceeded {
        limit: what,
        value: match what {
            LimitKind::CompileTime => limits.max_compile_time.as_millis() as usize,
            _ => limits.max_automaton_bytes,
        },
        rule: rules.name(a.table.state_rule[s] as usize).into(),
    };
    let nullable = a.rules.nullable.clone();
    let mut set = StampSet::new(n);
    let mut same_origin = Rows::default();
    let mut stack = Vec::new();
    for s in 0..n {
        set.clear();
        set.insert(s as u32);
        let row = same_origin.items.len();
        stack.push(s as u32);
        while let Some(x) = stack.pop() {
            for &(r, t) in &a.edges.calls[x as usize] {
                if nullable[r as usize] && set.insert(t) {
                    same_origin.items.push(t);
                    stack.push(t);
                }
            }
        }
        same_origin.end_row();
        budget =
            budget.checked_sub(same_origin.items.len() - row).ok_or_else(|| over(a, s, LimitKind::AutomatonMemory))?;
        if s % 4096 == 4095 && std::time::Instant::now() > deadline {
            return Err(over(a, s, LimitKind::CompileTime));
        }
    }
    a.closures.same_origin = same_origin;
    // Everything a rule predicts at its own start: its start state, the starts of the
    // rules its states call, and the states reached over nullable calls, transitively.
    let mut rule_predict: Rows<u32> = Rows::default();
    for r in 0..a.rules.start.len() {
        let start = a.rules.start[r];
        let row = rule_predict.items.len();
        if start != DEAD {
            set.clear();
            set.insert(start);
            rule_predict.items.push(start);
            let mut i = row;
            while i < rule_predict.items.len() {
                for &(callee, t) in &a.edges.calls[rule_predict.items[i] as usize] {
                    let callee_start = a.rules.start[callee as usize];
                    if set.insert(callee_start) {
                        rule_predict.items.push(callee_start);
                    }
                    if nullable[callee as usize] && set.insert(t) {
                        rule_predict.items.push(t);
                    }
                }
                i += 1;
            }
            budget = budget
                .checked_sub(rule_predict.items.len() - row)
                .ok_or_else(|| over(a, start as usize, LimitKind::AutomatonMemory))?;
            if r % 1024 == 1023 && std::time::Instant::now() > deadline {
                return Err(over(a, start as usize, LimitKind::CompileTime));
            }
        }
        rule_predict.end_row();
    }
    let mut predicted = Rows::default();
    for s in 0..n {
        set.clear();
        let row = predicted.items.len();
        for x in std::iter::once(s as u32).chain(a.closures.same_origin[s].iter().copied()) {
            for &(callee, _) in &a.edges.calls[x as usize] {
                for &y in &rule_predict[callee as usize] {
                    if set.insert(y) {
                        predicted.items.push(y);
                    }
                }
            }
        }
        predicted.end_row();
        budget =
            budget.checked_sub(predicted.items.len() - row).ok_or_else(|| over(a, s, LimitKind::AutomatonMemory))?;
        if s % 4096 == 4095 && std::time::Instant::now() > deadline {
            return Err(over(a, s, LimitKind::CompileTime));
        }
    }
    a.closures.predicted = predicted;
    a.closures.simple = (0..a.n_states()).map(|s| !a.table.is_final[s] && a.edges.calls[s].is_empty()).collect();
    tracing::debug!(same_origin = a.closures.same_origin.items.len(), predicted = a.closures.predicted.items.len());
    Ok(())
}

/// FOLLOW sets over bytes: for each rule, the bytes some caller can take right after the
/// rule ends (through the caller's own end, transitively).
pub(super) fn follow_bytes(a: &Automaton) -> Vec<ByteSet> {
    let _span = tracing::debug_span!("follow", rules = a.rules.start.len()).entered();
    let n_rules = a.rules.start.len();
    // What an item in state t can take next, and whether it can end right there.
    let next_of = |t: u32| {
        let mut set = ByteSet::EMPTY;
        let mut can_end = false;
        for x in std::iter::once(t)
            .chain(a.closures.same_origin[t as usize].iter().copied())
            .chain(a.closures.predicted[t as usize].iter().copied())
        {
            set |= a.table.first_bytes[x as usize];
        }
        for x in std::iter::once(t).chain(a.closures.same_origin[t as usize].iter().copied()) {
            can_end |= a.table.is_final[x as usize];
        }
        (set, can_end)
    };
    let mut follow = vec![ByteSet::EMPTY; n_rules];
    // (callee, caller rule) pairs whose FOLLOW flows from caller to callee.
    let mut inherits: Vec<(u32, u32)> = Vec::new();
    for s in 0..a.n_states() {
        for &(callee, t) in &a.edges.calls[s] {
            let (set, can_end) = next_of(t);
            follow[callee as usize] |= set;
            if can_end {
                inherits.push((callee, a.table.state_rule[s]));
            }
        }
    }
    // Propagate along caller → callee edges with a worklist: a rule's set only grows, at
    // most 256 times, so this is linear in the edges (a fixed-point loop over all pairs
    // would be quadratic on long call chains).
    let heirs = Rows::grouped(n_rules, || inherits.iter().map(|&(callee, caller)| (caller, callee)));
    let mut queued = vec![true; n_rules];
    let mut work: Vec<u32> = (0..n_rules as u32).collect();
    while let Some(caller) = work.pop() {
        queued[caller as usize] = false;
        let from = follow[caller as usize];
        for &callee in &heirs[caller as usize] {
            let to = &mut follow[callee as usize];
            let changed = !to.contains_all(from);
            *to |= from;
            if changed && !std::mem::replace(&mut queued[callee as usize], true) {
                work.push(callee);
            }
        }
    }
    follow
}
