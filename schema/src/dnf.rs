//! The disjunctive normal form of a value's conjunction: `$ref`, `allOf`, `anyOf`,
//! `oneOf` and `if`/`then`/`else` are expanded ([`Ctx::dnf`]) into branches, each a
//! conjunction of applicator-free members (or negations of simple ones); `oneOf` is exact
//! when its branches are provably disjoint ([`Ctx::disjoint`], by [`Sig`]natures) or of the
//! `required`-only form. [`Ctx::merge_pattern_branches`] then joins string branches that
//! differ only in their pattern: one branch with the patterns' alternation, since
//! separate unanchored searches blow up the engine's subset construction.
//!
//! Invariant: the union of the branches' languages is the conjunction's (up to what is
//! reported unenforced), and never more than `SchemaLimits::max_branches` branches exist.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;
use serde_json::Value;

use crate::compile::{too_large, Ctx};
use crate::locate::{ref_overrides_siblings, Sid};
use crate::node::{asserting, json_eq, required_only, types_of, valid_types, value_type, Node, Types};
use crate::{Draft, SchemaError, SchemaLimit};

/// A member of a conjunction: a schema, or (`true`) the negation of a simple one.
pub(crate) type Member = (Sid, bool);
/// Schemas that must all hold at one value position.
pub(crate) type Conj = BTreeSet<Member>;

/// What a member of a conjunction says about types (see [`Ctx::drop_implied`]).
#[derive(Clone, Copy)]
pub(crate) struct TypeFacts {
    /// For a member that asserts nothing but through its applicators and `type`: `Some` of
    /// its types (`None`: no `type`). `None` for any other member.
    own: Option<Option<Types>>,
    /// The types its own `type` narrows a value to, when it has one in effect.
    narrows: Option<Types>,
}

/// The keywords [`Ctx::dnf`] expands (`then`/`else` come with `if`).
pub(crate) const APPLICATORS: [&str; 7] = ["$ref", "$dynamicRef", "$recursiveRef", "allOf", "anyOf", "oneOf", "if"];

impl<'o> Ctx<'o> {
    /// `Err` once `n` combinations of `keyword`'s branches pass `max_branches`.
    fn check_branches(&self, sid: Sid, keyword: &str, n: usize) -> Result<(), SchemaError> {
        let max = self.opts.limits.max_branches;
        if n <= max {
            return Ok(());
        }
        let reason = format!("more than {max} combinations of {keyword} branches (limit max_branches)");
        Err(too_large(SchemaLimit::Branches, max as u64, self.loc.ptr(sid), reason))
    }

    /// Branches that are strings with one `pattern` each and nothing else become one
    /// branch whose pattern is their alternation: the same language, but unanchored
    /// patterns in separate branches (`.*A.*|.*B.*`) make the subset construction track
    /// every pattern's progress after another has matched (Github_hard/o12278, seven
    /// status words: 8,450 DFA states for 76 minimal ones), where `.*(A|B).*` does not.
    pub(crate) fn merge_pattern_branches(&mut self, nodes: &mut Vec<Node>) -> Result<(), SchemaError> {
        let mergeable = |n: &Node| {
            n.types & !n.not_types == Types::STRING
                && n.values.is_none()
                && n.not_values.is_empty()
                && n.unsupported.is_empty()
                && n.not_required.is_empty()
                && n.str.min_len == 0
                && n.str.max_len.is_none()
                && n.str.formats.is_empty()
                && n.str.patterns.len() == 1
                && !joins_unsafely(&n.str.patterns[0].0)
        };
        let picked: Vec<usize> = (0..nodes.len()).filter(|&i| mergeable(&nodes[i])).collect();
        if picked.len() < 2 {
            return Ok(());
        }
        // Each pattern on its own first, so a bad one is reported where it is.
        for &i in &picked {
            let (p, at) = nodes[i].str.patterns[0].clone();
            self.pattern_hir(&p, |_| at)?;
        }
        let mut seen = std::collections::HashSet::new();
        let joined: Vec<String> = picked
            .iter()
            .map(|&i| &nodes[i].str.patterns[0].0)
            .filter(|p| seen.insert(p.as_str()))
            .map(|p| format!("(?:{p})"))
            .collect();
        let joined = joined.join("|");
        nodes[picked[0]].str.patterns[0].0 = joined;
        for &i in picked[1..].iter().rev() {
            nodes.remove(i);
        }
        Ok(())
    }

