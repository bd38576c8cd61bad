//! "Any string but these": the escaped contents of a JSON string that is none of a set
//! of excluded strings (an object's declared keys, when other keys are allowed too).
//!
//! One trie of the names, each node with its closing quote, its leaving characters and
//! its next characters side by side, one rule per set of names; the rest of such a
//! string, and its characters that are not plain text, are two rules shared by every
//! such key (`StringRests`). A pattern's keys (or a combination of patterns') less the
//! names they hold are the same trie walked on the language's minimal DFA
//! (`keyset::Product::without_words`): a character that leaves the trie goes on to the
//! rule of the DFA state it reaches, one rule per state, all tail calls, so the engine
//! builds the key back into one automaton.

use crate::emit::{alt, hir_expr, lit, seq};
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
static ANY: LazyLock<Expr> = LazyLock::new(|| hir_expr(length_hir(0, None)));

/// The ends of every "any string but these", as calls of two rules the grammar shares
/// (see [`StringRests::bodies`]). Written in place, every such string would hold its own
/// copy of "anything", and of the escapes and UTF-8 sequences of the characters that are
/// not plain (a fifth of the transition table of a big Kubernetes schema).
pub(crate) struct StringRests {
    /// Any contents, then the closing quote.
    pub any: Expr,
    /// One character that is not plain, then any contents and the closing quote.
    pub other: Expr,
}

impl StringRests {
    /// The bodies of the rules behind [`StringRests::any`] and [`StringRests::other`].
    pub(crate) fn bodies() -> [Expr; 2] {
        let any = seq(vec![ANY.clone(), lit("\"")]);
        [any.clone(), seq(vec![NOT_PLAIN.clone(), any])]
    }
}

/// A JSON string (quotes and escapes included) that is none of `excluded`, as one trie
/// of the excluded strings' characters: at each node, the closing quote (unless the node
/// is an excluded string), a next character of the trie, or a character that leaves the
/// trie and then anything (`rests`).
///
/// ```text
/// ["ab"]  ⇒  " ( " | [^a"] rest | a ( " | [^b"] rest | b ( [^"] rest | other ) | other ) | other )   (roughly)
/// ```
///
/// One copy of the trie, each node's ways on side by side: the walks that stop, leave
/// or take another character written as three tries would make the engine determinize
/// three copies in lockstep (the same language; its minimal automaton is the same).
pub(crate) fn string_not_in(excluded: &[String], rests: &StringRests) -> Expr {
    let mut words: Vec<Vec<char>> = excluded.iter().map(|s| s.chars().collect()).collect();
    words.sort_unstable();
    words.dedup();
    // Characters no excluded string has, spelled the same after any trie node: taken
    // once after "any prefix of the trie" (`rests.other`) rather than at every node (a
    // key's trie node with its own copy of every non-ASCII character makes a big
    // automaton). When the excluded strings are plain ASCII, that is every non-ASCII or
    // escaped character.
    let all_plain = words.iter().flatten().all(|&c| is_plain(c));
    let other = all_plain.then_some(&rests.other);
    seq(vec![lit("\""), node(&words, 0, other, &rests.any)])
}

fn is_plain(c: char) -> bool {
    crate::hirset::class_has(&PLAIN, c)
}

/// The JSON string (quotes and escapes included) of a key language less some of its
/// words ([`crate::keyset::WithoutWords`]): its trie in place, each way out of it a
/// character and then the call of one of `states` (the rules of the DFA's states, each
/// [`ways`] of its state); `None` when no string is left.
pub(crate) fn language_not_in(
    w: &crate::keyset::WithoutWords,
    states: &[Expr],
    other: &mut dyn FnMut(&ClassUnicode, usize) -> Expr,
) -> Option<Expr> {
    Some(seq(vec![lit("\""), ways(&w.root, states, other)?]))
}

/// The rest of a key from a trie node or a DFA state: its closing quote where it may end,
/// a character that leaves for a DFA state (a plain one in place; the others, as
/// `other(class, state)`'s, a shared rule: like [`StringRests::other`], written at every
/// node it would copy the escapes and UTF-8 sequences of those characters there), or a
/// word's next character and its node.
pub(crate) fn ways(
    n: &crate::keyset::TrieNode,
    states: &[Expr],
    other: &mut dyn FnMut(&ClassUnicode, usize) -> Expr,
) -> Option<Expr> {
    let mut ways = Vec::with_capacity(n.exits.len() + n.next.len() + 1);
    if n.ends {
        ways.push(lit("\""));
    }
    for (class, k) in &n.exits {
        let mut plain = class.clone();
        plain.intersect(&PLAIN);
        let mut not_plain = class.clone();
        not_plain.difference(&PLAIN);
        if !plain.ranges().is_empty() {
            ways.push(Expr::Seq(vec![json_char_class(&plain), states[*k].clone()]));
        }
        if !not_plain.ranges().is_empty() {
            ways.push(other(&not_plain, *k));
        }
    }
    for (c, sub) in &n.next {
        let mut spelled = String::new();
        escape_char(*c, &mut spelled);
        ways.extend(self::ways(sub, states, other).map(|e| Expr::Seq(vec![Expr::Literal(spelled.into_bytes()), e])));
    }
    alt(ways)
}

