//! Resource limits: every one is a named, configurable setting with a sane default, and
//! exceeding one is a typed error ([`crate::CompileError::LimitExceeded`]) naming it.

/// Bounds on the work and memory that compiling a grammar may take.
///
/// ```
/// let limits = stencil_mask::Limits { max_automaton_states: 10_000, ..Default::default() };
/// assert!(limits.max_nfa_states > 0);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Thompson-automaton states over all rules (bounds `{m,n}` expansion).
    pub max_nfa_states: usize,
    /// Deterministic automaton states over all rules.
    pub max_automaton_states: usize,
    /// Depth of rule inlining and expression nesting during compilation.
    pub max_expression_depth: usize,
    /// Earley items one byte step may create before the step is abandoned with an error.
    pub max_items_per_step: usize,
    /// Wall-clock time `CompiledGrammar::new` may take.
    pub max_compile_time: std::time::Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_nfa_states: 2_000_000,
            max_automaton_states: 500_000,
            max_expression_depth: 512,
            max_items_per_step: 200_000,
            max_compile_time: std::time::Duration::from_secs(10),
        }
    }
}

/// Which limit was hit (see [`Limits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitKind {
    NfaStates,
    AutomatonStates,
    ExpressionDepth,
    ItemsPerStep,
    CompileTime,
}

impl std::fmt::Display for LimitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LimitKind::NfaStates => "max_nfa_states",
            LimitKind::AutomatonStates => "max_automaton_states",
            LimitKind::ExpressionDepth => "max_expression_depth",
            LimitKind::ItemsPerStep => "max_items_per_step",
            LimitKind::CompileTime => "max_compile_time",
        })
    }
}
