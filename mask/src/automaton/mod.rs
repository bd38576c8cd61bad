//! The compiled form of a grammar: every rule a deterministic automaton over bytes, rule
//! calls and whole-token terminals, all states in one global numbering.
//!
//! Small non-recursive rules are expanded in place; the rest stay rules that the Earley
//! parser ([`crate::earley`]) calls. States that cannot reach their rule's end are
//! trimmed, so every live Earley item can finish: a non-empty item set means the input so
//! far is a viable prefix.
//!
//! [`Automaton::compile`] runs the passes in this order, one module each (after
//! regex-automata's `dfa/`):
//!
//! | pass | module | computes |
//! |---|---|---|
//! | split, plan | [`plan`] (`split.rs`, `fuse.rs`) | what becomes of each rule: split, inlined, shared, fused |
//! | build | [`build`] (`nfa.rs`, `chain.rs`, [`determinize`], [`minimize`], [`classes`]) | each rule's minimal DFA, appended to the [`Table`] and [`Edges`] |
//! | fixpoints, trim | [`analysis`] | nullable and productive rules ([`RuleFacts`]); the states that cannot finish trimmed |
//! | text facts | [`text`] | the bytes each state moves on; runs and reaches ([`TextFacts`]) |
//! | closures | [`analysis`] | what Earley adds along with each state ([`Closures`]) |
//! | follow | [`analysis`] | the bytes that can follow each rule ([`RuleFacts::follow`]) |
//!
//! The fields are grouped by who reads them: the Earley parser (`earley.rs`) steps over
//! the [`Table`] and [`Edges`] and predicts and completes with the [`Closures`]; the mask
//! cache (`cache.rs`) takes its shortcuts from the [`TextFacts`] and the FOLLOW sets.
//! Containers shared by the passes are in [`rows`], interned state sets in `sets.rs`.
//! Each pass runs under a `tracing` span at debug level, with the sizes as fields.
//!
//! The table's rows are as long as their rule has byte classes (`Table::rows` says, per
//! state, where its row starts and which class map it uses; rules that split the bytes
//! alike share a map): a key's literal tells apart a few bytes where the whole grammar
//! tells apart dozens, which made the tables of the Kubernetes and WashingtonPost schemas
//! 3× smaller. Per-state lists (calls, token edges, predictions) are rows of one buffer
//! each, not a vector per state. Rule by rule, the NFA, its DFA and the minimized DFA are
//! built in buffers kept from one rule to the next, and the result is appended at once.
//! The synthetic start rule (`<start> ::= root`) gives "can end". Compiling is
//! sub-millisecond for the corpus grammars and builds no token tables: those are the mask
//! cache's, filled on first use.

mod analysis;
mod build;
mod chain;
mod classes;
mod determinize;
mod fuse;
mod minimize;
mod nfa;
mod plan;
mod rows;
mod sets;
mod split;
mod text;

use crate::bytes::ByteSet;
use crate::error::CompileError;
use crate::limits::Limits;
use crate::vocab::Vocabulary;
use nfa::Regexes;
use split::Rules;
use stencil_grammar::Grammar;

pub(crate) use classes::ClassMap;
pub(crate) use rows::{Rows, StampSet};

/// "No transition".
pub(crate) const DEAD: u32 = u32::MAX;

/// The origin of an Earley item whose callers are unknown (see [`crate::earley`]): the
/// mask cache's items, and what [`Automaton::steps_alone`] asks about.
pub(crate) const NO_ORIGIN: u32 = u32::MAX;

/// A whole-token terminal: `<[id]>` or `!<[id]>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TokenTerminal {
    pub id: u32,
    pub negated: bool,
}

impl TokenTerminal {
    pub fn matches(&self, token: u32) -> bool {
        (token == self.id) != self.negated
    }
}

/// All rules' automata.
#[derive(Debug)]
pub(crate) struct Automaton {
    /// The byte transitions: what every reader steps over.
    pub table: Table,
    /// Rule calls and token edges.
    pub edges: Edges,
    /// Per rule: start, nullability, FOLLOW.
    pub rules: RuleFacts,
    /// What the Earley parser adds along with an item (`earley.rs`).
    pub closures: Closures,
    /// The text fast paths of the mask cache (`cache.rs`).
    pub text: TextFacts,
    /// Synthetic start: `start_state --root--> accept_state`.
    pub start_state: u32,
    pub accept_state: u32,
}

