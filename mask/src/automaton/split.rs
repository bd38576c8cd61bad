//! Long counted repetitions of a big body, split into rules.
//!
//! `X{0,n}` as one automaton has `n` copies of `X`'s states: a JSON string with
//! `maxLength: 10000` is 140,000 states (and `max_automaton_states` is soon hit when a
//! schema has a few). With `k = ⌈√n⌉`, `n = k·q + r`, the same language is
//!
//! ```text
//! Y{0,q-1} Z | Y{q} W      Y ::= X{k}   Z ::= X{0,k-1}   W ::= X{0,r}
//! ```
//!
//! unambiguous (the count `c` picks the branch, `⌊c/k⌋` the `Y`s), so the parser keeps a
//! handful of items per byte, and the automata have about `3k + q` copies of `X` instead
//! of `n`. `X{m,n}` is `X{m} X{0,n-m}`, and `X{m}` is `Y{a} X{b}` with `m = k·a + b`.
//! Only bodies that are plain text (no rule calls, no tokens) and never empty are split:
//! a nullable `Y` would make every split of the count a parse. Regex terminals with such
//! a repetition are translated to the IR first. Counts above `max_repetition` are left
//! alone, to fail as before. Long regex terminals are made shared rules too.
//!
//! Only repetitions big enough to matter are split (a JSON string from a `maxLength` of
//! about 1,500 on), so that neither the NFA nor the DFA grows with `n`. The split hands
//! back only the rules it rewrote or added; the passes read the grammar through a `Rules`
//! view with those in place, so the grammar is never copied.

use super::nfa::Regexes;
use crate::limits::Limits;
use regex_syntax::hir::{Hir, HirKind};
use std::collections::HashMap;
use std::sync::Arc;
use stencil_grammar::{Expr, Grammar, Regex, Rule, RuleId};

/// Repetitions with at most this many expanded states (count × body weight) stay as they
/// are. Splitting costs mask time: a token that crosses the end of a `Y` depends on its
/// caller, so inside long free text most tokens become context-dependent. Only
/// repetitions that would make automata of this size or more are worth it (a JSON string
/// with `maxLength` from about 1,500 on, 14 states a character; a `maxLength: 1000`
/// string stays one automaton). On the benchmark's schemas, splitting from here rather
/// than from 100,000 halved the slowest compile (a `maxLength: 5000` string) at no cost
/// to the mask times' p99.
const SPLIT_MIN_WEIGHT: u64 = 20_000;
/// ... and so do those of at most this count.
const SPLIT_MIN_COUNT: u32 = 64;

/// What splitting changed: the rules it rewrote and the rules it added, each with its
/// index in the grammar (added ones from the grammar's length on, in order). The rest of
/// the grammar is not copied (a big schema's grammar is tens of thousands of nodes, and
/// few of its rules have a repetition to split).
#[derive(Default)]
pub(crate) struct Split {
    rules: Vec<(usize, Rule)>,
}

impl Split {
    /// The indexes of the rules it rewrote or added.
    pub fn changed(&self) -> impl Iterator<Item = usize> + '_ {
        self.rules.iter().map(|(i, _)| *i)
    }
}

/// The rules the automaton is built from: the grammar's, with [`Split`]'s in their places.
/// Indexes like the grammar's rules (`rules[r].body`).
pub(crate) struct Rules<'g> {
    rules: Vec<&'g Rule>,
    pub root: RuleId,
}

impl<'g> Rules<'g> {
    /// `grammar`'s rules as they are.
    #[cfg(test)]
    pub fn of(grammar: &'g Grammar) -> Self {
        static NOTHING: Split = Split { rules: Vec::new() };
        Self::new(grammar, &NOTHING)
    }

    /// `grammar`'s rules, with `split`'s.
    pub fn new(grammar: &'g Grammar, split: &'g Split) -> Self {
        let mut rules: Vec<&Rule> = grammar.rules.iter().collect();
        for (i, rule) in &split.rules {
            match rules.get_mut(*i) {
                Some(r) => *r = rule,
                None => {
                    debug_assert_eq!(*i, rules.len(), "added rules come in order");
                    rules.push(rule)
                }
            }
        }
        Rules { rules, root: grammar.root }
    }

    /// Rule `r`'s name; `<start>` past the rules (the automaton's synthetic start rule).
    pub fn name(&self, r: usize) -> &'g str {
        self.rules.get(r).map_or("<start>", |rule| &rule.name)
    }
}

