//! Thompson construction: one rule body → an ε-NFA over bytes, rule calls and token edges.

use crate::error::CompileError;
use crate::limits::{LimitKind, Limits};
use regex_automata::nfa::thompson;
use regex_automata::util::primitives::StateID;
use regex_syntax::utf8::Utf8Sequences;
use stencil_grammar::{Expr, Grammar, RuleId, MAX_CODE_POINT};

/// An edge of the ε-NFA.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Edge {
    Eps(u32),
    Bytes { lo: u8, hi: u8, to: u32 },
    Call { rule: u32, to: u32 },
    Token { terminal: u32, to: u32 },
}

/// ε-NFA of one rule: state 0 is the start, `accept` the only final state.
#[derive(Default, Debug)]
pub(crate) struct Nfa {
    pub edges: Vec<Vec<Edge>>,
    pub accept: u32,
}

/// Builds NFAs; shared state across rules for the global size limit.
pub(crate) struct NfaBuilder<'a> {
    pub grammar: &'a Grammar,
    pub limits: &'a Limits,
    /// Rules whose bodies are expanded in place instead of called.
    pub inline: &'a [bool],
    /// Token terminal index of each `Expr::Token` met, in traversal order (resolved by the caller).
    pub token_terminal: &'a mut dyn FnMut(&stencil_grammar::TokenRef, &str) -> Result<u32, CompileError>,
    pub total_states: usize,
    rule_name: String,
    nfa: Nfa,
}

impl<'a> NfaBuilder<'a> {
    pub fn new(
        grammar: &'a Grammar,
        limits: &'a Limits,
        inline: &'a [bool],
        token_terminal: &'a mut dyn FnMut(&stencil_grammar::TokenRef, &str) -> Result<u32, CompileError>,
    ) -> Self {
        NfaBuilder {
            grammar,
            limits,
            inline,
            token_terminal,
            total_states: 0,
            rule_name: String::new(),
            nfa: Nfa::default(),
        }
    }

    /// The NFA of `rule`'s body.
    pub fn build_rule(&mut self, rule: RuleId) -> Result<Nfa, CompileError> {
        self.rule_name = self.grammar.rule(rule).name.clone();
        self.nfa = Nfa::default();
        let start = self.new_state()?;
        let body = &self.grammar.rule(rule).body;
        let end = self.build(body, start, 0)?;
        self.nfa.accept = end;
        Ok(std::mem::take(&mut self.nfa))
    }

    fn limit(&self, limit: LimitKind, value: usize) -> CompileError {
        CompileError::LimitExceeded { limit, value, rule: self.rule_name.clone() }
    }

    fn new_state(&mut self) -> Result<u32, CompileError> {
        self.total_states += 1;
        if self.total_states > self.limits.max_nfa_states {
            return Err(self.limit(LimitKind::NfaStates, self.limits.max_nfa_states));
        }
        self.nfa.edges.push(Vec::new());
        Ok(self.nfa.edges.len() as u32 - 1)
    }

    fn edge(&mut self, from: u32, e: Edge) {
        self.nfa.edges[from as usize].push(e);
    }