/// The transition table (filled by [`build`], trimmed by [`analysis`]).
#[derive(Debug, Default)]
pub(crate) struct Table {
    /// The rules' byte classes (rules whose edges split the bytes alike share one).
    pub class_maps: Vec<ClassMap>,
    /// Per state: its row of `trans` and the class map that row uses.
    pub rows: Vec<Row>,
    /// One row per state, one entry per byte class of its rule: next state or [`DEAD`].
    /// (Rule-local classes keep rows short: a key's literal tells apart a few bytes,
    /// the whole grammar tells apart dozens.)
    pub trans: Vec<u32>,
    /// Per state: its rule.
    pub state_rule: Vec<u32>,
    /// Per state: whether its rule may end there.
    pub is_final: Vec<bool>,
    /// The bytes a state has transitions on (filled by [`text::facts`], once trimmed).
    pub first_bytes: Vec<ByteSet>,
}

/// The edges that are not bytes (filled by [`build`], trimmed by [`analysis`]).
#[derive(Debug, Default)]
pub(crate) struct Edges {
    /// `(rule, next state)` per state.
    pub calls: Rows<(u32, u32)>,
    /// `(terminal, next state)` per state.
    pub token_edges: Rows<(u32, u32)>,
    /// The token terminals, by the index `token_edges` use.
    pub terminals: Vec<TokenTerminal>,
}

/// Per rule; the last rule is the synthetic start.
#[derive(Debug)]
pub(crate) struct RuleFacts {
    /// Start state per rule ([`DEAD`] for rules without an automaton of their own).
    pub start: Vec<u32>,
    /// Whether the rule matches the empty input.
    pub nullable: Vec<bool>,
    /// The bytes that can come right after the rule ends, in any context.
    pub follow: Vec<ByteSet>,
}

/// The Earley closures (see [`analysis::compute_closures`]).
#[derive(Debug, Default)]
pub(crate) struct Closures {
    /// States reachable from a state through calls of nullable rules (same origin), excluding itself.
    pub same_origin: Rows<u32>,
    /// States predicted at the current position by a state (or its `same_origin` states).
    pub predicted: Rows<u32>,
    /// Not final, no calls: see [`Automaton::is_simple`].
    pub simple: Vec<bool>,
}

/// The text fast paths (see [`text`]): per state.
#[derive(Debug, Default)]
pub(crate) struct TextFacts {
    /// Runs (see `compute_runs` in [`text`]): per state, the ASCII bytes that move it where
    /// `a` does, and how many such bytes in a row keep every item alive and alone, with
    /// an unknown caller (`run_len`) or any (`run_len_simple`).
    pub run_bytes: Vec<u128>,
    pub run_len: Vec<u32>,
    pub run_len_simple: Vec<u32>,
    /// The run when non-ASCII characters count too: how many bytes in a row, each a run
    /// byte or part of a well-formed non-ASCII character, keep the item alive and alone
    /// with an unknown caller (every such character must take each state of the run where
    /// `a` does).
    pub utf8_run: Vec<u32>,
    /// Reaches (see `plain_reach` in [`text`]): per state, how many plain-text characters in
    /// a row, whichever they are, surely keep the item alive and alone with an unknown
    /// caller: plain ASCII only (`plain_reach`), non-ASCII characters too (`text_reach`).
    pub plain_reach: Vec<u32>,
    pub text_reach: Vec<u32>,
    /// Whether no plain text longer than `text_reach` keeps the item alive either: with
    /// the rule ending nowhere on the way (exact), or perhaps ending (bounded: the text
    /// may go on in a caller).
    pub text_reach_exact: Vec<bool>,
    pub text_reach_bounded: Vec<bool>,
    /// Where `text_reach` is an end (`u32::MAX` elsewhere): every plain text of that many
    /// characters takes the item to its rule's end, through states that neither end nor
    /// call, and the rule takes no more plain text there.
    pub text_end: Vec<u32>,
}

/// Where a state's transitions are: `trans[start..start + n]`, `n` the classes of
/// `class_maps[classes]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Row {
    pub start: u32,
    pub classes: u32,
}

