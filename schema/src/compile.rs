//! The driver: schema → grammar. A value position is a set of schema locations that must
//! all hold (a conjunction, [`Conj`]). [`Ctx::value_rule`] gives each conjunction one rule:
//! `$ref` and `allOf` add to the set, `anyOf`/`oneOf`/`if` branch it ([`crate::dnf`]), each
//! branch's keywords are merged into a typed [`crate::node::Node`] and emitted by the
//! emitter of each JSON type ([`crate::emit`]).
//!
//! Invariant: one rule per distinct conjunction and nesting depth (memoized in
//! [`Memo::value_rules`] before its body is built), so recursion closes on itself; every
//! limit of [`crate::SchemaLimits`] is checked here, on the way into a value rule.

use std::time::Instant;

use serde_json::Value;
use stencil_grammar::{Expr, Grammar, RuleId};

use crate::dnf::Conj;
use crate::emit::{alt, sanitize, Emitter};
use crate::locate::{Locations, Sid};
use crate::memo::{at_depth, branches_key, Memo};
use crate::resolve::Resources;
use crate::style::Style;
use crate::{CompiledSchema, Mode, SchemaError, SchemaLimit, SchemaOptions, Unenforced};

/// One compile's state, in the parts that change separately.
pub(crate) struct Ctx<'o> {
    pub(crate) opts: &'o SchemaOptions,
    /// Where subschemas are: interned locations, their values and drafts, references.
    pub(crate) loc: Locations<'o>,
    /// The grammar being written, its rule names and the rules shared by every use.
    pub(crate) out: Emitter,
    /// How JSON text is laid out.
    pub(crate) style: Style,
    /// Answers computed once per compile.
    pub(crate) memo: Memo,
    /// Keywords left unenforced.
    pub(crate) diag: Diagnostics,
    /// What the limits count.
    pub(crate) budget: Budget,
}

/// What [`crate::SchemaLimits`] bounds while compiling (besides the rule count).
pub(crate) struct Budget {
    start: Instant,
    /// The depth of the walk (see `SchemaLimits::max_depth`): value rules being compiled
    /// one inside another, and the references and applicators followed to reach the
    /// member being expanded.
    pub(crate) depth: usize,
    /// The grammar's first rule of this compile (`SchemaLimits::max_rules` counts from it).
    first_rule: usize,
}

/// Stack left below which a recursive step of the compile continues on a new segment.
const RED_ZONE: usize = 256 << 10;
/// The size of each new segment.
const SEGMENT: usize = 4 << 20;

/// Runs `f` (a recursive step of the compile) where at least [`RED_ZONE`] of stack is
/// left, on a new segment of [`SEGMENT`] bytes when the caller's stack is nearly used up.
/// The walk is bounded by `SchemaLimits::max_depth`, but its bound must not depend on the
/// caller's thread: a tokio worker has 2 MiB, the main thread 8 MiB, and a step of the
/// compile takes about 0.8 KB (a `$ref` followed) to several KB (a value nested).
pub(crate) fn grow<T>(f: impl FnOnce() -> T) -> T {
    stacker::maybe_grow(RED_ZONE, SEGMENT, f)
}

/// The keywords the grammar does not enforce: errors in strict mode, warnings (each
/// keyword and pointer once) in lenient mode.
pub(crate) struct Diagnostics {
    mode: Mode,
    warnings: Vec<Unenforced>,
    warned: std::collections::HashSet<(String, String)>,
    /// What made the grammar narrower than the schema (lenient mode's narrowings, and the
    /// values cut at `max_indent_depth`): with any, a grammar of no value does not mean a
    /// schema of no value.
    narrowings: Vec<Unenforced>,
}

impl Diagnostics {
    /// A keyword the grammar does not enforce: error in strict mode, warning in lenient.
    pub(crate) fn unenforced(&mut self, keyword: &str, pointer: &str, reason: &str) -> Result<(), SchemaError> {
        self.note(keyword, pointer, reason, false)
    }

    /// A keyword the grammar enforces more narrowly than the schema (some valid values are
    /// not generated): error in strict mode, warning in lenient mode, remembered either way
    /// so that a grammar left with no value is not reported as a schema with none.
    pub(crate) fn narrowed(&mut self, keyword: &str, pointer: &str, reason: &str) -> Result<(), SchemaError> {
        self.note(keyword, pointer, reason, true)
    }

