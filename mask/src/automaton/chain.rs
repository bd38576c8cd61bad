//! Long counted repetitions written out as chains, without the subset construction.
//!
//! A rule `a X{m,n} b` (literals around one counted repetition: a JSON string with a
//! large `maxLength` is `"` char{0,n} `"`) has for minimal automaton `n` copies of `X`'s
//! minimal automaton end to end, when `X` is a prefix code (no word of `X` extends
//! another, so the copy a byte belongs to is never in doubt: a JSON string character,
//! escapes and UTF-8 included). The subset construction and minimization find exactly
//! that chain, one state at a time: 70 ms for `maxLength: 5000`. Here it is written
//! out, row by row, from `X`'s rows, for counts of 256 or more that were not split
//! (`split.rs`); the tests check it against the subset construction plus minimization,
//! state for state.

use super::classes::{classes_of, mark_boundaries};
use super::determinize::RuleDfa;
use super::nfa::{Edge, MiniDfa};
use super::rows::EdgeRows;
use super::DEAD;

/// Repetitions shorter than this go through the subset construction like the rest.
pub(super) const CHAIN_MIN_COUNT: u32 = 256;

/// A rule's body as literals around one counted repetition.
pub(super) struct Counted {
    pub prefix: Vec<u8>,
    /// The repeated body's minimal automaton.
    pub body: MiniDfa,
    pub min: u32,
    pub max: u32,
    pub suffix: Vec<u8>,
}