/// One character of `class` as spelled inside a JSON string, then `rest`: the body of
/// [`language_not_in`]'s shared rules for the characters that are not plain.
pub(crate) fn char_then(class: &ClassUnicode, rest: Expr) -> Expr {
    Expr::Seq(vec![json_char_class(class), rest])
}

/// A trie node's children: each next character's escaped spelling and the words below
/// it. `words` (sorted) share their first `depth` characters, so each child's words are
/// a contiguous run.
fn children(words: &[Vec<char>], depth: usize) -> impl Iterator<Item = (String, &[Vec<char>])> {
    let longer = &words[words.iter().take_while(|w| w.len() == depth).count()..];
    longer.chunk_by(move |a, b| a[depth] == b[depth]).map(move |run| {
        let mut spelled = String::new();
        escape_char(run[0][depth], &mut spelled);
        (spelled, run)
    })
}

/// The rest of the string from a trie node whose `words` (sorted) share their first
/// `depth` characters: the closing quote where no word ends here; a character that no
/// word has here, then `any`; or a word's next character and its node. With `other`
/// (every word plain), the character that leaves is a plain one and `other` takes the
/// rest; without, it is any character.
fn node(words: &[Vec<char>], depth: usize, other: Option<&Expr>, any: &Expr) -> Expr {
    // Words end here first (they are sorted); every other one goes on.
    let ending = words.iter().take_while(|w| w.len() == depth).count();
    let mut ways = Vec::with_capacity(3 + (words.len() - ending).min(8));
    if ending == 0 {
        ways.push(lit("\""));
    }
    let here = words.iter().filter(|w| w.len() > depth).map(|w| w[depth]);
    let leave = match other {
        Some(_) => plain_but(here),
        None => {
            let mut leave = ClassUnicode::new([ClassUnicodeRange::new('\0', char::MAX)]);
            leave.difference(&ClassUnicode::new(here.map(|c| ClassUnicodeRange::new(c, c))));
            (!leave.ranges().is_empty()).then(|| json_char_class(&leave))
        }
    };
    if let Some(leave) = leave {
        ways.push(Expr::Seq(vec![leave, any.clone()]));
    }
    ways.extend(other.cloned());
    for (c, sub) in children(words, depth) {
        ways.push(Expr::Seq(vec![Expr::Literal(c.into_bytes()), node(sub, depth + 1, other, any)]));
    }
    alt(ways).unwrap_or_else(|| Expr::Regex(Hir::fail().to_string().into()))
}

/// One [`PLAIN`] character but `these` (themselves plain), as a class; `None` when none is
/// left. The common case of [`json_char_class`], on a bit set (names are mostly ASCII).
fn plain_but(these: impl Iterator<Item = char>) -> Option<Expr> {
    const PLAIN_BITS: u128 =
        (0b11 << 0x20) | (((1 << (0x5C - 0x23)) - 1) << 0x23) | (((1 << (0x7F - 0x5D)) - 1) << 0x5D);
    let left = these.fold(PLAIN_BITS, |bits, c| bits & !(1u128 << c as u32));
    // Runs of set bits, lowest first.
    let (mut ranges, mut rest) = (Vec::new(), left);
    while rest != 0 {
        let lo = rest.trailing_zeros();
        let run = (rest >> lo).trailing_ones();
        ranges.push((lo, lo + run - 1));
        rest &= !(u128::MAX >> (128 - run) << lo);
    }
    (!ranges.is_empty()).then(|| Expr::Class(CharClass::new(ranges)))
}

/// One character of `class` as spelled inside a JSON string: a plain class when none
/// needs an escape (nothing for the engine to parse), else the regex of its spellings.
fn json_char_class(class: &ClassUnicode) -> Expr {
    let plain = |r: &ClassUnicodeRange| PLAIN.ranges().iter().any(|p| p.start() <= r.start() && r.end() <= p.end());
    if class.ranges().iter().all(plain) {
        Expr::Class(CharClass::new(class.ranges().iter().map(|r| (r.start() as u32, r.end() as u32))))
    } else {
        hir_expr(class_hir(class))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bit-set path agrees with the class difference it stands for.
    #[test]
    fn plain_but_is_the_class_difference() {
        let cases: [&str; 5] = ["", "a", "az~ ", "!#[]", "abcdefghijklmnopqrstuvwxyz0123456789"];
        let every_plain: String = (' '..='~').filter(|&c| is_plain(c)).collect();
        for these in cases.iter().copied().chain([every_plain.as_str()]) {
            let mut expected = PLAIN.clone();
            expected.difference(&ClassUnicode::new(these.chars().map(|c| ClassUnicodeRange::new(c, c))));
            let expected = (!expected.ranges().is_empty()).then(|| json_char_class(&expected));
            assert_eq!(plain_but(these.chars()), expected, "plain but {these:?}");
        }
    }
}
