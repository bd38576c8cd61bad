//! Small language operations on full-match character languages (`regex-syntax` HIRs without
//! look-arounds): "this language minus a finite set of words", by Brzozowski derivatives
//! along the words' trie, for property names that a pattern shares with declared names
//! where the pattern's DFA is past the key languages' limits (within them,
//! [`crate::keyset::Product::without_words`] does it without copying the language at
//! every node of the trie).

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Repetition};

/// Whether `h` matches the empty string.
pub(crate) fn nullable(h: &Hir) -> bool {
    h.properties().minimum_len() == Some(0)
}

fn is_fail(h: &Hir) -> bool {
    h.properties().minimum_len().is_none()
}

/// Concatenation, `fail` absorbing.
fn cat(a: Hir, b: Hir) -> Hir {
    if is_fail(&a) || is_fail(&b) {
        return Hir::fail();
    }
    Hir::concat(vec![a, b])
}

/// Alternation without the `fail` members.
fn alts(v: Vec<Hir>) -> Hir {
    let v: Vec<Hir> = v.into_iter().filter(|h| !is_fail(h)).collect();
    match v.len() {
        0 => Hir::fail(),
        1 => v.into_iter().next().unwrap(),
        _ => Hir::alternation(v),
    }
}

fn rest_of(v: &[Hir]) -> Hir {
    Hir::concat(v.to_vec())
}

fn decrement(min: u32, max: Option<u32>, sub: &Hir) -> Hir {
    Hir::repetition(Repetition {
        min: min.saturating_sub(1),
        max: max.map(|m| m - 1),
        greedy: true,
        sub: Box::new(sub.clone()),
    })
}

fn unicode_class(c: &Class) -> Option<ClassUnicode> {
    match c {
        Class::Unicode(u) => Some(u.clone()),
        Class::Bytes(b) => b.to_unicode_class(),
    }
}

/// The strings of `h` seen through their first character: a literal's text goes to
/// `literal`, a class to `class` (each says what becomes of the strings starting there);
/// the structure around them is walked the same way for every such operation. `None`:
/// something this module does not handle.
fn by_first_char(h: &Hir, literal: &dyn Fn(&str) -> Hir, class: &dyn Fn(ClassUnicode) -> Hir) -> Option<Hir> {
    let step = |x: &Hir| by_first_char(x, literal, class);
    Some(match h.kind() {
        HirKind::Empty => Hir::fail(),
        HirKind::Literal(lit) => literal(std::str::from_utf8(&lit.0).ok()?),
        HirKind::Class(cls) => class(unicode_class(cls)?),
        HirKind::Repetition(r) => {
            if r.max == Some(0) {
                return Some(Hir::fail());
            }
            cat(step(&r.sub)?, decrement(r.min, r.max, &r.sub))
        }
        HirKind::Capture(cap) => step(&cap.sub)?,
        HirKind::Concat(v) => {
            let first = &v[0];
            let rest = rest_of(&v[1..]);
            let mut out = vec![cat(step(first)?, rest.clone())];
            if nullable(first) {
                out.push(step(&rest)?);
            }
            alts(out)
        }
        HirKind::Alternation(v) => alts(v.iter().map(step).collect::<Option<_>>()?),
        HirKind::Look(_) => return None,
    })
}

/// Whether class `u` has the character `c`.
pub(crate) fn class_has(u: &ClassUnicode, c: char) -> bool {
    u.ranges().iter().any(|r| r.start() <= c && c <= r.end())
}

/// The strings `w` with `c·w` in `h`. `None`: something this module does not handle.
fn derive(h: &Hir, c: char) -> Option<Hir> {
    by_first_char(
        h,
        &|s| s.strip_prefix(c).map_or_else(Hir::fail, |rest| Hir::literal(rest.as_bytes().to_vec())),
        &|u| if class_has(&u, c) { Hir::empty() } else { Hir::fail() },
    )
}

/// The non-empty strings of `h` whose first character is not in `ex`.
fn restrict_first(h: &Hir, ex: &ClassUnicode) -> Option<Hir> {
    by_first_char(
        h,
        &|s| match s.chars().next() {
            Some(c) if !class_has(ex, c) => Hir::literal(s.as_bytes().to_vec()),
            _ => Hir::fail(),
        },
        &|mut u| {
            u.difference(ex);
            if u.ranges().is_empty() {
                Hir::fail()
            } else {
                Hir::class(Class::Unicode(u))
            }
        },
    )
}

