//! Tests of the reference recognizer (`stencil_grammar::reference`) and of the random
//! grammar generator (`stencil_grammar::random`).
//!
//! Hand-written grammars check known members, non-members and prefixes. A JSON grammar is
//! checked against `serde_json` on random and mutated documents. Random grammars are
//! checked against an independent, brute-force enumeration of their (length-bounded)
//! languages.

use std::collections::{BTreeSet, HashMap};

use stencil_grammar::random::{random_grammar, random_string_in, RandomGrammarConfig, SplitMix64, UNICODE_CHARS};
use stencil_grammar::reference::{Recognizer, ReferenceError};
use stencil_grammar::{CharClass, Expr, Grammar, RuleId, TokenName, TokenRef};

// ---------------------------------------------------------------------------------------
// Helpers

fn lit(s: &str) -> Expr {
    Expr::literal(s)
}

fn rule(id: RuleId) -> Expr {
    Expr::Rule(id)
}

fn negated(ranges: &[(char, char)]) -> Expr {
    Expr::Class(CharClass { ranges: ranges.iter().map(|&(a, b)| (a as u32, b as u32)).collect(), negated: true })
}

/// A grammar whose root is a single rule with this body.
fn single(body: Expr) -> Grammar {
    let mut g = Grammar::new();
    g.root = g.add_rule("root", body);
    g
}

/// Asserts the members, non-members that are prefixes, and non-prefixes.
fn check(g: &Grammar, members: &[&[u8]], prefixes_only: &[&[u8]], rejected: &[&[u8]]) {
    let r = Recognizer::new(g).unwrap();
    for &s in members {
        assert!(r.matches(s), "should match: {:?}", String::from_utf8_lossy(s));
        assert!(r.is_prefix(s), "a member is a prefix: {:?}", String::from_utf8_lossy(s));
    }
    for &s in prefixes_only {
        assert!(!r.matches(s), "should not match: {:?}", String::from_utf8_lossy(s));
        assert!(r.is_prefix(s), "should be a prefix: {:?}", String::from_utf8_lossy(s));
    }
    for &s in rejected {
        assert!(!r.matches(s), "should not match: {:?}", String::from_utf8_lossy(s));
        assert!(!r.is_prefix(s), "should not be a prefix: {:?}", String::from_utf8_lossy(s));
    }
}

// ---------------------------------------------------------------------------------------
// Hand-written grammars

#[test]
fn balanced_parentheses() {
    // root ::= "(" root ")" root | ""
    let mut g = Grammar::new();
    let root = g.add_rule("root", Expr::Empty);
    g.set_body(root, Expr::alt([Expr::seq([lit("("), rule(root), lit(")"), rule(root)]), Expr::Empty]));
    g.root = root;
    check(
        &g,
        &[b"", b"()", b"(())()", b"((()())())"],
        &[b"(", b"(()", b"()((", b"((()())"],
        &[b")", b")(", b"())", b"(()))", b"(a)", b"()x"],
    );
}

#[test]
fn left_recursion() {
    // expr ::= expr "+" term | term ; term ::= [0-9]+
    let mut g = Grammar::new();
    let expr = g.add_rule("expr", Expr::Empty);
    let term = g.add_rule("term", Expr::plus(Expr::class([('0', '9')])));
    g.set_body(expr, Expr::alt([Expr::seq([rule(expr), lit("+"), rule(term)]), rule(term)]));
    g.root = expr;
    check(&g, &[b"1", b"12", b"1+2", b"12+3+45"], &[b"", b"1+", b"12+3+"], &[b"+", b"+1", b"1++2", b"1+a", b"a"]);
}

#[test]
fn mutual_left_recursion() {
    // a ::= b "x" | "y" ; b ::= a "z" | "w"   —   language: (y | w x)(z x)*
    let mut g = Grammar::new();
    let a = g.add_rule("a", Expr::Empty);
    let b = g.add_rule("b", Expr::Empty);
    g.set_body(a, Expr::alt([Expr::seq([rule(b), lit("x")]), lit("y")]));
    g.set_body(b, Expr::alt([Expr::seq([rule(a), lit("z")]), lit("w")]));
    g.root = a;
    check(&g, &[b"y", b"wx", b"yzx", b"wxzxzx"], &[b"", b"w", b"yz", b"wxzxz"], &[b"x", b"z", b"yx", b"wxx", b"yzz"]);
}

