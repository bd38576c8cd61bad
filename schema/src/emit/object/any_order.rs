//! Objects in any order ([`PropertyOrder::Any`]): one rule per reachable set of declared
//! names written (and count of extra members), within
//! `SchemaLimits::max_any_order_properties`.
//!
//! Invariant: each state's rule allows exactly the members not yet written, and closes
//! only where the required names, dependencies and counts hold.

use stencil_grammar::{Expr, RuleId};

use super::Chain;
use crate::compile::{too_large, Ctx};
use crate::emit::{lit, seq};
use crate::node::Node;
use crate::{Mode, PropertyOrder, SchemaError, SchemaLimit};

impl<'o> Ctx<'o> {
    /// Whether this object's members may come in any order ([`PropertyOrder::Any`]): only
    /// up to `SchemaLimits::max_any_order_properties` declared names and 16 counted extra
    /// members. Above: an error (strict) or schema order with a warning (lenient).
    pub(super) fn any_order(
        &mut self,
        node: &Node,
        n: usize,
        extras: bool,
        min_props: u64,
        max_props: Option<u64>,
    ) -> Result<bool, SchemaError> {
        if self.opts.property_order != PropertyOrder::Any {
            return Ok(false);
        }
        let limit = self.opts.limits.max_any_order_properties;
        let counted = if extras { any_order_extra_cap(min_props, max_props) } else { 0 };
        let why = if n > limit {
            format!("{n} declared properties, more than {limit} (limit max_any_order_properties)")
        } else if counted > ANY_ORDER_MAX_COUNTED {
            format!(
                "extra properties counted up to {counted} by minProperties/maxProperties, more than {ANY_ORDER_MAX_COUNTED} (with limit max_any_order_properties)"
            )
        } else {
            return Ok(true);
        };
        let pointer = node.members.first().map(|&s| self.loc.ptr(s)).unwrap_or_default();
        match self.opts.mode {
            Mode::Strict => {
                let reason = format!("property order Any: {why}");
                Err(too_large(SchemaLimit::AnyOrderProperties, limit as u64, pointer, reason))
            }
            Mode::Lenient => {
                let reason =
                    format!("property order Any is not applied ({why}): key order is fixed to schema order here");
                self.diag.narrowed("properties", &pointer, &reason)?;
                Ok(false)
            }
        }
    }

    /// The members of an object in any order ([`PropertyOrder::Any`]): one rule per
    /// reachable `(set of declared names written, extra members written)`, the extras
    /// counted up to what `minProperties`/`maxProperties` need (else only "some or none").
    /// Extra keys never spell a declared name, so each declared name appears at most once.
    pub(super) fn any_order_rule(&mut self, ch: &Chain) -> Result<Option<Expr>, SchemaError> {
        let n = ch.declared.len();
        let has_extras = ch.extras.is_some();
        let emax: u64 = if has_extras { any_order_extra_cap(ch.min_props, ch.max_props) } else { 0 };
        let width = emax as usize + 1;
        let states = (1usize << n) * width;
        let idx = |set: usize, e: u64| set * width + e as usize;
        let required: Vec<usize> = (0..n).filter(|&i| ch.required.contains(&ch.declared[i].0)).collect();
        let count = |set: usize, e: u64| set.count_ones() as u64 + e;
        let room = |set: usize, e: u64| ch.max_props.is_none_or(|m| count(set, e) < m);
        let next_e = |e: u64| (e + 1).min(emax);
        let can_close = |set: usize, e: u64| {
            let has = |j: usize| set & (1 << j) != 0;
            required.iter().all(|&j| has(j))
                && ch.deps.iter().all(|(a, bs, absent)| !has(*a) || (!*absent && bs.iter().all(|&b| has(b))))
                && !ch.absent.iter().any(|g| g.iter().all(|&j| has(j)))
                && count(set, e) >= ch.min_props
                && ch.max_props.is_none_or(|m| count(set, e) <= m)
        };
        // Which states can finish: successors have a larger set, or the same set and more
        // extras (or the same state, which adds nothing).
        let mut viable = vec![false; states];
        for set in (0..1usize << n).rev() {
            for e in (0..=emax).rev() {
                let mut v = can_close(set, e);
                if !v && room(set, e) {
                    v = (has_extras && next_e(e) != e && viable[idx(set, next_e(e))])
                        || (0..n).any(|i| {
                            set & (1 << i) == 0 && ch.declared[i].1.is_some() && viable[idx(set | (1 << i), e)]
                        });
                }
                viable[idx(set, e)] = v;
            }
        }
        if !viable[idx(0, 0)] {
            return Ok(None);
        }
        // Rules for the viable states reachable from the start.
        let mut rule: Vec<Option<RuleId>> = vec![None; states];
        let mut stack = vec![(0usize, 0u64)];
        let mut order = Vec::new();
        while let Some((set, e)) = stack.pop() {
            let k = idx(set, e);
            if rule[k].is_some() {
                continue;
            }
            let name = format!("{}-any-{set}-{e}", ch.base);
            rule[k] = Some(self.out.add_rule(&name, Expr::Alt(vec![])));
            order.push((set, e));
            if room(set, e) {
                if has_extras && viable[idx(set, next_e(e))] {
                    stack.push((set, next_e(e)));
                }
                for i in 0..n {
                    if set & (1 << i) == 0 && ch.declared[i].1.is_some() && viable[idx(set | (1 << i), e)] {
                        stack.push((set | (1 << i), e));
                    }
                }
            }
            if order.len() % 1024 == 0 {
                self.check_budget(&ch.pointer)?;
            }
        }
        let d = ch.depth;
        for (set, e) in order {
            let any = set != 0 || e > 0;
            let pre = if any { self.style.item_sep(d) } else { self.style.first_prefix(d) };
            let mut alts = Vec::new();
            if room(set, e) {
                for i in 0..n {
                    let (name, value) = &ch.declared[i];
                    let (Some(v), false) = (value, set & (1 << i) != 0) else { continue };
                    if let Some(r) = rule[idx(set | (1 << i), e)] {
                        alts.push(seq(vec![
                            pre.clone(),
                            self.out.key(name),
                            self.style.key_sep(),
                            v.clone(),
                            Expr::Rule(r),
                        ]));
                    }
                }
                if let (Some(kv), Some(r)) = (&ch.extras, rule[idx(set, next_e(e))]) {
                    alts.push(seq(vec![pre.clone(), kv.clone(), Expr::Rule(r)]));
                }
            }
            if can_close(set, e) {
                alts.push(if any {
                    seq(vec![self.style.close_prefix(d), lit("}")])
                } else {
                    seq(vec![self.style.empty_inside(), lit("}")])
                });
            }
            let id = rule[idx(set, e)].expect("made above");
            self.out.g.set_body(id, Expr::Alt(alts));
            self.out.g.set_no_inline(id);
        }
        Ok(rule[idx(0, 0)].map(Expr::Rule))
    }
}

/// With [`PropertyOrder::Any`], the most extra members an object's grammar counts.
const ANY_ORDER_MAX_COUNTED: u64 = 16;

/// How far [`PropertyOrder::Any`] counts extra members: up to `maxProperties` (none may
/// follow), else up to `minProperties` (more are free), and at least 1 ("any written yet").
fn any_order_extra_cap(min_props: u64, max_props: Option<u64>) -> u64 {
    max_props.unwrap_or(min_props).max(1)
}
