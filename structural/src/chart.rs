//! The parser behind captures: an Earley parser over the compiled grammar itself, byte by
//! byte, that remembers one derivation of every item, so that the marked rules' spans can
//! be read back.
//!
//! Each rule the parse can reach becomes a Thompson NFA over bytes (characters as their
//! UTF-8 sequences, regexes through their syntax tree), with calls to other rules. Unmarked
//! rules called last in their caller (the free text's states, one rule each) are built into
//! the caller's NFA, as the engine does, so that free text is a loop and not a chain of
//! calls. Token terminals read their text; a negated one reads any vocabulary token's text
//! but the excluded one's.
//!
//! Items are `(NFA state, origin)`; each keeps the first way it was derived ([`Link`]),
//! except that a completion whose caller started earlier replaces a later one, so that an
//! earlier segment closes as early as the rest allows (see [`crate::capture`]).

use std::collections::HashSet;
use std::sync::Arc;

use regex_syntax::utf8::Utf8Sequences;
use rustc_hash::FxHashMap;
use stencil_grammar::{Expr, Grammar, TokenName};
use stencil_mask::Vocabulary;

use crate::capture::CaptureError;
use crate::compile::Mark;

/// NFA states, all rules together, before the work of a parse becomes too much.
const MAX_STATES: usize = 4_000_000;

#[derive(Default, Clone)]
struct State {
    eps: Vec<u32>,
    bytes: Vec<(u8, u8, u32)>,
    calls: Vec<(u32, u32)>,
    /// Any one vocabulary token's text but this one's.
    not_token: Vec<(Arc<[u8]>, u32)>,
    fin: bool,
}

/// The compiled grammar as NFAs, shared by every parse.
pub(crate) struct Program {
    states: Vec<State>,
    rule_of: Vec<u32>,
    start: Vec<u32>,
    pub(crate) marks: Vec<Option<Mark>>,
    pub(crate) root: u32,
    tokens: Option<HashSet<Vec<u8>>>,
    max_token_len: usize,
}

impl Program {
    pub(crate) fn new(
        g: &Grammar,
        marks: &[Option<Mark>],
        token_text: &FxHashMap<TokenName, Vec<u8>>,
        vocab: Option<&Vocabulary>,
    ) -> Result<Program, CaptureError> {
        let mut p = Program {
            states: Vec::new(),
            rule_of: Vec::new(),
            start: vec![u32::MAX; g.rules.len()],
            marks: marks.to_vec(),
            root: g.root.0,
            tokens: None,
            max_token_len: 0,
        };
        p.marks.resize(g.rules.len(), None);
        let mut queue = vec![g.root.0];
        let mut regexes: FxHashMap<String, Expr> = FxHashMap::default();
        while let Some(r) = queue.pop() {
            if p.start[r as usize] != u32::MAX {
                continue;
            }
            let mut b = RuleBuilder {
                p: &mut p,
                g,
                rule: r,
                fused: FxHashMap::default(),
                calls: Vec::new(),
                token_text,
                regexes: &mut regexes,
                negated: false,
            };
            let start = b.state();
            let fin = b.state();
            b.p.states[fin as usize].fin = true;
            b.p.start[r as usize] = start;
            let end = b.expr(&g.rules[r as usize].body, start, true)?;
            b.eps(end, fin);
            let (calls, negated) = (b.calls, b.negated);
            queue.extend(calls);
            if negated && p.tokens.is_none() {
                let v = vocab.ok_or(CaptureError::NeedsVocabulary)?;
                let set: HashSet<Vec<u8>> =
                    (0..v.len() as u32).filter(|&t| v.is_text(t)).map(|t| v.token_bytes(t).to_vec()).collect();
                p.max_token_len = set.iter().map(Vec::len).max().unwrap_or(0);
                p.tokens = Some(set);
            }
        }
        Ok(p)
    }