#[test]
fn nullable_rules() {
    // a ::= b b "x" ; b ::= "" | "y"
    let mut g = Grammar::new();
    let a = g.add_rule("a", Expr::Empty);
    let b = g.add_rule("b", Expr::alt([Expr::Empty, lit("y")]));
    g.set_body(a, Expr::seq([rule(b), rule(b), lit("x")]));
    g.root = a;
    check(&g, &[b"x", b"yx", b"yyx"], &[b"", b"y", b"yy"], &[b"yyy", b"yyyx", b"xy", b"xx"]);

    // Cyclic and nullable: s ::= s s | s | "z" | ""
    let mut g = Grammar::new();
    let s = g.add_rule("s", Expr::Empty);
    g.set_body(s, Expr::alt([Expr::seq([rule(s), rule(s)]), rule(s), lit("z"), Expr::Empty]));
    g.root = s;
    check(&g, &[b"", b"z", b"zzzz"], &[], &[b"a", b"zza"]);

    // Nullable repetition of a nullable item: ("" | "ab")* "c"
    let g = single(Expr::seq([Expr::star(Expr::alt([Expr::Empty, lit("ab")])), lit("c")]));
    check(&g, &[b"c", b"abc", b"ababc"], &[b"", b"a", b"aba"], &[b"ac", b"abbc", b"cc"]);
}

#[test]
fn bounded_repetition() {
    let g = single(Expr::repeat(lit("x"), 2, Some(3)));
    check(&g, &[b"xx", b"xxx"], &[b"", b"x"], &[b"xxxx", b"y"]);

    // ("ab"){2,} "c"
    let g = single(Expr::seq([Expr::repeat(lit("ab"), 2, None), lit("c")]));
    check(&g, &[b"ababc", b"abababc"], &[b"a", b"abab", b"ababa"], &[b"abc", b"ababcc", b"ac"]);

    // x{0,0} is the empty string only; x{3,2} is the empty language.
    check(&single(Expr::repeat(lit("x"), 0, Some(0))), &[b""], &[], &[b"x"]);
    check(&single(Expr::repeat(lit("x"), 3, Some(2))), &[], &[], &[b"", b"x", b"xx", b"xxx"]);
}

#[test]
fn unproductive_rules_never_count() {
    // root ::= "a" dead | "ab" ; dead ::= "x" dead
    let mut g = Grammar::new();
    let root = g.add_rule("root", Expr::Empty);
    let dead = g.add_rule("dead", Expr::Empty);
    g.set_body(dead, Expr::seq([lit("x"), rule(dead)]));
    g.set_body(root, Expr::alt([Expr::seq([lit("a"), rule(dead)]), lit("ab")]));
    g.root = root;
    check(&g, &[b"ab"], &[b"", b"a"], &[b"ax", b"axx", b"abx"]);
    let r = Recognizer::new(&g).unwrap();
    assert!(r.is_productive(root));
    assert!(!r.is_productive(dead));

    // A root whose language is empty has no prefix at all, not even "".
    g.set_body(root, Expr::seq([lit("a"), rule(dead)]));
    check(&g, &[], &[], &[b"", b"a", b"ax"]);
    // An unproductive item after the end of the input must not make it viable either.
    g.set_body(root, Expr::seq([lit("a"), Expr::star(lit("b")), rule(dead)]));
    check(&g, &[], &[], &[b"", b"a", b"ab"]);
    // ...but one under a repetition that may be empty is harmless.
    g.set_body(root, Expr::seq([lit("a"), Expr::star(rule(dead))]));
    check(&g, &[b"a"], &[b""], &[b"ax"]);
    // An empty class is unproductive.
    g.set_body(root, Expr::alt([lit("ab"), Expr::seq([lit("a"), Expr::Class(CharClass::new([]))])]));
    check(&g, &[b"ab"], &[b"a"], &[b"ac"]);
}

#[test]
fn multibyte_classes() {
    let beta = "β".as_bytes();
    let g = single(Expr::class([('α', 'ω')]));
    check(
        &g,
        &[beta, "ω".as_bytes()],
        &[b"", &beta[..1]],
        &[&beta[1..], b"a", "β".repeat(2).as_bytes(), "ß".as_bytes()],
    );

    // Four-byte characters: every proper prefix is viable.
    let smile = "😀".as_bytes();
    let g = single(Expr::plus(Expr::class([('😀', '😎')])));
    check(
        &g,
        &[smile, "😀😎".as_bytes()],
        &[&smile[..1], &smile[..2], &smile[..3], &"😀😎".as_bytes()[..6]],
        &[&smile[1..], "😏".as_bytes(), &"🙀".as_bytes()[..3]],
    );

    // Negated classes cover the rest of Unicode.
    let g = single(negated(&[('a', 'a')]));
    check(&g, &[b"b", "é".as_bytes(), smile], &[&smile[..2]], &[b"a", b"bb"]);

    // `.`: any code point, but no invalid UTF-8.
    let g = single(Expr::AnyChar);
    check(
        &g,
        &[b"a", "\u{10FFFF}".as_bytes(), "\u{E000}".as_bytes()],
        &[&[0xE0], &[0xF4, 0x8F]],
        &[
            &[0xFF],
            &[0xC0],             // overlong lead byte
            &[0xC1, 0xBF],       // overlong
            &[0xE0, 0x80],       // overlong
            &[0xED, 0xA0],       // surrogate
            &[0xED, 0xA0, 0x80], // surrogate
            &[0xF4, 0x90],       // above U+10FFFF
            &[0xF5],
            &[0x80],
        ],
    );
}