    /// The branches of `conj`, each without the members the others imply
    /// ([`Ctx::drop_implied`]), duplicates dropped.
    pub(crate) fn dnf(&mut self, conj: &Conj) -> Result<Vec<Conj>, SchemaError> {
        let mut branches: Vec<Conj> = vec![Conj::new()];
        for &m in conj {
            branches = self.add_member(branches, m)?;
            if branches.is_empty() {
                break;
            }
        }
        let mut pruned = false;
        for b in &mut branches {
            pruned |= self.drop_implied(b);
        }
        if pruned {
            // Branches equal once pruned: the first of each is kept.
            let first: Vec<bool> = {
                let mut seen = rustc_hash::FxHashSet::default();
                branches.iter().map(|b| seen.insert(b)).collect()
            };
            let mut first = first.into_iter();
            branches.retain(|_| first.next().unwrap_or(true));
        }
        Ok(branches)
    }

    /// Drops from branch `b` the members that assert nothing the rest does not: a member
    /// whose applicators are expanded in `b` already, and whose only other assertion is a
    /// `type` that another member narrows at least as much (`{"$ref": "#", "type":
    /// "object"}` beside `#`), or none at all (a Draft 7 `$ref`'s siblings). Such members
    /// made equal branches look different, and each got a copy of the same value rule: a
    /// schema whose 102 properties are `{"$ref": "#", "type": "object"}` had 219 copies of
    /// its object. Whether it dropped any.
    fn drop_implied(&mut self, b: &mut Conj) -> bool {
        if b.len() < 2 {
            return false;
        }
        let facts: Vec<(Member, TypeFacts)> = b.iter().map(|&m| (m, self.type_facts(m))).collect();
        if facts.iter().all(|(_, f)| f.own.is_none()) {
            return false;
        }
        let mut kept = vec![true; facts.len()];
        for (i, &(m, f)) in facts.iter().enumerate() {
            let implied = match f.own {
                None => false,
                Some(None) => true,
                Some(Some(t)) => facts
                    .iter()
                    .enumerate()
                    .any(|(j, (_, g))| j != i && kept[j] && g.narrows.is_some_and(|u| u & !t == Types::NONE)),
            };
            if implied {
                kept[i] = false;
                b.remove(&m);
            }
        }
        kept.contains(&false)
    }

    /// What member `m` says about types, computed once per compile.
    fn type_facts(&mut self, m: Member) -> TypeFacts {
        if let Some(&f) = self.memo.type_facts.get(&m) {
            return f;
        }
        let (sid, negated) = m;
        let f = match self.loc.schema(sid) {
            Value::Object(map) if !negated => {
                if ref_overrides_siblings(self.loc.draft(sid), map) {
                    TypeFacts { own: Some(None), narrows: None }
                } else {
                    let t = map.get("type");
                    let plain = |k: &str| {
                        !matches!(k, "contentMediaType" | "contentEncoding")
                            && (!asserting(k) || APPLICATORS.contains(&k) || matches!(k, "then" | "else"))
                    };
                    let own = match t {
                        _ if !map.keys().all(|k| k == "type" || plain(k)) => None,
                        None => Some(None),
                        Some(t) => valid_types(t).map(Some),
                    };
                    TypeFacts { own, narrows: t.and_then(valid_types) }
                }
            }
            _ => TypeFacts { own: None, narrows: None },
        };
        self.memo.type_facts.insert(m, f);
        f
    }

    fn add_member(&mut self, branches: Vec<Conj>, m: Member) -> Result<Vec<Conj>, SchemaError> {
        let (sid, negated) = m;
        let mut out = Vec::new();
        for b in branches {
            if b.contains(&m) {
                out.push(b);
                continue;
            }
            let mut b = b;
            b.insert(m);
            // A reference or applicator followed is one level deeper (`max_depth`).
            self.budget.depth += 1;
            let expanded = self.check_depth(sid).and_then(|()| crate::compile::grow(|| self.expand(b, sid, negated)));
            self.budget.depth -= 1;
            out.extend(expanded?);
            if out.len() > self.opts.limits.max_branches {
                let p = self.loc.ptr(sid);
                let max = self.opts.limits.max_branches;
                let reason = format!("more than {max} combinations of anyOf/oneOf branches (limit max_branches)");
                return Err(too_large(SchemaLimit::Branches, max as u64, p, reason));
            }
        }
        Ok(out)
    }

