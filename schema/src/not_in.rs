//! "Any string but these": the escaped contents of a JSON string that is none of a set
//! of excluded strings (an object's declared keys, when other keys are allowed too).

use crate::compile::{alt, hir_expr, lit, seq};
use crate::escape::{class_hir, escape_char, length_hir};
use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange, Hir};
use std::sync::LazyLock;
use stencil_grammar::{CharClass, Expr};

/// The characters a JSON string holds as themselves: printable ASCII but `"` and `\`.
static PLAIN: LazyLock<ClassUnicode> = LazyLock::new(|| {
    ClassUnicode::new([
        ClassUnicodeRange::new(' ', '!'),
        ClassUnicodeRange::new('#', '['),
        ClassUnicodeRange::new(']', '~'),
    ])
});

/// Any one character that is not [`PLAIN`], spelled.
static NOT_PLAIN: LazyLock<Expr> = LazyLock::new(|| {
    let mut not_plain = PLAIN.clone();
    not_plain.negate();
    json_char_class(&not_plain)
});

/// Any string contents.
static ANY: LazyLock<Expr> = LazyLock::new(|| hir_expr(&length_hir(0, None)));

/// String contents (escaped) of any string except `excluded`, over a trie of the excluded
/// strings' characters: either a walk down the trie that stops at a node that is not an
/// excluded string, or one that leaves the trie by some other character and is followed
/// by anything. "Anything" is written once, in place: a call would make every byte of
/// such a key a two-item Earley step, and one copy per trie node would make its automaton
/// as many times bigger.
///
/// ```text
/// ["ab"]  ⇒  (| a (| b c…)) | (a ([^b] | …) | [^a] …) any*      (roughly)
/// ```
pub(crate) fn string_not_in(excluded: &[String]) -> Expr {
    let mut words: Vec<Vec<char>> = excluded.iter().map(|s| s.chars().collect()).collect();
    words.sort_unstable();
    words.dedup();
    // Characters no excluded string has, spelled the same after any trie node: written
    // once after "any prefix of the trie" rather than at every node (a key's trie node
    // with its own copy of every non-ASCII character makes a big automaton). When the
    // excluded strings are plain ASCII, that is every non-ASCII or escaped character.
    let leaving = if words.iter().flatten().all(|&c| is_plain(c)) {
        let by_plain = leave(&words, 0, &PLAIN);
        let by_shared = seq(vec![prefix(&words, 0), NOT_PLAIN.clone()]);
        alt(by_plain.into_iter().chain([by_shared]).collect())
    } else {
        leave(&words, 0, &ClassUnicode::new([ClassUnicodeRange::new('\0', char::MAX)]))
    };
    let alts = [stop(&words, 0), leaving.map(|l| seq(vec![l, ANY.clone()]))];
    alt(alts.into_iter().flatten().collect()).unwrap_or_else(|| Expr::Regex(Hir::fail().to_string()))
}

fn is_plain(c: char) -> bool {
    crate::hirset::class_has(&PLAIN, c)
}

/// A trie node's children: each next character's escaped spelling and the words below
/// it. `words` (sorted) share their first `depth` characters, so each child's words are
/// a contiguous run.
fn children(words: &[Vec<char>], depth: usize) -> Vec<(String, &[Vec<char>])> {
    let longer = &words[words.iter().take_while(|w| w.len() == depth).count()..];
    longer
        .chunk_by(|a, b| a[depth] == b[depth])
        .map(|run| {
            let mut spelled = String::new();
            escape_char(run[0][depth], &mut spelled);
            (spelled, run)
        })
        .collect()
}

/// Walks down the trie that end at a node that is not an excluded string.
fn stop(words: &[Vec<char>], depth: usize) -> Option<Expr> {
    let mut alts = Vec::new();
    if !words.iter().any(|w| w.len() == depth) {
        alts.push(Expr::Empty);
    }
    for (c, sub) in children(words, depth) {
        if let Some(rest) = stop(sub, depth + 1) {
            alts.push(seq(vec![lit(&c), rest]));
        }
    }
    alt(alts)
}

/// Walks down the trie that leave it by a character among `chars` that no excluded
/// string has there.
fn leave(words: &[Vec<char>], depth: usize, chars: &ClassUnicode) -> Option<Expr> {
    let mut alts = Vec::new();
    for (c, sub) in children(words, depth) {
        if let Some(rest) = leave(sub, depth + 1, chars) {
            alts.push(seq(vec![lit(&c), rest]));
        }
    }
    let here = words.iter().filter(|w| w.len() > depth).map(|w| ClassUnicodeRange::new(w[depth], w[depth]));
    let mut taken = ClassUnicode::new(here);
    taken.negate();
    let mut other = chars.clone();
    other.intersect(&taken);
    if !other.ranges().is_empty() {
        alts.push(json_char_class(&other));
    }
    alt(alts)
}

/// Walks down the trie that stop anywhere.
fn prefix(words: &[Vec<char>], depth: usize) -> Expr {
    let mut alts = vec![Expr::Empty];
    for (c, sub) in children(words, depth) {
        alts.push(seq(vec![lit(&c), prefix(sub, depth + 1)]));
    }
    alt(alts).expect("not empty")
}

/// One character of `class` as spelled inside a JSON string: a plain class when none
/// needs an escape (nothing for the engine to parse), else the regex of its spellings.
fn json_char_class(class: &ClassUnicode) -> Expr {
    let mut needs_escape = class.clone();
    needs_escape.difference(&PLAIN);
    if needs_escape.ranges().is_empty() {
        Expr::Class(CharClass::new(class.ranges().iter().map(|r| (r.start() as u32, r.end() as u32))))
    } else {
        hir_expr(&class_hir(class))
    }
}
