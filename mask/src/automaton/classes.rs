//! Byte classes: bytes that no edge tells apart share a class, so a row of the table has
//! one entry per class instead of 256.
//!
//! Each rule gets its own classes ([`byte_classes`] of its NFA, then
//! [`RuleDfa::merge_equal_classes`] once it is deterministic), and rules that split the
//! bytes alike share one [`ClassMap`]. The UTF-8 sequences of every non-ASCII plain character
//! ([`NON_ASCII_UTF8`]) are kept per class map as classes, for the text fast paths.
//!
//! Invariant: two bytes in one class move every state of the rule to the same state;
//! classes are numbered from 0 without gaps, and `of_byte` and `bytes` are inverse.

use super::determinize::RuleDfa;
use super::nfa::{Edge, Nfa};
use crate::bytes::{ByteSet, LINE_SEPARATORS};

/// The UTF-8 byte sequences of every non-ASCII plain-text character (all but U+2028 and
/// U+2029, see [`crate::bytes::plain_char`]): their byte ranges, each once, and each
/// sequence as indexes of its ranges.
pub(super) struct NonAsciiUtf8 {
    pub(super) ranges: Vec<(u8, u8)>,
    pub(super) sequences: Vec<Vec<usize>>,
}

pub(super) static NON_ASCII_UTF8: std::sync::LazyLock<NonAsciiUtf8> = std::sync::LazyLock::new(|| {
    let mut ranges: Vec<(u8, u8)> = Vec::new();
    // Every non-ASCII character but the line separators.
    let mut plain =
        regex_syntax::hir::ClassUnicode::new([regex_syntax::hir::ClassUnicodeRange::new('\u{80}', char::MAX)]);
    let separators = LINE_SEPARATORS.map(|c| regex_syntax::hir::ClassUnicodeRange::new(c, c));
    plain.difference(&regex_syntax::hir::ClassUnicode::new(separators));
    let sequences = plain
        .ranges()
        .iter()
        .flat_map(|r| regex_syntax::utf8::Utf8Sequences::new(r.start(), r.end()))
        .map(|seq| {
            seq.as_slice()
                .iter()
                .map(|r| match ranges.iter().position(|&x| x == (r.start, r.end)) {
                    Some(i) => i,
                    None => {
                        ranges.push((r.start, r.end));
                        ranges.len() - 1
                    }
                })
                .collect()
        })
        .collect();
    NonAsciiUtf8 { ranges, sequences }
});

/// A rule's byte classes: bytes that no edge of the rule tells apart share a class.
#[derive(Debug)]
pub(crate) struct ClassMap {
    /// The class of each byte.
    pub of_byte: [u8; 256],
    /// The bytes of each class.
    pub bytes: Vec<ByteSet>,
    /// The classes of the bytes of each range of [`NON_ASCII_UTF8`] (each class once):
    /// range `i`'s are `utf8_classes[utf8_starts[i]..utf8_starts[i + 1]]`. A class need
    /// not be a byte interval (see [`RuleDfa::merge_equal_classes`]).
    utf8_classes: Vec<u8>,
    utf8_starts: Vec<u16>,
}

impl ClassMap {
    pub(super) fn new(of_byte: [u8; 256], n_classes: usize) -> Self {
        let mut bytes = vec![ByteSet::EMPTY; n_classes];
        for b in 0..=255u8 {
            bytes[of_byte[b as usize] as usize].insert(b);
        }
        // Classes numbered in byte order are intervals: a range's are consecutive.
        let intervals = (1..256).fold(true, |ok, b| ok & (of_byte[b].wrapping_sub(of_byte[b - 1]) <= 1));
        let (mut utf8_classes, mut utf8_starts) = (Vec::new(), vec![0u16]);
        for &(lo, hi) in &NON_ASCII_UTF8.ranges {
            if intervals {
                utf8_classes.extend(of_byte[lo as usize]..=of_byte[hi as usize]);
            } else {
                let mut seen = ByteSet::EMPTY;
                for b in lo..=hi {
                    let c = of_byte[b as usize];
                    if !seen.contains(c) {
                        seen.insert(c);
                        utf8_classes.push(c);
                    }
                }
            }
            utf8_starts.push(utf8_classes.len() as u16);
        }
        ClassMap { of_byte, bytes, utf8_classes, utf8_starts }
    }

    /// The classes of the bytes of range `i` of [`NON_ASCII_UTF8`].
    pub(super) fn utf8_range_classes(&self, i: usize) -> &[u8] {
        &self.utf8_classes[self.utf8_starts[i] as usize..self.utf8_starts[i + 1] as usize]
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }
}

