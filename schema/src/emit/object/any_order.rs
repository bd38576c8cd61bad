//! Objects in any order ([`PropertyOrder::Any`]): one rule per reachable set of tracked
//! names written (and count of extra members). Exact within
//! `SchemaLimits::max_any_order_properties`; beyond it, lenient mode widens (see
//! [`AnyOrder::Widened`]).
//!
//! Invariant: each state's rule allows exactly the tracked names not yet written, and
//! closes only where the tracked required names (and, when exact, the dependencies and
//! counts) hold; an exact grammar tracks every name, so no name repeats.

use stencil_grammar::{Expr, RuleId};

use super::Chain;
use crate::compile::{too_large, Ctx};
use crate::emit::{lit, seq};
use crate::node::Node;
use crate::{Mode, PropertyOrder, SchemaError, SchemaLimit};

/// How an object under [`PropertyOrder::Any`] is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AnyOrder {
    /// Every declared name tracked: each at most once, required ones present,
    /// dependencies and `minProperties`/`maxProperties` enforced.
    Exact,
    /// Lenient, beyond the limit: the names in any order, all tracked when they are few
    /// enough, else at most `max_any_order_properties` of the required names (present,
    /// once); untracked names may repeat, and counts (and dependencies among untracked
    /// names) are left to post-hoc validation.
    Widened,
}

impl<'o> Ctx<'o> {
    /// Whether this object's members may come in any order ([`PropertyOrder::Any`]), and
    /// how: exact up to `SchemaLimits::max_any_order_properties` declared names and 16
    /// counted extra members; above, an error (strict) or [`AnyOrder::Widened`] with a
    /// warning (lenient). `None`: schema order.
    pub(super) fn any_order(
        &mut self,
        node: &Node,
        n: usize,
        extras: bool,
        min_props: u64,
        max_props: Option<u64>,
    ) -> Result<Option<AnyOrder>, SchemaError> {
        if self.opts.property_order != PropertyOrder::Any {
            return Ok(None);
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
            return Ok(Some(AnyOrder::Exact));
        };
        let pointer = node.members.first().map(|&s| self.loc.ptr(s)).unwrap_or_default();
        match self.opts.mode {
            Mode::Strict => {
                let reason = format!("property order Any: {why}");
                Err(too_large(SchemaLimit::AnyOrderProperties, limit as u64, pointer, reason))
            }
            Mode::Lenient => {
                let tracked = if n > limit {
                    format!("at most {limit} required names tracked (present, once), other names may repeat or, if required, be missing; ")
                } else {
                    String::new()
                };
                let reason = format!(
                    "property order Any is widened ({why}): {tracked}counts and dependencies on untracked names are left to post-hoc validation"
                );
                self.diag.unenforced("properties", &pointer, &reason)?;
                Ok(Some(AnyOrder::Widened))
            }
        }
    }