    /// A narrowing that an option asks for (no warning): values nested deeper than
    /// `max_indent_depth` under indentation.
    pub(crate) fn cut(&mut self, pointer: &str, reason: &str) {
        if !self.narrowings.iter().any(|n| n.pointer == pointer && n.reason == reason) {
            let u =
                Unenforced { keyword: "indent".into(), pointer: pointer.into(), reason: reason.into(), narrows: true };
            self.narrowings.push(u);
        }
    }

    fn note(&mut self, keyword: &str, pointer: &str, reason: &str, narrows: bool) -> Result<(), SchemaError> {
        match self.mode {
            Mode::Strict => Err(SchemaError::UnsupportedKeyword {
                keyword: keyword.into(),
                pointer: pointer.into(),
                reason: reason.into(),
            }),
            Mode::Lenient => {
                let u = Unenforced { keyword: keyword.into(), pointer: pointer.into(), reason: reason.into(), narrows };
                if narrows && !self.narrowings.contains(&u) {
                    self.narrowings.push(u.clone());
                }
                if self.warned.insert((keyword.to_string(), pointer.to_string())) {
                    self.warnings.push(u);
                }
                Ok(())
            }
        }
    }
}

/// What compiles of one schema after another into one grammar keep (see
/// [`crate::SchemaBatch`]): the grammar with the rules every schema uses (whitespace, any
/// value, keys, the ends of strings), its style, and the memo entries that depend on what
/// they are keyed by only (see [`Memo::forget_document`]).
pub(crate) struct Shared {
    pub(crate) out: Emitter,
    pub(crate) style: Style,
    pub(crate) memo: Memo,
    /// The grammar's length before the shared rules were added, until the first document
    /// (whose rule count includes them, as a compile alone does).
    fresh_from: Option<usize>,
}

impl Shared {
    /// A start on `g`, rule names after `prefix`.
    pub(crate) fn new(g: Grammar, prefix: String, opts: &SchemaOptions) -> Shared {
        crate::escape::reset_class_cache();
        let fresh_from = Some(g.rules.len());
        let mut out = Emitter::new(g, prefix);
        let style = Style::new(opts, &mut out);
        Shared { out, style, memo: Memo::default(), fresh_from }
    }
}

pub(crate) fn compile(schema: &Value, opts: &SchemaOptions) -> Result<CompiledSchema, SchemaError> {
    let (shared, result) = compile_document(schema, opts, Shared::new(Grammar::new(), String::new(), opts));
    let (root, warnings) = result?;
    let mut grammar = shared.out.g;
    grammar.root = root;
    Ok(CompiledSchema { grammar, warnings })
}

/// `schema` compiled into `shared`'s grammar: its root rule and warnings. `shared` comes
/// back either way; after an error its grammar may hold rules of the failed compile.
pub(crate) fn compile_document(
    schema: &Value,
    opts: &SchemaOptions,
    shared: Shared,
) -> (Shared, Result<(RuleId, Vec<Unenforced>), SchemaError>) {
    use tracing::field::Empty;
    let span = tracing::debug_span!(
        "schema_compile",
        documents = Empty,
        locations = Empty,
        rules = Empty,
        conjunctions = Empty,
        warnings = Empty
    );
    let _entered = span.enter();
    let res = {
        let _index = tracing::debug_span!("schema_index").entered();
        Resources::new(schema, opts.default_draft)
    };
    let Shared { out, style, mut memo, fresh_from } = shared;
    memo.forget_document();
    let first_rule = fresh_from.unwrap_or(out.g.rules.len());
    let mut ctx = Ctx {
        opts,
        loc: Locations::new(res),
        out,
        style,
        memo,
        diag: Diagnostics { mode: opts.mode, warnings: Vec::new(), warned: Default::default(), narrowings: Vec::new() },
        budget: Budget { start: Instant::now(), depth: 0, first_rule },
    };
    let root = {
        let rules_span = tracing::debug_span!("schema_rules", rules = Empty, locations = Empty);
        let _rules = rules_span.enter();
        let root_sid = ctx.loc.sid(&(0, String::new()));
        let root = ctx.value_rule(&[(root_sid, false)].into_iter().collect(), 0, Some("root"));
        rules_span.record("rules", ctx.out.g.rules.len() - first_rule);
        rules_span.record("locations", ctx.loc.len());
        root
    };
    span.record("documents", ctx.loc.res.docs.len());
    span.record("locations", ctx.loc.len());
    span.record("rules", ctx.out.g.rules.len() - first_rule);
    span.record("conjunctions", ctx.memo.value_rules.iter().map(|m| m.len()).sum::<usize>());
    span.record("warnings", ctx.diag.warnings.len());
    let result = match root {
        Err(e) => Err(e),
        Ok(Some(Expr::Rule(id))) => Ok(id),
        Ok(Some(e)) => Ok(ctx.out.add_rule("root", e)),
        // No value: the schema's own doing only when nothing was narrowed.
        Ok(None) if !ctx.diag.narrowings.is_empty() => {
            Err(SchemaError::Narrowed { pointer: String::new(), narrowings: std::mem::take(&mut ctx.diag.narrowings) })
        }
        Ok(None) => {
            Err(SchemaError::Unsatisfiable { pointer: String::new(), reason: "no JSON value satisfies it".into() })
        }
    };
    let result = result.map(|root| (root, std::mem::take(&mut ctx.diag.warnings)));
    (Shared { out: ctx.out, style: ctx.style, memo: ctx.memo, fresh_from: None }, result)
}

