//! Planning: before any automaton is built, what becomes of each rule.
//!
//! - [`split()`]: long counted repetitions of a big body are split into rules (`split.rs`),
//!   found by the same walk that checks every call names a rule ([`checked_callees`]).
//! - [`make`]: from each rule's calls, the rules expanded in place ([`choose_inlined`]: small
//!   and not recursive, [`recursive_rules`]); each rule's representative among rules
//!   with the same body ([`representatives`]: one automaton for all copies); and the
//!   rules fused into their tail callers (`fuse.rs`).
//!
//! Size decides inlining: a regex counts by its size, so long patterns stay shared rules,
//! and `Rule::no_inline` keeps a small rule a rule (the schema compiler's keys). Rules
//! share one automaton when their bodies are the same once their callees are replaced by
//! their own representatives, compared callees first: a schema's subschema copied under
//! other rule names is built once.
//!
//! Invariant: a rule gets an automaton of its own exactly when [`Plan::builds`] says so;
//! every call of a rule that gets none is expanded (inlined), redirected (to its
//! representative) or built into the automata of the rules that reach it by tail calls
//! (fused). The root is never inlined, and a rule is its own representative before any
//! other is.

use super::fuse;
use super::nfa::Regexes;
use super::rows::Rows;
use super::split::{self, Rules, Split};
use crate::error::CompileError;
use crate::limits::Limits;
use rustc_hash::FxHashMap;
use stencil_grammar::{Expr, Grammar, Rule};

/// Expressions at most this big (see `expr_size`) are inlined into their callers when
/// not recursive.
const INLINE_MAX_SIZE: usize = 8;
/// The most rule expansions nested inside one another (a chain `rI ::= rI+1` of tiny
/// rules is cut into rules every this many): the NFA builder and the fusion pass recurse
/// once per expansion.
const INLINE_MAX_DEPTH: u32 = 32;

/// What to build of each rule of [`Rules`] (indexes like its rules').
pub(super) struct Plan {
    /// Rules expanded in place into their callers.
    pub inline: Vec<bool>,
    /// Where a call of each rule goes (itself for inlined rules).
    pub representative: Vec<u32>,
    /// Rules built into their tail callers' automata (see `fuse.rs`).
    pub fused: Vec<bool>,
}

impl Plan {
    /// Whether rule `r` gets an automaton of its own.
    pub fn builds(&self, r: usize) -> bool {
        !(self.inline[r] || self.representative[r] != r as u32 || self.fused[r])
    }
}

/// The grammar's long repetitions split (see `split.rs`), and each grammar rule's calls
/// before the split (for [`make`], which finds again only the calls of split rules). One
/// walk over the grammar finds the calls and what to split (a big grammar's nodes are
/// scattered in memory: each walk costs). Splitting keeps every rule and its name and
/// follows no reference.
pub(super) fn split(grammar: &Grammar, limits: &Limits, regexes: &Regexes) -> Result<(Split, Calls), CompileError> {
    let _span = tracing::debug_span!("split", rules = grammar.rules.len()).entered();
    let mut needs_split = vec![false; grammar.rules.len()];
    let unsplit = checked_callees(grammar.rules.iter(), grammar.rules.len(), None, |r, e| {
        needs_split[r] |= split::needs_split(e, limits, regexes)
    })?;
    let split = split::split_long_repetitions(grammar, &needs_split, limits, regexes);
    Ok((split, unsplit))
}

/// The [`Plan`] of `rules`: `split` and `unsplit` come from [`split()`].
pub(super) fn make(rules: &Rules, split: &Split, unsplit: &Calls, regexes: &Regexes) -> Result<Plan, CompileError> {
    let calls = {
        let _span = tracing::debug_span!("callees", rules = rules.len()).entered();
        let mut changed = vec![false; rules.len()];
        split.changed().for_each(|r| changed[r] = true);
        checked_callees(rules.iter().copied(), rules.len(), Some((unsplit, &changed)), |_, _| {})?
    };
    let inline = {
        let _span = tracing::debug_span!("inline", rules = rules.len()).entered();
        choose_inlined(rules, &calls.callees, regexes)
    };
    let representative = {
        let _span = tracing::debug_span!("representatives", rules = rules.len()).entered();
        representatives(rules, &inline, &calls.callees)
    };
    let fused = {
        let _span = tracing::debug_span!("fuse", rules = rules.len()).entered();
        let fused = fuse::choose_fused(rules, &calls, &inline, &representative);
        tracing::debug!(fused = fused.iter().filter(|&&f| f).count(), "fused rules");
        fused
    };
    Ok(Plan { inline, representative, fused })
}

