//! Objects: declared properties in schema order, then extra properties, as a chain of
//! rules over the declared names ([`Ctx::chain_rule`]: emit or skip each name, tracking
//! counts for `minProperties`/`maxProperties` and the names that dependencies and negated
//! `required` need). [`any_order`] writes the [`crate::PropertyOrder::Any`] form instead;
//! [`extra`] the grammar of one extra member.
//!
//! A declared property's quoted name is one rule shared by every object that declares it
//! (kept a rule, `Rule::no_inline`): an object's automaton keeps only its punctuation and
//! calls, and the engine fuses the chain into one automaton (`fuse.rs` in `stencil-mask`).
//!
//! Invariant: a declared name appears at most once (except for the untracked names of a
//! widened [`crate::PropertyOrder::Any`] object, in lenient mode), and extra keys never
//! spell a declared name.

mod any_order;
mod evaluated;
mod extra;

use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;
use serde_json::Value;
use stencil_grammar::Expr;

use super::{alt, lit, sanitize, seq};
use crate::compile::Ctx;
use crate::dnf::Conj;
use crate::locate::Sid;
use crate::node::Node;
use crate::{Draft, SchemaError};

/// One member of an object's conjunction, as the object's grammar sees it.
struct MemberObj<'o> {
    sid: Sid,
    props: rustc_hash::FxHashSet<&'o str>,
    patterns: Vec<(String, Sid)>,
    additional: Option<Sid>,
    unevaluated: Option<Sid>,
    /// With `unevaluated`: the other members whose evaluated keys it does not apply to
    /// (indices into the branch's members, see [`evaluated`]).
    sees: Vec<usize>,
    property_names: Option<Sid>,
}

