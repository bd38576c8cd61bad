//! Emitting grammar: [`Ctx::node_expr`] writes a branch's [`Node`] as the alternation of
//! its types, each by the emitter of that JSON type — [`number`], [`string`], [`array`],
//! [`object`] — and [`Emitter`] holds the grammar being written, its rule names and the
//! rules every use shares (property keys, "any string", "any other key").
//!
//! Invariant: rule names are unique (see [`Emitter::new_rule_name`]) and derived from
//! pointers and counters only, so the same schema and options always give the same
//! grammar text.

mod array;
mod number;
mod object;
mod string;

use regex_syntax::hir::{Hir, HirKind};
use rustc_hash::FxHashMap as HashMap;
use serde_json::Value;
use stencil_grammar::{Expr, Grammar, RuleId};

use crate::compile::Ctx;
use crate::escape::json_string;
use crate::locate::{ref_overrides_siblings, Sid};
use crate::node::{asserting, json_eq, json_hash, value_type, Node, Types};
use crate::SchemaError;

/// The grammar being written.
pub(crate) struct Emitter {
    pub(crate) g: Grammar,
    /// Hashes of the rule names taken (see [`name_hash`]).
    pub(crate) names: rustc_hash::FxHashSet<u64>,
    /// Per rule-name base, the next suffix to try (see [`Emitter::new_rule_name`]).
    next_suffix: HashMap<String, u32>,
    /// Each declared property name's quoted key, as one rule (see [`Emitter::key`]).
    keys: HashMap<String, RuleId>,
    /// Each set of declared names' "any other key", as one rule (see
    /// [`Emitter::string_not_in`]).
    keys_not_in: HashMap<Vec<String>, RuleId>,
    /// The rule of any string (see [`Emitter::any_string`]).
    any_string: Option<RuleId>,
    /// The shared ends of "any string but these" (see [`Emitter::string_not_in`]).
    string_rests: Option<crate::not_in::StringRests>,
    /// Put before every rule name (a [`crate::SchemaBatch`]'s, so that its names stay
    /// apart from the rest of the grammar it writes into).
    prefix: String,
}

pub(crate) fn lit(s: &str) -> Expr {
    Expr::literal(s)
}

pub(crate) fn seq(mut v: Vec<Expr>) -> Expr {
    v.retain(|e| !matches!(e, Expr::Empty));
    match v.len() {
        0 => Expr::Empty,
        1 => v.pop().expect("one item"),
        _ => Expr::Seq(v),
    }
}

pub(crate) fn alt(v: Vec<Expr>) -> Option<Expr> {
    match v.len() {
        0 => None,
        1 => v.into_iter().next(),
        _ => Some(Expr::Alt(v)),
    }
}

/// A rule name's hash, for [`Emitter::new_rule_name`]'s set of names taken: two names with
/// one hash only make it skip a free name (names stay unique).
pub(crate) fn name_hash(name: &str) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(name)
}

/// A rule name from a JSON pointer: its ASCII letters and digits, every run of other
/// characters one `-`, at most its last 60 characters.
pub(crate) fn sanitize(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for c in p.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    if out.ends_with('-') {
        out.pop();
    }
    if out.len() > 60 {
        out = out[out.len() - 60..].trim_start_matches('-').to_string();
    }
    if out.is_empty() {
        "value".into()
    } else {
        out
    }
}

