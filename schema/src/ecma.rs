//! ECMA-262 regular expressions (JSON Schema's `pattern` dialect) → `regex-syntax`.
//!
//! [`translate_pattern`] rewrites the syntax (`\d`, `\w`, `\s`, `.`, `[^]`, `\cX`, `\uXXXX`,
//! `\u{...}`, named groups, literal braces) keeping ECMA's meaning, with `^`/`$` as `\A`/`\z`.
//! [`full_match_hir`] then turns "matches somewhere" into a full-match language: `abc` means
//! `(?s:.*)abc(?s:.*)`, `^abc$` means `abc`. Anchors may sit at the start or end of each
//! alternative, also inside groups where they are at the start or end of the whole match
//! (`^$|^\d+$`, `(^a|b)c`, `(?:^|x)a`, `a(?:$|\.)`): each alternative gets `.*` on its
//! unanchored sides only. Anchors anywhere else (`a^b`, `(^a)*`), back-references,
//! look-around and word boundaries have no regular (or no supported) equivalent and are
//! refused with a clear reason.

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Look, Repetition};

/// Why a pattern cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatternError(pub String);

impl std::fmt::Display for PatternError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

const ECMA_SPACE: &str =
    r"\t\n\x{B}\x{C}\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";
const WORD: &str = r"0-9A-Za-z_";
const DIGIT: &str = r"0-9";

fn err<T>(s: impl Into<String>) -> Result<T, PatternError> {
    Err(PatternError(s.into()))
}

fn hex(c: u32) -> String {
    format!(r"\x{{{c:X}}}")
}

/// Translates an ECMA-262 pattern to `regex-syntax` syntax with the same meaning (anchors
/// become `\A` and `\z`; use `full_match_hir` for a full-match language).
///
/// ```
/// use stencil_schema::translate_pattern;
/// assert_eq!(translate_pattern(r"^\d+$").unwrap(), r"\A[0-9]+\z");
/// assert!(translate_pattern(r"(a)\1").is_err());
/// ```
pub fn translate_pattern(p: &str) -> Result<String, PatternError> {
    let chars: Vec<char> = p.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    // Number of capture groups seen, for telling back-references from octal-ish escapes.
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                let (piece, n) = escape(&chars, i, false)?;
                out.push_str(&piece);
                i += n;
            }
            '[' => {
                let (piece, n) = class(&chars, i)?;
                out.push_str(&piece);
                i += n;
            }
            '.' => {
                out.push_str(r"[^\n\r\x{2028}\x{2029}]");
                i += 1;
            }
            '^' => {
                out.push_str(r"\A");
                i += 1;
            }
            '$' => {
                out.push_str(r"\z");
                i += 1;
            }
            '(' => {
                if chars.get(i + 1) == Some(&'?') {
                    match (chars.get(i + 2), chars.get(i + 3)) {
                        (Some(':'), _) => {
                            out.push_str("(?:");
                            i += 3;
                        }
                        (Some('='), _) | (Some('!'), _) => return err("look-ahead assertions are not supported"),
                        (Some('<'), Some('=')) | (Some('<'), Some('!')) => {
                            return err("look-behind assertions are not supported")
                        }
                        (Some('<'), _) => {
                            let end = chars[i + 3..].iter().position(|&c| c == '>');
                            let Some(end) = end else { return err("unterminated group name") };
                            let name: String = chars[i + 3..i + 3 + end].iter().collect();
                            if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                                return err(format!("unsupported group name {name:?}"));
                            }
                            out.push_str(&format!("(?P<{name}>"));
                            i += 4 + end;
                        }
                        _ => return err("unsupported group syntax `(?`"),
                    }
                } else {
                    out.push('(');
                    i += 1;
                }
            }
            ')' | '|' => {
                out.push(c);
                i += 1;
            }
            '*' | '+' | '?' => {
                out.push(c);
                i += 1;
                if chars.get(i) == Some(&'?') {
                    i += 1; // lazy: same language
                }
            }
            '{' => {
                // A quantifier `{n}`, `{n,}`, `{n,m}`, else a literal brace (Annex B).
                let rest: String = chars[i..].iter().take(40).collect();
                let q = quantifier(&rest);
                match q {
                    Some((text, n)) => {
                        if out.is_empty() || out.ends_with('(') || out.ends_with('|') {
                            return err("nothing to repeat");
                        }
                        out.push_str(&text);
                        i += n;
                        if chars.get(i) == Some(&'?') {
                            i += 1;
                        }
                    }
                    None => {
                        out.push_str(r"\{");
                        i += 1;
                    }
                }
            }
            '}' => {
                out.push_str(r"\}");
                i += 1;
            }
            ']' => {
                out.push_str(r"\]");
                i += 1;
            }
            _ => {
                push_literal(&mut out, c);
                i += 1;
            }
        }
    }
    Ok(out)
}