#[test]
fn literals_cut_inside_characters() {
    let g = single(Expr::seq([lit("é"), lit("ab")]));
    let e = "é".as_bytes();
    check(&g, &["éab".as_bytes()], &[&e[..1], e, "éa".as_bytes()], &[&e[1..], b"ab", "éb".as_bytes()]);
}

#[test]
fn regex_terminals() {
    // root ::= /[ab]+c?/ "d"
    let g = single(Expr::seq([Expr::Regex("[ab]+c?".into()), lit("d")]));
    check(&g, &[b"ad", b"abd", b"abcd", b"bbbad"], &[b"", b"a", b"ab", b"abc"], &[b"d", b"cd", b"abcc", b"abdd", b"x"]);

    // Every match of the regex counts, not just the leftmost-first one.
    let g = single(Expr::seq([Expr::Regex("a|ab".into()), lit("c")]));
    check(&g, &[b"ac", b"abc"], &[b"a", b"ab"], &[b"abb", b"bc"]);

    // A regex that cannot match makes the branch unproductive.
    let g = single(Expr::alt([Expr::seq([lit("a"), Expr::Regex("x[^\\s\\S]".into())]), lit("ab")]));
    check(&g, &[b"ab"], &[b"a"], &[b"ax"]);

    // Unicode inside regexes, and prefixes that stop inside a character.
    let g = single(Expr::Regex("é+".into()));
    let e = "é".as_bytes();
    check(&g, &[e, "éé".as_bytes()], &[&e[..1], &"éé".as_bytes()[..3]], &[&e[1..], b"e"]);

    // A regex that matches the empty string.
    let g = single(Expr::seq([Expr::Regex("x*".into()), lit("y")]));
    check(&g, &[b"y", b"xxy"], &[b"", b"xx"], &[b"yx", b"xyy"]);
}

#[test]
fn construction_errors() {
    let tok = Expr::Token(TokenRef { token: TokenName::Text("<think>".into()), negated: false });
    let g = single(Expr::seq([lit("a"), tok]));
    assert!(matches!(Recognizer::new(&g), Err(ReferenceError::Token { .. })));

    let g = single(Expr::alt([lit("a"), Expr::Rule(RuleId(7))]));
    assert!(matches!(Recognizer::new(&g), Err(ReferenceError::BadRuleId { id: 7, .. })));

    let mut g = single(lit("a"));
    g.root = RuleId(1);
    assert!(matches!(Recognizer::new(&g), Err(ReferenceError::BadRoot(1))));

    let g = single(Expr::Regex("(".into()));
    assert!(matches!(Recognizer::new(&g), Err(ReferenceError::Regex { .. })));
}

// ---------------------------------------------------------------------------------------
// JSON

