//! Rules called only in tail position, built into their callers' automata.
//!
//! A schema writes an object's members as a chain of rules, one per declared property
//! (and whether a member came before): `obj-3 ::= "," key-kind ":" v obj-4 | obj-4`.
//! Each link calls the next one last. Built apart, every link is a rule with its own
//! automaton, and the parser predicts down the chain at every key. But a call in tail
//! position needs no return: it is an ε edge into the callee's body, whose end is the
//! caller's end. So a rule that is only ever called last is built into the automaton of
//! the rule that reaches it, once per automaton however many tail calls lead to it
//! (both uses end where the caller ends, so they can share the callee's states), and the
//! chain becomes one automaton as big as its links together.
//!
//! A fused rule has no automaton of its own, like an inlined one. A rule that several
//! unfused rules reach through tail calls is built into each of them while the copies
//! are small together ([`MAX_COPIED_SIZE`]: a key's language, written one rule per state,
//! that several objects share, is then one automaton with each object's members, and its
//! text facts see through it); past that it stays a rule.

use super::plan::Calls;
use super::rows::{Rows, StampSet};
use super::split::Rules;
use stencil_grammar::Expr;

/// Which rules to fuse into their tail callers (see the module doc). `inline`: rules
/// expanded in place; `representative`: where a call of each rule goes.
pub(super) fn choose_fused(rules: &Rules, calls: &Calls, inline: &[bool], representative: &[u32]) -> Vec<bool> {
    let n = rules.len();
    let built = |r: usize| !inline[r] && representative[r] == r as u32;
    let mut fused: Vec<bool> =
        (0..n).map(|r| built(r) && r != rules.root.0 as usize && small(&rules[r].body)).collect();
    // Each built rule's tail callees (representatives); a rule called anywhere else, or
    // never, is not fused.
    let mut tail_calls: Rows<u32> = Rows::default();
    let mut called = vec![false; n];
    for r in 0..n {
        if built(r) {
            let mut walk = CallWalk {
                calls,
                inline,
                representative,
                tail: &mut tail_calls.items,
                other: &mut fused,
                called: &mut called,
            };
            walk.rule(r, true);
        }
        tail_calls.end_row();
    }
    for r in 0..n {
        fused[r] &= called[r];
    }
    // Owners: the unfused rules each fused one is built into. A rule several owners reach
    // is copied into each of them while the copies stay small (a key's language, written
    // one rule per state, that several objects share); past that it becomes an owner
    // itself, which changes what the others reach, so again until none.
    const ROUNDS: usize = 8;
    for _ in 0..ROUNDS {
        let mut owners: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut seen = vec![u32::MAX; n];
        let mut stack = Vec::new();
        for root in (0..n).filter(|&r| built(r) && !fused[r]) {
            stack.push(root as u32);
            while let Some(x) = stack.pop() {
                for &t in &tail_calls[x as usize] {
                    if fused[t as usize] && seen[t as usize] != root as u32 {
                        seen[t as usize] = root as u32;
                        owners[t as usize].push(root as u32);
                        stack.push(t);
                    }
                }
            }
        }
        // What each fused rule brings into an automaton: its body and the fused rules it
        // reaches.
        let mut in_group = StampSet::new(n);
        let mut group_size = |t: usize| {
            in_group.clear();
            in_group.insert(t as u32);
            let (mut size, mut stack) = (0, vec![t as u32]);
            while let Some(x) = stack.pop() {
                size += expr_size(&rules[x as usize].body);
                for &c in &tail_calls[x as usize] {
                    if fused[c as usize] && in_group.insert(c) {
                        stack.push(c);
                    }
                }
            }
            size
        };
        // Fused rules no owner reaches (only fused rules call them, in a cycle) stay rules.
        let shared: Vec<usize> = (0..n)
            .filter(|&t| fused[t])
            .filter(|&t| match owners[t].len() {
                0 => true,
                1 => false,
                k => k * group_size(t) > MAX_COPIED_SIZE,
            })
            .collect();
        if shared.is_empty() {
            return fused;
        }
        shared.iter().for_each(|&t| fused[t] = false);
    }
    vec![false; n]
}

