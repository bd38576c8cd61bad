//! Free text that contains none of some strings, exactly, as grammar rules.
//!
//! "Any text without `</think>`", or the free text of a `triggered_tags` (text until a
//! trigger, which opens a tag) are regular languages: the Aho–Corasick automaton of the
//! strings, read character by character, is their DFA. [`TextDfa`] builds it over
//! characters (the strings' characters one column each, every other character one column);
//! [`TextDfa::write`] writes it out as one grammar rule per state, all tail calls, which the
//! engine builds back into one automaton whose loop over ordinary characters keeps its
//! plain-text fast paths. A count of characters (`max_chars`) multiplies the states by the
//! count.
//!
//! Semantics: a state is the longest suffix of the text read that is a prefix of one of the
//! strings. Reading a character that completes an excluded string (as a suffix of the text,
//! however it overlaps others) is impossible; one that completes a trigger (and no excluded
//! string) leaves the free text: the caller's continuation for that trigger follows (the
//! longest trigger when several end there). The free text may end in any state.
//!
//! ```
//! use stencil_grammar::{Expr, Grammar};
//! use stencil_structural::text::TextDfa;
//! let dfa = TextDfa::new(&["</think>".to_string()], &[]);
//! let mut g = Grammar::new();
//! let root = dfa.write(&mut g, "free", None, &mut |_, _| unreachable!()).unwrap();
//! g.root = root;
//! let r = stencil_grammar::reference::Recognizer::new(&g).unwrap();
//! assert!(r.matches(b"let me think </thin"));
//! assert!(!r.matches(b"done</think> more"));
//! ```

use rustc_hash::FxHashMap;
use stencil_grammar::{CharClass, Expr, Grammar, RuleId, MAX_CODE_POINT};

/// Where a character leads from a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    State(u32),
    /// Completes trigger `i` (its index in the triggers given).
    Trigger(u32),
    /// Completes an excluded string.
    Dead,
}

/// The Aho–Corasick DFA of excluded strings and triggers, over character columns.
#[derive(Clone, Debug)]
pub struct TextDfa {
    /// Column `c` < `chars.len()` is the character `chars[c]`; the last column is every
    /// other character.
    chars: Vec<char>,
    /// `next[s * n_cols + c]`.
    next: Vec<Target>,
    n_states: usize,
}

impl TextDfa {
    /// The DFA of free text without `excludes` in which `triggers` leave the text.
    /// Empty strings are ignored.
    pub fn new(excludes: &[String], triggers: &[String]) -> TextDfa {
        let mut chars: Vec<char> = excludes.iter().chain(triggers).flat_map(|s| s.chars()).collect();
        chars.sort_unstable();
        chars.dedup();
        let col: FxHashMap<char, usize> = chars.iter().enumerate().map(|(i, &c)| (c, i)).collect();
        let n_cols = chars.len() + 1;
        // The trie: node 0 is the root; `out` is the pattern ending exactly there.
        let mut child: Vec<Vec<Option<u32>>> = vec![vec![None; n_cols]];
        let mut depth = vec![0usize];
        // (is_excluded, trigger index, length) of the pattern ending at the node.
        let mut ends: Vec<Option<(bool, u32)>> = vec![None];
        let patterns = excludes
            .iter()
            .map(|s| (s, true, 0u32))
            .chain(triggers.iter().enumerate().map(|(i, s)| (s, false, i as u32)));
        for (s, excluded, index) in patterns {
            if s.is_empty() {
                continue;
            }
            let mut node = 0usize;
            for ch in s.chars() {
                let c = col[&ch];
                node = match child[node][c] {
                    Some(n) => n as usize,
                    None => {
                        child.push(vec![None; n_cols]);
                        depth.push(depth[node] + 1);
                        ends.push(None);
                        let n = child.len() - 1;
                        child[node][c] = Some(n as u32);
                        n
                    }
                };
            }
            // An excluded string wins over a trigger spelled the same.
            ends[node] = match ends[node] {
                Some((true, _)) => Some((true, 0)),
                _ => Some((excluded, index)),
            };
        }
        // Breadth-first: failure links, the output of each node (an excluded string ending
        // anywhere in its suffix chain makes it dead; else the longest trigger), and the
        // full transition rows.
        let n = child.len();
        let mut fail = vec![0usize; n];
        let mut out: Vec<Option<(bool, u32)>> = ends.clone();
        let mut delta = vec![0u32; n * n_cols];
        let mut order = vec![0usize];
        let mut head = 0;
        while head < order.len() {
            let u = order[head];
            head += 1;
            if u != 0 {
                let f = fail[u];
                out[u] = match (ends[u], out[f]) {
                    (Some((true, _)), _) | (_, Some((true, _))) => Some((true, 0)),
                    (Some(e), _) => Some(e),
                    (None, o) => o,
                };
            }
            for c in 0..n_cols {
                let fallback = if u == 0 { 0 } else { delta[fail[u] * n_cols + c] };
                match child[u][c] {
                    Some(v) => {
                        fail[v as usize] = fallback as usize;
                        delta[u * n_cols + c] = v;
                        order.push(v as usize);
                    }
                    None => delta[u * n_cols + c] = fallback,
                }
            }
        }
        // Live states are the nodes without output; number them in breadth-first order.
        let mut number = vec![u32::MAX; n];
        let mut n_states = 0u32;
        for &u in &order {
            if out[u].is_none() {
                number[u] = n_states;
                n_states += 1;
            }
        }
        let mut next = Vec::with_capacity(n_states as usize * n_cols);
        for &u in &order {
            if out[u].is_some() {
                continue;
            }
            for c in 0..n_cols {
                let v = delta[u * n_cols + c] as usize;
                next.push(match out[v] {
                    None => Target::State(number[v]),
                    Some((true, _)) => Target::Dead,
                    Some((false, t)) => Target::Trigger(t),
                });
            }
        }
        TextDfa { chars, next, n_states: n_states as usize }
    }