impl<'g> std::ops::Deref for Rules<'g> {
    type Target = [&'g Rule];

    fn deref(&self) -> &[&'g Rule] {
        &self.rules
    }
}

/// The grammar's long repetitions split (nothing when it has none).
/// Regex terminals are parsed through `regexes`, the compile's cache.
/// `needs[r]`: rule `r` has a node that [`needs_split`] (found by the caller's walk).
pub(crate) fn split_long_repetitions(grammar: &Grammar, needs: &[bool], limits: &Limits, regexes: &Regexes) -> Split {
    let mut s =
        Splitter { limits, regexes, shared: HashMap::new(), next_rule: grammar.rules.len(), split: Split::default() };
    for (i, rule) in grammar.rules.iter().enumerate().filter(|&(i, _)| needs[i]) {
        let body = s.rewrite(rule.body.clone(), &rule.name);
        s.split.rules.push((i, Rule { name: rule.name.clone(), body, no_inline: rule.no_inline }));
    }
    s.split
}

/// Whether the node `e` itself (not its children) is a repetition to split or a regex
/// terminal to split or hoist.
pub(crate) fn needs_split(e: &Expr, limits: &Limits, regexes: &Regexes) -> bool {
    match e {
        Expr::Repeat { expr, min, max } => splittable(expr, *min, *max, limits, regexes),
        Expr::Regex(p) => p.len() > HOIST_REGEX_LEN || regex_needs(p, limits, regexes).is_some(),
        _ => false,
    }
}

/// Regex terminals longer than this (a schema's "any key but these" pattern) become one
/// shared rule instead of being expanded at every use.
const HOIST_REGEX_LEN: usize = 1024;

fn hir_needs(h: &Hir, limits: &Limits) -> bool {
    match h.kind() {
        HirKind::Capture(c) => hir_needs(&c.sub, limits),
        HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().any(|x| hir_needs(x, limits)),
        HirKind::Repetition(r) => {
            let count = r.max.unwrap_or(r.min);
            (count >= SPLIT_MIN_COUNT
                && count <= limits.max_repetition
                && r.sub.properties().minimum_len().is_some_and(|n| n > 0)
                && (count as u64).saturating_mul(hir_weight(&r.sub)) > SPLIT_MIN_WEIGHT)
                || hir_needs(&r.sub, limits)
        }
        _ => false,
    }
}

/// Regex terminal `p`, parsed, when it has a repetition to split; parsed only when its
/// text has a count of at least [`SPLIT_MIN_COUNT`] (parsing every regex of a big schema
/// is slow).
fn regex_needs(p: &Regex, limits: &Limits, regexes: &Regexes) -> Option<Arc<Hir>> {
    let b = p.as_bytes();
    let has_count = (0..b.len()).any(|i| {
        b[i] == b'{' && {
            let digits: String =
                b[i + 1..].iter().take_while(|c| c.is_ascii_digit() || **c == b',').map(|&c| c as char).collect();
            digits.split(',').any(|d| d.parse::<u64>().is_ok_and(|n| n >= SPLIT_MIN_COUNT as u64))
        }
    });
    if !has_count {
        return None;
    }
    regex_hir(p, regexes).filter(|h| hir_needs(h, limits))
}

/// A regex terminal that can be translated (parses, no assertions).
fn regex_hir(p: &Regex, regexes: &Regexes) -> Option<Arc<Hir>> {
    let h = regexes.parse(p).ok()?;
    h.properties().look_set().is_empty().then_some(h)
}

fn splittable(x: &Expr, min: u32, max: Option<u32>, limits: &Limits, regexes: &Regexes) -> bool {
    let count = max.unwrap_or(min);
    count >= SPLIT_MIN_COUNT
        && count <= limits.max_repetition
        && min_len(x, regexes).is_some_and(|n| n > 0)
        && (count as u64).saturating_mul(weight(x, regexes)) > SPLIT_MIN_WEIGHT
}

/// The shortest match of a plain-text expression; `None` when it calls rules or tokens
/// (or has a regex that is not translatable).
fn min_len(e: &Expr, regexes: &Regexes) -> Option<u64> {
    Some(match e {
        Expr::Empty => 0,
        Expr::Literal(b) => b.len() as u64,
        Expr::Class(_) | Expr::AnyChar => 1,
        Expr::Regex(p) => regex_hir(p, regexes)?.properties().minimum_len()? as u64,
        Expr::Rule(_) | Expr::Token(_) => return None,
        Expr::Seq(v) => v.iter().map(|x| min_len(x, regexes)).sum::<Option<u64>>()?,
        Expr::Alt(v) => {
            v.iter().map(|x| min_len(x, regexes)).collect::<Option<Vec<u64>>>()?.into_iter().min().unwrap_or(u64::MAX)
        }
        Expr::Repeat { expr, min, .. } => min_len(expr, regexes)?.saturating_mul(*min as u64),
    })
}

/// A rough size of an expression's automaton.
fn weight(e: &Expr, regexes: &Regexes) -> u64 {
    match e {
        Expr::Literal(b) => b.len() as u64,
        Expr::Class(_) | Expr::AnyChar | Expr::Rule(_) | Expr::Token(_) | Expr::Empty => 1,
        Expr::Regex(p) => regex_hir(p, regexes).map_or(1, |h| hir_weight(&h)),
        Expr::Seq(v) | Expr::Alt(v) => v.iter().map(|x| weight(x, regexes)).fold(1, u64::saturating_add),
        Expr::Repeat { expr, min, max } => weight(expr, regexes).saturating_mul(max.unwrap_or(*min).max(1) as u64),
    }
}

fn hir_weight(h: &Hir) -> u64 {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => 1,
        HirKind::Literal(l) => l.0.len() as u64,
        HirKind::Class(_) => 1,
        HirKind::Capture(c) => hir_weight(&c.sub),
        HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().map(hir_weight).fold(1, u64::saturating_add),
        HirKind::Repetition(r) => hir_weight(&r.sub).saturating_mul(r.max.unwrap_or(r.min).max(1) as u64),
    }
}

