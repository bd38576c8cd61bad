//! Building the table: per rule that gets an automaton of its own (see [`Plan::builds`]),
//! its Thompson NFA (`nfa.rs`), the subset construction over the rule's own byte classes
//! (`determinize.rs`) and minimization (`minimize.rs`); long counted strings come as
//! automata already (`chain.rs`). Each rule's automaton is appended to the table at once,
//! in one global numbering, and the synthetic start rule (`start --root--> accept`) last.
//!
//! Token terminals (`<[id]>`, `<text>`) are resolved against the vocabulary and numbered
//! as the rules' NFAs meet them.
//!
//! Invariant: rule `r`'s states are `rules.start[r]..` up to the next rule's start, all
//! with `state_rule == r` and transitions only among themselves; the size limits
//! ([`Limits::max_automaton_states`], [`Limits::max_automaton_bytes`]) and the compile
//! deadline are checked before each rule is appended, so a table over them is never built.

use super::classes::{byte_classes, ClassMap};
use super::determinize::{determinize, RuleDfa, SubsetScratch, Unfinished};
use super::minimize::{worth_minimizing, MinimizeScratch};
use super::nfa::{Edge, Nfa, NfaBuilder, Regexes};
use super::plan::Plan;
use super::split::Rules;
use super::{chain, Automaton, Closures, Edges, Row, RuleFacts, Table, TextFacts, TokenTerminal, DEAD};
use crate::error::CompileError;
use crate::limits::{LimitKind, Limits};
use crate::vocab::Vocabulary;
use rustc_hash::FxHashMap;
use std::time::Instant;
use stencil_grammar::{RuleId, TokenName, TokenRef};

/// A rule on its way to its automaton.
enum Built<'n> {
    Nfa(&'n Nfa),
    /// Built directly (see `chain.rs`), already minimal.
    Dfa(Box<RuleDfa>),
}