    pub(crate) fn rule_of(&self, state: u32) -> u32 {
        self.rule_of[state as usize]
    }
}

struct RuleBuilder<'a> {
    p: &'a mut Program,
    g: &'a Grammar,
    rule: u32,
    /// Rules built into this NFA (tail calls of unmarked rules), by their entry state.
    fused: FxHashMap<u32, u32>,
    calls: Vec<u32>,
    token_text: &'a FxHashMap<TokenName, Vec<u8>>,
    regexes: &'a mut FxHashMap<String, Expr>,
    negated: bool,
}

impl RuleBuilder<'_> {
    fn state(&mut self) -> u32 {
        self.p.states.push(State::default());
        self.p.rule_of.push(self.rule);
        self.p.states.len() as u32 - 1
    }

    fn eps(&mut self, from: u32, to: u32) {
        self.p.states[from as usize].eps.push(to);
    }

    fn check(&self) -> Result<(), CaptureError> {
        if self.p.states.len() > MAX_STATES {
            return Err(CaptureError::TooLarge { states: MAX_STATES });
        }
        Ok(())
    }

    fn bytes(&mut self, start: u32, bytes: &[u8]) -> u32 {
        let mut s = start;
        for &b in bytes {
            let t = self.state();
            self.p.states[s as usize].bytes.push((b, b, t));
            s = t;
        }
        s
    }

    fn chars(&mut self, start: u32, ranges: &[(u32, u32)]) -> u32 {
        let end = self.state();
        for &(lo, hi) in ranges {
            let (Some(lo), Some(hi)) = (char::from_u32(lo), char::from_u32(hi)) else { continue };
            for seq in Utf8Sequences::new(lo, hi) {
                let mut s = start;
                let n = seq.as_slice().len();
                for (i, r) in seq.as_slice().iter().enumerate() {
                    let t = if i + 1 == n { end } else { self.state() };
                    self.p.states[s as usize].bytes.push((r.start, r.end, t));
                    s = t;
                }
            }
        }
        end
    }

    /// Builds `e` from `start`; returns its end. `tail`: nothing follows it in the rule.
    fn expr(&mut self, e: &Expr, start: u32, tail: bool) -> Result<u32, CaptureError> {
        self.check()?;
        Ok(match e {
            Expr::Empty => start,
            Expr::Literal(b) => self.bytes(start, b),
            Expr::Class(c) => self.chars(start, &c.code_points()),
            Expr::AnyChar => self.chars(start, &[(0, 0xD7FF), (0xE000, 0x10FFFF)]),
            Expr::Regex(r) => {
                let key = r.as_str().to_string();
                let inner = match self.regexes.get(&key) {
                    Some(x) => x.clone(),
                    None => {
                        let hir = match r.hir() {
                            Some(h) => (**h).clone(),
                            None => regex_syntax::ParserBuilder::new()
                                .utf8(true)
                                .build()
                                .parse(r.as_str())
                                .map_err(|e| CaptureError::Regex(e.to_string()))?,
                        };
                        let x =
                            Expr::from_hir(&hir).ok_or_else(|| CaptureError::Regex(format!("{key}: look-around")))?;
                        self.regexes.insert(key, x.clone());
                        x
                    }
                };
                self.expr(&inner, start, tail)?
            }
            Expr::Rule(id) => {
                let r = id.0;
                if tail && self.p.marks[r as usize].is_none() {
                    // Built into this NFA: nothing follows, so its end is this rule's end.
                    let after = self.state();
                    match self.fused.get(&r) {
                        Some(&entry) => self.eps(start, entry),
                        None => {
                            let entry = self.state();
                            self.fused.insert(r, entry);
                            self.eps(start, entry);
                            let body = &self.g.rules[r as usize].body;
                            let end = self.expr(body, entry, true)?;
                            self.eps(end, after);
                        }
                    }
                    after
                } else {
                    let to = self.state();
                    self.p.states[start as usize].calls.push((r, to));
                    self.calls.push(r);
                    to
                }
            }
            Expr::Token(t) => {
                let text = self.token_text.get(&t.token).ok_or(CaptureError::NeedsVocabulary)?.clone();
                if t.negated {
                    self.negated = true;
                    let to = self.state();
                    self.p.states[start as usize].not_token.push((text.into(), to));
                    to
                } else {
                    self.bytes(start, &text)
                }
            }
            Expr::Seq(v) => {
                let mut s = start;
                for (i, x) in v.iter().enumerate() {
                    s = self.expr(x, s, tail && i + 1 == v.len())?;
                }
                s
            }
            Expr::Alt(v) => {
                let end = self.state();
                for x in v {
                    let s = self.state();
                    self.eps(start, s);
                    let e = self.expr(x, s, tail)?;
                    self.eps(e, end);
                }
                end
            }
            Expr::Repeat { expr, min, max } => {
                let copies = max.unwrap_or(*min).max(*min) as usize;
                if copies > MAX_STATES {
                    return Err(CaptureError::TooLarge { states: MAX_STATES });
                }
                let mut s = start;
                for _ in 0..*min {
                    s = self.expr(expr, s, false)?;
                }
                match max {
                    None => {
                        let head = self.state();
                        self.eps(s, head);
                        let e = self.expr(expr, head, false)?;
                        self.eps(e, head);
                        head
                    }
                    Some(max) => {
                        let end = self.state();
                        self.eps(s, end);
                        for _ in *min..*max {
                            s = self.expr(expr, s, tail && *max == 1)?;
                            self.eps(s, end);
                        }
                        end
                    }
                }
            }
        })
    }
}