/// A JSON grammar (RFC 8259), with whitespace around the value.
fn json_grammar() -> Grammar {
    let mut g = Grammar::new();
    let root = g.add_rule("root", Expr::Empty);
    let value = g.add_rule("value", Expr::Empty);
    let object = g.add_rule("object", Expr::Empty);
    let member = g.add_rule("member", Expr::Empty);
    let array = g.add_rule("array", Expr::Empty);
    let string = g.add_rule("string", Expr::Empty);
    let chr = g.add_rule("char", Expr::Empty);
    let number = g.add_rule("number", Expr::Empty);
    let ws = g.add_rule("ws", Expr::star(Expr::class([(' ', ' '), ('\t', '\t'), ('\n', '\n'), ('\r', '\r')])));
    let digits = || Expr::plus(Expr::class([('0', '9')]));
    let hex = || Expr::class([('0', '9'), ('a', 'f'), ('A', 'F')]);
    g.set_body(root, Expr::seq([rule(ws), rule(value), rule(ws)]));
    g.set_body(
        value,
        Expr::alt([rule(object), rule(array), rule(string), rule(number), lit("true"), lit("false"), lit("null")]),
    );
    g.set_body(
        object,
        Expr::seq([
            lit("{"),
            rule(ws),
            Expr::optional(Expr::seq([
                rule(member),
                Expr::star(Expr::seq([rule(ws), lit(","), rule(ws), rule(member)])),
                rule(ws),
            ])),
            lit("}"),
        ]),
    );
    g.set_body(member, Expr::seq([rule(string), rule(ws), lit(":"), rule(ws), rule(value)]));
    g.set_body(
        array,
        Expr::seq([
            lit("["),
            rule(ws),
            Expr::optional(Expr::seq([
                rule(value),
                Expr::star(Expr::seq([rule(ws), lit(","), rule(ws), rule(value)])),
                rule(ws),
            ])),
            lit("]"),
        ]),
    );
    g.set_body(string, Expr::seq([lit("\""), Expr::star(rule(chr)), lit("\"")]));
    g.set_body(
        chr,
        Expr::alt([
            negated(&[('"', '"'), ('\\', '\\'), ('\0', '\u{1F}')]),
            Expr::seq([
                lit("\\"),
                Expr::alt([
                    Expr::Class(CharClass::new("\"\\/bfnrt".chars().map(|c| (c as u32, c as u32)))),
                    Expr::seq([lit("u"), hex(), hex(), hex(), hex()]),
                ]),
            ]),
        ]),
    );
    g.set_body(
        number,
        Expr::seq([
            Expr::optional(lit("-")),
            Expr::alt([lit("0"), Expr::seq([Expr::class([('1', '9')]), Expr::star(Expr::class([('0', '9')]))])]),
            Expr::optional(Expr::seq([lit("."), digits()])),
            Expr::optional(Expr::seq([
                Expr::class([('e', 'e'), ('E', 'E')]),
                Expr::optional(Expr::class([('-', '-'), ('+', '+')])),
                digits(),
            ])),
        ]),
    );
    g.root = root;
    g
}

#[test]
fn json_examples() {
    let g = json_grammar();
    check(
        &g,
        &[
            br#"{"a":[1,2,{"b":null}]}"#,
            r#" { "a" : [ 1 , -2.5e+3 , { "b" : null } ] , "c\n\u00e9" : "é" } "#.as_bytes(),
            b"0",
            b"[]",
            b"{}",
            br#""\"""#,
            b"[true,false,null]",
        ],
        &[br#"{"a":[1,"#, b"", b" ", br#"{"a"#, b"-", b"1.", b"1e", b"1e+", b"tru", br#""\u00"#, b"[1,2"],
        &[br#"{"a":}"#, br#"{"a":[1,]}"#, b"01", b"[1,,2]", b"nul1", b"{a:1}", br#""\x""#, b"[1]]", b"+1", b"1.e3"],
    );
}

/// A random JSON document, as text, with optional whitespace.
fn random_json(rng: &mut SplitMix64, depth: u32, out: &mut String) {
    let ws = |rng: &mut SplitMix64, out: &mut String| {
        if rng.chance(1, 4) {
            out.push_str(rng.pick::<&str>(&[" ", "\n", "\t ", "\r\n"]));
        }
    };
    let string = |rng: &mut SplitMix64, out: &mut String| {
        out.push('"');
        for _ in 0..rng.below(5) {
            out.push_str(
                rng.pick::<&str>(&["a", "b", "z", " ", "é", "😀", "\\n", "\\\"", "\\\\", "\\u00e9", "/", "'"]),
            );
        }
        out.push('"');
    };
    let kind = if depth >= 3 { rng.below(4) } else { rng.below(6) };
    match kind {
        0 => string(rng, out),
        1 => {
            let n = rng.below(2000) as i64 - 1000;
            out.push_str(&n.to_string());
            if rng.chance(1, 3) {
                out.push_str(rng.pick::<&str>(&[".5", ".25", "e3", "E-2", ".0e+1"]));
            }
        }
        2 => out.push_str(rng.pick::<&str>(&["true", "false", "null"])),
        3 => out.push_str(rng.pick::<&str>(&["0", "-0", "[]", "{}"])),
        4 => {
            out.push('[');
            let n = rng.below(4);
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                ws(rng, out);
                random_json(rng, depth + 1, out);
                ws(rng, out);
            }
            out.push(']');
        }
        _ => {
            out.push('{');
            let n = rng.below(4);
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                ws(rng, out);
                string(rng, out);
                ws(rng, out);
                out.push(':');
                ws(rng, out);
                random_json(rng, depth + 1, out);
                ws(rng, out);
            }
            out.push('}');
        }
    }
}