/// The byte classes of an NFA's edges: bytes no edge tells apart share a class.
pub(super) fn byte_classes(nfa: &Nfa) -> ([u8; 256], usize) {
    let mut boundary = [false; 257];
    mark_boundaries(&mut boundary, nfa.all_edges());
    classes_of(&boundary)
}

/// Marks where the byte ranges of `edges` start and end (see [`classes_of`]).
pub(super) fn mark_boundaries<'e>(boundary: &mut [bool; 257], edges: impl IntoIterator<Item = &'e Edge>) {
    for e in edges {
        if let Edge::Bytes { lo, hi, .. } = *e {
            boundary[lo as usize] = true;
            boundary[hi as usize + 1] = true;
        }
    }
}

/// Bytes numbered by class, a new class at each boundary (`boundary[b]`: byte `b`
/// starts a class): `(class of each byte, number of classes)`.
pub(super) fn classes_of(boundary: &[bool; 257]) -> ([u8; 256], usize) {
    let mut class = [0u8; 256];
    let mut c = 0usize;
    for b in 0..256 {
        if b > 0 && boundary[b] {
            c += 1;
        }
        class[b] = c as u8;
    }
    (class, c + 1)
}

impl RuleDfa {
    /// Merges the byte classes that every state treats alike (equal columns). The subset
    /// construction starts from the NFA's classes, which tell apart bytes that no state
    /// of the DFA does: a `\S` and a `\s` cut UTF-8 lead bytes differently, and a JSON
    /// string's `\S` automaton has 57 classes where 37 do. Fewer classes make a smaller
    /// table and cheaper minimization; the states and what they accept are the same.
    pub(super) fn merge_equal_classes(&mut self, kept: &mut Vec<usize>) {
        let (n, nc) = (self.n_states(), self.n_classes);
        // A hash of each column, then each class against the classes kept so far.
        let mut hashes = vec![0u64; nc];
        for row in self.trans.chunks_exact(nc) {
            for (h, &t) in hashes.iter_mut().zip(row) {
                *h = (h.rotate_left(5) ^ t as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
            }
        }
        let column_eq = |a: usize, b: usize| (0..n).all(|s| self.trans[s * nc + a] == self.trans[s * nc + b]);
        let mut new_class = [0u8; 256];
        kept.clear();
        for c in 0..nc {
            let same = kept.iter().position(|&k| hashes[k] == hashes[c] && column_eq(k, c));
            new_class[c] = match same {
                Some(k) => k as u8,
                None => {
                    kept.push(c);
                    (kept.len() - 1) as u8
                }
            };
        }
        if kept.len() == nc {
            return;
        }
        let mut merged = Vec::with_capacity(n * kept.len());
        for row in self.trans.chunks_exact(nc) {
            merged.extend(kept.iter().map(|&c| row[c]));
        }
        self.trans = merged;
        self.n_classes = kept.len();
        for c in self.class.iter_mut() {
            *c = new_class[*c as usize];
        }
    }
}

#[cfg(test)]
mod tests {
    /// Merging equal classes keeps every byte's move from every state, and leaves fewer
    /// classes where a Unicode class and its complement cut UTF-8 bytes apart.
    #[test]
    fn merging_equal_classes_keeps_every_move() {
        let src = r#"root ::= ([^ \u1680\u2000-\u200a] [ \u1680\u2000-\u200a]){0,3} "x""#;
        let g = stencil_grammar::parse_gbnf(src).unwrap();
        let mut dfa = super::super::nfa::with_plain_builder(&g, |b| {
            let nfa = b.build_rule(g.root).unwrap();
            super::super::determinize::determinize(
                nfa,
                super::byte_classes(nfa),
                usize::MAX,
                None,
                &mut Default::default(),
            )
            .unwrap()
        });
        let moves = |d: &super::RuleDfa| -> Vec<u32> {
            (0..d.n_states())
                .flat_map(|s| (0..256).map(move |b| d.trans[s * d.n_classes + d.class[b] as usize]))
                .collect()
        };
        let (before, classes) = (moves(&dfa), dfa.n_classes);
        dfa.merge_equal_classes(&mut Vec::new());
        assert_eq!(moves(&dfa), before);
        assert!(dfa.n_classes < classes, "{} classes, {classes} before", dfa.n_classes);
        assert!(dfa.class.iter().all(|&c| (c as usize) < dfa.n_classes));
    }
}
