//! A grammar as llama.cpp's GBNF parser reads it: [`rewrite`] turns any grammar (its regex
//! terminals lowered first, [`crate::lower_regexes`]) into an equivalent one that
//! [`crate::to_gbnf`] prints and llama.cpp accepts.
//!
//! - [`prune`]: GBNF has no way to write an empty language, so the parts that match
//!   nothing go (the language is unchanged);
//! - repetitions fit llama.cpp's limit ([`REPETITION_LIMIT`]): every repeated operand is one
//!   symbol, and large counts are split with helper rules;
//! - the start rule is named `root`, llama.cpp's start rule.
//!
//! ```
//! use stencil_grammar::{llama_cpp, parse_gbnf, to_gbnf};
//! // `dead` derives no string; "a"{0,4500} is over llama.cpp's limit.
//! let g = parse_gbnf(r#"root ::= "a"{0,4500} | "b" dead
//! dead ::= "c" dead"#)?;
//! assert_eq!(
//!     to_gbnf(&llama_cpp::rewrite(&g))?,
//!     "root ::= root-r1{0,3} \"a\"{0,999} | root-r1{4} \"a\"{0,500}\nroot-r1 ::= \"a\"{1000}\n"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{HashMap, HashSet};

use crate::{Expr, Grammar, RuleId};

/// `g` for llama.cpp: [`prune`]d, its repetitions fitted to [`REPETITION_LIMIT`], its
/// start rule named `root` (renaming another rule that holds the name). The language is
/// unchanged. `g`'s regex terminals, if any, stay as they are: lower them first
/// ([`crate::lower_regexes`]), GBNF cannot write them.
pub fn rewrite(g: &Grammar) -> Grammar {
    let mut out = fit_repetitions(&prune(g));
    name_root(&mut out);
    out
}

/// Names the start rule `root` (renaming another rule that holds the name).
fn name_root(g: &mut Grammar) {
    const ROOT: &str = "root";
    if g.rule(g.root).name == ROOT {
        return;
    }
    if let Some(other) = g.rule_id(ROOT) {
        let fresh = (1..).map(|i| format!("{ROOT}-{i}")).find(|n| g.rule_id(n).is_none()).expect("a free name");
        g.rules[other.0 as usize].name = fresh;
    }
    let root = g.root.0 as usize;
    g.rules[root].name = ROOT.to_string();
}