/// Does serde_json accept the text? `Some(true)`: valid; `Some(false)`: invalid, but a
/// prefix of a valid document (it ran out of input); `None`: invalid.
fn serde_verdict(s: &[u8]) -> Option<bool> {
    match serde_json::from_slice::<serde_json::Value>(s) {
        Ok(_) => Some(true),
        Err(e) if e.is_eof() => Some(false),
        Err(_) => None,
    }
}

/// Cases where serde_json's verdict is not the grammar's: `\u` escapes (serde_json rejects
/// lone surrogates), huge numbers (out of range for serde_json), and invalid UTF-8
/// (serde_json validates a string only when it closes, so it reports "EOF" for an
/// unclosed string with invalid UTF-8 in it).
fn serde_comparable(s: &[u8]) -> bool {
    let utf8_ok = match std::str::from_utf8(s) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(), // only cut short at the end
    };
    let out_of_range =
        serde_json::from_slice::<serde_json::Value>(s).is_err_and(|e| e.to_string().contains("out of range"));
    utf8_ok && !out_of_range && !s.windows(2).any(|w| w == b"\\u")
}

#[test]
fn json_against_serde() {
    let g = json_grammar();
    let r = Recognizer::new(&g).unwrap();
    let mut rng = SplitMix64::new(2024);
    let alphabet: &[&[u8]] = &[
        b"{",
        b"}",
        b"[",
        b"]",
        b"\"",
        b":",
        b",",
        b"0",
        b"1",
        b"9",
        b"-",
        b"+",
        b".",
        b"e",
        b"E",
        b"t",
        b"n",
        b"\\",
        b" ",
        b"\n",
        b"a",
        "é".as_bytes(),
        &[0xC3],
        &[0xA9],
        &[0x01],
        &[0xFF],
    ];
    let mut compared = 0;
    for _ in 0..150 {
        let mut doc = String::new();
        random_json(&mut rng, 0, &mut doc);
        let doc = doc.into_bytes();
        assert_eq!(serde_verdict(&doc), Some(true), "generator bug: {}", String::from_utf8_lossy(&doc));
        assert!(r.matches(&doc), "{}", String::from_utf8_lossy(&doc));
        // Cuts, and one-byte edits.
        let mut variants = Vec::new();
        for _ in 0..3 {
            variants.push(doc[..rng.below(doc.len() as u64 + 1) as usize].to_vec());
        }
        for _ in 0..6 {
            let mut v = doc.clone();
            let at = rng.below(v.len() as u64 + 1) as usize;
            match rng.below(3) {
                0 if at < v.len() => {
                    v.remove(at);
                }
                1 if at < v.len() => {
                    v.splice(at..at + 1, rng.pick(alphabet).iter().copied());
                }
                _ => {
                    v.splice(at..at, rng.pick(alphabet).iter().copied());
                }
            }
            if rng.chance(1, 2) {
                v.truncate(rng.below(v.len() as u64 + 1) as usize);
            }
            variants.push(v);
        }
        for v in variants {
            if !serde_comparable(&v) {
                continue;
            }
            compared += 1;
            let verdict = serde_verdict(&v);
            let text = String::from_utf8_lossy(&v);
            assert_eq!(r.matches(&v), verdict == Some(true), "matches: {text:?}");
            assert_eq!(r.is_prefix(&v), verdict.is_some(), "is_prefix: {text:?}");
        }
    }
    assert!(compared > 600, "too few comparisons: {compared}");
}

#[test]
fn long_inputs() {
    // A JSON document of a few hundred bytes.
    let g = json_grammar();
    let r = Recognizer::new(&g).unwrap();
    let item = r#"{"key": [1, 2.5, -3e4, "x\"y", true, null, {"z": []}]}"#;
    let doc = format!("[{}]", [item; 8].join(", "));
    assert!(doc.len() > 400);
    assert!(r.matches(doc.as_bytes()));
    assert!(r.is_prefix(&doc.as_bytes()[..doc.len() - 1]));
    assert!(!r.matches(&doc.as_bytes()[..doc.len() - 1]));
    assert!(!r.is_prefix(format!("{doc}]").as_bytes()));

    // Left recursion over a long sum.
    let mut g = Grammar::new();
    let expr = g.add_rule("expr", Expr::Empty);
    let term = g.add_rule("term", Expr::plus(Expr::class([('0', '9')])));
    g.set_body(expr, Expr::alt([Expr::seq([rule(expr), lit("+"), rule(term)]), rule(term)]));
    g.root = expr;
    let r = Recognizer::new(&g).unwrap();
    let sum: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    let sum = sum.join("+");
    assert!(sum.len() > 280);
    assert!(r.matches(sum.as_bytes()));
    assert!(r.is_prefix(format!("{sum}+").as_bytes()));
    assert!(!r.is_prefix(format!("{sum}++").as_bytes()));
}