    /// Adds `expr` starting at `start`; returns its end state.
    fn build(&mut self, expr: &Expr, start: u32, depth: usize) -> Result<u32, CompileError> {
        if depth > self.limits.max_expression_depth {
            return Err(self.limit(LimitKind::ExpressionDepth, self.limits.max_expression_depth));
        }
        match expr {
            Expr::Empty => Ok(start),
            Expr::Literal(bytes) => {
                let mut cur = start;
                for &b in bytes {
                    let next = self.new_state()?;
                    self.edge(cur, Edge::Bytes { lo: b, hi: b, to: next });
                    cur = next;
                }
                Ok(cur)
            }
            Expr::Class(class) => self.code_points(&class.code_points(), start),
            Expr::AnyChar => self.code_points(&[(0, 0xD7FF), (0xE000, MAX_CODE_POINT)], start),
            Expr::Regex(pattern) => self.regex(pattern, start),
            Expr::Rule(id) => {
                let Some(rule) = self.grammar.rules.get(id.0 as usize) else {
                    return Err(CompileError::DanglingRule { rule: self.rule_name.clone(), id: id.0 });
                };
                if self.inline[id.0 as usize] {
                    self.build(&rule.body, start, depth + 1)
                } else {
                    let end = self.new_state()?;
                    self.edge(start, Edge::Call { rule: id.0, to: end });
                    Ok(end)
                }
            }
            Expr::Token(t) => {
                let terminal = (self.token_terminal)(t, &self.rule_name)?;
                let end = self.new_state()?;
                self.edge(start, Edge::Token { terminal, to: end });
                Ok(end)
            }
            Expr::Seq(items) => {
                let mut cur = start;
                for item in items {
                    cur = self.build(item, cur, depth + 1)?;
                }
                Ok(cur)
            }
            Expr::Alt(alts) => {
                let end = self.new_state()?;
                for alt in alts {
                    let s = self.new_state()?;
                    self.edge(start, Edge::Eps(s));
                    let e = self.build(alt, s, depth + 1)?;
                    self.edge(e, Edge::Eps(end));
                }
                Ok(end)
            }
            Expr::Repeat { expr, min, max } => {
                let count = max.unwrap_or(*min);
                if count > self.limits.max_repetition {
                    return Err(self.limit(LimitKind::Repetition, self.limits.max_repetition as usize));
                }
                // Fail before building when the expansion is sure not to fit.
                let copies = (*max).map_or(*min as usize + 1, |m| m as usize);
                let at_least = copies.saturating_mul(self.min_states(expr, depth + 1));
                if self.total_states.saturating_add(at_least) > self.limits.max_nfa_states {
                    return Err(self.limit(LimitKind::NfaStates, self.limits.max_nfa_states));
                }
                let mut cur = start;
                for _ in 0..*min {
                    cur = self.build(expr, cur, depth + 1)?;
                }
                match max {
                    None => {
                        // cur --ε--> s --expr--> e --ε--> cur; exit at cur.
                        let s = self.new_state()?;
                        self.edge(cur, Edge::Eps(s));
                        let e = self.build(expr, s, depth + 1)?;
                        self.edge(e, Edge::Eps(cur));
                        let end = self.new_state()?;
                        self.edge(cur, Edge::Eps(end));
                        Ok(end)
                    }
                    Some(max) => {
                        let end = self.new_state()?;
                        for _ in *min..*max {
                            self.edge(cur, Edge::Eps(end));
                            let s = self.new_state()?;
                            self.edge(cur, Edge::Eps(s));
                            cur = self.build(expr, s, depth + 1)?;
                        }
                        self.edge(cur, Edge::Eps(end));
                        Ok(end)
                    }
                }
            }
        }
    }

    /// A lower bound on the states `build` makes for `expr` (saturating; stops counting
    /// past the depth limit, where `build` fails anyway).
    fn min_states(&self, expr: &Expr, depth: usize) -> usize {
        if depth > self.limits.max_expression_depth {
            return 0;
        }
        match expr {
            Expr::Empty => 0,
            Expr::Literal(b) => b.len(),
            Expr::Class(_) | Expr::AnyChar | Expr::Regex(_) | Expr::Token(_) => 1,
            Expr::Rule(id) => match self.grammar.rules.get(id.0 as usize) {
                Some(rule) if self.inline[id.0 as usize] => self.min_states(&rule.body, depth + 1),
                _ => 1,
            },
            Expr::Seq(v) => v.iter().fold(0usize, |n, e| n.saturating_add(self.min_states(e, depth + 1))),
            Expr::Alt(v) => {
                v.iter().fold(1usize, |n, e| n.saturating_add(1).saturating_add(self.min_states(e, depth + 1)))
            }
            Expr::Repeat { expr, min, max } => {
                let one = self.min_states(expr, depth + 1);
                match max {
                    None => (*min as usize + 1).saturating_mul(one).saturating_add(2),
                    Some(max) => (*max as usize).saturating_mul(one).saturating_add(1),
                }
            }
        }
    }