impl<'o> Ctx<'o> {
    /// The grammar of the node's objects; `None` when no object satisfies it.
    pub(crate) fn object_expr(&mut self, node: &Node, depth: usize) -> Result<Option<Expr>, SchemaError> {
        let mut members: Vec<MemberObj> = Vec::new();
        let mut order: Vec<String> = Vec::new();
        // `order`'s names, for membership tests (a linear scan is quadratic in a schema of
        // 100,000 properties).
        let mut in_order: rustc_hash::FxHashSet<&str> = Default::default();
        let mut required: BTreeSet<String> = BTreeSet::new();
        // `required` names in document order (the set above is for membership tests).
        let mut required_order: Vec<String> = Vec::new();
        let mut min_props: u64 = 0;
        let mut max_props: Option<u64> = None;
        let mut deps: Vec<(String, Vec<String>)> = Vec::new();
        for (sid, m, draft) in self.loc.keyword_members(&node.members) {
            let ptr = self.loc.ptr(sid);
            let mut mo = MemberObj {
                sid,
                props: Default::default(),
                patterns: vec![],
                additional: None,
                unevaluated: None,
                sees: vec![],
                property_names: None,
            };
            if let Some(Value::Object(p)) = m.get("properties") {
                for k in p.keys() {
                    mo.props.insert(k);
                    if in_order.insert(k) {
                        order.push(k.clone());
                    }
                }
            }
            if let Some(Value::Object(p)) = m.get("patternProperties") {
                for k in p.keys() {
                    let c = self.loc.child(sid, &["patternProperties", k]);
                    mo.patterns.push((k.clone(), c));
                }
            }
            if m.contains_key("additionalProperties") {
                mo.additional = Some(self.loc.child(sid, &["additionalProperties"]));
            }
            if m.contains_key("unevaluatedProperties") {
                mo.unevaluated = Some(self.loc.child(sid, &["unevaluatedProperties"]));
            }
            if m.contains_key("propertyNames") && draft >= Draft::Draft6 {
                mo.property_names = Some(self.loc.child(sid, &["propertyNames"]));
            }
            if let Some(Value::Array(r)) = m.get("required") {
                for x in r.iter().filter_map(Value::as_str) {
                    if required.insert(x.to_string()) {
                        required_order.push(x.to_string());
                    }
                }
            }
            for (k, slot_min) in [("minProperties", true), ("maxProperties", false)] {
                if let Some(v) = m.get(k) {
                    let n = v
                        .as_f64()
                        .filter(|f| *f >= 0.0)
                        .ok_or_else(|| self.invalid(sid, k, "must be a non-negative integer"))?;
                    let n = n.ceil() as u64;
                    if slot_min {
                        min_props = min_props.max(n);
                    } else {
                        max_props = Some(max_props.map_or(n, |x| x.min(n)));
                    }
                }
            }
            // `dependencies` (up to draft 7) is honoured in every draft, as validators do.
            let dep_kw: Vec<&str> = if draft >= Draft::Draft201909 {
                vec!["dependentRequired", "dependentSchemas", "dependencies"]
            } else {
                vec!["dependencies"]
            };
            for kw in dep_kw {
                if let Some(Value::Object(d)) = m.get(kw) {
                    for (a, v) in d {
                        match v {
                            Value::Array(names) => {
                                let names: Vec<String> =
                                    names.iter().filter_map(|x| x.as_str().map(String::from)).collect();
                                if !names.is_empty() {
                                    deps.push((a.clone(), names));
                                }
                            }
                            Value::Bool(true) => {}
                            Value::Object(o) if o.is_empty() => {}
                            Value::Bool(false) => deps.push((a.clone(), vec![])), // a must be absent
                            _ => self.diag.unenforced(kw, &ptr, "dependent schemas are not enforced")?,
                        }
                    }
                }
            }
            members.push(mo);
        }
        self.resolve_unevaluated(&mut members)?;
        // Declared names: properties in order, then required, then dependency names.
        for r in &required_order {
            if in_order.insert(r) {
                order.push(r.clone());
            }
        }
        for (a, bs) in &deps {
            for n in std::iter::once(a).chain(bs.iter()) {
                if !order.contains(n) && members.iter().any(|m| m.additional.is_some() || !m.patterns.is_empty()) {
                    order.push(n.clone());
                }
            }
        }
        for (a, bs) in &deps {
            for n in std::iter::once(a).chain(bs.iter()) {
                if !order.contains(n) {
                    order.push(n.clone());
                }
            }
        }
        // Negated `required`: the names not already required, of which one must be absent
        // (none left: no object qualifies). They become declared names, so that no extra
        // property can carry them.
        let mut absent_groups: Vec<(Vec<String>, String, String)> = Vec::new();
        for (names, kw, p) in &node.not_required {
            let rest: Vec<&String> = names.iter().filter(|n| !required.contains(*n)).collect();
            if rest.is_empty() {
                return Ok(None);
            }
            for &n in &rest {
                if in_order.insert(n) {
                    order.push(n.clone());
                }
            }
            absent_groups.push((rest.into_iter().cloned().collect(), kw.clone(), p.clone()));
        }
        let cd = self.style.child_depth(depth);
        // Value grammar of each declared name.
        let mut declared: Vec<(String, Option<Expr>)> = Vec::new();
        for name in &order {
            let mut c = Conj::new();
            let mut forbidden = false;
            for mo in &members {
                let mut matched = false;
                if mo.props.contains(name.as_str()) {
                    c.insert((self.loc.child(mo.sid, &["properties", name]), false));
                    matched = true;
                }
                for (p, psid) in &mo.patterns {
                    if self.pattern_matches(p, name, |c| c.loc.ptr(mo.sid))? {
                        c.insert((*psid, false));
                        matched = true;
                    }
                }
                if !matched {
                    if let Some(a) = mo.additional {
                        c.insert((a, false));
                    } else if let Some(u) = mo.unevaluated {
                        let mut seen = false;
                        for &j in &mo.sees {
                            let o = &members[j];
                            seen |= evaluated::evaluates_name(o, name, |p| {
                                self.pattern_matches(p, name, |c| c.loc.ptr(o.sid))
                            })?;
                        }
                        if !seen {
                            c.insert((u, false));
                        }
                    }
                }
                if let Some(pn) = mo.property_names {
                    if !self.name_ok(pn, name)? {
                        forbidden = true;
                    }
                }
            }
            let e = if forbidden { None } else { self.value_rule(&c, cd, None)? };
            if e.is_none() && required.contains(name) {
                return Ok(None);
            }
            declared.push((name.clone(), e));
        }
        // A group of one name: that name is forbidden.
        for (g, _, _) in &absent_groups {
            if let [single] = g.as_slice() {
                if let Some(d) = declared.iter_mut().find(|(n, _)| n == single) {
                    d.1 = None;
                }
            }
        }
        let absent_groups: Vec<(Vec<String>, String, String)> =
            absent_groups.into_iter().filter(|(g, _, _)| g.len() > 1).collect();
        // Extra properties.
        let extras = self.extra_properties(&members, &order, cd)?;
        // The chain.
        let names: Vec<String> = declared.iter().map(|(n, _)| n.clone()).collect();
        let any_order = self.any_order(node, declared.len(), extras.is_some(), min_props, max_props)?;
        let index_of = |n: &String| names.iter().position(|x| x == n);
        let absent: Vec<Vec<usize>> =
            absent_groups.iter().map(|(g, _, _)| g.iter().filter_map(index_of).collect()).collect();
        let relevant: Vec<usize> = {
            let mut r: Vec<usize> = Vec::new();
            for i in absent.iter().flatten() {
                if !r.contains(i) {
                    r.push(*i);
                }
            }
            for (a, bs) in &deps {
                for n in std::iter::once(a).chain(bs.iter()) {
                    if let Some(i) = names.iter().position(|x| x == n) {
                        if !r.contains(&i) {
                            r.push(i);
                        }
                    }
                }
            }
            r
        };
        // The chain tracks at most 12 names (any order tracks them all).
        if any_order.is_none() && relevant.len() > 12 {
            for ((g, kw, p), idx) in absent_groups.iter().zip(&absent) {
                if idx.iter().any(|i| relevant.iter().position(|r| r == i).is_none_or(|b| b >= 12)) {
                    let reason = format!("more than 12 properties to track: objects with the tracked names of {g:?} are refused even when an untracked one is absent");
                    self.diag.narrowed(kw, p, &reason)?;
                }
            }
            if !deps.is_empty() {
                let p = self.loc.ptr(node.members[0]);
                self.diag.unenforced("dependentRequired", &p, "more than 12 properties involved")?;
            }
        }
        let relevant: Vec<usize> = relevant.into_iter().take(12).collect();
        let cap = if max_props.is_some() || min_props > 0 { max_props.unwrap_or(0).max(min_props) + 1 } else { 0 };
        if any_order.is_none() && cap > 64 && declared.len() > 64 {
            let p = self.loc.ptr(node.members[0]);
            self.diag.unenforced("maxProperties", &p, "counts above 64 with many properties")?;
        }
        let chain = Chain {
            declared,
            required: required.clone(),
            deps: deps
                .iter()
                .filter_map(|(a, bs)| {
                    let ai = names.iter().position(|x| x == a)?;
                    let bis: Vec<usize> = bs.iter().filter_map(|b| names.iter().position(|x| x == b)).collect();
                    Some((ai, bis, bs.is_empty()))
                })
                .collect(),
            absent,
            relevant,
            cap,
            min_props,
            max_props,
            extras,
            depth,
            base: sanitize(&self.loc.ptr(node.members.first().copied().unwrap_or(0))),
            pointer: self.loc.ptr(node.members.first().copied().unwrap_or(0)),
        };
        let body = match any_order {
            Some(how) => self.any_order_rule(&chain, how)?,
            None => self.chain_rule(&chain)?,
        };
        Ok(body.map(|b| {
            let name = format!("{}-object", chain.base);
            Expr::Rule(self.out.add_kept_rule(&name, seq(vec![lit("{"), b])))
        }))
    }