fn quantifier(s: &str) -> Option<(String, usize)> {
    let b = s.as_bytes();
    let mut j = 1;
    let start = j;
    while j < b.len() && b[j].is_ascii_digit() {
        j += 1;
    }
    if j == start {
        return None;
    }
    let lo = &s[start..j];
    if j < b.len() && b[j] == b'}' {
        return Some((format!("{{{lo}}}"), j + 1));
    }
    if j < b.len() && b[j] == b',' {
        j += 1;
        let s2 = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        let hi = &s[s2..j];
        if j < b.len() && b[j] == b'}' {
            return Some((format!("{{{lo},{hi}}}"), j + 1));
        }
    }
    None
}

fn push_literal(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() || c == '_' || c == ' ' || (!c.is_ascii() && !c.is_control()) {
        out.push(c);
    } else {
        out.push_str(&hex(c as u32));
    }
}

/// One escape starting at `chars[i] == '\\'`: the translation and the number of chars used.
/// Inside a class, class escapes give their bare ranges.
fn escape(chars: &[char], i: usize, in_class: bool) -> Result<(String, usize), PatternError> {
    let Some(&c) = chars.get(i + 1) else { return err("pattern ends with a backslash") };
    let wrap = |body: &str, neg: bool| -> String {
        if in_class && !neg {
            body.to_string()
        } else if neg {
            format!("[^{body}]")
        } else {
            format!("[{body}]")
        }
    };
    Ok(match c {
        'd' => (wrap(DIGIT, false), 2),
        'D' => (wrap(DIGIT, true), 2),
        'w' => (wrap(WORD, false), 2),
        'W' => (wrap(WORD, true), 2),
        's' => (wrap(ECMA_SPACE, false), 2),
        'S' => (wrap(ECMA_SPACE, true), 2),
        'b' if in_class => (hex(8), 2),
        'b' | 'B' => return err("word-boundary assertions (\\b, \\B) are not supported"),
        'n' => (hex(10), 2),
        'r' => (hex(13), 2),
        't' => (hex(9), 2),
        'v' => (hex(11), 2),
        'f' => (hex(12), 2),
        '0' if !chars.get(i + 2).is_some_and(|c| c.is_ascii_digit()) => (hex(0), 2),
        '1'..='9' => return err("back-references are not supported"),
        'k' if chars.get(i + 2) == Some(&'<') => return err("named back-references are not supported"),
        'c' => match chars.get(i + 2) {
            Some(&l) if l.is_ascii_alphabetic() => (hex(l as u32 % 32), 3),
            _ => ("\\\\c".to_string(), 2),
        },
        'x' => {
            let h: String = chars.iter().skip(i + 2).take(2).collect();
            if h.len() == 2 && h.chars().all(|c| c.is_ascii_hexdigit()) {
                (hex(u32::from_str_radix(&h, 16).unwrap()), 4)
            } else {
                ("x".to_string(), 2)
            }
        }
        'u' => {
            if chars.get(i + 2) == Some(&'{') {
                let end = chars[i + 3..].iter().position(|&c| c == '}');
                let Some(end) = end else { return err("unterminated \\u{...}") };
                let h: String = chars[i + 3..i + 3 + end].iter().collect();
                let v = u32::from_str_radix(&h, 16).map_err(|_| PatternError(format!("bad escape \\u{{{h}}}")))?;
                if v > 0x10FFFF || (0xD800..=0xDFFF).contains(&v) {
                    return err(format!("escape \\u{{{h}}} is not a Unicode scalar value"));
                }
                (hex(v), 4 + end)
            } else {
                let h: String = chars.iter().skip(i + 2).take(4).collect();
                if h.len() != 4 || !h.chars().all(|c| c.is_ascii_hexdigit()) {
                    ("u".to_string(), 2)
                } else {
                    let v = u32::from_str_radix(&h, 16).unwrap();
                    if (0xD800..0xDC00).contains(&v) {
                        // A surrogate pair written as two escapes.
                        let l: String = chars.iter().skip(i + 6).take(6).collect();
                        if l.len() == 6 && l.starts_with("\\u") {
                            if let Ok(lo) = u32::from_str_radix(&l[2..], 16) {
                                if (0xDC00..0xE000).contains(&lo) {
                                    let cp = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                                    return Ok((hex(cp), 12));
                                }
                            }
                        }
                        return err("lone surrogate escapes are not supported");
                    }
                    if (0xDC00..0xE000).contains(&v) {
                        return err("lone surrogate escapes are not supported");
                    }
                    (hex(v), 6)
                }
            }
        }
        'p' | 'P' => {
            // \p{...}: regex-syntax knows the same Unicode property names for the common cases.
            if chars.get(i + 2) == Some(&'{') {
                let end = chars[i + 3..].iter().position(|&c| c == '}');
                let Some(end) = end else { return err("unterminated \\p{...}") };
                let name: String = chars[i + 3..i + 3 + end].iter().collect();
                (format!("\\{c}{{{name}}}"), 4 + end)
            } else {
                (c.to_string(), 2)
            }
        }
        other => {
            // Identity escape.
            let mut s = String::new();
            push_literal(&mut s, other);
            (s, 2)
        }
    })
}