/// [`SchemaError::TooLarge`] for `limit`, whose setting is `value`.
pub(crate) fn too_large(limit: SchemaLimit, value: u64, pointer: String, reason: String) -> SchemaError {
    SchemaError::TooLarge { limit, value, pointer, reason }
}

/// A rough size of what an expression expands to in the engine.
fn expr_weight(e: &Expr) -> usize {
    match e {
        Expr::Seq(v) | Expr::Alt(v) => v.iter().map(expr_weight).sum::<usize>() + 1,
        Expr::Repeat { expr, min, max } => expr_weight(expr) * (*max).unwrap_or(*min).clamp(1, 1000) as usize,
        Expr::Literal(b) => b.len(),
        Expr::Regex(r) => r.len() * 4,
        _ => 1,
    }
}

impl<'o> Ctx<'o> {
    /// The rule count, the time and the nesting depth against their limits (`ptr`: the
    /// subschema to blame).
    pub(crate) fn check_budget(&self, ptr: &str) -> Result<(), SchemaError> {
        let limits = &self.opts.limits;
        if self.out.g.rules.len() - self.budget.first_rule > limits.max_rules {
            let reason = format!("more than {} grammar rules (limit max_rules)", limits.max_rules);
            return Err(too_large(SchemaLimit::Rules, limits.max_rules as u64, ptr.into(), reason));
        }
        if self.budget.start.elapsed() > limits.max_compile_time {
            let ms = limits.max_compile_time.as_millis();
            let reason = format!("compilation took longer than {ms} ms (limit max_compile_time)");
            return Err(too_large(SchemaLimit::CompileTime, ms.min(u64::MAX as u128) as u64, ptr.into(), reason));
        }
        if self.budget.depth > limits.max_depth {
            return Err(self.too_deep(ptr.into()));
        }
        Ok(())
    }

    /// The depth (one more reference or applicator followed, to `sid`) and the time against
    /// their limits; the pointer is made only for the error.
    pub(crate) fn check_depth(&self, sid: Sid) -> Result<(), SchemaError> {
        if self.budget.depth > self.opts.limits.max_depth {
            return Err(self.too_deep(self.loc.ptr(sid)));
        }
        if self.budget.start.elapsed() > self.opts.limits.max_compile_time {
            return self.check_budget(&self.loc.ptr(sid));
        }
        Ok(())
    }

    fn too_deep(&self, pointer: String) -> SchemaError {
        let max = self.opts.limits.max_depth;
        let reason =
            format!("subschemas and the references between them nest deeper than {max} levels (limit max_depth)");
        too_large(SchemaLimit::Depth, max as u64, pointer, reason)
    }