/// The table of every rule that `plan` builds, with its edges, terminals and rule starts;
/// the analyses and facts are left empty. Stops with an error at the first rule that
/// would pass a limit or the `deadline`.
pub(super) fn automata(
    rules: &Rules,
    plan: &Plan,
    vocab: &Vocabulary,
    limits: &Limits,
    regexes: &Regexes,
    deadline: Instant,
) -> Result<Automaton, CompileError> {
    let n_rules = rules.len();
    let _span = tracing::debug_span!("build", rules = n_rules).entered();
    // Per-rule times for the debug log only (a clock read per rule otherwise).
    let timed = tracing::enabled!(tracing::Level::DEBUG);
    let mut terminals: Vec<TokenTerminal> = Vec::new();
    let mut resolve = |t: &TokenRef, rule: &str| -> Result<u32, CompileError> {
        let id = match &t.token {
            TokenName::Id(id) => {
                if *id as usize >= vocab.len() {
                    return Err(CompileError::TokenIdOutOfRange { rule: rule.into(), id: *id, len: vocab.len() });
                }
                *id
            }
            TokenName::Text(text) => vocab
                .find_token(text.as_bytes())
                .ok_or_else(|| CompileError::UnknownTokenText { rule: rule.into(), text: text.clone() })?,
        };
        let term = TokenTerminal { id, negated: t.negated };
        Ok(match terminals.iter().position(|x| *x == term) {
            Some(i) => i as u32,
            None => {
                terminals.push(term);
                terminals.len() as u32 - 1
            }
        })
    };
    let mut a = Automaton {
        table: Table::default(),
        edges: Edges::default(),
        rules: RuleFacts { start: vec![DEAD; n_rules + 1], nullable: vec![false; n_rules + 1], follow: Vec::new() },
        closures: Closures::default(),
        text: TextFacts::default(),
        start_state: 0,
        accept_state: 0,
    };
    let (mut scratch, mut min_scratch) = (SubsetScratch::default(), MinimizeScratch::default());
    let mut class_ids = FxHashMap::default();
    // The synthetic start rule: start --root--> accept.
    let start_rule = n_rules as u32;
    let start_nfa = Nfa::new(2, &[(0, Edge::Call { rule: rules.root.0, to: 1 })], 1);
    let mut nfa_states = 0;
    let (inline, representative, fused) = (&plan.inline, &plan.representative, &plan.fused);
    let mut builder = NfaBuilder::new(rules, limits, inline, representative, fused, regexes, &mut resolve);
    for r in 0..=n_rules {
        let rule_started = timed.then(Instant::now);
        let b = if r == n_rules {
            Built::Nfa(&start_nfa)
        } else if !plan.builds(r) {
            continue;
        } else if let Some(dfa) = builder.counted_rule(RuleId(r as u32))?.as_ref().and_then(chain::chain_dfa) {
            Built::Dfa(Box::new(dfa))
        } else {
            let nfa = builder.build_rule(RuleId(r as u32))?;
            nfa_states += nfa.n_states();
            Built::Nfa(nfa)
        };
        if Instant::now() > deadline {
            return Err(CompileError::LimitExceeded {
                limit: LimitKind::CompileTime,
                value: limits.max_compile_time.as_millis() as usize,
                rule: rules.name(r).into(),
            });
        }
        // Room left under both size limits; the first to bind names the error.
        let by_count = limits.max_automaton_states.saturating_sub(a.n_states());
        let classes = match &b {
            Built::Nfa(nfa) => byte_classes(nfa),
            Built::Dfa(dfa) => (dfa.class, dfa.n_classes),
        };
        let by_memory = (limits.max_automaton_bytes / 4).saturating_sub(a.table.trans.len()) / classes.1;
        let stopped = |stop: Unfinished| {
            let (limit, value) = match stop {
                Unfinished::OutOfTime => (LimitKind::CompileTime, limits.max_compile_time.as_millis() as usize),
                _ if by_count <= by_memory => (LimitKind::AutomatonStates, limits.max_automaton_states),
                _ => (LimitKind::AutomatonMemory, limits.max_automaton_bytes),
            };
            CompileError::LimitExceeded { limit, value, rule: rules.name(r).into() }
        };
        let dfa = match b {
            Built::Dfa(dfa) if dfa.n_states() > by_count.min(by_memory) => {
                return Err(stopped(Unfinished::TooManyStates))
            }
            Built::Dfa(dfa) => *dfa,
            Built::Nfa(nfa) => {
                let mut dfa = determinize(nfa, classes, by_count.min(by_memory), Some(deadline), &mut scratch)
                    .map_err(stopped)?;
                let before = dfa.n_states();
                let determinized = timed.then(Instant::now);
                if worth_minimizing(nfa, before) {
                    dfa.merge_equal_classes(&mut min_scratch.kept);
                    dfa.minimize(&mut min_scratch);
                }
                if let (Some(rule_started), Some(determinized)) = (rule_started, determinized) {
                    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
                    if before > 2000 || ms(rule_started) > 0.2 {
                        tracing::debug!(
                            rule = rules.name(r),
                            nfa = nfa.n_states(),
                            dfa = before,
                            min = dfa.n_states(),
                            ms = ms(rule_started),
                            minimizing_ms = ms(determinized),
                            "slow rule"
                        );
                    }
                }
                dfa
            }
        };
        a.rules.start[r] = a.n_states() as u32;
        a.append(r as u32, &dfa, &mut class_ids);
        scratch.recycle(dfa);
    }
    drop(builder);
    tracing::debug!(
        nfa_states,
        states = a.n_states(),
        table_entries = a.table.trans.len(),
        class_maps = a.table.class_maps.len(),
        "built"
    );
    a.edges.terminals = terminals;
    a.start_state = a.rules.start[start_rule as usize];
    a.accept_state = a.start_state + 1;
    Ok(a)
}

impl Automaton {
    /// Appends `dfa` as `rule`'s states; `class_ids` finds class maps already kept.
    fn append(&mut self, rule: u32, dfa: &RuleDfa, class_ids: &mut FxHashMap<[u8; 256], u32>) {
        let base = self.n_states() as u32;
        let shift = |t: u32| if t == DEAD { DEAD } else { base + t };
        let classes = *class_ids.entry(dfa.class).or_insert_with(|| {
            self.table.class_maps.push(ClassMap::new(dfa.class, dfa.n_classes));
            self.table.class_maps.len() as u32 - 1
        });
        let start = self.table.trans.len() as u32;
        self.table
            .rows
            .extend((0..dfa.n_states() as u32).map(|s| Row { start: start + s * dfa.n_classes as u32, classes }));
        self.table.trans.extend(dfa.trans.iter().map(|&t| shift(t)));
        for s in 0..dfa.n_states() {
            self.edges.calls.push_row(dfa.calls.get(s).iter().map(|&(r, t)| (r, shift(t))));
            self.edges.token_edges.push_row(dfa.token_edges.get(s).iter().map(|&(k, t)| (k, shift(t))));
        }
        self.table.is_final.extend_from_slice(&dfa.is_final);
        self.table.state_rule.extend(std::iter::repeat_n(rule, dfa.n_states()));
    }
}
