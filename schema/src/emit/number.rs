//! Numbers: integer and decimal ranges as digit regexes ([`crate::numbers`]), `multipleOf`
//! for integers (enumerated in small ranges, else a digit automaton of remainders,
//! [`Emitter::mod_automaton`]) and for powers of ten.
//!
//! Invariant: the language is exactly the node's numbers, written as JSON numbers (without
//! an exponent when bounded), except where a warning says it is wider or narrower.

use stencil_grammar::{Expr, RuleId};

use super::{alt, lit, seq, Emitter};
use crate::compile::Ctx;
use crate::node::{Node, Types};
use crate::numbers::{decimal_range_regex, int_range_regex, Decimal};
use crate::{Draft, SchemaError};

impl<'o> Ctx<'o> {
    /// The grammar of the node's numbers of `types` (integers, or all numbers); `None`
    /// when none is in range.
    pub(crate) fn number_expr(&mut self, node: &Node, types: Types) -> Result<Option<Expr>, SchemaError> {
        // (bound, inclusive)
        let min = node.num.min.as_ref().map(|(d, e)| (d, !*e));
        let max = node.num.max.as_ref().map(|(d, e)| (d, !*e));
        let int_only = !types.intersects(Types::FRACTION);
        // An integer value may be written with a zero fraction (`6000.0`, serde_json's form
        // of a whole f64): a number, and an integer from draft 6 on (draft 4 says it is not).
        let draft = node.members.first().map_or(self.opts.default_draft, |&s| self.loc.draft(s));
        let zero_frac = !int_only || draft >= Draft::Draft6;
        let int_tail = |e: Expr| -> Expr {
            if zero_frac {
                seq(vec![e, Expr::Regex(r"(?:\.0+)?".into())])
            } else {
                e
            }
        };
        let int_regex = |r: String| regex_expr(r).map(int_tail);
        let mut mult: Vec<(Decimal, String)> = node.num.multiple_of.clone();
        // multipleOf 1 says nothing more about an integer.
        mult.retain(|(d, _)| !(int_only && d.int == "1" && d.frac.is_empty() && d.is_integer()));
        let int_bounds = || {
            let lo = min.map(|(d, incl)| if !incl && d.is_integer() { d.succ() } else { d.clone() });
            let hi = max.map(|(d, incl)| if !incl && d.is_integer() { d.pred() } else { d.clone() });
            (lo, hi)
        };
        if mult.is_empty() {
            if int_only {
                let (lo, hi) = int_bounds();
                let r = int_range_regex(lo.as_ref(), hi.as_ref());
                return Ok(int_regex(r));
            }
            if min.is_none() && max.is_none() {
                let frac = if !types.intersects(Types::INTEGER) {
                    r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]*[1-9][0-9]*(?:[eE][+-]?[0-9]+)?|[eE]-[0-9]+)"
                } else {
                    r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
                };
                if !types.intersects(Types::INTEGER) {
                    let p = node.members.first().map(|&s| self.loc.ptr(s)).unwrap_or_default();
                    let _ = p;
                }
                return Ok(regex_expr(frac.to_string()));
            }
            return Ok(match decimal_range_regex(min, max) {
                Some(r) => regex_expr(r),
                None => {
                    // Only integers within the bounds (sound, narrower).
                    let (lo, hi) = int_bounds();
                    int_regex(int_range_regex(lo.as_ref(), hi.as_ref()))
                }
            });
        }
        // multipleOf: integers (k ≥ 1 integer) or fixed decimal places (10^-j).
        let ptr = mult[0].1.clone();
        let int_mults: Vec<&Decimal> = mult.iter().map(|(d, _)| d).filter(|d| d.is_integer()).collect();
        if !int_mults.is_empty() {
            let k: u128 = int_mults.iter().map(|d| d.int.parse::<u128>().unwrap_or(0)).fold(1, lcm);
            if k == 0 || int_mults.len() != mult.len() {
                self.diag.unenforced(
                    "multipleOf",
                    &ptr,
                    "a multiple too large or mixing integer and fractional multiples",
                )?;
            }
            let (lo, hi) = int_bounds();
            let lo = lo.map(|d| d.ceil());
            let hi = hi.map(|d| d.floor());
            // Small ranges: enumerate.
            if let (Some(l), Some(h)) = (&lo, &hi) {
                if let (Ok(l), Ok(h)) = (l.to_string().parse::<i128>(), h.to_string().parse::<i128>()) {
                    if k > 0 && h >= l && (h - l) / (k as i128) <= 2000 {
                        let first = l.rem_euclid(k as i128);
                        let start = if first == 0 { l } else { l + (k as i128 - first) };
                        let mut lits = Vec::new();
                        let mut x = start;
                        while x <= h {
                            lits.push(lit(&x.to_string()));
                            x += k as i128;
                        }
                        return Ok(alt(lits).map(int_tail));
                    }
                    if h < l {
                        return Ok(None);
                    }
                }
            }
            if k <= 1 {
                return Ok(int_regex(int_range_regex(lo.as_ref(), hi.as_ref())));
            }
            if k > 1000 {
                self.diag.unenforced("multipleOf", &ptr, "multiples above 1000 with wide bounds")?;
                return Ok(int_regex(int_range_regex(lo.as_ref(), hi.as_ref())));
            }
            // Sign from the bounds; other bounds are not combined with the digit automaton.
            let zero = Decimal::parse("0").unwrap();
            let nonneg = lo.as_ref().is_some_and(|l| *l >= zero);
            let nonpos = hi.as_ref().is_some_and(|h| *h <= zero);
            let exact_bounds = lo.as_ref().is_none_or(|l| *l == zero || l.negative && !nonneg)
                && hi.as_ref().is_none_or(|h| *h == zero || !h.negative && !nonpos);
            let exact_bounds =
                exact_bounds && lo.as_ref().is_none_or(|l| *l == zero) && hi.as_ref().is_none_or(|h| *h == zero);
            if !exact_bounds {
                self.diag.unenforced("minimum", &ptr, "bounds combined with multipleOf over a wide range")?;
            }
            let digits = self.out.mod_automaton(k as u32);
            let mut alts = vec![lit("0")];
            if !nonpos {
                alts.push(digits.clone());
            }
            if !nonneg {
                alts.push(seq(vec![lit("-"), digits]));
            }
            return Ok(alt(alts).map(int_tail));
        }
        // Fractional multiples: 10^-j gives at most j decimal places.
        let d = &mult[0].0;
        let pow10 = d.int == "0" && d.frac.ends_with('1') && d.frac[..d.frac.len() - 1].bytes().all(|b| b == b'0');
        if mult.len() == 1 && pow10 && min.is_none() && max.is_none() {
            let j = d.frac.len();
            // Trailing zeros beyond the j places keep the value a multiple (`1.50`).
            if int_only {
                return Ok(int_regex(r"-?(?:0|[1-9][0-9]*)".to_string()));
            }
            return Ok(regex_expr(format!(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]{{1,{j}}}0*)?")));
        }
        self.diag.unenforced("multipleOf", &ptr, "fractional multiples other than a power of ten without bounds")?;
        if int_only {
            let (lo, hi) = int_bounds();
            return Ok(int_regex(int_range_regex(lo.as_ref(), hi.as_ref())));
        }
        Ok(match decimal_range_regex(min, max) {
            Some(r) => regex_expr(r),
            None => {
                let (lo, hi) = int_bounds();
                int_regex(int_range_regex(lo.as_ref(), hi.as_ref()))
            }
        })
    }
}

