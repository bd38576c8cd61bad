//! The GBNF front end and printer against llama.cpp's grammars and test cases
//! (`fixtures/gbnf/`, see its SOURCE.md), plus error snapshots and property tests.

use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::Value;
use stencil_grammar::*;

fn fixtures() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/gbnf"))
}

/// The corpus grammars, by file name.
fn corpus() -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(fixtures())
        .expect("fixtures/gbnf")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "gbnf"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    files.sort();
    assert_eq!(files.len(), 8, "the eight grammars of llama.cpp's grammars/");
    files
}

fn cases(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(fixtures().join(file)).unwrap();
    serde_json::from_str::<Value>(&text).unwrap().as_array().unwrap().clone()
}

fn field<'a>(case: &'a Value, key: &str) -> &'a str {
    case[key].as_str().unwrap_or_else(|| panic!("case field {key}"))
}

fn with_root(root: &str) -> ParseOptions {
    ParseOptions { root: root.to_string(), ..ParseOptions::default() }
}

/// print → parse gives `g` back, and printing again gives the same text.
fn assert_round_trip(g: &Grammar, what: &str) {
    let text = to_gbnf(g).unwrap_or_else(|e| panic!("{what}: cannot print: {e}"));
    let again = parse_gbnf_with(&text, &with_root(&g.rule(g.root).name))
        .unwrap_or_else(|e| panic!("{what}: printed grammar does not parse:\n{text}\n{e}"));
    assert_eq!(&again, g, "{what}: round trip changed the grammar; printed:\n{text}");
    assert_eq!(to_gbnf(&again).unwrap(), text, "{what}: printing is not stable");
}

// ---------------------------------------------------------------------------------------
// llama.cpp's corpus

#[test]
fn corpus_grammars_parse_and_round_trip() {
    for (name, text) in corpus() {
        let g = parse_gbnf(&text).unwrap_or_else(|e| panic!("{name}:\n{e}"));
        assert_eq!(g.rule(g.root).name, "root", "{name}");
        assert_round_trip(&g, &name);
    }
}

/// parser_cases.json cases where Stencil deliberately disagrees with llama.cpp, and why.
const PARSER_DEVIATIONS: &[(&str, &str)] = &[(
    "verify_failure@148",
    "llama.cpp refuses six nested `{0,99}` because its expansion into rules would be too \
     large; that is a compile-time size limit, not syntax, and Stencil's compiler applies its own",
)];

#[test]
fn parser_cases_agree_with_llama_cpp() {
    let cases = cases("parser_cases.json");
    assert!(cases.len() >= 20);
    for case in &cases {
        let name = field(case, "name");
        let grammar = field(case, "grammar");
        let llama_fails = case["expect_error"].as_bool().unwrap();
        let deviation = PARSER_DEVIATIONS.iter().find(|(n, _)| *n == name);
        let result = parse_gbnf(grammar);
        let we_fail = result.is_err();
        match deviation {
            None => assert_eq!(we_fail, llama_fails, "{name}: {grammar:?} gave {result:?}"),
            Some((_, why)) => assert_eq!(we_fail, !llama_fails, "{name} is a listed deviation ({why}) but agrees now"),
        }
        if let Ok(g) = result {
            assert_round_trip(&g, name);
        }
    }
    for (name, _) in PARSER_DEVIATIONS {
        assert!(cases.iter().any(|c| field(c, "name") == *name), "deviation {name} is not a case");
    }
}

/// integration_cases.json cases that llama.cpp refuses to build and Stencil accepts.
fn integration_deviation(name: &str) -> Option<&'static str> {
    name.starts_with("test_failure_left_recursion")
        .then_some("left recursion: Stencil's parser is not a recursive descent and handles it")
}

