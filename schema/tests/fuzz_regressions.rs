//! Replays every minimized fuzz crash in `fixtures/fuzz-regressions/<target>/` through the
//! same checks the fuzz targets run (`stencil_test_support::checks`, which the fuzz crate
//! re-exports, so that the normal test suite needs neither libFuzzer nor the fuzz crate).
//! See `FUZZING.md`.

use stencil_test_support::checks;

use std::path::Path;

#[test]
fn fuzz_regressions_replay() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/fuzz-regressions");
    let mut replayed = 0;
    for target in ["gbnf_parse", "schema_compile", "ecma_pattern", "matcher"] {
        let dir = root.join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut files: Vec<_> = entries.map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
        files.sort();
        for file in files {
            if file.file_name().is_some_and(|n| n == "README.md") {
                continue;
            }
            let bytes = std::fs::read(&file).unwrap();
            let outcome = std::panic::catch_unwind(|| checks::replay(target, &bytes));
            assert!(outcome.is_ok(), "{} fails again", file.display());
            replayed += 1;
        }
    }
    eprintln!("{replayed} fuzz regressions replayed");
}

/// The checks themselves work on known-good inputs (so that an empty regression directory
/// still exercises this file).
#[test]
fn checks_pass_on_good_inputs() {
    checks::check_gbnf(b"root ::= \"a\" [b-d]* item\nitem ::= \"x\" | \"y\"{1,3}\n");
    checks::check_pattern("^[a-z]+(-[a-z]+)*$");
    let case = checks::SchemaCase {
        schema: serde_json::json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]}),
        options: checks::CaseOptions { compact: true, ..Default::default() },
    };
    checks::check_schema(&case);
    let v = checks::SchemaCase::from_json(&case.to_json());
    assert_eq!(v, case);
    let mut g = stencil_grammar::Grammar::new();
    let r = g.add_rule("root", stencil_grammar::Expr::Empty);
    g.set_body(
        r,
        stencil_grammar::Expr::alt([
            stencil_grammar::Expr::seq([
                stencil_grammar::Expr::literal("{"),
                stencil_grammar::Expr::Rule(r),
                stencil_grammar::Expr::literal("}"),
            ]),
            stencil_grammar::Expr::Regex("a+".into()),
        ]),
    );
    g.root = r;
    use checks::Op::*;
    let case = checks::MatcherCase {
        grammar: g,
        vocab_seed: 3,
        ops: vec![
            Accept(0),
            Fork,
            Accept(5),
            Forced(4),
            Reject(2),
            Rollback(1),
            Accept(1),
            Accept(7),
            Accept(0),
            Rollback(9),
            Accept(3),
        ],
    };
    checks::check_matcher(&case);
    assert_eq!(checks::MatcherCase::from_json(&case.to_json()), case);
}