/// Expression nodes that copies of a fused rule (and the fused rules it reaches) may add
/// to the automata of its owners together.
const MAX_COPIED_SIZE: usize = 512;

/// Expression nodes in `body`.
fn expr_size(body: &Expr) -> usize {
    match body {
        Expr::Seq(v) | Expr::Alt(v) => 1 + v.iter().map(expr_size).sum::<usize>(),
        Expr::Repeat { expr, .. } => 1 + expr_size(expr),
        _ => 1,
    }
}

/// Whether a rule's body is small and plain enough to copy into its caller's automaton:
/// no regex terminals (patterns stay shared rules) and no long repetitions (counted
/// strings have their own construction, `chain.rs`).
fn small(body: &Expr) -> bool {
    fn size(e: &Expr, budget: &mut usize) -> bool {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        match e {
            Expr::Regex(_) => false,
            Expr::Seq(v) | Expr::Alt(v) => v.iter().all(|x| size(x, budget)),
            Expr::Repeat { expr, min, max } => *min <= 8 && max.is_none_or(|m| m <= 8) && size(expr, budget),
            _ => true,
        }
    }
    size(body, &mut { MAX_FUSED_SIZE })
}

/// Expression nodes a fused rule's body may have.
const MAX_FUSED_SIZE: usize = 64;

/// Goes through one built rule's calls (inlined callees' included, as the NFA builder
/// expands them), noting its tail calls; a call elsewhere marks its callee not fusable.
struct CallWalk<'a> {
    calls: &'a Calls,
    inline: &'a [bool],
    representative: &'a [u32],
    tail: &'a mut Vec<u32>,
    other: &'a mut Vec<bool>,
    called: &'a mut Vec<bool>,
}