/// How an item was first derived.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Link {
    /// A rule's start, predicted where it begins.
    Predict,
    /// From an item of the same set.
    Eps(u32),
    /// From an item of the previous set, over one byte.
    Scan(u32),
    /// From `caller` (an item of the set where the child began) over the child (an item of
    /// this set that finished a rule).
    Complete { caller: u32, child: u32 },
    /// From an item of set `from`, over one token's text.
    Token { from: u32, item: u32 },
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Item {
    pub(crate) state: u32,
    pub(crate) origin: u32,
    pub(crate) link: Link,
}

#[derive(Default)]
pub(crate) struct Set {
    pub(crate) items: Vec<Item>,
    index: FxHashMap<(u32, u32), u32>,
    /// Per called rule: (caller item, state after the call).
    pub(crate) waiting: FxHashMap<u32, Vec<(u32, u32)>>,
    /// Rules completed with their origin here: their final item.
    done_here: FxHashMap<u32, u32>,
}

/// An Earley chart over a growing text.
pub(crate) struct Chart {
    pub(crate) program: Arc<Program>,
    pub(crate) sets: Vec<Set>,
    pub(crate) text: Vec<u8>,
    /// Negated-token scans not yet decided: (set, item, excluded text, target).
    pending: Vec<(u32, u32, Arc<[u8]>, u32)>,
    work: u64,
    max_work: u64,
    pub(crate) dead: bool,
}

impl Chart {
    pub(crate) fn new(program: Arc<Program>, max_work: u64) -> Result<Chart, CaptureError> {
        let mut c = Chart {
            program,
            sets: vec![Set::default()],
            text: Vec::new(),
            pending: Vec::new(),
            work: 0,
            max_work,
            dead: false,
        };
        let s = c.program.start[c.program.root as usize];
        c.add(0, s, 0, Link::Predict);
        c.close(0)?;
        Ok(c)
    }