struct Splitter<'a> {
    limits: &'a Limits,
    regexes: &'a Regexes,
    /// `(body, min, max)` → the rule of `body{min,max}`, shared by all repetitions.
    shared: HashMap<(String, u32, u32), RuleId>,
    /// The index the next added rule gets (from the grammar's length on).
    next_rule: usize,
    split: Split,
}

impl Splitter<'_> {
    /// A new rule, after the grammar's and those added before.
    fn add_rule(&mut self, name: &str, body: Expr) -> RuleId {
        let i = self.next_rule;
        self.next_rule += 1;
        self.split.rules.push((i, Rule { name: name.to_string(), body, no_inline: false }));
        RuleId(i as u32)
    }

    fn rewrite(&mut self, e: Expr, name: &str) -> Expr {
        match e {
            Expr::Seq(v) => Expr::Seq(v.into_iter().map(|x| self.rewrite(x, name)).collect()),
            Expr::Alt(v) => Expr::Alt(v.into_iter().map(|x| self.rewrite(x, name)).collect()),
            Expr::Regex(p) => match regex_needs(&p, self.limits, self.regexes) {
                Some(h) => self.rewrite(Expr::from_hir(&h).expect("no assertions"), name),
                _ if p.len() > HOIST_REGEX_LEN => {
                    let key = (p.to_string(), u32::MAX, u32::MAX);
                    if let Some(&id) = self.shared.get(&key) {
                        return Expr::Rule(id);
                    }
                    let id = self.add_rule(name, Expr::Regex(p));
                    self.shared.insert(key, id);
                    Expr::Rule(id)
                }
                _ => Expr::Regex(p),
            },
            Expr::Repeat { expr, min, max } => {
                let x = self.rewrite(*expr, name);
                if splittable(&x, min, max, self.limits, self.regexes) {
                    self.split(x, min, max, name)
                } else {
                    Expr::Repeat { expr: Box::new(x), min, max }
                }
            }
            e => e,
        }
    }

    /// A rule for `x{min,max}` (bounded), shared; its body split again if still long.
    fn rule(&mut self, x: &Expr, min: u32, max: u32, name: &str) -> Expr {
        let key = (format!("{x:?}"), min, max);
        if let Some(&id) = self.shared.get(&key) {
            return Expr::Rule(id);
        }
        let body = Expr::Repeat { expr: Box::new(x.clone()), min, max: Some(max) };
        let body = self.rewrite(body, name);
        let id = self.add_rule(name, body);
        self.shared.insert(key, id);
        Expr::Rule(id)
    }

    /// `x{count}` exactly.
    fn exact(&mut self, x: &Expr, count: u32, k: u32, name: &str) -> Expr {
        let (a, b) = (count / k, count % k);
        let mut v = Vec::new();
        if a > 0 {
            let y = self.rule(x, k, k, name);
            v.push(Expr::Repeat { expr: Box::new(y), min: a, max: Some(a) });
        }
        if b > 0 {
            v.push(self.rule(x, b, b, name));
        }
        Expr::Seq(v)
    }

    fn split(&mut self, x: Expr, min: u32, max: Option<u32>, name: &str) -> Expr {
        let n = max.unwrap_or(min);
        let k = ((n as f64).sqrt().ceil() as u32).max(2);
        let head = self.exact(&x, min, k, name);
        let tail = match max {
            None => Expr::Repeat { expr: Box::new(x), min: 0, max: None },
            Some(max) => {
                let n = max - min;
                let (q, r) = (n / k, n % k);
                if q == 0 {
                    self.rule(&x, 0, r, name)
                } else {
                    let y = self.rule(&x, k, k, name);
                    let z = self.rule(&x, 0, k - 1, name);
                    let w = self.rule(&x, 0, r, name);
                    Expr::Alt(vec![
                        Expr::Seq(vec![Expr::Repeat { expr: Box::new(y.clone()), min: 0, max: Some(q - 1) }, z]),
                        Expr::Seq(vec![Expr::Repeat { expr: Box::new(y), min: q, max: Some(q) }, w]),
                    ])
                }
            }
        };
        Expr::Seq(vec![head, tail])
    }
}