/// A class `[...]` starting at `chars[i]`.
fn class(chars: &[char], i: usize) -> Result<(String, usize), PatternError> {
    let mut j = i + 1;
    let negated = chars.get(j) == Some(&'^');
    if negated {
        j += 1;
    }
    if chars.get(j) == Some(&']') {
        // `[]` matches nothing, `[^]` matches any character.
        let s = if negated { r"[\x{0}-\x{10FFFF}]" } else { r"[a&&b]" };
        return Ok((s.to_string(), j + 1 - i));
    }
    // Items: single code points (Some) or class escapes (None, with their text).
    enum Item {
        Cp(u32),
        Set(String),
    }
    let mut items: Vec<Item> = Vec::new();
    loop {
        let Some(&c) = chars.get(j) else { return err("unterminated character class") };
        if c == ']' {
            j += 1;
            break;
        }
        if c == '\\' {
            let (piece, n) = escape(chars, j, true)?;
            // Single code points come back as `\x{..}` or one literal char.
            if let Some(cp) = single_cp(&piece) {
                items.push(Item::Cp(cp));
            } else {
                items.push(Item::Set(piece));
            }
            j += n;
        } else {
            items.push(Item::Cp(c as u32));
            j += 1;
        }
        // Ranges: `a-z`.
        if chars.get(j) == Some(&'-') && chars.get(j + 1).is_some_and(|&c| c != ']') {
            if let Some(Item::Cp(lo)) = items.last() {
                let lo = *lo;
                let (hi, n) = if chars[j + 1] == '\\' {
                    let (piece, n) = escape(chars, j + 1, true)?;
                    (single_cp(&piece), n)
                } else {
                    (Some(chars[j + 1] as u32), 1)
                };
                if let Some(hi) = hi {
                    if hi < lo {
                        return err("range out of order in character class");
                    }
                    items.pop();
                    items.push(Item::Set(format!("{}-{}", hex(lo), hex(hi))));
                    j += 1 + n;
                    continue;
                }
            }
        }
    }
    let mut s = String::from(if negated { "[^" } else { "[" });
    for it in items {
        match it {
            Item::Cp(c) => s.push_str(&hex(c)),
            Item::Set(t) => s.push_str(&t),
        }
    }
    s.push(']');
    Ok((s, j - i))
}