    fn add(&mut self, set: usize, state: u32, origin: u32, link: Link) {
        let st = &mut self.sets[set];
        match st.index.get(&(state, origin)) {
            Some(&i) => {
                // A completion over a child that began earlier is preferred: the segments
                // before it close as early as the rest allows.
                if let (Link::Complete { child: new, .. }, Link::Complete { child: old, .. }) =
                    (link, st.items[i as usize].link)
                {
                    if st.items[new as usize].origin < st.items[old as usize].origin {
                        st.items[i as usize].link = link;
                    }
                }
            }
            None => {
                st.index.insert((state, origin), st.items.len() as u32);
                st.items.push(Item { state, origin, link });
            }
        }
    }

    /// Runs predictions and completions in set `j` to a fixpoint.
    fn close(&mut self, j: usize) -> Result<(), CaptureError> {
        let program = self.program.clone();
        let mut i = 0;
        while i < self.sets[j].items.len() {
            self.work += 1;
            if self.work > self.max_work {
                return Err(CaptureError::TooMuchWork { limit: self.max_work });
            }
            let Item { state, origin, .. } = self.sets[j].items[i];
            let st = &program.states[state as usize];
            let idx = i as u32;
            for &t in &st.eps {
                self.add(j, t, origin, Link::Eps(idx));
            }
            if st.fin {
                let r = program.rule_of(state);
                if origin as usize == j {
                    self.sets[j].done_here.entry(r).or_insert(idx);
                }
                let callers = self.sets[origin as usize].waiting.get(&r).cloned().unwrap_or_default();
                for (c, to) in callers {
                    let co = self.sets[origin as usize].items[c as usize].origin;
                    self.add(j, to, co, Link::Complete { caller: c, child: idx });
                }
            }
            for &(r, to) in &st.calls {
                self.sets[j].waiting.entry(r).or_default().push((idx, to));
                self.add(j, program.start[r as usize], j as u32, Link::Predict);
                if let Some(&child) = self.sets[j].done_here.get(&r) {
                    self.add(j, to, origin, Link::Complete { caller: idx, child });
                }
            }
            for (ex, to) in &st.not_token {
                self.pending.push((j as u32, idx, ex.clone(), *to));
            }
            i += 1;
        }
        Ok(())
    }

    /// Reads more text. A byte no item can take leaves the chart dead (and returns false).
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<bool, CaptureError> {
        for &b in bytes {
            if self.dead {
                return Ok(false);
            }
            let j = self.sets.len() - 1;
            self.text.push(b);
            self.sets.push(Set::default());
            let program = self.program.clone();
            for i in 0..self.sets[j].items.len() {
                let Item { state, origin, .. } = self.sets[j].items[i];
                for &(lo, hi, to) in &program.states[state as usize].bytes {
                    if (lo..=hi).contains(&b) {
                        self.add(j + 1, to, origin, Link::Scan(i as u32));
                    }
                }
            }
            self.scan_tokens(j + 1);
            self.close(j + 1)?;
            if self.sets[j + 1].items.is_empty() && self.pending.is_empty() {
                self.dead = true;
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn scan_tokens(&mut self, k: usize) {
        if self.pending.is_empty() {
            return;
        }
        let program = self.program.clone();
        let Some(tokens) = program.tokens.as_ref() else { return };
        let max = program.max_token_len;
        let pending = std::mem::take(&mut self.pending);
        for (j, item, ex, to) in pending {
            let j = j as usize;
            let piece = &self.text[j..k];
            if tokens.contains(piece) && piece != &*ex {
                let origin = self.sets[j].items[item as usize].origin;
                self.add(k, to, origin, Link::Token { from: j as u32, item });
            }
            if k - j < max {
                self.pending.push((j as u32, item, ex, to));
            }
        }
    }

    /// The root's final item in the last set, if the text so far is a whole reply.
    pub(crate) fn complete_item(&self) -> Option<u32> {
        let n = self.sets.len() - 1;
        let root = self.program.root;
        self.sets[n]
            .items
            .iter()
            .position(|it| {
                it.origin == 0 && self.program.states[it.state as usize].fin && self.program.rule_of(it.state) == root
            })
            .map(|i| i as u32)
    }
}
