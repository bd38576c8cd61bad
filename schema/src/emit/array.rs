//! Arrays: prefix items and the rest (`prefixItems`/`items`/`additionalItems`,
//! `unevaluatedItems`), item counts, one `contains`, and `uniqueItems` over a few
//! enum-like items (one rule per set of items used).
//!
//! Invariant: each item position's schema is the conjunction of every member's schema for
//! that position, emitted as its own value rule.

use rustc_hash::FxHashMap as HashMap;
use serde_json::Value;
use stencil_grammar::{Expr, RuleId};

use super::{alt, lit, sanitize, seq};
use crate::compile::{Ctx, Diagnostics};
use crate::dnf::Conj;
use crate::locate::Sid;
use crate::node::{json_eq, types_of, value_type, Node, Types, IGNORED};
use crate::{Draft, SchemaError};

impl<'o> Ctx<'o> {
    /// The grammar of the node's arrays; `None` when no array satisfies it.
    pub(crate) fn array_expr(&mut self, node: &Node, depth: usize) -> Result<Option<Expr>, SchemaError> {
        let mut prefix: Vec<Conj> = Vec::new();
        let mut rest: Conj = Conj::new();
        let mut rest_false = false;
        let mut min_items: u64 = 0;
        let mut max_items: Option<u64> = None;
        let mut contains: Vec<Sid> = Vec::new();
        let mut unique = false;
        let mut unique_ptr = String::new();
        // Per member: its prefix and rest.
        let mut per_member: Vec<(Vec<Sid>, Option<Sid>)> = Vec::new();
        for (sid, m, draft) in self.loc.keyword_members(&node.members) {
            let ptr = self.loc.ptr(sid);
            let mut pre = Vec::new();
            let mut r = None;
            if draft >= Draft::Draft202012 {
                if let Some(Value::Array(a)) = m.get("prefixItems") {
                    pre = (0..a.len()).map(|i| self.loc.child(sid, &["prefixItems", &i.to_string()])).collect();
                }
                if m.contains_key("items") {
                    r = Some(self.loc.child(sid, &["items"]));
                }
            } else {
                match m.get("items") {
                    Some(Value::Array(a)) => {
                        pre = (0..a.len()).map(|i| self.loc.child(sid, &["items", &i.to_string()])).collect();
                        if m.contains_key("additionalItems") {
                            r = Some(self.loc.child(sid, &["additionalItems"]));
                        }
                    }
                    Some(_) => r = Some(self.loc.child(sid, &["items"])),
                    None => {}
                }
            }
            // Items evaluated by nothing else must satisfy unevaluatedItems; requiring it of
            // every rest item is narrower (items matched by `contains` included), so sound.
            if r.is_none() && m.contains_key("unevaluatedItems") {
                r = Some(self.loc.child(sid, &["unevaluatedItems"]));
            }
            for (k, slot_min) in [("minItems", true), ("maxItems", false)] {
                if let Some(v) = m.get(k) {
                    let n = v
                        .as_f64()
                        .filter(|f| *f >= 0.0)
                        .ok_or_else(|| self.invalid(sid, k, "must be a non-negative integer"))?;
                    let n = n.ceil() as u64;
                    if !self.countable(sid, k, n)? {
                        continue;
                    }
                    if slot_min {
                        min_items = min_items.max(n);
                    } else {
                        max_items = Some(max_items.map_or(n, |x| x.min(n)));
                    }
                }
            }
            if m.contains_key("contains") && draft >= Draft::Draft6 {
                let min_c = m
                    .get("minContains")
                    .and_then(Value::as_f64)
                    .map(|f| f.ceil() as u64)
                    .filter(|_| draft >= Draft::Draft201909);
                if min_c == Some(0) {
                    // contains with minContains 0 constrains nothing (maxContains aside).
                } else {
                    if min_c.is_some_and(|c| c > 1) {
                        node_push_unsupported(&mut self.diag, "minContains", &ptr)?;
                    }
                    contains.push(self.loc.child(sid, &["contains"]));
                }
                if m.contains_key("maxContains") && draft >= Draft::Draft201909 {
                    node_push_unsupported(&mut self.diag, "maxContains", &ptr)?;
                }
            }
            if m.get("uniqueItems") == Some(&Value::Bool(true)) {
                unique = true;
                unique_ptr = ptr.clone();
            }
            per_member.push((pre, r));
        }
        let k = per_member.iter().map(|(p, _)| p.len()).max().unwrap_or(0);
        for i in 0..k {
            let mut c = Conj::new();
            let mut impossible = false;
            for (pre, r) in &per_member {
                if i < pre.len() {
                    c.insert((pre[i], false));
                } else if let Some(r) = r {
                    c.insert((*r, false));
                }
                let _ = &mut impossible;
            }
            prefix.push(c);
        }
        for (_, r) in &per_member {
            if let Some(r) = r {
                rest.insert((*r, false));
                if *self.loc.schema(*r) == Value::Bool(false) {
                    rest_false = true;
                }
            }
        }
        if let Some(m) = max_items {
            if min_items > m {
                return Ok(None);
            }
        }
        let cd = self.style.child_depth(depth);
        let mut prefix_exprs: Vec<Option<Expr>> = Vec::new();
        for c in &prefix {
            prefix_exprs.push(self.value_rule(c, cd, None)?);
        }
        // A position whose schema admits nothing caps the length.
        if let Some(i) = prefix_exprs.iter().position(|e| e.is_none()) {
            max_items = Some(max_items.map_or(i as u64, |m| m.min(i as u64)));
            prefix_exprs.truncate(i);
            rest_false = true;
        }
        let rest_expr = if rest_false { None } else { self.value_rule(&rest, cd, None)? };
        if let Some(m) = max_items {
            if min_items > m {
                return Ok(None);
            }
        }
        let open = lit("[");
        let close = lit("]");
        // uniqueItems over enum-like items.
        if unique {
            if let Some(e) = self.unique_array(&prefix, &rest, rest_false, min_items, max_items, depth, &contains)? {
                return Ok(e);
            }
            self.diag.unenforced("uniqueItems", &unique_ptr, "only arrays of a few enum-like items are made unique")?;
        }
        if !contains.is_empty() {
            if contains.len() > 1 || !prefix_exprs.is_empty() || min_items > 1 || max_items.is_some() || rest_false {
                let p = self.loc.ptr(contains[0]);
                self.diag.unenforced(
                    "contains",
                    &p,
                    "contains together with prefix items, several contains, or item counts",
                )?;
            } else {
                let mut c = rest.clone();
                c.insert((contains[0], false));
                let Some(ce) = self.value_rule(&c, cd, None)? else { return Ok(None) };
                let item = rest_expr.clone().expect("rest not false");
                let sep = self.style.item_sep(depth);
                let body = seq(vec![
                    self.style.first_prefix(depth),
                    Expr::star(seq(vec![item.clone(), sep.clone()])),
                    ce,
                    Expr::star(seq(vec![sep, item])),
                    self.style.close_prefix(depth),
                ]);
                return Ok(Some(seq(vec![open, body, close])));
            }
        }
        // Items from position i on, given i already emitted.
        let min = min_items;
        let max = max_items;
        let mut tail: Option<Expr> = None; // grammar after all prefix items (position k')
        let kp = prefix_exprs.len() as u64;
        let sep = self.style.item_sep(depth);
        // Rest part after kp items (kp ≥ 1 here means a separator precedes each).
        let rest_part = |first: bool, need: u64, cap: Option<u64>| -> Option<Expr> {
            let Some(r) = rest_expr.clone() else {
                return if need == 0 { Some(Expr::Empty) } else { None };
            };
            if cap == Some(0) {
                return if need == 0 { Some(Expr::Empty) } else { None };
            }
            let more = Expr::repeat(
                seq(vec![sep.clone(), r.clone()]),
                need.saturating_sub(1).min(u32::MAX as u64) as u32,
                cap.map(|c| (c - 1).min(u32::MAX as u64) as u32),
            );
            let one_or_more = seq(vec![if first { Expr::Empty } else { sep.clone() }, r, more]);
            if need == 0 {
                Some(Expr::optional(one_or_more))
            } else {
                Some(one_or_more)
            }
        };
        // Build from the end of the prefix backwards.
        let after_prefix = rest_part(kp == 0, min.saturating_sub(kp), max.map(|m| m.saturating_sub(kp)));
        if max.is_some_and(|m| m < kp) {
            // Fewer items than the prefix: truncate.
        }
        tail = after_prefix.or(tail);
        let mut cur: Option<Expr> = tail;
        for i in (0..kp).rev() {
            let item = prefix_exprs[i as usize].clone().unwrap();
            let emitted = cur.map(|t| seq(vec![if i == 0 { Expr::Empty } else { sep.clone() }, item, t]));
            let allowed_here = max.is_none_or(|m| i < m);
            let emitted = if allowed_here { emitted } else { None };
            cur = if i >= min {
                // May stop before item i.
                match emitted {
                    Some(e) => Some(Expr::optional(e)),
                    None => Some(Expr::Empty),
                }
            } else {
                emitted
            };
        }
        let Some(inner) = cur else { return Ok(None) };
        // inner may be empty (no items): container shape.
        let nonempty_possible = inner != Expr::Empty;
        let can_be_empty = min == 0;
        let mut alts = Vec::new();
        if nonempty_possible {
            let ne = self.strip_empty(inner, can_be_empty);
            if let Some(ne) = ne {
                alts.push(seq(vec![
                    open.clone(),
                    self.style.first_prefix(depth),
                    ne,
                    self.style.close_prefix(depth),
                    close.clone(),
                ]));
            }
        }
        if can_be_empty {
            alts.push(seq(vec![open, self.style.empty_inside(), close]));
        }
        Ok(alt(alts).map(|e| {
            let name = format!("{}-array", sanitize(&self.loc.ptr(node.members.first().copied().unwrap_or(0))));
            Expr::Rule(self.out.add_kept_rule(&name, e))
        }))
    }

