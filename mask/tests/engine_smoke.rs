//! Small hand-checked cases for the engine (the oracle tests live in `oracle.rs`).

use stencil_grammar::{Expr, Grammar, RuleId};
use stencil_mask::{bitmask, CompiledGrammar, Matcher, Vocabulary};
use stencil_test_support::toy;

fn allowed(m: &mut Matcher) -> Vec<String> {
    let vocab = m.grammar().vocab().clone();
    let mut mask = bitmask::new_mask(vocab.mask_width());
    m.fill_mask(&mut mask).unwrap();
    bitmask::allowed(&mask).map(|t| String::from_utf8_lossy(vocab.token_bytes(t)).into_owned()).collect()
}

fn id(v: &Vocabulary, s: &str) -> u32 {
    (0..v.len() as u32).find(|&t| v.token_bytes(t) == s.as_bytes()).unwrap()
}

/// expr ::= expr "+" term | term ; term ::= [0-9]+  (left recursive)
fn arithmetic() -> Grammar {
    let mut g = Grammar::new();
    let expr = g.add_rule("expr", Expr::Empty);
    let term = g.add_rule("term", Expr::plus(Expr::class([('0', '9')])));
    g.set_body(
        expr,
        Expr::alt([Expr::seq([Expr::Rule(expr), Expr::literal("+"), Expr::Rule(term)]), Expr::Rule(term)]),
    );
    g.root = expr;
    g
}

#[test]
fn left_recursion_masks_and_accepts() {
    let v = toy::words(&["1", "2", "+", "1+", "+2", "12", "a", "+1+"]);
    let g = CompiledGrammar::new(&arithmetic(), v.clone()).unwrap();
    let mut m = Matcher::new(g);
    assert_eq!(allowed(&mut m), vec!["1", "2", "1+", "12"]);
    m.accept_token(id(&v, "1+")).unwrap();
    assert!(!m.can_end());
    assert_eq!(allowed(&mut m), vec!["1", "2", "1+", "12"]);
    m.accept_token(id(&v, "2")).unwrap();
    assert!(m.can_end());
    assert_eq!(allowed(&mut m), vec!["<eos>", "1", "2", "+", "1+", "+2", "12", "+1+"]);
    m.accept_token(id(&v, "+1+")).unwrap();
    assert!(m.accept_token(id(&v, "+")).is_err());
    m.rollback(1).unwrap();
    assert!(m.can_end());
    m.accept_token(0).unwrap();
    assert!(m.is_ended());
}

/// root ::= "{" ws "\"k\"" ws ":" ws value ws "}" ; value ::= "1" | root ; ws ::= " "?
#[test]
fn nested_objects_force_bytes() {
    let mut g = Grammar::new();
    let root = g.add_rule("root", Expr::Empty);
    let value = g.add_rule("value", Expr::alt([Expr::literal("1"), Expr::Rule(root)]));
    let ws = g.add_rule("ws", Expr::optional(Expr::literal(" ")));
    g.set_body(
        root,
        Expr::seq([
            Expr::literal("{"),
            Expr::Rule(ws),
            Expr::literal("\"k\""),
            Expr::Rule(ws),
            Expr::literal(":"),
            Expr::Rule(ws),
            Expr::Rule(value),
            Expr::Rule(ws),
            Expr::literal("}"),
        ]),
    );
    g.root = root;
    let v = toy::words(&["{", "\"", "k", "\":", "\"k\"", ":", " ", "1", "}", "}}", "1}", "{\"", ":{"]);
    let c = CompiledGrammar::new(&g, v.clone()).unwrap();
    let mut m = Matcher::new(c);
    assert_eq!(m.forced_bytes(100), b"{");
    for t in ["{\"", "k", "\":", "{\"", "k", "\":", "1}"] {
        m.accept_token(id(&v, t)).unwrap_or_else(|e| panic!("{t}: {e}"));
    }
    assert!(!m.can_end());
    assert_eq!(m.forced_bytes(100), b"");
    assert_eq!(allowed(&mut m), vec![" ", "}"]);
    assert!(m.accept_token(id(&v, "}}")).is_err());
    m.accept_token(id(&v, "}")).unwrap();
    assert!(m.can_end() && m.must_end());
    assert_eq!(allowed(&mut m), vec!["<eos>"]);
}

#[test]
fn rule_ids_are_checked() {
    let mut g = Grammar::new();
    g.root = g.add_rule("root", Expr::Rule(RuleId(7)));
    assert!(CompiledGrammar::new(&g, toy::words(&["a"])).is_err());
}

/// A rule other than the first whose automaton loops back to its start state
/// (regression: the loop pointed at global state 0).
#[test]
fn loops_back_to_a_later_rules_start() {
    let mut g = Grammar::new();
    let root = g.add_rule("root", Expr::Empty);
    // Not inlined: recursive through root.
    let items = g.add_rule("items", Expr::seq([Expr::Regex("a*b".into()), Expr::optional(Expr::Rule(root))]));
    g.set_body(root, Expr::seq([Expr::literal("["), Expr::Rule(items), Expr::literal("]")]));
    g.root = root;
    let v = toy::words(&["[", "a", "b", "]", "aa", "ab"]);
    let mut m = Matcher::new(CompiledGrammar::new(&g, v.clone()).unwrap());
    for t in ["[", "a", "aa", "b", "[", "ab", "]", "]"] {
        m.accept_token(id(&v, t)).unwrap_or_else(|e| panic!("{t}: {e}"));
    }
    assert!(m.must_end());
}

/// ECMA-262's `.` (a pattern's `.*`) takes every plain character but the line separators
/// U+2028 and U+2029; a JSON string's interior takes those too. Plain text leaves them
/// out, so both interiors take their fast path, and the separators' tokens are walked.
#[test]
fn line_separators_are_walked_outside_plain_text() {
    let words = ["a", "é", "a\u{2028}", "\u{2029}", "\u{2029}b", "b\"", "\""];
    let vocab = toy::words(&words);
    for (class, separators) in [(r#"[^"\\\x00-\x1F\u2028\u2029]"#, false), (r#"[^"\\\x00-\x1F]"#, true)] {
        let src = format!("root ::= \"\\\"\" {class}* \"\\\"\"");
        let g = CompiledGrammar::new(&stencil_grammar::parse_gbnf(&src).unwrap(), vocab.clone()).unwrap();
        let mut m = Matcher::new(g);
        m.accept_token(id(&vocab, "\"")).unwrap();
        for _ in 0..2 {
            let mut want = vec!["a", "é", "b\"", "\""];
            if separators {
                want.extend(["a\u{2028}", "\u{2029}", "\u{2029}b"]);
            }
            want.sort();
            let mut got = allowed(&mut m);
            got.sort();
            assert_eq!(got, want, "{class}");
            m.accept_token(id(&vocab, "a")).unwrap();
        }
    }
}