#[test]
fn integration_cases_agree_with_llama_cpp() {
    let cases = cases("integration_cases.json");
    let mut deviations = 0;
    for case in &cases {
        let name = field(case, "name");
        let grammar = field(case, "grammar");
        let root = field(case, "root");
        let result = parse_gbnf_with(grammar, &with_root(root));
        if !case["expect_error"].as_bool().unwrap() {
            let g = result.unwrap_or_else(|e| panic!("{name}:\n{e}"));
            assert_eq!(g.rule(g.root).name, root);
            assert_round_trip(&g, name);
        } else if let Some(why) = integration_deviation(name) {
            deviations += 1;
            let g = result.unwrap_or_else(|e| panic!("{name} ({why}) must parse:\n{e}"));
            assert_round_trip(&g, name);
        } else if name.contains("missing_reference") {
            match result {
                Err(GbnfError::UndefinedRule { name: missing, .. }) => {
                    assert!(grammar.contains(&missing) && !grammar.contains(&format!("{missing} ::=")), "{name}")
                }
                other => panic!("{name}: expected UndefinedRule, got {other:?}"),
            }
        } else if name.contains("root") {
            assert_eq!(result, Err(GbnfError::MissingRoot { root: root.to_string() }), "{name}");
        } else {
            panic!("{name}: an error case this test does not know");
        }
    }
    assert_eq!(deviations, 4, "the four left-recursion cases");
}

// ---------------------------------------------------------------------------------------
// What the parser produces

fn body(src: &str) -> Expr {
    let g = parse_gbnf(src).unwrap_or_else(|e| panic!("{src:?}:\n{e}"));
    g.rule(g.root).body.clone()
}

fn lit(s: &str) -> Expr {
    Expr::literal(s)
}

fn class(ranges: &[(u32, u32)], negated: bool) -> Expr {
    Expr::Class(CharClass { ranges: ranges.to_vec(), negated })
}

fn token(token: TokenName, negated: bool) -> Expr {
    Expr::Token(TokenRef { token, negated })
}

