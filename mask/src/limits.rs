//! Resource limits: every one is a named, configurable setting with a sane default, and
//! exceeding one is a typed error ([`crate::CompileError::LimitExceeded`] naming the limit
//! and the rule, or [`crate::MatchError::LimitExceeded`]) — never a hang, an abort or
//! unbounded memory. `LIMITS.md` at the repository root lists them all, with the parser's
//! and the schema compiler's.

/// Bounds on the work and memory that compiling a grammar, and each matcher step, may take.
///
/// ```
/// let limits = stencil_mask::Limits { max_automaton_states: 10_000, ..Default::default() };
/// assert!(limits.max_nfa_states > 0);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Thompson-automaton states over all rules (bounds `{m,n}` expansion). Default
    /// 2,000,000 (about 100 MB while compiling). A repetition whose expansion is sure to
    /// exceed it fails before anything is built.
    pub max_nfa_states: usize,
    /// Deterministic automaton states over all rules. Default 500,000.
    pub max_automaton_states: usize,
    /// Bytes of the compiled automaton's tables (transitions, and the prediction closures
    /// that can grow quadratically with a rule's size). Default 256 MiB.
    pub max_automaton_bytes: usize,
    /// The largest bounded repetition count `n` of `{m,n}` (and `m` of `{m,}`). Default
    /// 100,000; counts are expanded into automaton states, so larger ones are refused
    /// before any work.
    pub max_repetition: u32,
    /// Depth of rule inlining and expression nesting during compilation. Default 512.
    pub max_expression_depth: usize,
    /// Earley items one byte step may create before the step is abandoned with an error:
    /// the bound on the work of one mask or accept step. Default 200,000.
    pub max_items_per_step: usize,
    /// Parser work (items added or examined) that one mask, accept or forced-bytes
    /// computation may do, filling the mask cache for the states it meets included: the
    /// bound on a step of a highly ambiguous grammar, whose sets stay under
    /// `max_items_per_step` but whose steps are many. Default 100,000,000 (about a second).
    pub max_step_work: u64,
    /// Wall-clock time `CompiledGrammar::new` may take. Default 10 s.
    pub max_compile_time: std::time::Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_nfa_states: 2_000_000,
            max_automaton_states: 500_000,
            max_automaton_bytes: 256 << 20,
            max_repetition: 100_000,
            max_expression_depth: 512,
            max_items_per_step: 200_000,
            max_step_work: 100_000_000,
            max_compile_time: std::time::Duration::from_secs(10),
        }
    }
}

/// Which limit was hit (see [`Limits`]); it displays as the field's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitKind {
    /// [`Limits::max_nfa_states`].
    NfaStates,
    /// [`Limits::max_automaton_states`].
    AutomatonStates,
    /// [`Limits::max_automaton_bytes`].
    AutomatonMemory,
    /// [`Limits::max_repetition`].
    Repetition,
    /// [`Limits::max_expression_depth`].
    ExpressionDepth,
    /// [`Limits::max_items_per_step`].
    ItemsPerStep,
    /// [`Limits::max_step_work`].
    StepWork,
    /// [`Limits::max_compile_time`].
    CompileTime,
}

impl std::fmt::Display for LimitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LimitKind::NfaStates => "max_nfa_states",
            LimitKind::AutomatonStates => "max_automaton_states",
            LimitKind::AutomatonMemory => "max_automaton_bytes",
            LimitKind::Repetition => "max_repetition",
            LimitKind::ExpressionDepth => "max_expression_depth",
            LimitKind::ItemsPerStep => "max_items_per_step",
            LimitKind::StepWork => "max_step_work",
            LimitKind::CompileTime => "max_compile_time",
        })
    }
}