/// The rules each rule calls, in order, and whether each call is in tail position
/// (nothing follows it in its rule; see `fuse.rs`): `callees[r]` and `tail[r]`.
pub(super) struct Calls {
    pub callees: Rows<u32>,
    pub tail: Rows<bool>,
}

/// Each rule's [`Calls`]; an error at a call of a rule that does not exist. `visit` sees
/// every node of each rule walked (with the rule's index). With `known`, the calls of
/// the rules not `changed` are copied from those found before instead.
#[inline(never)]
pub(super) fn checked_callees<'r>(
    rules: impl Iterator<Item = &'r Rule>,
    n_rules: usize,
    known: Option<(&Calls, &[bool])>,
    mut visit: impl FnMut(usize, &Expr),
) -> Result<Calls, CompileError> {
    fn walk(e: &Expr, tail: bool, calls: &mut Calls, visit: &mut dyn FnMut(&Expr)) {
        visit(e);
        match e {
            Expr::Rule(id) => {
                calls.callees.items.push(id.0);
                calls.tail.items.push(tail);
            }
            Expr::Seq(v) => v.iter().enumerate().for_each(|(i, x)| walk(x, tail && i + 1 == v.len(), calls, visit)),
            Expr::Alt(v) => v.iter().for_each(|x| walk(x, tail, calls, visit)),
            Expr::Repeat { expr, .. } => walk(expr, false, calls, visit),
            _ => {}
        }
    }
    let mut calls = Calls { callees: Rows::default(), tail: Rows::default() };
    for (r, rule) in rules.enumerate() {
        match known {
            Some((known, changed)) if !changed[r] => {
                calls.callees.push_row(known.callees[r].iter().copied());
                calls.tail.push_row(known.tail[r].iter().copied());
                continue;
            }
            _ => {
                walk(&rule.body, true, &mut calls, &mut |e| visit(r, e));
                calls.callees.end_row();
                calls.tail.end_row();
            }
        }
        if let Some(&id) = calls.callees[r].iter().find(|&&id| id as usize >= n_rules) {
            return Err(CompileError::DanglingRule { rule: rule.name.clone(), id });
        }
    }
    Ok(calls)
}

/// Each rule's representative: the first rule with the same body once the rules it
/// calls are replaced by theirs (the root before all; itself for inlined rules).
/// Generated grammars repeat themselves (a schema's subschema copied at several places,
/// each copy a chain of rules with names of its own); calls go to the representative,
/// whose automaton is built once. Rules are compared callees first (an explicit
/// post-order walk of the calls); a callee not decided yet (recursion) stands for itself.
pub(super) fn representatives(rules: &Rules, inline: &[bool], callees: &Rows<u32>) -> Vec<u32> {
    use std::hash::Hasher;
    let n = rules.len();
    let root = rules.root.0;
    let mut class: Vec<u32> = (0..n as u32).collect();
    // 0: not seen, 1: on the walk's stack, 2: decided.
    let mut seen = vec![0u8; n];
    // Rules decided so far, by hash: the first one, and after each the next with its hash.
    let mut first_with_hash: FxHashMap<u64, u32> = FxHashMap::default();
    let mut next_with_hash = vec![u32::MAX; n];
    let mut stack: Vec<(u32, usize)> = Vec::new();
    for first in std::iter::once(root).chain(0..n as u32) {
        if seen[first as usize] != 0 {
            continue;
        }
        seen[first as usize] = 1;
        stack.push((first, 0));
        while let Some(&mut (r, ref mut next)) = stack.last_mut() {
            if let Some(&c) = callees[r as usize].get(*next) {
                *next += 1;
                if seen[c as usize] == 0 {
                    seen[c as usize] = 1;
                    stack.push((c, 0));
                }
                continue;
            }
            stack.pop();
            seen[r as usize] = 2;
            let (body, inlined) = (&rules[r as usize].body, inline[r as usize]);
            let mut h = rustc_hash::FxHasher::default();
            h.write_u8(inlined as u8);
            hash_calls_as(body, &class, &mut h);
            let mut s = *first_with_hash.entry(h.finish()).or_insert(r);
            if s == r {
                continue;
            }
            // The first equal rule; the root joins the list, as do rules equal to none.
            let mut same = None;
            loop {
                if same.is_none()
                    && inline[s as usize] == inlined
                    && equal_calls_as(&rules[s as usize].body, body, &class)
                {
                    same = Some(s);
                    if r != root {
                        break;
                    }
                }
                match next_with_hash[s as usize] {
                    u32::MAX => break,
                    next => s = next,
                }
            }
            match same {
                Some(same) if r != root => class[r as usize] = same,
                _ => next_with_hash[s as usize] = r,
            }
        }
    }
    (0..n).map(|r| if inline[r] { r as u32 } else { class[r] }).collect()
}