#[test]
fn items_and_operators() {
    assert_eq!(
        body(r#"root ::= "a" | [bdx-z] | [^1-3]"#),
        Expr::alt([
            lit("a"),
            class(&[('b' as u32, 'b' as u32), ('d' as u32, 'd' as u32), ('x' as u32, 'z' as u32)], false),
            class(&[('1' as u32, '3' as u32)], true)
        ])
    );
    assert_eq!(
        body(r#"root ::= "ab" . ("c" | "d")"#),
        Expr::seq([lit("ab"), Expr::AnyChar, Expr::alt([lit("c"), lit("d")])])
    );
    assert_eq!(body(r#"root ::= ("x")"#), lit("x"));
    assert_eq!(
        body(r#"root ::= "a"? "b"* "c"+"#),
        Expr::seq([Expr::optional(lit("a")), Expr::star(lit("b")), Expr::plus(lit("c"))])
    );
    assert_eq!(
        body(r#"root ::= "a"{2} "b"{2,} "c"{2,4} "d"{ 0 , 3 }"#),
        Expr::seq([
            Expr::repeat(lit("a"), 2, Some(2)),
            Expr::repeat(lit("b"), 2, None),
            Expr::repeat(lit("c"), 2, Some(4)),
            Expr::repeat(lit("d"), 0, Some(3)),
        ])
    );
    assert_eq!(body(r#"root ::= "a"+?"#), Expr::optional(Expr::plus(lit("a"))));
    assert_eq!(body(r#"root ::= "a" *"#), Expr::star(lit("a")), "spaces before a quantifier");
    // A maximum above llama.cpp's 2000 stays as written (llama.cpp makes it unbounded).
    assert_eq!(body(r#"root ::= "a"{3,5000}"#), Expr::repeat(lit("a"), 3, Some(5000)));
    assert_eq!(body(r#"root ::= "a"{2000}"#), Expr::repeat(lit("a"), 2000, Some(2000)));
    assert_eq!(
        body("root ::= <[1000]> !<[1001]> <think> !</think> <>"),
        Expr::seq([
            token(TokenName::Id(1000), false),
            token(TokenName::Id(1001), true),
            token(TokenName::Text("<think>".into()), false),
            token(TokenName::Text("</think>".into()), true),
            token(TokenName::Text("<>".into()), false),
        ])
    );
    assert_eq!(
        body(r#"root ::= () "" ("")*"#),
        Expr::seq([Expr::Empty, Expr::Literal(vec![]), Expr::star(Expr::Literal(vec![]))])
    );
    assert_eq!(body("root ::= ()*"), Expr::star(Expr::Empty));
    assert_eq!(body("root ::= \"a\"{0}"), Expr::repeat(lit("a"), 0, Some(0)));
}

#[test]
fn empty_alternatives() {
    assert_eq!(body(r#"root ::= | " ""#), Expr::alt([Expr::Empty, lit(" ")]));
    assert_eq!(body(r#"root ::= "x" | "#), Expr::alt([lit("x"), Expr::Empty]));
    assert_eq!(body("root ::="), Expr::Empty);
    assert_eq!(body("root ::= ( | )"), Expr::alt([Expr::Empty, Expr::Empty]));
}

#[test]
fn escapes_give_code_points() {
    assert_eq!(body(r#"root ::= "\x80""#), Expr::Literal(vec![0xC2, 0x80]));
    assert_eq!(body(r#"root ::= "\n\t\r\\\"\[\]\-""#), lit("\n\t\r\\\"[]-"));
    assert_eq!(body(r#"root ::= "\x41\u00e9\U0001F600é""#), lit("Aé😀é"));
    assert_eq!(body(r#"root ::= "\x414""#), lit("A4"), "\\x takes exactly two digits");
    assert_eq!(body(r#"root ::= [\x00-\U0010FFFF]"#), class(&[(0, 0x10FFFF)], false));
    assert_eq!(body(r#"root ::= [\]\[\\\-\n]"#), class(&[(93, 93), (91, 91), (92, 92), (45, 45), (10, 10)], false));
    // Raw newlines are part of literals and classes.
    assert_eq!(body("root ::= \"a\nb\""), lit("a\nb"));
}

#[test]
fn classes_read_ranges_like_llama_cpp() {
    let c = |s: &str| s.chars().map(|c| c as u32).collect::<Vec<_>>();
    let singles = |s: &str| c(s).into_iter().map(|v| (v, v)).collect::<Vec<_>>();
    assert_eq!(body("root ::= [a-]"), class(&singles("a-"), false));
    assert_eq!(body("root ::= [-a]"), class(&singles("-a"), false));
    assert_eq!(body("root ::= [a-c-e]"), class(&[(97, 99), (45, 45), (101, 101)], false));
    assert_eq!(body("root ::= [!--]"), class(&[(33, 45)], false));
    assert_eq!(body("root ::= [^^]"), class(&[(94, 94)], true));
    assert_eq!(body("root ::= [a^]"), class(&singles("a^"), false));
    assert_eq!(body("root ::= [[]"), class(&singles("["), false));
    assert_eq!(
        body("root ::= [z-a0]"),
        class(&[(122, 97), (48, 48)], false),
        "backward ranges are kept, as in llama.cpp"
    );
    assert_eq!(body("root ::= [\"#]"), class(&singles("\"#"), false));
}

#[test]
fn newlines_and_comments() {
    // Newlines are whitespace inside parentheses, after `::=` and after `|`.
    assert_eq!(body("root ::= (\n\"a\"\n|\n\"b\"\n)\n"), Expr::alt([lit("a"), lit("b")]));
    assert_eq!(body("root ::=\n  \"a\" |\n  \"b\""), Expr::alt([lit("a"), lit("b")]));
    assert_eq!(body("root ::= (\"a\"\n{2,\n3})"), Expr::repeat(lit("a"), 2, Some(3)));
    // Elsewhere a newline ends the rule.
    assert!(matches!(parse_gbnf("root ::= \"a\"\n| \"b\""), Err(GbnfError::Syntax { line: 2, col: 1, .. })));
    assert!(matches!(parse_gbnf("root ::= \"a\"\n*"), Err(GbnfError::Syntax { line: 2, col: 1, .. })));
    let e = parse_gbnf("root ::= \"a\"{2,\n3}");
    assert!(matches!(e, Err(GbnfError::Syntax { line: 1, col: 16, .. })), "{e:?}");
    assert!(matches!(parse_gbnf("root\n::= \"a\""), Err(GbnfError::Syntax { line: 1, col: 5, .. })));
    // Comments run to the end of the line, and \r\n or \r end lines too.
    let g = parse_gbnf("# c\r\nroot ::= a # (\r\na ::= \"x\" # \"y\"\rb ::= (\"#\" # )\n)\n# end").unwrap();
    assert_eq!(g.rules.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["root", "a", "b"]);
    assert_eq!(g.rule(RuleId(2)).body, lit("#"));
    assert_eq!(parse_gbnf("root ::= x\n\n\n\t x ::= \"\"").unwrap().rules.len(), 2);
}

#[test]
fn rules_names_and_ids() {
    // Ids follow definitions; references may come first; names take letters, digits, `-`.
    let g = parse_gbnf("a-1 ::= B9 c\nroot ::= a-1\nc ::= \"c\"\nB9 ::= \"b\"").unwrap();
    assert_eq!(g.rules.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["a-1", "root", "c", "B9"]);
    assert_eq!(g.root, RuleId(1));
    assert_eq!(g.rule(RuleId(0)).body, Expr::seq([Expr::Rule(RuleId(3)), Expr::Rule(RuleId(2))]));
    // As in llama.cpp, `_` is not a name character.
    assert!(matches!(parse_gbnf("root ::= a_b\na_b ::= \"x\""), Err(GbnfError::Syntax { .. })));
    // As in llama.cpp, a rule defined again takes the last definition (and keeps its id).
    let g = parse_gbnf("root ::= x\nx ::= \"1\"\nx ::= \"2\"").unwrap();
    assert_eq!(g.rules.len(), 2);
    assert_eq!(g.rule(RuleId(1)).body, lit("2"));
    // The start rule can be any rule.
    let g = parse_gbnf_with("a ::= b\nb ::= \"x\"", &with_root("b")).unwrap();
    assert_eq!(g.root, RuleId(1));
}

#[test]
fn rejected_grammars() {
    use GbnfError::*;
    let err = |src: &str| parse_gbnf(src).unwrap_err();
    assert!(matches!(err(r#"root ::= "\q""#), InvalidEscape { col: 11, .. }));
    assert!(matches!(err(r#"root ::= [\^]"#), InvalidEscape { .. }), "llama.cpp has no \\^");
    assert!(matches!(err(r#"root ::= "\x4""#), InvalidEscape { .. }));
    assert!(matches!(err(r#"root ::= "\u12G4""#), InvalidEscape { .. }));
    assert!(matches!(err(r#"root ::= "\uD800""#), InvalidCodePoint { value: 0xD800, .. }));
    assert!(matches!(err(r#"root ::= [\U00110000]"#), InvalidCodePoint { value: 0x110000, .. }));
    assert!(matches!(err("root ::= []"), EmptyClass { .. }));
    assert!(matches!(err("root ::= [^]"), EmptyClass { .. }));
    assert!(matches!(err(r"root ::= [^\x00-\uD7FF\uE000-\U0010FFFF]"), EmptyClass { .. }));
    assert!(matches!(err("root ::= [z-a]"), EmptyClass { .. }));
    assert!(matches!(err(r#"root ::= ""*"#), NothingToRepeat { col: 12, .. }));
    assert!(matches!(err(r#"root ::= "a"{0}?"#), NothingToRepeat { .. }));
    assert!(matches!(err(r#"root ::= *"#), Syntax { .. }));
    assert!(matches!(err(r#"root ::= "a" | +"#), Syntax { .. }));
    assert!(matches!(err(r#"root ::= "a"{2001}"#), RepetitionTooLarge { limit: 2000, .. }));
    assert!(matches!(err(r#"root ::= "a"{99999999999999999999999}"#), RepetitionTooLarge { .. }));
    assert!(matches!(err(r#"root ::= "a"{0,4294967296}"#), RepetitionTooLarge { limit: u32::MAX, .. }));
    assert!(matches!(err(r#"root ::= "a"{3,2}"#), RepetitionBounds { min: 3, max: 2, .. }));
    assert!(matches!(err(r#"root ::= "a"{}"#), Syntax { .. }));
    assert!(matches!(err("root ::= <[4294967296]>"), TokenIdTooLarge { .. }));
    assert!(matches!(err("root ::= <[]>"), Syntax { .. }));
    assert!(matches!(err("root ::= ! <[1]>"), Syntax { .. }));
    assert!(matches!(err("root ::= \"a\0\""), Syntax { .. }), "NUL is only allowed in comments");
    assert_eq!(err(""), MissingRoot { root: "root".into() });
    assert_eq!(err("# nothing\n"), MissingRoot { root: "root".into() });
    // Syntax errors come before undefined rules, undefined rules before a missing root.
    assert!(matches!(err("x ::= y\nz ::= \"a"), Syntax { line: 2, .. }));
    // An unclosed group or class is reported just after the grammar's last character,
    // not on the blank line after it.
    assert!(matches!(err("root ::= [a-z\n"), Syntax { line: 1, col: 14, at_end: true, .. }));
    let e = err("root ::= (\"a\" | \"b\"\n\n  \n");
    assert!(matches!(e, Syntax { line: 1, col: 20, at_end: true, .. }), "{e:?}");
    assert!(e.to_string().starts_with("unexpected end of grammar at line 1, column 20\n"), "{e}");
    assert!(matches!(err("root ::= \"a\"\n| \"b\""), Syntax { at_end: false, .. }));
    assert!(matches!(err("x ::= y"), UndefinedRule { .. }));
    let big = ParseOptions { max_source_bytes: 10, ..ParseOptions::default() };
    assert_eq!(parse_gbnf_with("root ::= \"abc\"", &big), Err(SourceTooLarge { size: 14, limit: 10 }));
    assert_eq!(parse_gbnf_bytes_with(b"root ::= \"abc\"", &big), Err(SourceTooLarge { size: 14, limit: 10 }));
}

#[test]
fn nesting_is_limited_without_overflowing_the_stack() {
    let options = ParseOptions::default();
    let n = options.max_nesting;
    let nested = |depth: usize| format!("root ::= {}\"x\"{}", "(".repeat(depth), ")".repeat(depth));
    let starred = |depth: usize| format!("root ::= \"x\"{}", "*".repeat(depth));
    let mixed = |depth: usize| format!("root ::= {}\"x\"{}", "(".repeat(depth / 2), "*)".repeat(depth / 2));
    // At the limit it parses, prints and compares in a thread with a 1 MiB stack.
    std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            for src in [nested(n), starred(n), mixed(n)] {
                let g = parse_gbnf(&src).unwrap();
                assert_round_trip(&g, "deep");
            }
            for src in [nested(n + 1), starred(n + 1), mixed(n + 2)] {
                assert!(matches!(parse_gbnf(&src), Err(GbnfError::NestingTooDeep { limit: 256, .. })), "{src}");
            }
        })
        .unwrap()
        .join()
        .unwrap();
    for src in [nested(60_000), starred(60_000), mixed(60_000), "root ::= ".to_string() + &"(".repeat(1 << 20)] {
        assert!(matches!(parse_gbnf(&src), Err(GbnfError::NestingTooDeep { .. })));
    }
    // Parentheses inside literals, classes, tokens and comments do not count.
    let quoted = format!("root ::= \"{0}\" [{0}] <{0}> # {0}\n", "(".repeat(1000));
    assert!(parse_gbnf(&quoted).is_ok());
}

// ---------------------------------------------------------------------------------------
// Error messages

fn display(src: &str) -> String {
    parse_gbnf(src).unwrap_err().to_string()
}

#[test]
fn error_snapshots() {
    assert_eq!(
        display("root ::= (\"a\" | \"b\"\n"),
        "unexpected end of grammar at line 1, column 20\nroot ::= (\"a\" | \"b\"\n                   ^ expected an item, a quantifier, `|` or `)`"
    );
    assert_eq!(
        display("root ::= (\"a\" | \"b\" x ::= \"c\""),
        "syntax error at line 1, column 23\nroot ::= (\"a\" | \"b\" x ::= \"c\"\n                      ^ expected an item, a quantifier, `|` or `)`"
    );
    assert_eq!(
        display("root ::= \"abc\n"),
        "unexpected end of grammar at line 1, column 14\nroot ::= \"abc\n             ^ expected `\"`"
    );
    assert_eq!(
        display("root ::= \"a\"\n  | \"b\""),
        "syntax error at line 2, column 3\n  | \"b\"\n  ^ expected a rule name or the end of the input"
    );
    assert_eq!(
        display("root ::= \"a\" )"),
        "syntax error at line 1, column 14\nroot ::= \"a\" )\n             ^ expected an item, a quantifier, `|` or the end of the line"
    );
    assert_eq!(display("root = \"a\""), "syntax error at line 1, column 6\nroot = \"a\"\n     ^ expected `::=`");
    assert_eq!(
        display("root ::= \"a\"{,10}"),
        "syntax error at line 1, column 14\nroot ::= \"a\"{,10}\n             ^ expected an integer"
    );
    assert_eq!(
        display("root ::= \"x\\q\""),
        "invalid escape `\\q` at line 1, column 12\nroot ::= \"x\\q\"\n           ^ expected \\xHH, \\uHHHH, \\UHHHHHHHH, \\t, \\n, \\r, \\\\, \\\", \\[, \\] or \\-"
    );
    assert_eq!(
        display("\troot ::= [\\uDFFF]"),
        "escape gives 0xDFFF, which is not a Unicode scalar value at line 1, column 12\n\troot ::= [\\uDFFF]\n\t          ^ surrogates and values above U+10FFFF cannot be encoded"
    );
    assert_eq!(
        display("root ::= expr\nexpr ::= term (\"+\" term)*\nterm ::= numero\nnumber ::= [0-9]+"),
        "undefined rule `numero` at line 3, column 10\nterm ::= numero\n         ^"
    );
    assert_eq!(display("rot ::= \"a\""), "the grammar has no rule `root` to start from");
    assert_eq!(
        display("root ::= \"a\" [^\\x00-\\U0010FFFF]"),
        "empty character class at line 1, column 14\nroot ::= \"a\" [^\\x00-\\U0010FFFF]\n             ^ it matches no character"
    );
    assert_eq!(
        display("root ::= \"a\"{5000}"),
        "repetition count 5000 is too large at line 1, column 14\nroot ::= \"a\"{5000}\n             ^ the most allowed here is 2000"
    );
    assert_eq!(
        display("root ::= \"\"+"),
        "nothing to repeat at line 1, column 12\nroot ::= \"\"+\n           ^ the item before this is empty (`\"\"` or `{0}`); wrap it in parentheses"
    );
    assert_eq!(
        display(&format!("root ::= {}", "(".repeat(60_000))),
        format!(
            "nesting deeper than 256 levels at line 1, column 266\n...{}...\n{}^ parentheses and quantifiers nest too deep here",
            "(".repeat(100),
            " ".repeat(53)
        )
    );
    assert_eq!(
        parse_gbnf_bytes(b"root ::= x\nx ::= \"caf\xC3\xA9 \xFF\"\n").unwrap_err().to_string(),
        "invalid UTF-8 at line 2, column 13\nx ::= \"caf\u{e9} \u{fffd}\"\n            ^"
    );
    let long = format!("root ::= {} )", "\"a\" ".repeat(40));
    assert_eq!(
        display(&long),
        format!(
            "syntax error at line 1, column 171\n...{}\n{}^ expected an item, a quantifier, `|` or the end of the line",
            &long[120..],
            " ".repeat(53)
        )
    );
}

#[test]
fn errors_carry_their_place() {
    let e = parse_gbnf("root ::= a\n\n  a ::= \"\\x\"").unwrap_err();
    assert_eq!(e.line_col(), Some((3, 10)));
    assert_eq!(GbnfError::MissingRoot { root: "r".into() }.line_col(), None);
}

// ---------------------------------------------------------------------------------------
// The printer

#[test]
fn printer_escapes_and_refuses_what_gbnf_cannot_say() {
    let mut g = Grammar::new();
    let root = g.add_rule(
        "root",
        Expr::seq([
            Expr::literal("q\"\\\n\t\r\u{0}\u{7f}\u{85}\u{a0}\u{2028}\u{feff}\u{10FFFF}é😀 "),
            Expr::Class(CharClass {
                ranges: vec![(0x5E, 0x5E), (0x2D, 0x5D), (0x5B, 0x5C), (0, 0x1F), (0xE000, 0xF8FF)],
                negated: true,
            }),
            Expr::repeat(Expr::Literal(vec![]), 1, None),
            Expr::star(Expr::repeat(Expr::Rule(RuleId(0)), 0, Some(0))),
            Expr::seq([Expr::Empty, Expr::seq([])]),
        ]),
    );
    g.root = root;
    let text = to_gbnf(&g).unwrap();
    assert_eq!(
        text,
        "root ::= \"q\\\"\\\\\\n\\t\\r\\x00\\x7F\\x85\\xA0\\u2028\\uFEFF\\U0010FFFF\u{e9}\u{1F600} \" \
         [^\\x5E\\--\\]\\[-\\\\\\x00-\\x1F\\uE000-\\uF8FF] (\"\")+ (root{0})* (() ())\n"
    );
    let again = parse_gbnf(&text).unwrap();
    assert_eq!(to_gbnf(&again).unwrap(), text);

    let one = |body: Expr| {
        let mut g = Grammar::new();
        g.add_rule("root", body);
        to_gbnf(&g)
    };
    assert!(matches!(one(Expr::Regex("a+".into())), Err(PrintError::RegexNotPrintable { .. })));
    assert!(matches!(one(Expr::Literal(vec![0xFF])), Err(PrintError::NotUtf8 { .. })));
    assert!(matches!(one(Expr::Rule(RuleId(7))), Err(PrintError::UnknownRule { id: 7, .. })));
    assert!(matches!(one(Expr::Class(CharClass::new([]))), Err(PrintError::EmptyClass { .. })));
    assert!(matches!(one(Expr::Class(CharClass::new([(0xD800, 0xD800)]))), Err(PrintError::InvalidCodePoint { .. })));
    assert!(matches!(one(Expr::Alt(vec![])), Err(PrintError::EmptyAlternation { .. })));
    assert!(matches!(one(Expr::repeat(lit("a"), 3, Some(2))), Err(PrintError::InvalidRepeat { .. })));
    assert!(matches!(one(Expr::repeat(lit("a"), 2001, None)), Err(PrintError::InvalidRepeat { .. })));
    for text in ["think", "<a>b>", "<[1]>", "<", "<x\0>"] {
        let t = token(TokenName::Text(text.into()), false);
        assert!(matches!(one(t), Err(PrintError::InvalidToken { .. })), "{text}");
    }
    assert_eq!(one(token(TokenName::Text("<a b\n>".into()), true)).unwrap(), "root ::= !<a b\n>\n");
    assert_eq!(one(token(TokenName::Id(7), true)).unwrap(), "root ::= !<[7]>\n");
    let mut g = Grammar::new();
    g.add_rule("a_b", Expr::Empty);
    assert!(matches!(to_gbnf(&g), Err(PrintError::InvalidRuleName { .. })));
    let mut g = Grammar::new();
    g.add_rule("a", Expr::Empty);
    g.add_rule("a", Expr::Empty);
    assert!(matches!(to_gbnf(&g), Err(PrintError::DuplicateRuleName { .. })));
}

// ---------------------------------------------------------------------------------------
// Properties

/// GBNF-ish text: punctuation, names, escapes, whitespace, and some non-ASCII.
fn gbnf_soup() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("::="),
        Just("root"),
        Just("a"),
        Just("x-1"),
        Just(" "),
        Just("\n"),
        Just("\r\n"),
        Just("\t"),
        Just("|"),
        Just("("),
        Just(")"),
        Just("\""),
        Just("["),
        Just("]"),
        Just("^"),
        Just("-"),
        Just("\\"),
        Just("\\x"),
        Just("\\u"),
        Just("\\U"),
        Just("0"),
        Just("9F"),
        Just("FFFF"),
        Just("{"),
        Just("}"),
        Just(","),
        Just("*"),
        Just("+"),
        Just("?"),
        Just("."),
        Just("#"),
        Just("<"),
        Just(">"),
        Just("!"),
        Just("<["),
        Just("é"),
        Just("\u{0}"),
        Just("root ::= "),
    ];
    proptest::collection::vec(piece, 0..60).prop_map(|v| v.concat())
}

/// Rule bodies from GBNF items and operators, so that a good share of them parse.
fn gbnf_body_soup() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("\"a\""),
        Just("\"\\x41\\n\\\"\""),
        Just("\"\""),
        Just("[a-z]"),
        Just("[^\\n\\]-]"),
        Just("."),
        Just("root"),
        Just("r-2"),
        Just("("),
        Just(")"),
        Just("()"),
        Just("|"),
        Just("*"),
        Just("+"),
        Just("?"),
        Just("{2}"),
        Just("{1,3}"),
        Just("{0,}"),
        Just("{0}"),
        Just(" "),
        Just("\n"),
        Just(" # c\n"),
        Just("<[5]>"),
        Just("!<x>"),
    ];
    (proptest::collection::vec(piece, 0..30), any::<bool>()).prop_map(|(v, extra)| {
        let rule = if extra { "\nr-2 ::= \"z\"" } else { "" };
        format!("root ::= {}{rule}", v.concat())
    })
}

/// Grammars shaped like those the parser produces, with rule references to `rules` rules.
fn arb_expr(rules: u32) -> impl Strategy<Value = Expr> {
    // Any character, ASCII, or one that GBNF treats specially.
    let chars = prop_oneof![
        any::<char>(),
        proptest::char::range('\0', '\u{7f}'),
        proptest::sample::select(&['-', ']', '[', '\\', '^', '"', '\n', '\r', '#', '\u{85}', '\u{feff}'][..]),
    ];
    // A class item is a single character or a range.
    let class_item = prop_oneof![chars.clone().prop_map(|c| (c, c)), (chars.clone(), chars.clone())];
    let leaf = prop_oneof![
        Just(Expr::Empty),
        Just(Expr::AnyChar),
        proptest::collection::vec(chars, 0..4).prop_map(|cs| Expr::literal(&cs.into_iter().collect::<String>())),
        (proptest::collection::vec(class_item, 1..4), any::<bool>())
            .prop_map(|(rs, negated)| Expr::Class(CharClass {
                ranges: rs.into_iter().map(|(a, b)| (a as u32, b as u32)).collect(),
                negated
            }))
            .prop_filter("matches something", |e| matches!(e, Expr::Class(c) if !c.is_empty())),
        (0..rules).prop_map(|r| Expr::Rule(RuleId(r))),
        (any::<u32>(), any::<bool>()).prop_map(|(id, n)| token(TokenName::Id(id), n)),
        ("[^\\[>\0][^>\0]{0,5}", any::<bool>()).prop_map(|(t, n)| token(TokenName::Text(format!("<{t}>")), n)),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 2..4).prop_map(Expr::Seq),
            proptest::collection::vec(inner.clone(), 2..4).prop_map(Expr::Alt),
            (inner, 0u32..4, proptest::option::of(0u32..4)).prop_map(|(e, min, max)| Expr::repeat(
                e,
                min,
                max.map(|m| m + min)
            )),
        ]
    })
}

fn arb_grammar() -> impl Strategy<Value = Grammar> {
    (1u32..4).prop_flat_map(|n| {
        (proptest::collection::vec(arb_expr(n), n as usize), 0..n).prop_map(|(bodies, root)| {
            let mut g = Grammar::new();
            for (i, body) in bodies.into_iter().enumerate() {
                g.add_rule(format!("r{i}"), body);
            }
            g.root = RuleId(root);
            g
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_text_never_panics(src in gbnf_soup()) {
        match parse_gbnf(&src) {
            // Whatever parses also prints and parses back.
            Ok(g) => assert_round_trip(&g, &src),
            Err(e) => { let _ = e.to_string(); }
        }
    }

    #[test]
    fn random_bodies_never_panic(src in gbnf_body_soup()) {
        match parse_gbnf(&src) {
            Ok(g) => assert_round_trip(&g, &src),
            Err(e) => { let _ = e.to_string(); }
        }
    }

    #[test]
    fn random_bytes_never_panic(src in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Err(e) = parse_gbnf_bytes(&src) {
            let _ = e.to_string();
        }
    }

    #[test]
    fn random_unicode_never_panics(src in "\\PC{0,100}") {
        if let Err(e) = parse_gbnf(&src) {
            let _ = e.to_string();
        }
    }

    #[test]
    fn printed_grammars_parse_back(g in arb_grammar()) {
        assert_round_trip(&g, "random grammar");
    }
}