impl Automaton {
    /// Compiles `grammar`, resolving token references against `vocab`: the passes in
    /// order (see the module doc).
    pub fn compile(grammar: &Grammar, vocab: &Vocabulary, limits: &Limits) -> Result<Self, CompileError> {
        let deadline = std::time::Instant::now() + limits.max_compile_time;
        let _span = tracing::debug_span!("compile", rules = grammar.rules.len(), vocab = vocab.len()).entered();
        if grammar.root.0 as usize >= grammar.rules.len() {
            return Err(CompileError::DanglingRule { rule: "<root>".into(), id: grammar.root.0 });
        }
        let regexes = Regexes::default();
        // Planning (plan.rs): long repetitions split into rules; then which rules are
        // inlined, shared with an equal one, or fused into their tail caller.
        let (split, unsplit) = plan::split(grammar, limits, &regexes)?;
        let rules = Rules::new(grammar, &split);
        let plan = plan::make(&rules, &split, &unsplit, &regexes)?;
        // Per rule built: NFA, subset construction, minimization, into the table (build.rs).
        let mut a = build::automata(&rules, &plan, vocab, limits, &regexes, deadline)?;
        // Nullable and productive rules; trim the states that cannot finish (analysis.rs).
        let successors = analysis::Successors::of(&a);
        a.rules.nullable = analysis::fixpoint_rules(&a, &successors, false);
        let productive = analysis::fixpoint_rules(&a, &successors, true);
        if !productive[rules.root.0 as usize] {
            return Err(CompileError::EmptyLanguage { rule: rules[rules.root.0 as usize].name.clone() });
        }
        analysis::trim(&mut a, &successors, &productive);
        // The bytes each state moves on, its runs and reaches (text.rs).
        text::facts(&mut a);
        // Earley's closures, then FOLLOW (analysis.rs).
        analysis::compute_closures(&mut a, &rules, limits, deadline)?;
        a.rules.follow = analysis::follow_bytes(&a);
        Ok(a)
    }

    /// Where `byte` takes `state` ([`DEAD`]: nowhere).
    #[inline]
    pub fn next(&self, state: u32, byte: u8) -> u32 {
        let row = self.table.rows[state as usize];
        self.table.trans
            [row.start as usize + self.table.class_maps[row.classes as usize].of_byte[byte as usize] as usize]
    }

    /// State `s`'s transitions, one per class of [`Automaton::classes`]`(s)`.
    pub fn row(&self, s: usize) -> &[u32] {
        let row = self.table.rows[s];
        &self.table.trans[row.start as usize..row.start as usize + self.table.class_maps[row.classes as usize].len()]
    }

    /// State `s`'s transitions, to change (see [`Automaton::row`]).
    fn row_mut(&mut self, s: usize) -> &mut [u32] {
        let row = self.table.rows[s];
        let len = self.table.class_maps[row.classes as usize].len();
        &mut self.table.trans[row.start as usize..row.start as usize + len]
    }

    /// The byte classes of state `s`'s row.
    pub fn classes(&self, s: usize) -> &ClassMap {
        &self.table.class_maps[self.table.rows[s].classes as usize]
    }

    /// The most byte classes of any rule.
    pub fn max_classes(&self) -> usize {
        self.table.class_maps.iter().map(ClassMap::len).max().unwrap_or(0)
    }

    /// Number of states over all rules.
    pub fn n_states(&self) -> usize {
        self.table.state_rule.len()
    }

    /// A state an item can move into without predicting or completing anything.
    #[inline]
    pub fn is_simple(&self, state: u32) -> bool {
        self.closures.simple[state as usize]
    }

    /// Whether an item `(state, origin)` reached by a byte makes a set on its own: it
    /// predicts nothing, and completes nothing but, with an unknown caller, an escape.
    #[inline]
    pub fn steps_alone(&self, state: u32, origin: u32) -> bool {
        self.closures.simple[state as usize] || (origin == NO_ORIGIN && self.edges.calls[state as usize].is_empty())
    }

    /// Whether `state` has a transition on some byte.
    pub fn has_byte_edges(&self, state: u32) -> bool {
        !self.table.first_bytes[state as usize].is_empty()
    }
}