/// Hashes `e` with each rule reference replaced by `class[rule]`.
fn hash_calls_as(e: &Expr, class: &[u32], h: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    std::mem::discriminant(e).hash(h);
    match e {
        Expr::Empty | Expr::AnyChar => {}
        Expr::Literal(b) => b.hash(h),
        Expr::Class(c) => c.hash(h),
        Expr::Regex(p) => p.hash(h),
        Expr::Rule(r) => class[r.0 as usize].hash(h),
        Expr::Token(t) => t.hash(h),
        Expr::Seq(v) | Expr::Alt(v) => {
            v.len().hash(h);
            v.iter().for_each(|x| hash_calls_as(x, class, h));
        }
        Expr::Repeat { expr, min, max } => {
            (min, max).hash(h);
            hash_calls_as(expr, class, h);
        }
    }
}

/// Whether `a` and `b` are the same with each rule reference replaced by `class[rule]`.
fn equal_calls_as(a: &Expr, b: &Expr, class: &[u32]) -> bool {
    match (a, b) {
        (Expr::Rule(x), Expr::Rule(y)) => class[x.0 as usize] == class[y.0 as usize],
        (Expr::Seq(x), Expr::Seq(y)) | (Expr::Alt(x), Expr::Alt(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| equal_calls_as(x, y, class))
        }
        (Expr::Repeat { expr: x, min: m, max: n }, Expr::Repeat { expr: y, min: p, max: q }) => {
            (m, n) == (p, q) && equal_calls_as(x, y, class)
        }
        (Expr::Seq(_) | Expr::Alt(_) | Expr::Repeat { .. } | Expr::Rule(_), _) => false,
        _ => a == b,
    }
}

/// Size of an expression for the inlining decision; a reference to a rule counts as the
/// size that rule expands to (`rule_size`) when it is inlined itself, else as 1. Only
/// sizes up to [`INLINE_MAX_SIZE`] matter: past it, the count stops (a schema's trie of
/// names is thousands of nodes).
fn expr_size(e: &Expr, rule_size: &dyn Fn(u32) -> usize, regexes: &Regexes) -> usize {
    match e {
        // Saturating: nested repetitions multiply (`(("a"{8}){8}){8}`...).
        Expr::Seq(v) | Expr::Alt(v) => {
            let mut n = 1usize;
            for x in v {
                n = n.saturating_add(expr_size(x, rule_size, regexes));
                if n > INLINE_MAX_SIZE {
                    break;
                }
            }
            n
        }
        Expr::Repeat { expr, min, max } => 1usize.saturating_add(
            expr_size(expr, rule_size, regexes).saturating_mul((*max).unwrap_or(*min).clamp(1, 8) as usize),
        ),
        Expr::Literal(b) => 1 + b.len() / 8,
        Expr::Rule(r) => rule_size(r.0),
        Expr::Regex(pattern) => regex_size(pattern, regexes),
        _ => 1,
    }
}

/// [`expr_size`] of a regex terminal, measured on its syntax tree: a regex is no cheaper
/// to expand than the same expression written in the IR (`[a-z]{0,1000}` must not be
/// inlined into every caller). A pattern that does not parse counts as big (it fails later).
fn regex_size(pattern: &stencil_grammar::Regex, regexes: &Regexes) -> usize {
    use regex_syntax::hir::{Hir, HirKind};
    fn size(h: &Hir) -> usize {
        match h.kind() {
            HirKind::Empty | HirKind::Look(_) => 0,
            HirKind::Literal(l) => 1 + l.0.len() / 8,
            HirKind::Class(_) => 1,
            HirKind::Capture(c) => size(&c.sub),
            HirKind::Repetition(r) => {
                1usize.saturating_add(size(&r.sub).saturating_mul(r.max.unwrap_or(r.min).clamp(1, 8) as usize))
            }
            HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().fold(1usize, |n, x| n.saturating_add(size(x))),
        }
    }
    // Only the decision "small or not" matters: long patterns are big without parsing.
    if pattern.len() > 64 * INLINE_MAX_SIZE {
        return usize::MAX;
    }
    match regexes.parse(pattern) {
        Ok(h) => size(&h),
        Err(_) => usize::MAX,
    }
}