/// The number of nodes of `h` (what the HIR size limits count).
pub(crate) fn size(h: &Hir) -> usize {
    match h.kind() {
        HirKind::Repetition(r) => 1 + size(&r.sub),
        HirKind::Capture(c) => 1 + size(&c.sub),
        HirKind::Concat(v) | HirKind::Alternation(v) => 1 + v.iter().map(size).sum::<usize>(),
        _ => 1,
    }
}

/// The strings of the full-match language `h` except `words`; `None` when `h` holds
/// something this does not handle (look-arounds) or the result would pass `max_size`
/// HIR nodes. The result may be `Hir::fail()` (matches nothing).
pub(crate) fn minus_words(h: &Hir, words: &[String], max_size: usize) -> Option<Hir> {
    let words: Vec<Vec<char>> = words.iter().map(|w| w.chars().collect()).collect();
    let mut budget = max_size;
    let out = minus_rec(h, &words, 0, &mut budget)?;
    Some(out)
}

fn minus_rec(h: &Hir, words: &[Vec<char>], depth: usize, budget: &mut usize) -> Option<Hir> {
    let s = size(h);
    if s > *budget {
        return None;
    }
    *budget -= s;
    let terminal = words.iter().any(|w| w.len() == depth);
    let mut children: Vec<char> = words.iter().filter(|w| w.len() > depth).map(|w| w[depth]).collect();
    children.sort_unstable();
    children.dedup();
    let mut out = Vec::new();
    if !terminal && nullable(h) {
        out.push(Hir::empty());
    }
    for &c in &children {
        let d = derive(h, c)?;
        if is_fail(&d) {
            continue;
        }
        let sub: Vec<Vec<char>> = words.iter().filter(|w| w.len() > depth && w[depth] == c).cloned().collect();
        let rest = minus_rec(&d, &sub, depth + 1, budget)?;
        let mut buf = [0u8; 4];
        out.push(cat(Hir::literal(c.encode_utf8(&mut buf).as_bytes().to_vec()), rest));
    }
    let ex = ClassUnicode::new(children.iter().map(|&c| ClassUnicodeRange::new(c, c)));
    out.push(restrict_first(h, &ex)?);
    Some(alts(out))
}

/// Whether `h` surely matches every string (a sufficient check: an unbounded repetition of
/// every character, everything around it nullable).
pub(crate) fn surely_universal(h: &Hir) -> bool {
    match h.kind() {
        HirKind::Repetition(r) => {
            r.min == 0
                && r.max.is_none()
                && matches!(r.sub.kind(), HirKind::Class(c) if unicode_class(c).is_some_and(|u| {
                    u.ranges().len() == 1 && u.ranges()[0].start() == '\0' && u.ranges()[0].end() == char::MAX
                }))
        }
        HirKind::Capture(c) => surely_universal(&c.sub),
        HirKind::Concat(v) => v.iter().all(nullable) && v.iter().any(surely_universal),
        HirKind::Alternation(v) => v.iter().any(surely_universal),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(h: &Hir) -> regex_automata::meta::Regex {
        use regex_syntax::hir::Look;
        regex_automata::meta::Regex::builder()
            .build_from_hir(&Hir::concat(vec![Hir::look(Look::Start), h.clone(), Hir::look(Look::End)]))
            .unwrap()
    }

    #[test]
    fn minus_words_brute_force() {
        let alphabet = ['a', 'b', 'c', '\n'];
        let mut strings = vec![String::new()];
        let mut frontier = vec![String::new()];
        for _ in 0..4 {
            let mut next = Vec::new();
            for s in &frontier {
                for c in alphabet {
                    next.push(format!("{s}{c}"));
                }
            }
            strings.extend(next.iter().cloned());
            frontier = next;
        }
        for p in ["", "^a", "b$", "^[ab]*$", "ab", "^(a|bc)+$", "^.$", "^a{1,2}c?$", "c|^b"] {
            let h = crate::ecma::full_match_hir(p).unwrap();
            for words in [vec!["a"], vec!["", "ab", "abc"], vec!["b", "ba", "cab", "a\nb"], vec!["aaaa", "c"]] {
                let words: Vec<String> = words.into_iter().map(String::from).collect();
                let m = minus_words(&h, &words, 100_000).unwrap();
                let (r0, r) = (re(&h), re(&m));
                for s in &strings {
                    let want = r0.is_match(s) && !words.contains(s);
                    assert_eq!(r.is_match(s), want, "pattern {p:?} minus {words:?} on {s:?}");
                }
            }
            assert_eq!(surely_universal(&h), p.is_empty(), "{p:?}");
        }
    }
}