fn single_cp(piece: &str) -> Option<u32> {
    if let Some(h) = piece.strip_prefix("\\x{").and_then(|r| r.strip_suffix('}')) {
        return u32::from_str_radix(h, 16).ok();
    }
    let mut it = piece.chars();
    match (it.next(), it.next()) {
        (Some(c), None) if c != '[' => Some(c as u32),
        _ => None,
    }
}

/// The full-match language, over decoded characters, of strings that ECMA-262 `pattern`
/// matches somewhere.
pub(crate) fn full_match_hir(pattern: &str) -> Result<Hir, PatternError> {
    let translated = translate_pattern(pattern)?;
    let hir = regex_syntax::ParserBuilder::new()
        .unicode(true)
        .utf8(true)
        .build()
        .parse(&translated)
        .map_err(|e| PatternError(format!("{e}")))?;
    unanchor(&hir)
}

fn any_star() -> Hir {
    Hir::repetition(Repetition {
        min: 0,
        max: None,
        greedy: true,
        sub: Box::new(Hir::class(Class::Unicode(ClassUnicode::new([ClassUnicodeRange::new('\0', char::MAX)])))),
    })
}

fn has_look(h: &Hir) -> bool {
    match h.kind() {
        HirKind::Look(_) => true,
        HirKind::Repetition(r) => has_look(&r.sub),
        HirKind::Capture(c) => has_look(&c.sub),
        HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().any(has_look),
        _ => false,
    }
}

const INNER_ANCHOR: &str = "anchors (^, $) or assertions inside the pattern are not supported";

/// One way of matching: whether it starts at the start of the string (`^`), the body (no
/// assertions), whether it ends at the end (`$`).
type Piece = (bool, Hir, bool);

fn is_empty(h: &Hir) -> bool {
    matches!(h.kind(), HirKind::Empty)
}

/// At most one piece per pair of anchor flags, bodies of the same flags merged.
fn merge(pieces: Vec<Piece>) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    for flags in [(false, false), (true, false), (false, true), (true, true)] {
        let bodies: Vec<Hir> = pieces.iter().filter(|p| (p.0, p.2) == flags).map(|p| p.1.clone()).collect();
        if !bodies.is_empty() {
            out.push((flags.0, Hir::alternation(bodies), flags.1));
        }
    }
    out
}

/// `h` as pieces: `^` and `$` are allowed where they are at the start (end) of every match
/// of the alternative they sit in: `^a|b$`, `^(a|b)$`, `^$|^\d+$`, `(^a|b)c` (`^` leading
/// its alternative of a leading group); anywhere else they are refused.
fn pieces(h: &Hir) -> Result<Vec<Piece>, PatternError> {
    if h.properties().look_set().is_empty() {
        // No anchor inside: one piece, taken whole (rebuilding it would copy it once per
        // element of every concatenation in it).
        return Ok(vec![(false, h.clone(), false)]);
    }
    Ok(match h.kind() {
        HirKind::Look(Look::Start) => vec![(true, Hir::empty(), false)],
        HirKind::Look(Look::End) => vec![(false, Hir::empty(), true)],
        HirKind::Look(_) => return Err(PatternError(INNER_ANCHOR.into())),
        HirKind::Capture(c) => pieces(&c.sub)?,
        HirKind::Alternation(v) => {
            let mut all = Vec::new();
            for x in v {
                all.extend(pieces(x)?);
            }
            merge(all)
        }
        HirKind::Concat(v) => {
            let mut acc: Vec<Piece> = vec![(false, Hir::empty(), false)];
            for x in v {
                let next = pieces(x)?;
                let mut out = Vec::new();
                for (l1, b1, r1) in &acc {
                    for (l2, b2, r2) in &next {
                        // `^` after something that may consume text, `$` before it: refused
                        // (only empty bodies can sit on the wrong side of an anchor).
                        if *l2 && (!is_empty(b1) || *r1 && !is_empty(b2)) {
                            return Err(PatternError(INNER_ANCHOR.into()));
                        }
                        if *r1 && !is_empty(b2) {
                            return Err(PatternError(INNER_ANCHOR.into()));
                        }
                        out.push((*l1 || *l2, Hir::concat(vec![b1.clone(), b2.clone()]), *r1 || *r2));
                    }
                }
                acc = merge(out);
            }
            acc
        }
        _ => {
            if has_look(h) {
                return Err(PatternError(INNER_ANCHOR.into()));
            }
            vec![(false, h.clone(), false)]
        }
    })
}