/// A regex syntax tree built here, as IR when small (no printing and parsing on its way
/// to the engine). A big one stays a regex terminal: the IR is cloned, hashed and walked
/// wherever the expression goes, a pattern's text is one string (and the terminal carries
/// its tree, so the engine does not parse it). One with an assertion too, for the engine
/// to refuse.
pub(crate) fn hir_expr(h: Hir) -> Expr {
    /// Syntax tree nodes up to which a regex becomes IR.
    const MAX_NODES: usize = 48;
    fn nodes(h: &Hir, budget: &mut usize) {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        match h.kind() {
            HirKind::Capture(c) => nodes(&c.sub, budget),
            HirKind::Repetition(r) => nodes(&r.sub, budget),
            HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().for_each(|x| nodes(x, budget)),
            _ => {}
        }
    }
    let mut budget = MAX_NODES + 1;
    nodes(&h, &mut budget);
    // Bigger ones stay one regex terminal, which carries its tree to the engine.
    match (budget > 0).then(|| Expr::from_hir(&h)).flatten() {
        Some(e) => e,
        None => Expr::Regex(stencil_grammar::Regex::from_hir(h)),
    }
}

impl Emitter {
    /// Writes into `g`, each rule's name after `prefix`.
    pub(crate) fn new(g: Grammar, prefix: String) -> Emitter {
        Emitter {
            g,
            prefix,
            names: Default::default(),
            next_suffix: HashMap::default(),
            keys: HashMap::default(),
            keys_not_in: HashMap::default(),
            any_string: None,
            string_rests: None,
        }
    }

    /// `base`, or `base-2`, `base-3`... whichever is free first. Each base remembers
    /// where its search stopped (names are never freed): thousands of rules share a base
    /// in big schemas, and probing from 1 each time was quadratic.
    fn new_rule_name(&mut self, base: &str) -> String {
        if !self.next_suffix.contains_key(base) {
            self.next_suffix.insert(base.to_string(), 1);
        }
        let next = self.next_suffix.get_mut(base).expect("inserted above");
        loop {
            let name = if *next == 1 { base.to_string() } else { format!("{base}-{next}") };
            *next += 1;
            if self.names.insert(name_hash(&name)) {
                return if self.prefix.is_empty() { name } else { format!("{}{name}", self.prefix) };
            }
        }
    }

    /// A declared property's quoted name, as a rule shared by every object that declares
    /// it.
    pub(crate) fn key(&mut self, name: &str) -> Expr {
        if let Some(&r) = self.keys.get(name) {
            return Expr::Rule(r);
        }
        let r = self.add_kept_rule(&format!("key-{}", sanitize(name)), lit(&json_string(name)));
        self.keys.insert(name.to_string(), r);
        Expr::Rule(r)
    }

    /// A rule the engine keeps a rule of its own (see `Rule::no_inline`; it inlines small
    /// rules): a whole object expanded into its parent makes one huge automaton per
    /// document, and a key or the rest of a string expanded at every use multiplies states.
    pub(crate) fn add_kept_rule(&mut self, base: &str, body: Expr) -> RuleId {
        let id = self.add_rule(base, body);
        self.g.set_no_inline(id);
        id
    }

    /// A new rule named after `base` (see [`Emitter::new_rule_name`]).
    pub(crate) fn add_rule(&mut self, base: &str, body: Expr) -> RuleId {
        let name = self.new_rule_name(base);
        self.g.add_rule(name, body)
    }
}