/// `g` without the parts that match nothing (GBNF has no way to write an empty
/// language): rules that derive no string, the alternatives and optional repetitions that
/// need one, and the rules the root no longer reaches. The language is unchanged. (The
/// schema compiler's indented style stops recursive schemas at a nesting depth with such
/// rules.)
///
/// ```
/// use stencil_grammar::{llama_cpp, parse_gbnf, to_gbnf};
/// // `dead` never ends: it derives no string.
/// let g = parse_gbnf(r#"root ::= "x" | "y" dead
/// dead ::= "z" dead"#)?;
/// assert_eq!(to_gbnf(&llama_cpp::prune(&g))?, "root ::= \"x\"\n");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn prune(g: &Grammar) -> Grammar {
    // Productive rules: least fixpoint.
    let mut productive = vec![false; g.rules.len()];
    loop {
        let mut changed = false;
        for (i, rule) in g.rules.iter().enumerate() {
            if !productive[i] && derives(&rule.body, &productive) {
                productive[i] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let bodies: Vec<Option<Expr>> = g
        .rules
        .iter()
        .enumerate()
        .map(|(i, r)| if productive[i] { keep(&r.body, &productive) } else { None })
        .collect();
    // Reachable from the root, in a stable order (rule id order).
    let mut reached = vec![false; g.rules.len()];
    let mut todo = vec![g.root];
    while let Some(id) = todo.pop() {
        let i = id.0 as usize;
        if reached[i] {
            continue;
        }
        reached[i] = true;
        if let Some(body) = &bodies[i] {
            body.for_each_rule(&mut |r| todo.push(r));
        }
    }
    let mut map: HashMap<RuleId, RuleId> = HashMap::new();
    let mut out = Grammar::new();
    for (i, rule) in g.rules.iter().enumerate() {
        if reached[i] && bodies[i].is_some() {
            map.insert(RuleId(i as u32), out.add_rule(rule.name.clone(), Expr::Empty));
        }
    }
    for (i, body) in bodies.into_iter().enumerate() {
        if let (Some(&new), Some(body)) = (map.get(&RuleId(i as u32)), body) {
            out.set_body(new, renumber(body, &map));
        }
    }
    // An unproductive root cannot happen (the schema compiler refuses such schemas): keep
    // it as it is, for the printer to report.
    out.root =
        map.get(&g.root).copied().unwrap_or_else(|| out.add_rule(g.rule(g.root).name.clone(), Expr::Alt(vec![])));
    out
}

/// Whether `e` derives some string, given which rules do.
fn derives(e: &Expr, productive: &[bool]) -> bool {
    match e {
        Expr::Rule(r) => productive[r.0 as usize],
        Expr::Class(c) => !c.is_empty(),
        Expr::Seq(v) => v.iter().all(|x| derives(x, productive)),
        Expr::Alt(v) => v.iter().any(|x| derives(x, productive)),
        Expr::Repeat { expr, min, .. } => *min == 0 || derives(expr, productive),
        Expr::Empty | Expr::Literal(_) | Expr::AnyChar | Expr::Regex(_) | Expr::Token(_) => true,
    }
}

/// `e` without what matches nothing; `None` when nothing is left.
fn keep(e: &Expr, productive: &[bool]) -> Option<Expr> {
    if !derives(e, productive) {
        return None;
    }
    Some(match e {
        Expr::Seq(v) => Expr::Seq(v.iter().map(|x| keep(x, productive)).collect::<Option<Vec<_>>>()?),
        Expr::Alt(v) => {
            let alts: Vec<Expr> = v.iter().filter_map(|x| keep(x, productive)).collect();
            match alts.len() {
                1 => alts.into_iter().next().expect("one alternative"),
                _ => Expr::Alt(alts),
            }
        }
        Expr::Repeat { expr, min, max } => match keep(expr, productive) {
            Some(inner) => Expr::repeat(inner, *min, *max),
            None => Expr::Empty,
        },
        e => e.clone(),
    })
}

fn renumber(e: Expr, map: &HashMap<RuleId, RuleId>) -> Expr {
    match e {
        Expr::Rule(r) => Expr::Rule(map[&r]),
        Expr::Seq(v) => Expr::Seq(v.into_iter().map(|x| renumber(x, map)).collect()),
        Expr::Alt(v) => Expr::Alt(v.into_iter().map(|x| renumber(x, map)).collect()),
        Expr::Repeat { expr, min, max } => Expr::repeat(renumber(*expr, map), min, max),
        e => e,
    }
}

/// llama.cpp expands every repetition `S{m,n}` into copies of `S` and `n - m` helper
/// rules, and refuses a repetition when (symbols generated inside `S`) × (`n`, or `m`
/// when unbounded) reaches [`REPETITION_LIMIT`]; a bounded maximum above the limit
/// silently becomes unbounded. This rewrites `g` into an equivalent grammar that stays
/// clear of both:
/// - sequences lose their empty items, nested sequences and alternations are flattened;
/// - the operand of a repetition that is not a single terminal or rule reference moves
///   into a rule of its own (so it counts as one symbol);
/// - counts at or above the limit are split with helper rules (see `Fit::split_counts`).
fn fit_repetitions(g: &Grammar) -> Grammar {
    fit_counts(g, MAX_COUNT, CHUNK)
}

/// [`fit_repetitions`] with counts up to `max_count` left alone and larger ones split into
/// chunks of `chunk` (`chunk <= max_count`).
fn fit_counts(g: &Grammar, max_count: u32, chunk: u32) -> Grammar {
    let mut out = g.clone();
    let mut names: HashSet<String> = out.rules.iter().map(|r| r.name.clone()).collect();
    let mut i = 0;
    // Rules added along the way are visited too.
    while i < out.rules.len() {
        let body = std::mem::replace(&mut out.rules[i].body, Expr::Empty);
        let base = out.rules[i].name.clone();
        let mut ctx = Fit { g: &mut out, names: &mut names, base, max_count, chunk };
        let body = ctx.expr(body);
        out.rules[i].body = body;
        i += 1;
    }
    out
}

/// The largest product llama.cpp's parser refuses (`MAX_REPETITION_THRESHOLD`): a repetition
/// is accepted while (symbols in the operand) × (count) stays below it.
pub const REPETITION_LIMIT: u32 = 2000;

/// Counts at most this are left alone; larger ones are split into chunks of [`CHUNK`].
const MAX_COUNT: u32 = REPETITION_LIMIT - 1;
const CHUNK: u32 = 1000;

struct Fit<'a> {
    g: &'a mut Grammar,
    names: &'a mut HashSet<String>,
    /// The rule being rewritten: helper rules are named after it.
    base: String,
    max_count: u32,
    chunk: u32,
}

impl Fit<'_> {
    fn new_rule(&mut self, body: Expr) -> Expr {
        let name = (1..).map(|i| format!("{}-r{i}", self.base)).find(|n| !self.names.contains(n)).expect("a free name");
        self.names.insert(name.clone());
        Expr::Rule(self.g.add_rule(name, body))
    }

    fn expr(&mut self, e: Expr) -> Expr {
        match e {
            Expr::Seq(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match self.expr(item) {
                        Expr::Empty => {}
                        Expr::Seq(inner) => out.extend(inner),
                        item => out.push(item),
                    }
                }
                match out.len() {
                    0 => Expr::Empty,
                    1 => out.pop().expect("one item"),
                    _ => Expr::Seq(out),
                }
            }
            Expr::Alt(alts) => {
                let mut out = Vec::with_capacity(alts.len());
                for alt in alts {
                    match self.expr(alt) {
                        Expr::Alt(inner) => out.extend(inner),
                        alt => out.push(alt),
                    }
                }
                match out.len() {
                    1 => out.pop().expect("one alternative"),
                    _ => Expr::Alt(out),
                }
            }
            Expr::Repeat { expr, min, max } => {
                let operand = match self.expr(*expr) {
                    Expr::Empty => return Expr::Empty,
                    e @ (Expr::Literal(_) | Expr::Class(_) | Expr::AnyChar | Expr::Rule(_) | Expr::Token(_)) => e,
                    e => self.new_rule(e),
                };
                self.split_counts(operand, min, max)
            }
            e => e,
        }
    }

    /// `x{min,max}` for a one-symbol `x`, with every count at most `max_count` (`c` is
    /// `chunk` below):
    /// - `x{m,n}` is `x{m} x{0,n-m}` (and `x{m,}` is `x{m} x*`) when a count is too large;
    /// - `x{m}` for a large `m` is `h{m / c} x{m % c}` with `h ::= x{c}`;
    /// - `x{0,d}` for a large `d = q·c + r` is `h{0,q-1} x{0,c-1} | h{q} x{0,r}`: the first
    ///   alternative gives the counts below `q·c`, the second the others, so the rewrite adds
    ///   no ambiguity.
    fn split_counts(&mut self, x: Expr, min: u32, max: Option<u32>) -> Expr {
        let max_count = self.max_count;
        let fits = |n: u32| n <= max_count;
        match (min, max) {
            (0, Some(0)) => return Expr::Empty,
            (1, Some(1)) => return x,
            (m, Some(n)) if fits(m) && fits(n) => return Expr::repeat(x, m, max),
            (m, None) if fits(m) => return Expr::repeat(x, m, None),
            _ => {}
        }
        if min > 0 {
            let required = self.exactly(x.clone(), min);
            let rest = match max {
                None => Expr::star(x),
                Some(n) => self.split_counts(x, 0, Some(n - min)),
            };
            return self.expr(Expr::Seq(vec![required, rest]));
        }
        let d = max.expect("bounded: x{0,} fits");
        let c = self.chunk;
        let (q, r) = (d / c, d % c);
        let h = self.new_rule(Expr::repeat(x.clone(), c, Some(c)));
        let below = vec![self.split_counts(h.clone(), 0, Some(q - 1)), self.split_counts(x.clone(), 0, Some(c - 1))];
        let above = vec![self.exactly(h, q), self.split_counts(x, 0, Some(r))];
        self.expr(Expr::Alt(vec![Expr::Seq(below), Expr::Seq(above)]))
    }

    /// `x{m}` with every count at most `max_count`.
    fn exactly(&mut self, x: Expr, m: u32) -> Expr {
        if m <= self.max_count {
            return self.split_counts(x, m, Some(m));
        }
        let c = self.chunk;
        let h = self.new_rule(Expr::repeat(x.clone(), c, Some(c)));
        let chunks = self.exactly(h, m / c);
        let rest = self.split_counts(x, m % c, Some(m % c));
        self.expr(Expr::Seq(vec![chunks, rest]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::Recognizer;

    fn one_rule(body: Expr) -> Grammar {
        let mut g = Grammar::new();
        g.root = g.add_rule("root", body);
        g
    }

    /// Every repetition in `g` is of one symbol and has counts of at most `max_count`.
    fn assert_fits(g: &Grammar, max_count: u32) {
        fn walk(e: &Expr, max_count: u32) {
            match e {
                Expr::Repeat { expr, min, max } => {
                    assert!(
                        matches!(**expr, Expr::Literal(_) | Expr::Class(_) | Expr::AnyChar | Expr::Rule(_)),
                        "operand not one symbol: {e:?}"
                    );
                    assert!(*min <= max_count && !max.is_some_and(|n| n > max_count), "{e:?}");
                }
                Expr::Seq(v) => {
                    assert!(!v.iter().any(|x| matches!(x, Expr::Empty | Expr::Seq(_))), "{e:?}");
                    v.iter().for_each(|x| walk(x, max_count))
                }
                Expr::Alt(v) => v.iter().for_each(|x| walk(x, max_count)),
                _ => {}
            }
        }
        g.rules.iter().for_each(|r| walk(&r.body, max_count));
    }

    /// The splitting, with small numbers (counts above 9 split in chunks of 4) so that the
    /// reference recognizer can check every count.
    #[test]
    fn large_counts_are_split_without_changing_the_language() {
        let cases = [
            (0, Some(45)),
            (25, Some(26)),
            (9, Some(9)),
            (10, Some(10)),
            (31, None),
            (0, Some(10)),
            (3, Some(50)),
            (0, Some(200)),
            (101, Some(150)),
        ];
        for (min, max) in cases {
            let g = one_rule(Expr::repeat(Expr::literal("ab"), min, max));
            let fit = fit_counts(&g, 9, 4);
            assert_fits(&fit, 9);
            let (r1, r2) = (Recognizer::new(&g).unwrap(), Recognizer::new(&fit).unwrap());
            for n in 0..=210 {
                let s = "ab".repeat(n);
                assert_eq!(r1.matches(s.as_bytes()), r2.matches(s.as_bytes()), "ab{{{min},{max:?}}} on {n} ab's");
            }
            assert!(!r2.matches(b"aba"));
            crate::to_gbnf(&fit).unwrap();
        }
        // The real limits: the shape of the output.
        let fit = fit_repetitions(&one_rule(Expr::repeat(Expr::literal("a"), 0, Some(4500))));
        assert_fits(&fit, MAX_COUNT);
        assert_eq!(
            crate::to_gbnf(&fit).unwrap(),
            "root ::= root-r1{0,3} \"a\"{0,999} | root-r1{4} \"a\"{0,500}\nroot-r1 ::= \"a\"{1000}\n"
        );
    }

    #[test]
    fn groups_under_repetitions_become_rules_and_empty_items_go() {
        let g = one_rule(Expr::seq([
            Expr::Empty,
            Expr::repeat(Expr::seq([Expr::literal("x"), Expr::optional(Expr::literal("y"))]), 0, Some(400)),
            Expr::seq([Expr::Empty, Expr::literal("z")]),
        ]));
        let fit = fit_repetitions(&g);
        assert_fits(&fit, MAX_COUNT);
        assert_eq!(crate::to_gbnf(&fit).unwrap(), "root ::= root-r1{0,400} \"z\"\nroot-r1 ::= \"x\" \"y\"?\n");
        let (r1, r2) = (Recognizer::new(&g).unwrap(), Recognizer::new(&fit).unwrap());
        for s in ["z", "xz", "xyxz", "xyyz", "y", ""] {
            assert_eq!(r1.matches(s.as_bytes()), r2.matches(s.as_bytes()), "{s:?}");
        }
    }

    #[test]
    fn rules_that_match_nothing_are_pruned() {
        // root ::= a | "x" b? ; a ::= "y" dead ; b ::= dead | "z" ; dead ::= <nothing> ; unused ::= "u"
        let mut g = Grammar::new();
        let dead = g.add_rule("dead", Expr::Alt(vec![]));
        let a = g.add_rule("a", Expr::seq([Expr::literal("y"), Expr::Rule(dead)]));
        let b = g.add_rule("b", Expr::alt([Expr::Rule(dead), Expr::literal("z")]));
        g.add_rule("unused", Expr::literal("u"));
        let c = g.add_rule("c", Expr::star(Expr::Rule(a)));
        g.root = g.add_rule(
            "root",
            Expr::alt([Expr::Rule(a), Expr::seq([Expr::literal("x"), Expr::optional(Expr::Rule(b)), Expr::Rule(c)])]),
        );
        let p = prune(&g);
        assert_eq!(crate::to_gbnf(&p).unwrap(), "b ::= \"z\"\nc ::= ()\nroot ::= \"x\" b? c\n");
        assert_eq!(p.rule(p.root).name, "root");
        let (r1, r2) = (Recognizer::new(&g).unwrap(), Recognizer::new(&p).unwrap());
        for s in ["x", "xz", "y", "xzz", "u", ""] {
            assert_eq!(r1.matches(s.as_bytes()), r2.matches(s.as_bytes()), "{s:?}");
        }
    }

    #[test]
    fn the_start_rule_is_named_root() {
        let mut g = Grammar::new();
        let other = g.add_rule("root", Expr::literal("a"));
        g.root = g.add_rule("value", Expr::Rule(other));
        name_root(&mut g);
        assert_eq!(g.rule(g.root).name, "root");
        assert_eq!(g.rule(other).name, "root-1");
        assert_eq!(crate::to_gbnf(&g).unwrap(), "root-1 ::= \"a\"\nroot ::= root-1\n");
    }
}