    /// The grammar of a value satisfying every member of `conj`, as a rule reference; None
    /// when no value can.
    pub(crate) fn value_rule(
        &mut self,
        conj: &Conj,
        depth: usize,
        name: Option<&str>,
    ) -> Result<Option<Expr>, SchemaError> {
        if let Some(r) = self.memo.value_rules.get(depth).and_then(|m| m.get(conj)) {
            return Ok(r.map(Expr::Rule));
        }
        let ptr = conj.iter().next().map(|m| self.loc.ptr(m.0)).unwrap_or_default();
        self.check_budget(&ptr)?;
        if self.style.indent.is_some() && depth > self.opts.max_indent_depth {
            let reason = format!(
                "values nested deeper than {} levels are not generated (max_indent_depth)",
                self.opts.max_indent_depth
            );
            self.diag.cut(&ptr, &reason);
            self.remember(conj, depth, None);
            return Ok(None);
        }
        let base = match name {
            Some(n) => n.to_string(),
            None if conj.is_empty() => "any".to_string(),
            None => sanitize(&ptr),
        };
        let base = if depth > 0 { format!("{base}-d{depth}") } else { base };
        // Conjunctions with the same branches (one adds only what another implies) share
        // one rule.
        let branches = self.dnf(conj)?;
        let key = branches_key(&branches);
        if let Some(&r) = self.memo.branch_rules.get(depth).and_then(|m| m.get(&key)) {
            self.remember(conj, depth, r);
            return Ok(r.map(Expr::Rule));
        }
        let id = self.out.add_rule(&base, Expr::Alt(vec![]));
        self.remember(conj, depth, Some(id));
        at_depth(&mut self.memo.branch_rules, depth).insert(key.clone(), Some(id));
        self.budget.depth += 1;
        let body = self.check_budget(&ptr).and_then(|()| grow(|| self.value_body(&branches, depth)));
        self.budget.depth -= 1;
        let body = body?;
        match body {
            Some(b) => {
                // Big bodies stay rules of their own: inlined into every caller they would
                // multiply the engine's automaton states.
                if expr_weight(&b) > 256 {
                    self.out.g.set_no_inline(id);
                }
                self.out.g.set_body(id, b);
                Ok(Some(Expr::Rule(id)))
            }
            None => {
                self.remember(conj, depth, None);
                self.memo.branch_rules[depth].insert(key, None);
                Ok(None)
            }
        }
    }

    /// Remembers `conj`'s value rule at `depth` (see `Memo::value_rules`).
    fn remember(&mut self, conj: &Conj, depth: usize, rule: Option<RuleId>) {
        let table = at_depth(&mut self.memo.value_rules, depth);
        match table.get_mut(conj) {
            Some(known) => *known = rule,
            None => {
                table.insert(conj.clone(), rule);
            }
        }
    }

    fn value_body(&mut self, branches: &[Conj], depth: usize) -> Result<Option<Expr>, SchemaError> {
        let mut nodes = Vec::new();
        for b in branches {
            if let Some(node) = self.branch_node(b)? {
                nodes.push(node);
            }
        }
        self.merge_pattern_branches(&mut nodes)?;
        let mut alts = Vec::new();
        for node in nodes {
            if let Some(e) = self.node_expr(node, depth)? {
                alts.push(e);
            }
        }
        Ok(alt(alts))
    }

    /// Whether a count keyword (`maxLength`, `minItems`...) is within
    /// `SchemaLimits::max_repetition`. Above it: an error in strict mode, a warning (and the
    /// keyword left to post-hoc validation) in lenient mode.
    pub(crate) fn countable(&mut self, sid: Sid, keyword: &str, n: u64) -> Result<bool, SchemaError> {
        let max = self.opts.limits.max_repetition;
        if n <= max {
            return Ok(true);
        }
        let pointer = self.loc.ptr(sid);
        match self.opts.mode {
            Mode::Strict => {
                let reason = format!("`{keyword}` {n} is above {max} (limit max_repetition)");
                Err(too_large(SchemaLimit::Repetition, max, pointer, reason))
            }
            Mode::Lenient => {
                self.diag.unenforced(keyword, &pointer, &format!("counts above {max} (limit max_repetition)"))?;
                Ok(false)
            }
        }
    }

    /// [`SchemaError::InvalidKeyword`] for `keyword` of `sid`.
    pub(crate) fn invalid(&self, sid: Sid, keyword: &str, reason: &str) -> SchemaError {
        SchemaError::InvalidKeyword { keyword: keyword.into(), pointer: self.loc.ptr(sid), reason: reason.into() }
    }
}