    /// The members of an object in any order ([`PropertyOrder::Any`]): one rule per
    /// reachable `(set of tracked names written, extra members written)`, the extras
    /// counted up to what `minProperties`/`maxProperties` need (else only "some or none").
    /// Extra keys never spell a declared name; [`AnyOrder::Exact`] tracks every declared
    /// name, so each appears at most once. Untracked names ([`AnyOrder::Widened`]) share
    /// one rule with the extra members.
    pub(super) fn any_order_rule(&mut self, ch: &Chain, how: AnyOrder) -> Result<Option<Expr>, SchemaError> {
        let exact = how == AnyOrder::Exact;
        let required = |i: usize| ch.required.contains(&ch.declared[i].0);
        // A required name with no value: no object.
        if (0..ch.declared.len()).any(|i| required(i) && ch.declared[i].1.is_none()) {
            return Ok(None);
        }
        let limit = self.opts.limits.max_any_order_properties;
        let tracked: Vec<usize> = if ch.declared.len() <= limit {
            (0..ch.declared.len()).collect()
        } else {
            (0..ch.declared.len()).filter(|&i| required(i)).take(limit).collect()
        };
        let bit = |i: usize| tracked.iter().position(|&t| t == i);
        // The untracked members (names and extras), one rule; none when exact.
        let free: Vec<Expr> = (0..ch.declared.len())
            .filter(|&i| bit(i).is_none())
            .filter_map(|i| {
                let (name, value) = &ch.declared[i];
                Some(seq(vec![self.out.key(name), self.style.key_sep(), value.clone()?]))
            })
            .collect();
        let has_extras = ch.extras.is_some() || !free.is_empty();
        let extras = if free.is_empty() {
            ch.extras.clone()
        } else {
            let all = free.into_iter().chain(ch.extras.clone()).collect();
            // One rule of its own, shared by every state rather than inlined into each.
            let id = self.out.add_rule(&format!("{}-any-free", ch.base), Expr::Alt(all));
            self.out.g.set_no_inline(id);
            Some(Expr::Rule(id))
        };
        let n = tracked.len();
        let emax: u64 = match (has_extras, exact) {
            (false, _) => 0,
            (true, true) => any_order_extra_cap(ch.min_props, ch.max_props),
            (true, false) => 1,
        };
        let width = emax as usize + 1;
        let states = (1usize << n) * width;
        let idx = |set: usize, e: u64| set * width + e as usize;
        let has = |set: usize, i: usize| bit(i).is_some_and(|b| set & (1 << b) != 0);
        let all_tracked = |names: &[usize]| names.iter().all(|&i| bit(i).is_some());
        let count = |set: usize, e: u64| set.count_ones() as u64 + e;
        let room = |set: usize, e: u64| !exact || ch.max_props.is_none_or(|m| count(set, e) < m);
        let next_e = |e: u64| (e + 1).min(emax);
        let can_close = |set: usize, e: u64| {
            let tracked_required = (0..n).filter(|&b| required(tracked[b])).all(|b| set & (1 << b) != 0);
            let counts = !exact || (count(set, e) >= ch.min_props && ch.max_props.is_none_or(|m| count(set, e) <= m));
            tracked_required
                && counts
                && ch.deps.iter().all(|(a, bs, absent)| {
                    !all_tracked(&[*a])
                        || !all_tracked(bs)
                        || !has(set, *a)
                        || (!*absent && bs.iter().all(|&b| has(set, b)))
                })
                && !ch.absent.iter().any(|g| all_tracked(g) && g.iter().all(|&j| has(set, j)))
        };
        let value = |b: usize| ch.declared[tracked[b]].1.as_ref();
        // Which states can finish: successors have a larger set, or the same set and more
        // extras (or the same state, which adds nothing).
        let mut viable = vec![false; states];
        for set in (0..1usize << n).rev() {
            for e in (0..=emax).rev() {
                let mut v = can_close(set, e);
                if !v && room(set, e) {
                    v = (has_extras && next_e(e) != e && viable[idx(set, next_e(e))])
                        || (0..n).any(|b| set & (1 << b) == 0 && value(b).is_some() && viable[idx(set | (1 << b), e)]);
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
                for b in 0..n {
                    if set & (1 << b) == 0 && value(b).is_some() && viable[idx(set | (1 << b), e)] {
                        stack.push((set | (1 << b), e));
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
                for b in 0..n {
                    let (Some(v), false) = (value(b), set & (1 << b) != 0) else { continue };
                    if let Some(r) = rule[idx(set | (1 << b), e)] {
                        let name = &ch.declared[tracked[b]].0;
                        alts.push(seq(vec![
                            pre.clone(),
                            self.out.key(name),
                            self.style.key_sep(),
                            v.clone(),
                            Expr::Rule(r),
                        ]));
                    }
                }
                if let (Some(kv), Some(r)) = (&extras, rule[idx(set, next_e(e))]) {
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