    /// Number of states (without a count).
    pub fn n_states(&self) -> usize {
        self.n_states
    }

    fn n_cols(&self) -> usize {
        self.chars.len() + 1
    }

    /// The characters of a set of columns, as a class.
    fn class(&self, cols: &[usize]) -> Expr {
        let other = self.chars.len();
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        if cols.contains(&other) {
            // Every character but the strings' own, less those columns not in `cols`.
            let mut lo = 0u32;
            for (i, &ch) in self.chars.iter().enumerate() {
                let c = ch as u32;
                if c > lo {
                    ranges.push((lo, c - 1));
                }
                if cols.contains(&i) {
                    ranges.push((c, c));
                }
                lo = c + 1;
            }
            if lo <= MAX_CODE_POINT {
                ranges.push((lo, MAX_CODE_POINT));
            }
        } else {
            ranges.extend(cols.iter().map(|&c| (self.chars[c] as u32, self.chars[c] as u32)));
        }
        if let [(lo, hi)] = ranges[..] {
            if lo == hi {
                return Expr::Literal(char::from_u32(lo).map(|c| c.to_string().into_bytes()).unwrap_or_default());
            }
        }
        Expr::Class(CharClass::new(ranges))
    }

    /// Writes the DFA as rules named `{name}-{state}` (with a count, `{name}-{state}-{k}`),
    /// and returns the start state's rule. `on_trigger(i, g)` gives what follows a character
    /// that completes trigger `i` (it may add rules). With `max_chars`, at most that many
    /// characters (the characters of a trigger count, what follows it does not).
    ///
    /// # Errors
    ///
    /// The number of rules a count needs, when it passes `max_rules`.
    pub fn write(
        &self,
        g: &mut Grammar,
        name: &str,
        max_chars: Option<(u32, usize)>,
        on_trigger: &mut dyn FnMut(u32, &mut Grammar) -> Expr,
    ) -> Result<RuleId, u64> {
        let layers = match max_chars {
            None => 1usize,
            Some((n, max_rules)) => {
                let need = (n as u64 + 1) * self.n_states as u64;
                if need > max_rules as u64 {
                    return Err(need);
                }
                n as usize + 1
            }
        };
        let first = g.rules.len() as u32;
        let rule = |s: usize, k: usize| RuleId(first + (k * self.n_states + s) as u32);
        for k in 0..layers {
            for s in 0..self.n_states {
                let label = if max_chars.is_some() { format!("{name}-{s}-{k}") } else { format!("{name}-{s}") };
                g.add_rule(label, Expr::Empty);
            }
        }
        let n_cols = self.n_cols();
        let mut triggered: FxHashMap<u32, Expr> = FxHashMap::default();
        for k in 0..layers {
            let last = max_chars.is_some() && k + 1 == layers;
            for s in 0..self.n_states {
                let mut alts = vec![Expr::Empty];
                if !last {
                    // Group the columns by target.
                    let mut groups: Vec<(Target, Vec<usize>)> = Vec::new();
                    for c in 0..n_cols {
                        let t = self.next[s * n_cols + c];
                        if t == Target::Dead {
                            continue;
                        }
                        match groups.iter_mut().find(|(g, _)| *g == t) {
                            Some((_, v)) => v.push(c),
                            None => groups.push((t, vec![c])),
                        }
                    }
                    let nk = if max_chars.is_some() { k + 1 } else { 0 };
                    for (t, cols) in groups {
                        let class = self.class(&cols);
                        let then = match t {
                            Target::State(q) => Expr::Rule(rule(q as usize, nk)),
                            Target::Trigger(i) => triggered.entry(i).or_insert_with(|| on_trigger(i, g)).clone(),
                            Target::Dead => continue,
                        };
                        alts.push(Expr::seq([class, then]));
                    }
                }
                let body = if alts.len() == 1 { Expr::Empty } else { Expr::Alt(alts) };
                g.set_body(rule(s, k), body);
            }
        }
        Ok(rule(0, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stencil_grammar::reference::Recognizer;

    fn grammar(excludes: &[&str], triggers: &[&str], max_chars: Option<u32>) -> Grammar {
        let ex: Vec<String> = excludes.iter().map(|s| s.to_string()).collect();
        let tr: Vec<String> = triggers.iter().map(|s| s.to_string()).collect();
        let dfa = TextDfa::new(&ex, &tr);
        let mut g = Grammar::new();
        let root = dfa
            .write(&mut g, "t", max_chars.map(|n| (n, 100_000)), &mut |i, _| Expr::literal(&format!("#{i}")))
            .unwrap();
        g.root = root;
        g
    }

    /// The languages against their definition, on every string over a small alphabet.
    #[test]
    fn languages_equal_their_definition() {
        let cases: &[(&[&str], &[&str])] =
            &[(&["ab"], &[]), (&["abc", "b"], &[]), (&["aa"], &["ab"]), (&[], &["aba", "ba"]), (&["ca"], &["abc"])];
        for (ex, tr) in cases {
            let g = grammar(ex, tr, None);
            let r = Recognizer::new(&g).unwrap();
            let alphabet = ['a', 'b', 'c'];
            let mut words = vec![String::new()];
            let mut frontier = vec![String::new()];
            for _ in 0..6 {
                frontier = frontier.iter().flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}"))).collect();
                words.extend(frontier.iter().cloned());
            }
            for w in &words {
                // Free text alone: no excluded string and no trigger occurs.
                let free = !ex.iter().chain(tr.iter()).any(|p| w.contains(p));
                assert_eq!(r.matches(w.as_bytes()), free, "{ex:?} {tr:?} {w:?}");
                // Free text then a trigger: the first occurrence of any string ends the word
                // and is a trigger (the longest one ending there).
                for (i, t) in tr.iter().enumerate() {
                    let full = format!("{w}{t}");
                    let first_end =
                        (1..=full.len()).find(|&e| ex.iter().chain(tr.iter()).any(|p| full[..e].ends_with(p))).unwrap();
                    let longest = tr
                        .iter()
                        .enumerate()
                        .filter(|(_, p)| full.ends_with(*p))
                        .max_by_key(|(_, p)| p.len())
                        .map(|(j, _)| j);
                    let expect = first_end == full.len() && !ex.iter().any(|p| full.ends_with(p)) && longest == Some(i);
                    let text = format!("{full}#{i}");
                    assert_eq!(r.matches(text.as_bytes()), expect, "{ex:?} {tr:?} {text:?}");
                }
            }
        }
    }

    #[test]
    fn counts_characters() {
        let g = grammar(&["</t>"], &[], Some(3));
        let r = Recognizer::new(&g).unwrap();
        assert!(r.matches("</é".as_bytes()));
        assert!(!r.matches(b"abcd"));
        assert!(!r.matches(b"</t>"));
        assert!(r.matches(b""));
    }
}