/// The rule's minimal automaton, states numbered prefix first, then copy by copy, then
/// the suffix; `None` when the shape does not allow a chain: the body is not a
/// non-empty prefix code of bytes only (one final state, with no way out), or the
/// suffix's first byte could also continue the body.
pub(super) fn chain_dfa(c: &Counted) -> Option<RuleDfa> {
    let body = &c.body;
    let k = body.finals.len();
    let mut finals = (0..k).filter(|&q| body.finals[q]);
    let (Some(f), None) = (finals.next(), finals.next()) else { return None };
    let bytes_only = body.edges.iter().flatten().all(|e| matches!(e, Edge::Bytes { .. }));
    if f == 0 || !body.edges[f].is_empty() || !bytes_only || c.min > c.max || c.max == 0 {
        return None;
    }
    // Byte classes: the body's edges and the literals' bytes split them.
    let mut boundary = [false; 257];
    mark_boundaries(&mut boundary, body.edges.iter().flatten());
    for &b in c.prefix.iter().chain(&c.suffix) {
        boundary[b as usize] = true;
        boundary[b as usize + 1] = true;
    }
    let (class, nc) = classes_of(&boundary);
    // Each body state but `f` in every copy: its row as (class, body target) pairs.
    let rows: Vec<Vec<(usize, usize)>> = (0..k)
        .map(|q| {
            let mut row = Vec::new();
            for e in &body.edges[q] {
                if let Edge::Bytes { lo, hi, to } = *e {
                    row.extend((class[lo as usize] as usize..=class[hi as usize] as usize).map(|c| (c, to as usize)));
                }
            }
            row
        })
        .collect();
    if let Some(&b0) = c.suffix.first() {
        if rows[0].iter().any(|&(cl, _)| cl == class[b0 as usize] as usize) {
            return None;
        }
    }
    let (a, n, per_copy) = (c.prefix.len(), c.max as usize, k - 1);
    let rank = |q: usize| if q < f { q } else { q - 1 };
    let copy_state = |i: usize, q: usize| (a + i * per_copy + rank(q)) as u32;
    let suffix_state = |j: usize| (a + n * per_copy + j) as u32; // after j ≥ 1 suffix bytes
    let total = a + n * per_copy + 1 + c.suffix.len();
    let mut trans = vec![DEAD; total * nc];
    let mut set = |from: u32, class: usize, to: u32| trans[from as usize * nc + class] = to;
    for (j, &b) in c.prefix.iter().enumerate() {
        let to = if j + 1 < a { (j + 1) as u32 } else { copy_state(0, 0) };
        set(j as u32, class[b as usize] as usize, to);
    }
    for i in 0..n {
        for (q, row) in rows.iter().enumerate().filter(|&(q, _)| q != f) {
            for &(cl, to) in row {
                set(copy_state(i, q), cl, if to == f { copy_state(i + 1, 0) } else { copy_state(i, to) });
            }
        }
    }
    let mut is_final = vec![false; total];
    match c.suffix.split_first() {
        Some((&b0, rest)) => {
            for i in c.min as usize..=n {
                set(copy_state(i, 0), class[b0 as usize] as usize, suffix_state(1));
            }
            for (j, &b) in rest.iter().enumerate() {
                set(suffix_state(j + 1), class[b as usize] as usize, suffix_state(j + 2));
            }
            is_final[total - 1] = true;
        }
        None => (c.min as usize..=n).for_each(|i| is_final[copy_state(i, 0) as usize] = true),
    }
    Some(RuleDfa {
        class,
        n_classes: nc,
        trans,
        is_final,
        calls: EdgeRows::empty(total),
        token_edges: EdgeRows::empty(total),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automaton::classes::byte_classes;
    use crate::automaton::determinize::determinize;
    use crate::automaton::nfa::with_plain_builder;

    /// The root rule of `gbnf` as a chain (when it is one) and through the subset
    /// construction and minimization.
    fn both_ways(gbnf: &str) -> (Option<RuleDfa>, RuleDfa) {
        let g = stencil_grammar::parse_gbnf(gbnf).unwrap();
        with_plain_builder(&g, |b| {
            let chain = b.counted_rule(g.root).unwrap().as_ref().and_then(chain_dfa);
            let nfa = b.build_rule(g.root).unwrap();
            let mut dfa = determinize(nfa, byte_classes(nfa), usize::MAX, None, &mut Default::default()).unwrap();
            dfa.minimize(&mut Default::default());
            (chain, dfa)
        })
    }

    /// Whether `x` and `y` are the same automaton up to state numbering: walked side by
    /// side from their starts over every byte, states pair one to one, with the same
    /// finality and the same dead ends.
    fn isomorphic(x: &RuleDfa, y: &RuleDfa) -> bool {
        let next = |d: &RuleDfa, s: u32, b: usize| d.trans[s as usize * d.n_classes + d.class[b] as usize];
        let (mut x_to_y, mut y_to_x) = (vec![DEAD; x.n_states()], vec![DEAD; y.n_states()]);
        let mut stack = vec![(0u32, 0u32)];
        (x_to_y[0], y_to_x[0]) = (0, 0);
        while let Some((s, t)) = stack.pop() {
            if x.is_final[s as usize] != y.is_final[t as usize] {
                return false;
            }
            for b in 0..256 {
                let (s2, t2) = (next(x, s, b), next(y, t, b));
                if (s2 == DEAD) != (t2 == DEAD) {
                    return false;
                }
                if s2 == DEAD {
                    continue;
                }
                match (x_to_y[s2 as usize], y_to_x[t2 as usize]) {
                    (DEAD, DEAD) => {
                        (x_to_y[s2 as usize], y_to_x[t2 as usize]) = (t2, s2);
                        stack.push((s2, t2));
                    }
                    (a, b) if a == t2 && b == s2 => {}
                    _ => return false,
                }
            }
        }
        x_to_y.iter().all(|&t| t != DEAD) && y_to_x.iter().all(|&s| s != DEAD)
    }

    #[test]
    fn chains_equal_the_minimal_automata() {
        let char = r#"( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )"#;
        for gbnf in [
            format!(r#"root ::= "\"" {char}{{0,300}} "\"""#),
            format!(r#"root ::= "{{\"k\":\"" {char}{{5,260}} "\"}}""#),
            format!(r#"root ::= {char}{{256,256}} "\"""#),
            "root ::= [0-9]{1,256}".to_string(),
            r#"root ::= "x" ( "a" | "bc" | [d-f] "g" ){0,257} "yz""#.to_string(),
        ] {
            let (chain, dfa) = both_ways(&gbnf);
            let chain = chain.unwrap_or_else(|| panic!("{gbnf}: no chain"));
            assert_eq!(chain.n_states(), dfa.n_states(), "{gbnf}");
            assert!(isomorphic(&chain, &dfa), "{gbnf}");
        }
    }

    /// A body with a word that extends another (the copy a byte belongs to is then in
    /// doubt), or a suffix that could continue the body, gets no chain; short counts
    /// neither.
    #[test]
    fn other_shapes_get_no_chain() {
        for gbnf in [
            r#"root ::= "\"" ( "a" | "ab" ){0,300} "\"""#,
            r#"root ::= "\"" [a-z]{0,300} "b""#,
            r#"root ::= "\"" [a-z]{0,100} "\"""#,
            r#"root ::= "\"" [a-z]{0,300} "\"" | "null""#,
        ] {
            assert!(both_ways(gbnf).0.is_none(), "{gbnf}");
        }
    }
}