    /// The grammar of an object's members from declared name `i` on, for each reachable
    /// `(i, count, mask, any)`: `count` members so far (capped), `mask` the relevant names
    /// present, `any` whether a member was emitted. One rule per key, made in the order of
    /// a depth-first walk (emit name `i`, then skip it) — with an explicit stack, since an
    /// object may declare 100,000 names.
    fn chain_rule(&mut self, ch: &Chain) -> Result<Option<Expr>, SchemaError> {
        type Key = (usize, u64, u32, bool);
        let mut memo: HashMap<Key, Option<Expr>> = HashMap::default();
        let n = ch.declared.len();
        // The children of a key below the end: (emit, skip), each when allowed.
        let children = |(i, count, mask, any): Key| -> (Option<Key>, Option<Key>) {
            let (name, value) = &ch.declared[i];
            let emit = (value.is_some() && ch.max_props.is_none_or(|m| count < m)).then(|| {
                let ncount = if ch.cap > 0 { (count + 1).min(ch.cap) } else { 0 };
                let nmask = match ch.relevant.iter().position(|&r| r == i) {
                    Some(b) => mask | (1 << b),
                    None => mask,
                };
                (i + 1, ncount, nmask, true)
            });
            let skip = (!ch.required.contains(name)).then_some((i + 1, count, mask, any));
            (emit, skip)
        };
        let root: Key = (0, 0, 0, false);
        let mut stack: Vec<(Key, u8)> = vec![(root, 0)];
        while let Some(&(key, stage)) = stack.last() {
            if stage == 0 && memo.contains_key(&key) {
                stack.pop();
                continue;
            }
            let (i, count, mask, any) = key;
            if i == n {
                let r = self.chain_end(ch, count, mask, any);
                memo.insert(key, r);
                stack.pop();
                continue;
            }
            let (emit, skip) = children(key);
            let top = stack.len() - 1;
            match stage {
                0 | 1 => {
                    stack[top].1 = stage + 1;
                    let child = if stage == 0 { emit } else { skip };
                    if let Some(c) = child.filter(|c| !memo.contains_key(c)) {
                        stack.push((c, 0));
                    }
                }
                _ => {
                    stack.pop();
                    let d = ch.depth;
                    let (name, value) = &ch.declared[i];
                    let mut alts = Vec::new();
                    if let (Some(v), Some(Some(rest))) = (value, emit.map(|c| memo[&c].clone())) {
                        let pre = if any { self.style.item_sep(d) } else { self.style.first_prefix(d) };
                        alts.push(seq(vec![pre, self.out.key(name), self.style.key_sep(), v.clone(), rest]));
                    }
                    if let Some(Some(rest)) = skip.map(|c| memo[&c].clone()) {
                        alts.push(rest);
                    }
                    let result = match alt(alts) {
                        None => None,
                        Some(e) => {
                            let name = format!("{}-obj-{i}", ch.base);
                            Some(Expr::Rule(self.out.add_kept_rule(&name, e)))
                        }
                    };
                    memo.insert(key, result);
                    if memo.len().is_multiple_of(1024) {
                        self.check_budget(&ch.pointer)?;
                    }
                }
            }
        }
        Ok(memo.remove(&root).flatten())
    }