// ---------------------------------------------------------------------------------------
// Random grammars against brute-force enumeration

/// All strings of characters from `universe` with at most `max_bytes` bytes.
fn all_strings(universe: &[char], max_bytes: usize) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    let mut i = 0;
    while i < out.len() {
        for c in universe {
            let mut s = out[i].clone();
            s.extend_from_slice(c.to_string().as_bytes());
            if s.len() <= max_bytes {
                out.push(s);
            }
        }
        i += 1;
    }
    out.sort();
    out.dedup();
    out
}

/// The strings of each rule's language with at most `max_bytes` bytes, whose classes, `.`
/// and regexes only use characters from `universe`. Computed by brute force, as a least
/// fixpoint over the rules; independent of the reference recognizer.
struct Enumerator<'a> {
    g: &'a Grammar,
    universe: &'a [char],
    strings: &'a [Vec<u8>],
    max_bytes: usize,
    regex_cache: HashMap<String, BTreeSet<Vec<u8>>>,
}

type Lang = BTreeSet<Vec<u8>>;

impl Enumerator<'_> {
    fn rules(&mut self) -> Vec<Lang> {
        let mut langs = vec![Lang::new(); self.g.rules.len()];
        loop {
            let mut changed = false;
            for r in 0..langs.len() {
                let l = self.lang(&self.g.rules[r].body, &langs);
                if l != langs[r] {
                    assert!(l.is_superset(&langs[r]));
                    langs[r] = l;
                    changed = true;
                }
            }
            if !changed {
                return langs;
            }
        }
    }

    fn concat(&self, a: &Lang, b: &Lang) -> Lang {
        let mut out = Lang::new();
        for x in a {
            for y in b {
                if x.len() + y.len() <= self.max_bytes {
                    out.insert([x.as_slice(), y.as_slice()].concat());
                }
            }
        }
        out
    }

    fn chars(&self, class: &CharClass) -> Lang {
        let cps = class.code_points();
        self.universe
            .iter()
            .filter(|&&c| cps.iter().any(|&(lo, hi)| lo <= c as u32 && c as u32 <= hi))
            .map(|c| c.to_string().into_bytes())
            .filter(|s| s.len() <= self.max_bytes)
            .collect()
    }

    fn lang(&mut self, e: &Expr, langs: &[Lang]) -> Lang {
        match e {
            Expr::Empty => Lang::from([Vec::new()]),
            Expr::Literal(b) => (b.len() <= self.max_bytes).then(|| b.clone()).into_iter().collect(),
            Expr::Class(c) => self.chars(c),
            Expr::AnyChar => self.chars(&CharClass::new([(0, 0x10FFFF)])),
            Expr::Regex(p) => {
                let p = p.as_str();
                if !self.regex_cache.contains_key(p) {
                    let re = regex_automata::meta::Regex::new(&format!("^(?:{p})$")).unwrap();
                    let l = self.strings.iter().filter(|s| re.is_match(s.as_slice())).cloned().collect();
                    self.regex_cache.insert(p.to_string(), l);
                }
                self.regex_cache[p].clone()
            }
            Expr::Rule(r) => langs[r.0 as usize].clone(),
            Expr::Token(_) => panic!("no tokens in random grammars"),
            Expr::Seq(items) => {
                let mut acc = Lang::from([Vec::new()]);
                for x in items {
                    let l = self.lang(x, langs);
                    acc = self.concat(&acc, &l);
                }
                acc
            }
            Expr::Alt(items) => items.iter().flat_map(|x| self.lang(x, langs)).collect(),
            Expr::Repeat { expr, min, max } => {
                let child = self.lang(expr, langs);
                let mut out = Lang::new();
                if max.is_some_and(|m| m < *min) {
                    return out;
                }
                // `cur`: strings of exactly `count` repetitions.
                let mut cur = Lang::from([Vec::new()]);
                let mut count = 0;
                loop {
                    if count >= *min {
                        // Once a whole round adds nothing, later rounds add nothing either.
                        if count > *min && cur.is_subset(&out) {
                            break;
                        }
                        out.extend(cur.iter().cloned());
                    }
                    if cur.is_empty() || *max == Some(count) {
                        break;
                    }
                    cur = self.concat(&cur, &child);
                    count += 1;
                }
                out
            }
        }
    }
}

