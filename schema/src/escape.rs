//! From languages over decoded string characters to languages over the JSON text of the
//! string's contents: every character becomes its canonical (serde_json) spelling.

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Repetition};

/// serde_json's spelling of `c` inside a string literal.
pub(crate) fn escape_char(c: char, out: &mut String) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
        c => out.push(c),
    }
}

/// serde_json's JSON text of a string (with the quotes).
pub(crate) fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        escape_char(c, &mut out);
    }
    out.push('"');
    out
}

/// Characters spelled as themselves.
fn plain_ranges() -> Vec<ClassUnicodeRange> {
    vec![ClassUnicodeRange::new(' ', '!'), ClassUnicodeRange::new('#', '['), ClassUnicodeRange::new(']', char::MAX)]
}

thread_local! {
    /// [`class_hir`]'s answers during one schema compile.
    static CLASS_CACHE: std::cell::RefCell<rustc_hash::FxHashMap<Vec<(char, char)>, Hir>> = Default::default();
}

/// Forgets [`class_hir`]'s answers: each compile starts afresh (and its time is its own).
pub(crate) fn reset_class_cache() {
    CLASS_CACHE.with(|cache| cache.borrow_mut().clear());
}

/// The escaped-text language of one class of characters (remembered until the next
/// [`reset_class_cache`]: a schema asks for the same few classes, "any character" first,
/// many times).
pub(crate) fn class_hir(class: &ClassUnicode) -> Hir {
    CLASS_CACHE.with(|cache| {
        let key: Vec<(char, char)> = class.ranges().iter().map(|r| (r.start(), r.end())).collect();
        if let Some(h) = cache.borrow().get(&key) {
            return h.clone();
        }
        let h = build_class_hir(class);
        cache.borrow_mut().insert(key, h.clone());
        h
    })
}

fn build_class_hir(class: &ClassUnicode) -> Hir {
    let mut plain = ClassUnicode::new(plain_ranges());
    plain.intersect(class);
    let mut alts = Vec::new();
    if !plain.ranges().is_empty() {
        alts.push(Hir::class(Class::Unicode(plain)));
    }
    // The escaped ones: `"`, `\`, and control characters, written as one trie.
    let mut escaped: Vec<Vec<u8>> = Vec::new();
    for r in class.ranges() {
        let (lo, hi) = (r.start() as u32, r.end() as u32);
        let specials = ['"', '\\'].into_iter().filter(|&c| (lo..=hi).contains(&(c as u32)));
        for c in (lo..=hi.min(0x1F)).filter_map(char::from_u32).chain(specials) {
            let mut s = String::new();
            escape_char(c, &mut s);
            escaped.push(s.into_bytes());
        }
    }
    escaped.sort_unstable();
    escaped.dedup();
    if !escaped.is_empty() {
        alts.push(ascii_trie(&escaped));
    }
    match alts.len() {
        0 => Hir::fail(),
        1 => alts.pop().unwrap(),
        _ => Hir::alternation(alts),
    }
}

/// The alternation of sorted ASCII `words`, common prefixes written once and last bytes
/// gathered into classes (`\u000a|\u000b` becomes `\u000[ab]`), so that automata built
/// from it stay small.
fn ascii_trie(words: &[Vec<u8>]) -> Hir {
    let mut alts = Vec::new();
    let mut last_bytes = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let Some(&b) = words[i].first() else {
            alts.push(Hir::empty());
            i += 1;
            continue;
        };
        let end = i + words[i..].iter().take_while(|w| w.first() == Some(&b)).count();
        let tails: Vec<Vec<u8>> = words[i..end].iter().map(|w| w[1..].to_vec()).collect();
        if tails.iter().all(Vec::is_empty) {
            last_bytes.push(ClassUnicodeRange::new(b as char, b as char));
        } else {
            alts.push(Hir::concat(vec![Hir::literal([b]), ascii_trie(&tails)]));
        }
        i = end;
    }
    if !last_bytes.is_empty() {
        alts.push(Hir::class(Class::Unicode(ClassUnicode::new(last_bytes))));
    }
    match alts.len() {
        0 => Hir::fail(),
        1 => alts.pop().unwrap(),
        _ => Hir::alternation(alts),
    }
}

/// Rewrites a character-level `hir` into the language of its strings' escaped spellings.
pub(crate) fn escape_hir(h: &Hir) -> Result<Hir, String> {
    Ok(match h.kind() {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(lit) => {
            let s = std::str::from_utf8(&lit.0).map_err(|_| "a byte-oriented pattern".to_string())?;
            let mut out = String::new();
            for c in s.chars() {
                escape_char(c, &mut out);
            }
            Hir::literal(out.into_bytes())
        }
        HirKind::Class(Class::Unicode(c)) => class_hir(c),
        HirKind::Class(Class::Bytes(_)) => return Err("a byte-oriented character class".into()),
        HirKind::Look(_) => return Err("an assertion".into()),
        HirKind::Repetition(r) => {
            Hir::repetition(Repetition { min: r.min, max: r.max, greedy: true, sub: Box::new(escape_hir(&r.sub)?) })
        }
        HirKind::Capture(c) => escape_hir(&c.sub)?,
        HirKind::Concat(v) => Hir::concat(v.iter().map(escape_hir).collect::<Result<_, _>>()?),
        HirKind::Alternation(v) => Hir::alternation(v.iter().map(escape_hir).collect::<Result<_, _>>()?),
    })
}

/// Any one character, escaped (built once: every schema with a string asks for it).
pub(crate) fn any_char_hir() -> Hir {
    static ANY_CHAR: std::sync::LazyLock<Hir> =
        std::sync::LazyLock::new(|| build_class_hir(&ClassUnicode::new([ClassUnicodeRange::new('\0', char::MAX)])));
    ANY_CHAR.clone()
}

/// Escaped strings of `min..=max` characters.
pub(crate) fn length_hir(min: u32, max: Option<u32>) -> Hir {
    Hir::repetition(Repetition { min, max, greedy: true, sub: Box::new(any_char_hir()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_escapes_match_serde_json() {
        for cp in (0u32..0x80).chain([0xA0, 0x2028, 0x1F600]) {
            let c = char::from_u32(cp).unwrap();
            let mut s = String::from("\"");
            escape_char(c, &mut s);
            s.push('"');
            assert_eq!(s, serde_json::to_string(&c.to_string()).unwrap(), "U+{cp:04X}");
        }
    }

    #[test]
    fn escaped_class_language() {
        let hir = escape_hir(&regex_syntax::parse(r#"[a"\\\n\x01]"#).unwrap()).unwrap();
        let re = regex_automata::meta::Regex::new(&format!("^(?:{hir})$")).unwrap();
        for ok in ["a", "\\\"", "\\\\", "\\n", "\\u0001"] {
            assert!(re.is_match(ok), "{ok}");
        }
        for bad in ["\"", "\\", "\n", "\u{1}", "b"] {
            assert!(!re.is_match(bad), "{bad:?}");
        }
    }
}