impl Emitter {
    /// Positive integers (no leading zero) divisible by k, by a digit automaton.
    fn mod_automaton(&mut self, k: u32) -> Expr {
        let name = format!("multiple-of-{k}");
        if let Some(id) = self.g.rule_id(&name) {
            return Expr::Rule(id);
        }
        let ids: Vec<RuleId> = (0..k).map(|r| self.add_rule(&format!("mod{k}-r{r}"), Expr::Empty)).collect();
        for r in 0..k {
            let mut alts = Vec::new();
            if r == 0 {
                alts.push(Expr::Empty);
            }
            for d in 0..10u32 {
                let next = (r * 10 + d) % k;
                alts.push(seq(vec![Expr::Literal(vec![b'0' + d as u8]), Expr::Rule(ids[next as usize])]));
            }
            self.g.set_body(ids[r as usize], Expr::Alt(alts));
        }
        let mut first = Vec::new();
        for d in 1..10u32 {
            first.push(seq(vec![Expr::Literal(vec![b'0' + d as u8]), Expr::Rule(ids[(d % k) as usize])]));
        }
        let id = self.add_rule(&name, Expr::Alt(first));
        Expr::Rule(id)
    }
}

fn lcm(a: u128, b: u128) -> u128 {
    if a == 0 || b == 0 {
        return 0;
    }
    fn gcd(a: u128, b: u128) -> u128 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let g = gcd(a, b);
    (a / g).checked_mul(b).unwrap_or(0)
}

fn regex_expr(r: String) -> Option<Expr> {
    if r == "[a&&b]" {
        None
    } else {
        Some(Expr::Regex(r.into()))
    }
}