    /// One code point from `ranges`, as UTF-8 byte sequences.
    fn code_points(&mut self, ranges: &[(u32, u32)], start: u32) -> Result<u32, CompileError> {
        let end = self.new_state()?;
        for &(lo, hi) in ranges {
            let (Some(lo), Some(hi)) = (char::from_u32(lo), char::from_u32(hi)) else { continue };
            for seq in Utf8Sequences::new(lo, hi) {
                let ranges = seq.as_slice();
                let mut cur = start;
                for (i, r) in ranges.iter().enumerate() {
                    let to = if i + 1 == ranges.len() { end } else { self.new_state()? };
                    self.edge(cur, Edge::Bytes { lo: r.start, hi: r.end, to });
                    cur = to;
                }
            }
        }
        Ok(end)
    }

    /// Imports `regex-automata`'s Thompson NFA for `pattern` (a full match over bytes).
    fn regex(&mut self, pattern: &str, start: u32) -> Result<u32, CompileError> {
        let bad = |message: String| CompileError::BadRegex {
            rule: self.rule_name.clone(),
            pattern: pattern.to_string(),
            message,
        };
        let nfa = thompson::Compiler::new()
            .syntax(regex_automata::util::syntax::Config::new().utf8(true).unicode(true))
            .configure(
                thompson::Config::new()
                    .which_captures(thompson::WhichCaptures::None)
                    .shrink(true)
                    // About 16 bytes a state: no bigger than what max_nfa_states allows.
                    .nfa_size_limit(Some(self.limits.max_nfa_states.saturating_mul(16))),
            )
            .build(pattern)
            .map_err(|e| match e.size_limit() {
                Some(_) => self.limit(LimitKind::NfaStates, self.limits.max_nfa_states),
                None => bad(e.to_string()),
            })?;
        let end = self.new_state()?;
        let mut map: Vec<Option<u32>> = vec![None; nfa.states().len()];
        let mut todo: Vec<StateID> = vec![nfa.start_anchored()];
        map[nfa.start_anchored().as_usize()] = Some(start);
        while let Some(id) = todo.pop() {
            let from = map[id.as_usize()].expect("mapped before queued");
            let mut targets: Vec<(Option<(u8, u8)>, StateID)> = Vec::new();
            match nfa.state(id) {
                thompson::State::ByteRange { trans } => targets.push((Some((trans.start, trans.end)), trans.next)),
                thompson::State::Sparse(s) => {
                    targets.extend(s.transitions.iter().map(|t| (Some((t.start, t.end)), t.next)))
                }
                thompson::State::Dense(d) => {
                    for b in 0..=255u8 {
                        let next = d.transitions[b as usize];
                        if next != StateID::ZERO {
                            targets.push((Some((b, b)), next));
                        }
                    }
                }
                thompson::State::Union { alternates } => targets.extend(alternates.iter().map(|&s| (None, s))),
                thompson::State::BinaryUnion { alt1, alt2 } => {
                    targets.push((None, *alt1));
                    targets.push((None, *alt2));
                }
                thompson::State::Capture { next, .. } => targets.push((None, *next)),
                thompson::State::Look { look, .. } => {
                    return Err(CompileError::UnsupportedRegex {
                        rule: self.rule_name.clone(),
                        pattern: pattern.to_string(),
                        feature: format!("the assertion {look:?}"),
                    })
                }
                thompson::State::Fail => {}
                thompson::State::Match { .. } => self.edge(from, Edge::Eps(end)),
            }
            for (range, next) in targets {
                let to = match map[next.as_usize()] {
                    Some(t) => t,
                    None => {
                        let t = self.new_state()?;
                        map[next.as_usize()] = Some(t);
                        todo.push(next);
                        t
                    }
                };
                match range {
                    Some((lo, hi)) => self.edge(from, Edge::Bytes { lo, hi, to }),
                    None => self.edge(from, Edge::Eps(to)),
                }
            }
        }
        Ok(end)
    }
}