/// An upper bound on the length of the strings of a grammar without recursion, or `None`.
fn max_len(g: &Grammar, e: &Expr, depth: usize) -> Option<usize> {
    if depth > g.rules.len() + 1 {
        return None; // recursion
    }
    Some(match e {
        Expr::Empty => 0,
        Expr::Literal(b) => b.len(),
        Expr::Class(c) => c.code_points().last().map_or(0, |&(_, hi)| char::from_u32(hi).map_or(4, char::len_utf8)),
        Expr::AnyChar | Expr::Token(_) => 4,
        Expr::Regex(_) => return None,
        Expr::Rule(r) => max_len(g, &g.rule(*r).body, depth + 1)?,
        Expr::Seq(items) => items.iter().map(|x| max_len(g, x, depth)).sum::<Option<usize>>()?,
        Expr::Alt(items) => {
            items.iter().map(|x| max_len(g, x, depth)).collect::<Option<Vec<_>>>()?.into_iter().max().unwrap_or(0)
        }
        Expr::Repeat { expr, max, .. } => max_len(g, expr, depth)? * (*max)? as usize,
    })
}

/// Is some rule left-recursive (reachable from itself without consuming input)?
fn has_left_recursion(g: &Grammar) -> bool {
    fn nullable(e: &Expr, null: &[bool]) -> bool {
        match e {
            Expr::Empty => true,
            Expr::Literal(b) => b.is_empty(),
            Expr::Regex(_) => true, // may be; over-approximate
            Expr::Class(_) | Expr::AnyChar | Expr::Token(_) => false,
            Expr::Rule(r) => null[r.0 as usize],
            Expr::Seq(items) => items.iter().all(|x| nullable(x, null)),
            Expr::Alt(items) => items.iter().any(|x| nullable(x, null)),
            Expr::Repeat { expr, min, .. } => *min == 0 || nullable(expr, null),
        }
    }
    // Rules that `e` may call before consuming any input.
    fn first_rules(e: &Expr, null: &[bool], out: &mut Vec<usize>) {
        match e {
            Expr::Rule(r) => out.push(r.0 as usize),
            Expr::Seq(items) => {
                for x in items {
                    first_rules(x, null, out);
                    if !nullable(x, null) {
                        break;
                    }
                }
            }
            Expr::Alt(items) => items.iter().for_each(|x| first_rules(x, null, out)),
            Expr::Repeat { expr, .. } => first_rules(expr, null, out),
            _ => {}
        }
    }
    let mut null = vec![false; g.rules.len()];
    for _ in 0..=g.rules.len() {
        null = g.rules.iter().map(|r| nullable(&r.body, &null)).collect();
    }
    let edges: Vec<Vec<usize>> = g
        .rules
        .iter()
        .map(|r| {
            let mut v = Vec::new();
            first_rules(&r.body, &null, &mut v);
            v
        })
        .collect();
    (0..g.rules.len()).any(|start| {
        let mut seen = vec![false; g.rules.len()];
        let mut stack = edges[start].clone();
        while let Some(r) = stack.pop() {
            if r == start {
                return true;
            }
            if !std::mem::replace(&mut seen[r], true) {
                stack.extend(&edges[r]);
            }
        }
        false
    })
}

/// `is_prefix(s)` holds exactly when `s` matches or some one-byte extension is a prefix.
fn check_local_consistency(r: &Recognizer, s: &[u8]) {
    let extended = (0..=255u8).any(|b| r.is_prefix(&[s, &[b]].concat()));
    assert_eq!(r.is_prefix(s), r.matches(s) || extended, "local consistency at {:?}", String::from_utf8_lossy(s));
}