/// Rules to expand in place: not recursive, not the root, small, and at most
/// [`INLINE_MAX_DEPTH`] expansions inside one another (`callees`: each rule's calls, from
/// [`checked_callees`]).
///
/// Linear in the grammar and without recursion on the call graph (a chain of 100,000
/// rules must neither take quadratic time nor overflow the stack; the passes after this
/// one recurse once per expansion, which the depth bounds).
pub(super) fn choose_inlined(rules: &Rules, callees: &Rows<u32>, regexes: &Regexes) -> Vec<bool> {
    let n = rules.len();
    let recursive = recursive_rules(callees);
    // Decide callees first (non-recursive rules form a DAG), so that a small rule whose
    // callees are inlined counts their size too: only small expansions are inlined.
    // An explicit post-order walk: a rule is sized once all its callees are.
    let mut inline = vec![false; n];
    let mut size: Vec<Option<usize>> = vec![None; n];
    // Expansions nested in a rule's own, once its callees are decided.
    let mut depth = vec![0u32; n];
    for r in 0..n {
        if recursive[r] {
            size[r] = Some(1);
        }
    }
    let mut stack: Vec<(usize, usize)> = Vec::new(); // (rule, next callee to visit)
    for root in 0..n {
        if size[root].is_some() {
            continue;
        }
        stack.push((root, 0));
        while let Some(&mut (r, ref mut next)) = stack.last_mut() {
            if let Some(&c) = callees[r].get(*next) {
                *next += 1;
                // Non-recursive rules only call rules that are not on the stack.
                if size[c as usize].is_none() {
                    stack.push((c as usize, 0));
                }
                continue;
            }
            stack.pop();
            if rules[r].no_inline {
                size[r] = Some(INLINE_MAX_SIZE + 1);
                continue;
            }
            let own = expr_size(
                &rules[r].body,
                &|c| {
                    if inline[c as usize] {
                        size[c as usize].unwrap_or(1)
                    } else {
                        1
                    }
                },
                regexes,
            );
            depth[r] =
                callees[r].iter().filter(|&&c| inline[c as usize]).map(|&c| depth[c as usize] + 1).max().unwrap_or(0);
            inline[r] = r != rules.root.0 as usize && own <= INLINE_MAX_SIZE && depth[r] < INLINE_MAX_DEPTH;
            size[r] = Some(own);
        }
    }
    inline
}

/// Which rules can reach themselves through calls: members of a strongly connected
/// component of the call graph with more than one rule, or with a self-call (Tarjan's
/// algorithm, iterative).
fn recursive_rules(callees: &Rows<u32>) -> Vec<bool> {
    let n = callees.len();
    const UNSEEN: u32 = u32::MAX;
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut scc_stack: Vec<u32> = Vec::new();
    let mut recursive = vec![false; n];
    let mut counter = 0u32;
    let mut work: Vec<(u32, usize)> = Vec::new();
    for root in 0..n as u32 {
        if index[root as usize] != UNSEEN {
            continue;
        }
        work.push((root, 0));
        index[root as usize] = counter;
        low[root as usize] = counter;
        counter += 1;
        scc_stack.push(root);
        on_stack[root as usize] = true;
        while let Some(&mut (v, ref mut next)) = work.last_mut() {
            let vu = v as usize;
            if let Some(&w) = callees[vu].get(*next) {
                *next += 1;
                let wu = w as usize;
                if w == v {
                    recursive[vu] = true;
                }
                if index[wu] == UNSEEN {
                    index[wu] = counter;
                    low[wu] = counter;
                    counter += 1;
                    scc_stack.push(w);
                    on_stack[wu] = true;
                    work.push((w, 0));
                } else if on_stack[wu] {
                    low[vu] = low[vu].min(index[wu]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent as usize] = low[parent as usize].min(low[vu]);
            }
            if low[vu] == index[vu] {
                // The component: `v` and what is above it on the stack.
                let at = scc_stack.iter().rposition(|&w| w == v).expect("v is on the stack");
                let members = &scc_stack[at..];
                for &w in members {
                    on_stack[w as usize] = false;
                    recursive[w as usize] |= members.len() > 1;
                }
                scc_stack.truncate(at);
            }
        }
    }
    recursive
}
