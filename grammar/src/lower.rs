//! Lowering regex terminals into plain IR: [`lower_regexes`] replaces every
//! [`Expr::Regex`] by an equivalent expression of literals, character classes, sequences,
//! alternatives and repetitions, built from `regex-syntax`'s HIR. GBNF has no regexes, so
//! this is what lets [`to_gbnf`](crate::to_gbnf) print a grammar that uses them (JSON Schema
//! `pattern`s and formats, for instance).
//!
//! ```
//! use stencil_grammar::{lower_regexes, to_gbnf, Expr, Grammar};
//! let mut g = Grammar::new();
//! g.root = g.add_rule("root", Expr::Regex("a[0-9]{2,3}|b+".into()));
//! let lowered = lower_regexes(&g).unwrap();
//! assert_eq!(to_gbnf(&lowered).unwrap(), "root ::= \"a\" [0-9]{2,3} | \"b\"+\n");
//! ```

use regex_syntax::hir::{Class, Hir, HirKind};

use crate::ir::{CharClass, Expr, Grammar};
use crate::parse::MAX_REPETITION_MIN;

/// Why a regex terminal cannot be lowered. `rule` names the rule that holds it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LowerError {
    /// The pattern does not parse (with UTF-8 and Unicode on, as the engine reads it).
    #[error("rule `{rule}`: regex {pattern:?} does not parse: {message}")]
    Parse { rule: String, pattern: String, message: String },
    /// A byte class with non-ASCII bytes: it matches bytes, not code points.
    #[error(
        "rule `{rule}`: regex {pattern:?} has a byte class with non-ASCII bytes, which is not a set of characters"
    )]
    NonUtf8Class { rule: String, pattern: String },
    /// A look-around assertion (`^`, `$`, `\b`, ...): the IR has none.
    #[error("rule `{rule}`: regex {pattern:?} uses the assertion {look}, which a grammar cannot express")]
    Assertion { rule: String, pattern: String, look: String },
}

/// A copy of `g` with every [`Expr::Regex`] replaced by an equivalent regex-free expression
/// (same rules, same names, same root). A regex that matches nothing becomes an empty
/// [`Expr::Alt`]. Repetitions with a minimum above what GBNF allows
/// ([`MAX_REPETITION_MIN`]) are split into nested ones.
pub fn lower_regexes(g: &Grammar) -> Result<Grammar, LowerError> {
    let mut out = g.clone();
    for rule in &mut out.rules {
        let name = rule.name.clone();
        lower_expr(&mut rule.body, &name)?;
    }
    Ok(out)
}

fn lower_expr(e: &mut Expr, rule: &str) -> Result<(), LowerError> {
    match e {
        Expr::Regex(pattern) => {
            let lowered = lower_pattern(pattern, rule)?;
            *e = lowered;
        }
        Expr::Seq(items) | Expr::Alt(items) => {
            for item in items {
                lower_expr(item, rule)?;
            }
        }
        Expr::Repeat { expr, .. } => lower_expr(expr, rule)?,
        Expr::Empty | Expr::Literal(_) | Expr::Class(_) | Expr::AnyChar | Expr::Rule(_) | Expr::Token(_) => {}
    }
    Ok(())
}

/// The regex-free expression of one pattern.
fn lower_pattern(pattern: &str, rule: &str) -> Result<Expr, LowerError> {
    let hir = regex_syntax::ParserBuilder::new().utf8(true).unicode(true).build().parse(pattern).map_err(|e| {
        LowerError::Parse { rule: rule.to_string(), pattern: pattern.to_string(), message: e.to_string() }
    })?;
    let mut l = Lowerer { rule, pattern };
    Ok(l.hir(&hir)?.unwrap_or(Expr::Alt(Vec::new())))
}

struct Lowerer<'a> {
    rule: &'a str,
    pattern: &'a str,
}

impl Lowerer<'_> {
    /// `None` when the expression matches nothing (an empty class, or anything that needs one).
    fn hir(&mut self, h: &Hir) -> Result<Option<Expr>, LowerError> {
        Ok(match h.kind() {
            HirKind::Empty => Some(Expr::Empty),
            HirKind::Literal(lit) => Some(Expr::Literal(lit.0.to_vec())),
            HirKind::Class(Class::Unicode(c)) => {
                let ranges: Vec<(u32, u32)> = c.ranges().iter().map(|r| (r.start() as u32, r.end() as u32)).collect();
                (!ranges.is_empty()).then(|| Expr::Class(CharClass::new(ranges)))
            }
            HirKind::Class(Class::Bytes(c)) => {
                if c.ranges().iter().any(|r| r.end() > 0x7F) {
                    return Err(LowerError::NonUtf8Class { rule: self.rule.into(), pattern: self.pattern.into() });
                }
                let ranges: Vec<(u32, u32)> = c.ranges().iter().map(|r| (r.start() as u32, r.end() as u32)).collect();
                (!ranges.is_empty()).then(|| Expr::Class(CharClass::new(ranges)))
            }
            HirKind::Look(look) => {
                return Err(LowerError::Assertion {
                    rule: self.rule.into(),
                    pattern: self.pattern.into(),
                    look: format!("{look:?}"),
                })
            }
            HirKind::Capture(c) => self.hir(&c.sub)?,
            HirKind::Repetition(r) => match self.hir(&r.sub)? {
                Some(sub) => Some(repeat(sub, r.min, r.max)),
                // Zero repetitions of nothing-matching still match the empty string.
                None if r.min == 0 => Some(Expr::Empty),
                None => None,
            },
            HirKind::Concat(items) => {
                let mut seq = Vec::with_capacity(items.len());
                for item in items {
                    match self.hir(item)? {
                        Some(Expr::Empty) => {}
                        Some(e) => seq.push(e),
                        None => return Ok(None),
                    }
                }
                Some(match seq.len() {
                    0 => Expr::Empty,
                    1 => seq.pop().expect("one item"),
                    _ => Expr::Seq(seq),
                })
            }
            HirKind::Alternation(items) => {
                let mut alts = Vec::with_capacity(items.len());
                for item in items {
                    if let Some(e) = self.hir(item)? {
                        alts.push(e);
                    }
                }
                match alts.len() {
                    0 => None,
                    1 => alts.pop(),
                    _ => Some(Expr::Alt(alts)),
                }
            }
        })
    }
}