    /// Expands the applicators of a member just added to branch `b`.
    fn expand(&mut self, b: Conj, sid: Sid, negated: bool) -> Result<Vec<Conj>, SchemaError> {
        let v = self.loc.schema(sid);
        if negated {
            return Ok(vec![b]);
        }
        let m = match v {
            Value::Bool(true) => return Ok(vec![b]),
            Value::Bool(false) => return Ok(vec![]),
            Value::Object(m) => m,
            _ => {
                let p = self.loc.ptr(sid);
                return Err(SchemaError::InvalidKeyword {
                    keyword: "schema".into(),
                    pointer: p,
                    reason: "a schema must be an object or a boolean".into(),
                });
            }
        };
        // Most subschemas have no applicator: one pass over the keys instead of a lookup
        // (a SipHash of the key) per applicator.
        if !m.keys().any(|k| APPLICATORS.contains(&k.as_str())) {
            return Ok(vec![b]);
        }
        let draft = self.loc.draft(sid);
        let mut branches = vec![b];
        let refs: [(&'static str, bool); 3] = [("$ref", false), ("$dynamicRef", true), ("$recursiveRef", true)];
        for (k, dynamic) in refs {
            if let Some(r) = m.get(k) {
                let Some(r) = r.as_str() else {
                    let p = self.loc.ptr(sid);
                    return Err(SchemaError::InvalidKeyword {
                        keyword: k.into(),
                        pointer: p,
                        reason: "not a string".into(),
                    });
                };
                let t = self.loc.ref_target(sid, k, r, &self.opts.registry)?;
                if dynamic {
                    let p = self.loc.ptr(sid);
                    self.diag.unenforced(k, &p, "resolved statically, like $ref")?;
                }
                branches = self.add_each(branches, (t, false))?;
            }
        }
        if ref_overrides_siblings(draft, m) {
            return Ok(branches);
        }
        if let Some(Value::Array(all)) = m.get("allOf") {
            for i in 0..all.len() {
                let c = self.loc.child(sid, &["allOf", &i.to_string()]);
                branches = self.add_each(branches, (c, false))?;
            }
        }
        for k in ["anyOf", "oneOf"] {
            if let Some(Value::Array(arr)) = m.get(k) {
                let alts: Vec<Sid> = (0..arr.len()).map(|i| self.loc.child(sid, &[k, &i.to_string()])).collect();
                // oneOf of `{required: [...]}` branches: each branch also negates the others
                // (an object missing one of their names), which is exact.
                let exclusive =
                    k == "oneOf" && alts.len() > 1 && alts.iter().all(|&a| required_only(self.loc.schema(a)).is_some());
                if exclusive {
                    let mut next = Vec::new();
                    for br in branches {
                        for &a in &alts {
                            let mut bs = self.add_member(vec![br.clone()], (a, false))?;
                            for &o in alts.iter().filter(|&&o| o != a) {
                                bs = self.add_each(bs, (o, true))?;
                            }
                            next.extend(bs);
                            self.check_branches(sid, k, next.len())?;
                        }
                    }
                    branches = next;
                    continue;
                }
                if k == "oneOf" && alts.len() > 1 && !self.disjoint(&alts)? {
                    let p = self.loc.ptr(sid);
                    self.diag.unenforced("oneOf", &p, "branches that may overlap are treated as anyOf")?;
                }
                let mut next = Vec::new();
                for br in branches {
                    for &a in &alts {
                        next.extend(self.add_member(vec![br.clone()], (a, false))?);
                        self.check_branches(sid, k, next.len())?;
                    }
                }
                branches = next;
            }
        }
        if draft >= Draft::Draft7 {
            if let Some(cond) = m.get("if") {
                let if_sid = self.loc.child(sid, &["if"]);
                let then_sid = m.contains_key("then").then(|| self.loc.child(sid, &["then"]));
                let else_sid = m.contains_key("else").then(|| self.loc.child(sid, &["else"]));
                if then_sid.is_some() || else_sid.is_some() {
                    if self.is_simple_negatable(cond) {
                        let mut next = Vec::new();
                        for br in branches {
                            let mut yes = self.add_member(vec![br.clone()], (if_sid, false))?;
                            if let Some(t) = then_sid {
                                yes = self.add_each(yes, (t, false))?;
                            }
                            let mut no = self.add_member(vec![br], (if_sid, true))?;
                            if let Some(e) = else_sid {
                                no = self.add_each(no, (e, false))?;
                            }
                            next.extend(yes);
                            next.extend(no);
                        }
                        branches = next;
                    } else {
                        let p = self.loc.ptr(sid);
                        self.diag.unenforced(
                            "if",
                            &p,
                            "only `if` schemas that test type, const or enum are enforced",
                        )?;
                    }
                }
            }
        }
        Ok(branches)
    }

    fn add_each(&mut self, branches: Vec<Conj>, m: Member) -> Result<Vec<Conj>, SchemaError> {
        self.add_member(branches, m)
    }

    /// A schema whose negation the merger understands: only `type`, `const`, `enum` and
    /// annotations, no references.
    pub(crate) fn is_simple_negatable(&self, v: &Value) -> bool {
        match v {
            Value::Bool(_) => true,
            Value::Object(m) => m.keys().all(|k| {
                matches!(
                    k.as_str(),
                    "type" | "const" | "enum" | "title" | "description" | "$comment" | "default" | "examples"
                )
            }),
            _ => false,
        }
    }

    /// Whether oneOf branches are pairwise disjoint by type, const/enum, or a required
    /// property's const/enum (discriminated unions).
    fn disjoint(&mut self, alts: &[Sid]) -> Result<bool, SchemaError> {
        let sigs: Vec<Sig> = alts.iter().map(|&a| self.signature(a, 0)).collect();
        for i in 0..sigs.len() {
            for j in i + 1..sigs.len() {
                if !sigs[i].disjoint(&sigs[j]) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    fn signature(&mut self, sid: Sid, depth: usize) -> Sig {
        let mut sig = Sig { types: Types::ALL, values: None, props: HashMap::default() };
        if depth > 8 {
            return sig;
        }
        let v = self.loc.schema(sid);
        let Value::Object(m) = v else {
            if *v == Value::Bool(false) {
                sig.types = Types::NONE;
            }
            return sig;
        };
        if let Some(r) = m.get("$ref").and_then(Value::as_str) {
            if let Ok(t) = self.loc.ref_target(sid, "$ref", r, &self.opts.registry) {
                let s = self.signature(t, depth + 1);
                sig.meet(s);
            }
        }
        if let Some(Value::Array(all)) = m.get("allOf") {
            for i in 0..all.len() {
                let c = self.loc.child(sid, &["allOf", &i.to_string()]);
                let s = self.signature(c, depth + 1);
                sig.meet(s);
            }
        }
        if let Some(t) = m.get("type") {
            sig.types &= types_of(t);
        }
        if let Some(c) = m.get("const") {
            sig.values = Some(vec![c.clone()]);
        } else if let Some(Value::Array(e)) = m.get("enum") {
            sig.values = Some(e.clone());
        }
        if let (Some(Value::Object(props)), Some(Value::Array(req))) = (m.get("properties"), m.get("required")) {
            for r in req.iter().filter_map(Value::as_str) {
                if let Some(ps) = props.get(r) {
                    let vals = match ps {
                        Value::Object(pm) => pm
                            .get("const")
                            .map(|c| vec![c.clone()])
                            .or_else(|| pm.get("enum").and_then(Value::as_array).cloned()),
                        _ => None,
                    };
                    if let Some(vals) = vals {
                        sig.props.insert(r.to_string(), vals);
                    }
                }
            }
        }
        sig
    }
}

/// What decides that two `oneOf` branches are disjoint: their types, values, and the
/// constant values of their required properties.
struct Sig {
    types: Types,
    values: Option<Vec<Value>>,
    props: HashMap<String, Vec<Value>>,
}

impl Sig {
    fn meet(&mut self, o: Sig) {
        self.types &= o.types;
        if o.values.is_some() {
            self.values = o.values;
        }
        self.props.extend(o.props);
    }
    fn effective_types(&self) -> Types {
        match &self.values {
            Some(v) => {
                v.iter().fold(Types::NONE, |t, x| {
                    t | value_type(x) | if value_type(x) == Types::INTEGER { Types::INTEGER } else { Types::NONE }
                }) & (self.types | if self.types.intersects(Types::FRACTION) { Types::INTEGER } else { Types::NONE })
            }
            None => self.types,
        }
    }
    fn disjoint(&self, o: &Sig) -> bool {
        if !self.effective_types().intersects(o.effective_types()) {
            return true;
        }
        if let (Some(a), Some(b)) = (&self.values, &o.values) {
            if !a.iter().any(|x| b.iter().any(|y| json_eq(x, y))) {
                return true;
            }
        }
        // Both objects with a required property of disjoint constant values. The types of
        // both must be object-only for this to decide.
        if self.types == Types::OBJECT && o.types == Types::OBJECT {
            for (k, a) in &self.props {
                if let Some(b) = o.props.get(k) {
                    if !a.iter().any(|x| b.iter().any(|y| json_eq(x, y))) {
                        return true;
                    }
                }
            }
        }
        false
    }
}

/// Whether a pattern means something else inside an alternation of patterns: group
/// names must be unique and backreferences count groups from the left.
fn joins_unsafely(pattern: &str) -> bool {
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        let mut ahead = chars.clone();
        let unsafe_here = match c {
            '\\' => matches!(chars.next(), Some('1'..='9' | 'k')),
            // A named group `(?<name>`, not a lookbehind `(?<=`, `(?<!`.
            '(' => ahead.next() == Some('?') && ahead.next() == Some('<') && !matches!(ahead.next(), Some('=' | '!')),
            _ => false,
        };
        if unsafe_here {
            return true;
        }
    }
    false
}