    /// `inner` is `X?` or `X` where X is non-empty; return X (the non-empty form) when the
    /// empty case is emitted separately.
    fn strip_empty(&self, inner: Expr, can_be_empty: bool) -> Option<Expr> {
        if !can_be_empty {
            return Some(inner);
        }
        match inner {
            Expr::Repeat { expr, min: 0, max: Some(1) } => Some(*expr),
            Expr::Empty => None,
            other => Some(other),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn unique_array(
        &mut self,
        prefix: &[Conj],
        rest: &Conj,
        rest_false: bool,
        min: u64,
        max: Option<u64>,
        depth: usize,
        contains: &[Sid],
    ) -> Result<Option<Option<Expr>>, SchemaError> {
        if !prefix.is_empty() || rest_false || !contains.is_empty() {
            return Ok(None);
        }
        // The finite set of item values, if the rest schema is enum-like.
        let Some(values) = self.finite_values(rest)? else { return Ok(None) };
        if values.len() > 8 {
            return Ok(None);
        }
        let n = values.len();
        let cd = self.style.child_depth(depth);
        let lits: Vec<Expr> = values.iter().map(|v| self.style.literal_value(v, cd)).collect();
        let max = max.map_or(n as u64, |m| m.min(n as u64));
        if min > max {
            return Ok(Some(None));
        }
        // State: used-set mask. U(mask) = end | sep v_i U(mask | i).
        let mut ids: HashMap<u32, RuleId> = HashMap::default();
        for mask in 0..(1u32 << n) {
            ids.insert(mask, self.out.add_rule("unique-items", Expr::Empty));
        }
        let sep = self.style.item_sep(depth);
        for mask in 0..(1u32 << n) {
            let count = mask.count_ones() as u64;
            let mut alts = Vec::new();
            if count >= min.max(1) {
                alts.push(seq(vec![self.style.close_prefix(depth), lit("]")]));
            }
            if count < max {
                for i in 0..n {
                    if mask & (1 << i) == 0 {
                        let pre = if mask == 0 { self.style.first_prefix(depth) } else { sep.clone() };
                        alts.push(seq(vec![pre, lits[i].clone(), Expr::Rule(ids[&(mask | 1 << i)])]));
                    }
                }
            }
            let body = if alts.is_empty() { Expr::Alt(vec![]) } else { Expr::Alt(alts) };
            self.out.g.set_body(ids[&mask], body);
        }
        let mut alts = vec![seq(vec![lit("["), Expr::Rule(ids[&0])])];
        if min == 0 {
            alts.push(seq(vec![lit("["), self.style.empty_inside(), lit("]")]));
        }
        Ok(Some(alt(alts)))
    }

    /// The values of a conjunction when it is a small finite set (enum/const/boolean/null).
    fn finite_values(&mut self, c: &Conj) -> Result<Option<Vec<Value>>, SchemaError> {
        let branches = self.dnf(c)?;
        let mut out: Vec<Value> = Vec::new();
        for b in branches {
            let mut types = Types::ALL;
            let mut values: Option<Vec<Value>> = None;
            for &(sid, neg) in &b {
                if neg {
                    return Ok(None);
                }
                let schema = self.loc.schema(sid);
                let Value::Object(m) = schema else { continue };
                for (k, v) in m {
                    match k.as_str() {
                        "type" => types &= types_of(v),
                        "enum" => values = Some(v.as_array().cloned().unwrap_or_default()),
                        "const" => values = Some(vec![v.clone()]),
                        kk if IGNORED.contains(&kk) => {}
                        _ => return Ok(None),
                    }
                }
            }
            let vals = match values {
                Some(v) => v.into_iter().filter(|x| value_type(x).intersects(types)).collect(),
                None => {
                    let mut v = Vec::new();
                    if types.intersects(!(Types::NULL | Types::BOOLEAN)) {
                        return Ok(None);
                    }
                    if types.intersects(Types::NULL) {
                        v.push(Value::Null);
                    }
                    if types.intersects(Types::BOOLEAN) {
                        v.push(Value::Bool(true));
                        v.push(Value::Bool(false));
                    }
                    v
                }
            };
            for v in vals {
                if !out.iter().any(|o| json_eq(o, &v)) {
                    out.push(v);
                }
            }
        }
        Ok(Some(out))
    }
}

fn node_push_unsupported(diag: &mut Diagnostics, kw: &str, ptr: &str) -> Result<(), SchemaError> {
    diag.unenforced(kw, ptr, "counted contains is not enforced")
}