impl<'o> Ctx<'o> {
    /// The grammar of the values a branch's node allows.
    pub(crate) fn node_expr(&mut self, mut node: Node, depth: usize) -> Result<Option<Expr>, SchemaError> {
        let mut types = node.types & !node.not_types;
        if let Some(vals) = node.values.take() {
            let mut keep: Vec<Value> = Vec::new();
            // Strings deduplicated by hashing (a linear scan per value is quadratic in the
            // size of an enum), other values by JSON equality (1 == 1.0).
            let mut strings = std::collections::HashSet::new();
            // Other values by a hash that JSON-equal values share, then by equality within
            // its bucket (an enum of 10,000 objects took 20 s compared pairwise).
            let mut others: rustc_hash::FxHashMap<u64, Vec<usize>> = Default::default();
            for v in vals {
                if !value_type(&v).intersects(types) {
                    continue;
                }
                if node.not_values.iter().any(|n| json_eq(n, &v)) {
                    continue;
                }
                if !self.value_satisfies(&v, &node.members)? {
                    continue;
                }
                if let Value::Object(o) = &v {
                    if node.not_required.iter().any(|(names, _, _)| names.iter().all(|n| o.contains_key(n))) {
                        continue;
                    }
                }
                let fresh = match &v {
                    Value::String(text) => strings.insert(text.clone()),
                    _ => {
                        let bucket = others.entry(json_hash(&v)).or_default();
                        let fresh = !bucket.iter().any(|&i| json_eq(&keep[i], &v));
                        if fresh {
                            bucket.push(keep.len());
                        }
                        fresh
                    }
                };
                if fresh {
                    keep.push(v);
                }
            }
            let alts: Vec<Expr> = keep.iter().map(|v| self.style.literal_value(v, depth)).collect();
            return Ok(alt(alts));
        }
        // Excluded values: strings via the string grammar, others unenforced.
        let not_values = std::mem::take(&mut node.not_values);
        let mut excluded_strings = Vec::new();
        for v in &not_values {
            match v {
                Value::String(s) => excluded_strings.push(s.clone()),
                Value::Null => types &= !Types::NULL,
                Value::Bool(_) => {}
                _ => {
                    let p = node.members.first().map(|&s| self.loc.ptr(s)).unwrap_or_default();
                    self.diag.unenforced("not", &p, "excluding a number, array or object value")?;
                }
            }
        }
        let mut alts = Vec::new();
        if types.intersects(Types::NULL) {
            alts.push(lit("null"));
        }
        if types.intersects(Types::BOOLEAN) {
            for (s, b) in [("true", true), ("false", false)] {
                if !not_values.iter().any(|v| v == &Value::Bool(b)) {
                    alts.push(lit(s));
                }
            }
        }
        if types.intersects(Types::INTEGER | Types::FRACTION) {
            if let Some(e) = self.number_expr(&node, types)? {
                alts.push(e);
            }
        }
        if types.intersects(Types::STRING) {
            if let Some(e) = self.string_expr(&node, &excluded_strings)? {
                alts.push(e);
            }
        }
        if types.intersects(Types::ARRAY) {
            if let Some(e) = self.array_expr(&node, depth)? {
                alts.push(e);
            }
        }
        if types.intersects(Types::OBJECT) {
            if let Some(e) = self.object_expr(&node, depth)? {
                alts.push(e);
            }
        }
        for (k, p, r) in std::mem::take(&mut node.unsupported) {
            self.diag.unenforced(&k, &p, &r)?;
        }
        Ok(alt(alts))
    }

    /// Does `v` satisfy every member? Simple members are checked here, others by the
    /// `jsonschema` validator of the member's location.
    fn value_satisfies(&mut self, v: &Value, members: &[Sid]) -> Result<bool, SchemaError> {
        for &m in members {
            let Value::Object(map) = self.loc.schema(m) else { continue };
            let annotation = |k: &str| !asserting(k);
            let simple = map.keys().all(|k| matches!(k.as_str(), "type" | "enum" | "const") || annotation(k));
            if simple {
                continue; // type/enum/const are applied by the caller
            }
            // A reference, an `allOf` and an `anyOf` add their subschemas (the branch's
            // choice, for `anyOf`) to the members: checked there. (Up to draft 7, a `$ref`'s
            // siblings do not apply at all.)
            let implied = ref_overrides_siblings(self.loc.draft(m), map)
                || map.keys().all(|k| matches!(k.as_str(), "$ref" | "allOf" | "anyOf") || annotation(k));
            if implied {
                continue;
            }
            match self.valid(m, v) {
                Some(true) => {}
                Some(false) => return Ok(false),
                None => {
                    let p = self.loc.ptr(m);
                    self.diag.unenforced(
                        "enum",
                        &p,
                        "the other keywords of this schema could not be checked against the enum values",
                    )?;
                }
            }
        }
        Ok(true)
    }
}