/// The full-match language of "`h` matches somewhere": each piece gets `.*` on its
/// unanchored sides.
fn unanchor(h: &Hir) -> Result<Hir, PatternError> {
    let alts: Vec<Hir> = pieces(h)?
        .into_iter()
        .map(|(l, body, r)| {
            let mut out = Vec::new();
            if !l {
                out.push(any_star());
            }
            out.push(body);
            if !r {
                out.push(any_star());
            }
            Hir::concat(out)
        })
        .collect();
    Ok(Hir::alternation(alts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(p: &str, s: &str) -> bool {
        let hir = full_match_hir(p).unwrap();
        let re = regex_automata::meta::Regex::builder()
            .build_from_hir(&Hir::concat(vec![Hir::look(Look::Start), hir, Hir::look(Look::End)]))
            .unwrap();
        re.is_match(s)
    }

    #[test]
    fn classes_and_escapes() {
        assert!(full(r"^\d+$", "0123"));
        assert!(!full(r"^\d+$", "١٢")); // ECMA's \d is ASCII only
        assert!(full(r"^\w+$", "a_Z9"));
        assert!(!full(r"^\w+$", "é"));
        assert!(full(r"^\s$", "\u{feff}"));
        assert!(full(r"^\s$", "\u{a0}"));
        assert!(!full(r"^\S$", " "));
        assert!(full(r"^[^]$", "\n"));
        assert!(!full(r"^[]$", "a"));
        assert!(full(r"^\cJ$", "\n"));
        assert!(full(r"^\u0041\u{1F600}$", "A😀"));
        assert!(full(r"^\uD83D\uDE00$", "😀"));
        assert!(full(r"^(?<year>\d{4})$", "2024"));
        assert!(full(r"^[\d.-]+$", "1.2-3"));
        assert!(full(r"^[\w\-]+$", "a-b"));
        assert!(full(r"^[[]$", "["));
        assert!(full(r"^a{$", "a{"));
        assert!(full(r"^a{2}$", "aa"));
        assert!(full(r"^\/x$", "/x"));
        assert!(!full(r"^.$", "\n"));
        assert!(full(r"^[\b]$", "\u{8}"));
    }

    #[test]
    fn anchoring() {
        assert!(full("abc", "xxabcyy"));
        assert!(!full("^abc", "xabc"));
        assert!(full("^abc", "abcx"));
        assert!(!full("abc$", "abcx"));
        assert!(full("^a|b$", "ax"));
        assert!(full("^a|b$", "xb"));
        assert!(!full("^a|b$", "xa"));
        assert!(full("^(a|b)$", "a"));
        assert!(full("", "anything"));
    }

    #[test]
    fn refusals() {
        for p in [r"(a)\1", r"a(?=b)", r"a(?!b)", r"(?<=a)b", r"(?<!a)b", r"\bword\b", r"\k<n>", r"a^b"] {
            assert!(full_match_hir(p).is_err(), "{p}");
        }
    }
}