impl CallWalk<'_> {
    /// The calls of rule `r`, expanded where the caller is in tail position iff `tail`.
    fn rule(&mut self, r: usize, tail: bool) {
        let calls = self.calls;
        for (&c, &at_end) in calls.callees[r].iter().zip(&calls.tail[r]) {
            let (c, tail) = (c as usize, tail && at_end);
            if self.inline[c] {
                self.rule(c, tail);
            } else {
                let t = self.representative[c];
                self.called[t as usize] = true;
                if tail {
                    self.tail.push(t);
                } else {
                    self.other[t as usize] = false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::nfa::Regexes;
    use super::super::plan::{checked_callees, choose_inlined, representatives};
    use super::{choose_fused, Rules};

    /// `(representative, fused)` per rule name, as `Automaton::compile` decides them.
    fn decide(gbnf: &str) -> Vec<(String, String, bool)> {
        let grammar = stencil_grammar::parse_gbnf(gbnf).unwrap();
        let g = Rules::of(&grammar);
        let calls = checked_callees(g.iter().copied(), g.len(), None, |_, _| {}).unwrap();
        let inline = choose_inlined(&g, &calls.callees, &Regexes::default());
        let representative = representatives(&g, &inline, &calls.callees);
        let fused = choose_fused(&g, &calls, &inline, &representative);
        (0..g.len()).map(|r| (g[r].name.clone(), g[representative[r] as usize].name.clone(), fused[r])).collect()
    }

    fn fused(decisions: &[(String, String, bool)]) -> Vec<&str> {
        decisions.iter().filter(|d| d.2).map(|d| d.0.as_str()).collect()
    }

    // Bodies padded with `()` so that they are too big to inline.
    const PAD: &str = "() () () () () () () ()";

    #[test]
    fn a_chain_of_tail_calls_is_fused_into_the_rule_that_starts_it() {
        let d = decide(&format!(
            r#"
            root ::= "[" obj "]"
            obj ::= {PAD} "{{" m0
            m0 ::= {PAD} ("\"a\":" v m1 | m1)
            m1 ::= {PAD} ("," "\"b\":" v m2 | m2)
            m2 ::= {PAD} "}}"
            v ::= "1" | "[" v "]"
            "#
        ));
        // `obj` is called inside brackets: it stays a rule; `v` is called before more text.
        assert_eq!(fused(&d), ["m0", "m1", "m2"]);
    }

    #[test]
    fn tail_calls_from_two_unfused_rules_copy_a_small_callee_into_both() {
        let d = decide(&format!(
            r#"
            root ::= "<" a ">" | "(" b ")"
            a ::= {PAD} "a" shared
            b ::= {PAD} "b" shared
            shared ::= {PAD} "x" tail
            tail ::= {PAD} "y"
            "#
        ));
        // `shared` and `tail` are built into both `a` and `b`.
        assert_eq!(fused(&d), ["shared", "tail"]);
    }

    #[test]
    fn tail_calls_from_two_unfused_rules_keep_a_big_callee_a_rule() {
        // Seven links of 38 nodes each, reached from two owners: 532 nodes to copy.
        let pad = "() ".repeat(36);
        let links: String = (0..7)
            .map(|i| {
                let next = if i < 6 { format!("t{}", i + 1) } else { String::new() };
                format!("t{i} ::= {pad} \"x\" {next}\n")
            })
            .collect();
        let d = decide(&format!(
            "root ::= \"<\" a \">\" | \"(\" b \")\"\na ::= {PAD} \"a\" t0\nb ::= {PAD} \"b\" t0\n{links}"
        ));
        // `t0` is an owner of its own; the others have one owner, `t0`.
        assert_eq!(fused(&d), ["t1", "t2", "t3", "t4", "t5", "t6"]);
    }

    #[test]
    fn a_call_before_more_text_or_inside_a_repetition_is_not_fused() {
        let d = decide(&format!(
            r#"
            root ::= x "!" | ("<" y)* | "[" z
            x ::= {PAD} "x"
            y ::= {PAD} "y"
            z ::= {PAD} "z" z2
            z2 ::= {PAD} "q" | x
            "#
        ));
        // `z` and `z2` are tail calls of the root; `x` is also called before "!".
        assert_eq!(fused(&d), ["z", "z2"]);
    }

    #[test]
    fn tail_recursion_is_fused_into_its_one_owner() {
        let d = decide(&format!(
            r#"
            root ::= "<" r1
            r1 ::= {PAD} ("a" r1 | "b" r2 | "c")
            r2 ::= {PAD} ("d" r1 | "e")
            "#
        ));
        assert_eq!(fused(&d), ["r1", "r2"]);
    }

    #[test]
    fn chains_that_differ_only_in_their_rules_names_share_one_representative() {
        let d = decide(&format!(
            r#"
            root ::= "[" p0 "," q0 "," r0 "]"
            p0 ::= {PAD} ("\"a\":1" p1 | p1)
            p1 ::= {PAD} ("," "\"b\":2" p2 | p2)
            p2 ::= {PAD} "}}"
            q0 ::= {PAD} ("\"a\":1" q1 | q1)
            q1 ::= {PAD} ("," "\"b\":2" q2 | q2)
            q2 ::= {PAD} "}}"
            r0 ::= {PAD} ("\"a\":1" r1 | r1)
            r1 ::= {PAD} ("," "\"b\":3" r2 | r2)
            r2 ::= {PAD} "}}"
            "#
        ));
        let rep = |name: &str| d.iter().find(|x| x.0 == name).unwrap().1.clone();
        assert_eq!((rep("q0"), rep("q1"), rep("q2")), ("p0".into(), "p1".into(), "p2".into()));
        // `r1` differs (`2` vs `3`), so `r0` does too; their common tail `r2` is `p2`.
        assert_eq!((rep("r0"), rep("r1"), rep("r2")), ("r0".into(), "r1".into(), "p2".into()));
        // `p2` is reached from `p1` and `r1`: two owners (`p0` and `r0`), each with a copy.
        assert_eq!(fused(&d), ["p1", "p2", "r1"]);
    }
}