/// Checks the reference recognizer on random grammars of `cfg`.
///
/// * `matches` agrees exactly with brute-force enumeration on all strings over the
///   universe (the alphabet, the generator's Unicode characters, and an outsider) of at
///   most `max_bytes` bytes;
/// * every byte prefix of an enumerated member, and of a sampled member, is a prefix;
/// * for finite languages that the enumeration covers completely, `is_prefix` is exactly
///   "is a prefix of an enumerated member";
/// * `is_prefix(s) == matches(s) || is_prefix(s + b)` for some byte `b`.
fn check_random_grammars(cfg: &RandomGrammarConfig, seeds: std::ops::Range<u64>, max_bytes: usize) -> usize {
    let mut universe: Vec<char> = cfg.alphabet.iter().map(|&b| b as char).collect();
    universe.push('z');
    if cfg.allow_unicode {
        universe.extend_from_slice(UNICODE_CHARS);
        universe.push('ü');
    }
    let strings = all_strings(&universe, max_bytes);
    let mut complete = 0;
    for seed in seeds {
        let g = random_grammar(seed, cfg);
        let r = Recognizer::new(&g).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{g:#?}"));
        for id in 0..g.rules.len() {
            assert!(r.is_productive(RuleId(id as u32)), "seed {seed}: rule {id} unproductive\n{g:#?}");
        }
        if !cfg.allow_left_recursion {
            assert!(!has_left_recursion(&g), "seed {seed}: left recursion\n{g:#?}");
        }
        let mut en =
            Enumerator { g: &g, universe: &universe, strings: &strings, max_bytes, regex_cache: HashMap::new() };
        let lang = en.rules().swap_remove(g.root.0 as usize);
        let ctx = || format!("seed {seed}\n{g:#?}\nlanguage (<= {max_bytes} bytes): {lang:?}");

        let prefixes: BTreeSet<&[u8]> = lang.iter().flat_map(|t| (0..=t.len()).map(move |k| &t[..k])).collect();
        let is_complete = max_len(&g, &g.rule(g.root).body, 0).is_some_and(|m| m <= max_bytes);
        complete += is_complete as usize;
        for s in &strings {
            let (matches, is_prefix) = r.matches_and_is_prefix(s);
            assert_eq!(matches, lang.contains(s), "matches({:?})\n{}", String::from_utf8_lossy(s), ctx());
            if is_complete {
                assert_eq!(is_prefix, prefixes.contains(s.as_slice()), "is_prefix({s:?})\n{}", ctx());
            } else if prefixes.contains(s.as_slice()) {
                assert!(is_prefix, "is_prefix({s:?})\n{}", ctx());
            }
        }
        // Prefixes that end inside a character.
        for p in &prefixes {
            if std::str::from_utf8(p).is_err() {
                assert!(r.is_prefix(p), "is_prefix({p:?})\n{}", ctx());
            }
        }

        let mut rng = SplitMix64::new(seed);
        let mut probes: Vec<Vec<u8>> = (0..2).map(|_| rng.pick(&strings).clone()).collect();
        for k in 0..6 {
            let Some(t) = random_string_in(&g, seed * 10 + k, 40) else { panic!("no sample\n{}", ctx()) };
            assert!(r.matches(&t), "sampled member {:?} does not match\n{}", String::from_utf8_lossy(&t), ctx());
            for i in 0..=t.len() {
                assert!(r.is_prefix(&t[..i]), "prefix {:?} of sample {t:?}\n{}", &t[..i], ctx());
            }
            if k == 0 {
                probes.push(t[..rng.below(t.len().min(12) as u64 + 1) as usize].to_vec());
            }
        }
        for p in &probes {
            check_local_consistency(&r, p);
        }
    }
    complete
}

#[test]
fn random_finite_grammars_are_exact() {
    let cfg = RandomGrammarConfig { alphabet: b"ab".to_vec(), ..RandomGrammarConfig::finite() };
    let complete = check_random_grammars(&cfg, 0..100, 6);
    assert!(complete > 30, "too few grammars were enumerated completely: {complete}");
}

#[test]
fn random_recursive_grammars() {
    let cfg = RandomGrammarConfig {
        alphabet: b"ab".to_vec(),
        allow_unicode: false,
        allow_any_char: false,
        allow_negated_classes: false,
        ..RandomGrammarConfig::default()
    };
    check_random_grammars(&cfg, 0..120, 5);
}

#[test]
fn random_grammars_without_left_recursion() {
    let cfg = RandomGrammarConfig {
        alphabet: b"abc".to_vec(),
        allow_left_recursion: false,
        allow_unicode: false,
        ..RandomGrammarConfig::default()
    };
    check_random_grammars(&cfg, 1000..1100, 5);
}

#[test]
fn random_unicode_grammars() {
    let cfg = RandomGrammarConfig { alphabet: b"a(".to_vec(), max_rules: 4, ..RandomGrammarConfig::default() };
    check_random_grammars(&cfg, 2000..2100, 5);
}

#[test]
fn random_grammars_are_varied() {
    let cfg = RandomGrammarConfig::default();
    let (mut left_rec, mut regex, mut any, mut negated_class, mut unbounded) = (0, 0, 0, 0, 0);
    for seed in 0..300 {
        let g = random_grammar(seed, &cfg);
        assert_eq!(g, random_grammar(seed, &cfg), "deterministic");
        left_rec += has_left_recursion(&g) as u32;
        let text = format!("{g:?}");
        regex += text.contains("Regex") as u32;
        any += text.contains("AnyChar") as u32;
        negated_class += text.contains("negated: true") as u32;
        unbounded += text.contains("max: None") as u32;
    }
    for (what, n) in [
        ("left recursion", left_rec),
        ("regex", regex),
        ("any", any),
        ("negated", negated_class),
        ("unbounded", unbounded),
    ] {
        assert!(n >= 15, "only {n} of 300 grammars have {what}");
    }
}