/// `e{min,max}`, with `min` split so that no repetition's minimum exceeds GBNF's limit:
/// `e{m,n}` is `(e{k}){q} e{r,r+n-m}` for `m = q·k + r`.
fn repeat(e: Expr, min: u32, max: Option<u32>) -> Expr {
    match (min, max) {
        (1, Some(1)) => return e,
        (0, Some(0)) => return Expr::Empty,
        _ => {}
    }
    if min <= MAX_REPETITION_MIN {
        return Expr::repeat(e, min, max);
    }
    let k = MAX_REPETITION_MIN;
    let (q, r) = (min / k, min % k);
    // The inner repetition goes in a one-item sequence so that the printer puts it in
    // parentheses: `(e{k}){q}`, not `e{k}{q}`.
    let head = repeat(Expr::Seq(vec![Expr::repeat(e.clone(), k, Some(k))]), q, Some(q));
    let tail = repeat(e, r, max.map(|n| n - min + r));
    match tail {
        Expr::Empty => head,
        tail => Expr::Seq(vec![head, tail]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::{random_string_in, SplitMix64};
    use crate::reference::Recognizer;
    use crate::{parse_gbnf, to_gbnf};

    fn grammar_of(e: Expr) -> Grammar {
        let mut g = Grammar::new();
        g.root = g.add_rule("root", e);
        g
    }

    /// Regexes of the kinds JSON Schema compilation produces, and some awkward ones.
    const PATTERNS: &[&str] = &[
        "abc",
        "",
        "a|b|",
        "[a-z]+@[a-z]+\\.(com|org)",
        "[0-9]{3}-[0-9]{4}",
        "(ab|a)(c|bcd)(d*)",
        "x{2,5}y?",
        "(?:a|bc){0,3}",
        "[^\"\\\\\\x00-\\x1F]*",
        "(?i)hello",
        "\\d+(\\.\\d+)?([eE][+-]?\\d+)?",
        "-?(0|[1-9][0-9]*)",
        "[\\u{80}-\\u{10FFFF}]",
        "é+|ü{2}|日本",
        "(?-u:[a-c\\x00])+",
        "(a*)*b",
        "a{0}b",
        "[^\\s\\S]|z",
        "(x[^\\s\\S])*y",
        "\\w{1,3}",
        "(?s:.){2}",
        "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}",
        "((a|b)c){1,2}|(d|)e",
    ];

    /// Strings to try against `pattern`: members sampled from the lowered grammar,
    /// mutations of them (a byte or character dropped, doubled, replaced), and short
    /// strings over the pattern's own characters.
    fn probes(pattern: &str, lowered: &Grammar, seed: u64) -> Vec<Vec<u8>> {
        let mut alphabet: Vec<char> = pattern.chars().filter(|c| !"\\()[]{}|?*+^$".contains(*c)).collect();
        alphabet.extend(['a', '0', ' ', 'é', '\u{10FFFF}', '"', '\\', '\n']);
        alphabet.sort_unstable();
        alphabet.dedup();
        let mut rng = SplitMix64::new(seed);
        let mut out: Vec<Vec<u8>> = vec![Vec::new()];
        for s in 0..60 {
            if let Some(m) = random_string_in(lowered, seed * 1000 + s, 24) {
                out.push(m);
            }
        }
        let members = out.clone();
        for m in &members {
            let text = String::from_utf8_lossy(m).into_owned();
            let chars: Vec<char> = text.chars().collect();
            for _ in 0..4 {
                let mut c = chars.clone();
                let op = rng.below(3);
                let at = rng.below(c.len() as u64 + 1) as usize;
                let x = *rng.pick(&alphabet);
                match op {
                    0 if at < c.len() => {
                        c.remove(at);
                    }
                    1 if at < c.len() => c.insert(at, c[at]),
                    _ => c.insert(at, x),
                }
                out.push(c.into_iter().collect::<String>().into_bytes());
            }
            // Raw byte edits too (invalid UTF-8 must be refused by both).
            let mut b = m.clone();
            b.push(0xFF);
            out.push(b);
        }
        for _ in 0..300 {
            let len = rng.below(6) as usize;
            let s: String = (0..len).map(|_| *rng.pick(&alphabet)).collect();
            out.push(s.into_bytes());
        }
        out
    }

    #[test]
    fn lowered_regexes_accept_the_same_strings() {
        for (i, pattern) in PATTERNS.iter().enumerate() {
            let original = grammar_of(Expr::Regex((*pattern).into()));
            let lowered = lower_regexes(&original).unwrap_or_else(|e| panic!("{pattern:?}: {e}"));
            let r_orig = Recognizer::new(&original).unwrap();
            let r_low = Recognizer::new(&lowered).unwrap();
            let mut members = 0;
            for s in probes(pattern, &lowered, i as u64 + 1) {
                let (a, b) = (r_orig.matches(&s), r_low.matches(&s));
                assert_eq!(a, b, "{pattern:?} on {:?}: regex says {a}, lowered says {b}", String::from_utf8_lossy(&s));
                assert_eq!(r_orig.is_prefix(&s), r_low.is_prefix(&s), "{pattern:?}: prefix of {s:?}");
                members += a as usize;
            }
            if !pattern.starts_with("[^\\s\\S]") {
                assert!(members > 0, "{pattern:?}: no member was tried");
            }
        }
    }

    #[test]
    fn lowered_grammars_print_as_gbnf_and_parse_back() {
        for pattern in PATTERNS {
            let lowered = lower_regexes(&grammar_of(Expr::Regex((*pattern).into()))).unwrap();
            let text = to_gbnf(&lowered).unwrap_or_else(|e| panic!("{pattern:?}: {e}"));
            let back = parse_gbnf(&text).unwrap_or_else(|e| panic!("{pattern:?}: {text}\n{e}"));
            let (r1, r2) = (Recognizer::new(&lowered).unwrap(), Recognizer::new(&back).unwrap());
            for s in probes(pattern, &lowered, 7) {
                assert_eq!(r1.matches(&s), r2.matches(&s), "{pattern:?} printed as {text}");
            }
        }
    }

    #[test]
    fn regexes_inside_rules_are_replaced_everywhere() {
        let mut g = Grammar::new();
        let item = g.add_rule("item", Expr::Empty);
        g.set_body(item, Expr::seq([Expr::literal("<"), Expr::Regex("[0-9]+".into()), Expr::literal(">")]));
        g.root = g.add_rule("root", Expr::star(Expr::alt([Expr::Rule(item), Expr::Regex("x|yz".into())])));
        let lowered = lower_regexes(&g).unwrap();
        assert_eq!(to_gbnf(&lowered).unwrap(), "item ::= \"<\" [0-9]+ \">\"\nroot ::= (item | (\"x\" | \"yz\"))*\n");
        let (r1, r2) = (Recognizer::new(&g).unwrap(), Recognizer::new(&lowered).unwrap());
        for s in ["", "<1>yz", "x<12>x", "<>", "<1>y", "xx<0>"] {
            assert_eq!(r1.matches(s.as_bytes()), r2.matches(s.as_bytes()), "{s:?}");
        }
    }

    #[test]
    fn large_repetitions_are_split_within_gbnf_limits() {
        let g = grammar_of(Expr::Regex("a{4500,4502}".into()));
        let lowered = lower_regexes(&g).unwrap();
        let text = to_gbnf(&lowered).unwrap();
        assert_eq!(text, "root ::= (\"a\"{2000}){2} \"a\"{500,502}\n");
        let r = Recognizer::new(&lowered).unwrap();
        for n in [4499, 4500, 4502, 4503] {
            assert_eq!(r.matches("a".repeat(n).as_bytes()), (4500..=4502).contains(&n), "{n}");
        }
    }

    #[test]
    fn what_cannot_be_lowered_is_an_error() {
        let err = |p: &str| lower_regexes(&grammar_of(Expr::Regex(p.into()))).unwrap_err();
        assert!(matches!(err("^a"), LowerError::Assertion { .. }));
        assert!(matches!(err("a\\b"), LowerError::Assertion { .. }));
        assert!(matches!(err("(a"), LowerError::Parse { .. }));
        // A byte class beyond ASCII: refused by the parser in UTF-8 mode, or by us.
        assert!(matches!(err("(?-u:[\\x00-\\xFF])"), LowerError::Parse { .. } | LowerError::NonUtf8Class { .. }));
        assert!(err("^a").to_string().contains("rule `root`"));
    }

    #[test]
    fn a_regex_that_matches_nothing_becomes_an_empty_alternation() {
        let lowered = lower_regexes(&grammar_of(Expr::Regex("a[^\\s\\S]".into()))).unwrap();
        assert_eq!(lowered.rules[0].body, Expr::Alt(vec![]));
        let lowered = lower_regexes(&grammar_of(Expr::Regex("(a[^\\s\\S])?b".into()))).unwrap();
        assert_eq!(lowered.rules[0].body, Expr::literal("b"));
    }
}