    /// The end of an object's members, after every declared name: extra members, the
    /// counts and the dependencies.
    fn chain_end(&mut self, ch: &Chain, count: u64, mask: u32, any: bool) -> Option<Expr> {
        let d = ch.depth;
        // Dependencies satisfied?
        let present = |j: usize| ch.relevant.iter().position(|&r| r == j).is_some_and(|b| mask & (1 << b) != 0);
        let deps_ok = ch.deps.iter().all(|(a, bs, absent)| {
            if !ch.relevant.contains(a) {
                return true;
            }
            !present(*a) || (!*absent && bs.iter().all(|&b| !ch.relevant.contains(&b) || present(b)))
        });
        if !deps_ok {
            return None;
        }
        // Negated `required`: one name of each group absent (names beyond the 12 tracked
        // count as present: narrower, said at compile time).
        let all_present = |g: &Vec<usize>| g.iter().all(|&j| !ch.relevant.contains(&j) || present(j));
        if ch.absent.iter().any(all_present) {
            return None;
        }
        let need = ch.min_props.saturating_sub(count);
        let cap = ch.max_props.map(|m| m.saturating_sub(count));
        if ch.max_props.is_some_and(|m| count > m) {
            return None;
        }
        let close = seq(vec![self.style.close_prefix(d), lit("}")]);
        let none = if any { close.clone() } else { seq(vec![self.style.empty_inside(), lit("}")]) };
        let cap_u = cap.map(|c| c.min(u32::MAX as u64) as u32);
        let kv = match &ch.extras {
            Some(kv) if cap_u != Some(0) => kv,
            // No (more) extra properties: close here, unless more are needed.
            _ => return (need == 0).then_some(none),
        };
        let sep = self.style.item_sep(d);
        let first = if any { sep.clone() } else { self.style.first_prefix(d) };
        let more = Expr::repeat(
            seq(vec![sep, kv.clone()]),
            need.saturating_sub(1).min(u32::MAX as u64) as u32,
            cap_u.map(|c| c - 1),
        );
        let some = seq(vec![first, kv.clone(), more, close]);
        if need > 0 {
            Some(some)
        } else {
            Some(Expr::Alt(vec![some, none]))
        }
    }
}

struct Chain {
    declared: Vec<(String, Option<Expr>)>,
    required: BTreeSet<String>,
    /// (name index, required name indices, "name must be absent")
    deps: Vec<(usize, Vec<usize>, bool)>,
    /// Groups of name indices of which one at least must be absent (negated `required`).
    absent: Vec<Vec<usize>>,
    relevant: Vec<usize>,
    cap: u64,
    min_props: u64,
    max_props: Option<u64>,
    extras: Option<Expr>,
    depth: usize,
    base: String,
    /// Of the object's first subschema, for errors.
    pointer: String,
}
