//! End-to-end tests of the `stencil` binary with JSON Schemas: `--schema` in `check`,
//! `accepts` and `sample`, and the `convert` and `validate` commands, on the fixture
//! schemas (`fixtures/schemas/*.json`, each with `*.valid.jsonl` and `*.invalid.jsonl`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use stencil_grammar::reference::Recognizer;
use stencil_schema::{compile_schema, Registry, SchemaOptions, Whitespace};

mod common;
use common::*;

/// The fixture schemas the grammar enforces completely (strict mode compiles them).
const STRICT: &[&str] = &["person", "invoice", "tree", "shape", "config", "contacts", "order", "citation"];
/// The fixture schema that needs `--lenient` (`uniqueItems` over free strings).
const LENIENT: &str = "note";

fn schema(name: &str) -> PathBuf {
    fixtures().join("schemas").join(format!("{name}.json"))
}

fn instances(name: &str, kind: &str) -> PathBuf {
    fixtures().join("schemas").join(format!("{name}.{kind}.jsonl"))
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The records of a fixture JSONL file.
fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {l}: {e}", path.display())))
        .collect()
}

/// The output shapes under test: the CLI flags, the same as library options, and how to
/// serialize an instance in that shape.
struct Style {
    flags: &'static [&'static str],
    options: fn() -> SchemaOptions,
    write: fn(&Value) -> String,
}

fn styles() -> Vec<Style> {
    vec![
        Style {
            flags: &["--whitespace", "compact"],
            options: SchemaOptions::compact,
            write: |v| serde_json::to_string(v).unwrap(),
        },
        Style {
            flags: &["--whitespace", "flexible", "--max-whitespace", "2"],
            options: || SchemaOptions { whitespace: Whitespace::Flexible { max_run: 2 }, ..Default::default() },
            // One member per line, no indentation: runs of one newline.
            // (Strings hold no raw newline, so every line starts outside of one.)
            write: |v| {
                serde_json::to_string_pretty(v).unwrap().lines().map(str::trim_start).collect::<Vec<_>>().join("\n")
            },
        },
        Style {
            flags: &["--indent", "2"],
            options: SchemaOptions::pretty,
            write: |v| serde_json::to_string_pretty(v).unwrap(),
        },
    ]
}

// ---------------------------------------------------------------------------------- check

#[test]
fn check_summarizes_each_strict_fixture_schema() {
    for name in STRICT {
        let o = run([OsString::from("check"), "--schema".into(), schema(name).into()]);
        assert_eq!(code(&o), 0, "{name}: {}{}", stdout(&o), stderr(&o));
        let out = stdout(&o);
        assert!(out.starts_with(&format!("schema {}: ok", schema(name).display())), "{out}");
        for field in [
            "rules:",
            "automaton states:",
            "schema compile:",
            "compile time:",
            "mode:             strict",
            "output shape:",
        ] {
            assert!(out.contains(field), "{name}: no {field:?} in\n{out}");
        }
        assert!(!out.contains("post-hoc only"), "{out}");
    }
}

#[test]
fn check_with_a_vocabulary_and_shape_flags() {
    let o = run([
        OsString::from("check"),
        "--schema".into(),
        schema("tree").into(),
        "--vocab".into(),
        gemma3().into(),
        "--indent".into(),
        "4".into(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("262144 tokens"), "{}", stdout(&o));
    assert!(stdout(&o).contains("indented, 4 spaces per level"), "{}", stdout(&o));
    let o = run([
        OsString::from("check"),
        "--schema".into(),
        schema("tree").into(),
        "--whitespace".into(),
        "compact".into(),
    ]);
    assert!(stdout(&o).contains("compact (no whitespace)"), "{}", stdout(&o));
    let o =
        run([OsString::from("check"), "--schema".into(), schema("tree").into(), "--max-whitespace".into(), "5".into()]);
    assert!(stdout(&o).contains("runs of at most 5"), "{}", stdout(&o));
}

#[test]
fn strict_mode_names_the_unsupported_keyword_and_its_pointer() {
    let o = run([OsString::from("check"), "--schema".into(), schema(LENIENT).into()]);
    assert_eq!(code(&o), 2, "{}{}", stdout(&o), stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("`uniqueItems` at #/properties/tags cannot be enforced"), "{err}");
    assert!(err.contains("note.json"), "{err}");
    assert!(err.contains("--lenient"), "the way out is named: {err}");
    assert!(stdout(&o).is_empty());
}

#[test]
fn lenient_mode_lists_what_is_left_to_post_hoc_validation() {
    let o = run([OsString::from("check"), "--schema".into(), schema(LENIENT).into(), "--lenient".into()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("mode:             lenient"), "{out}");
    assert!(out.contains("post-hoc only:    1 keyword"), "{out}");
    assert!(out.contains("`uniqueItems` at #/properties/tags is not enforced"), "{out}");
    // A lenient schema with nothing left over says so.
    let o = run([OsString::from("check"), "--schema".into(), schema("person").into(), "--lenient".into()]);
    assert!(stdout(&o).contains("post-hoc only:    none"), "{}", stdout(&o));
}

#[test]
fn bad_schemas_are_located_errors() {
    let cases: [(&str, &str, &[&str]); 5] = [
        ("not-json.json", "{\"type\": \"object\",\n  \"properties\": {,}}", &["not JSON", "line 2"]),
        (
            "bad-ref.json",
            r##"{"properties": {"a": {"$ref": "#/$defs/missing"}}}"##,
            &["`$ref` \"#/$defs/missing\" at #/properties/a does not resolve"],
        ),
        (
            "bad-pattern.json",
            r#"{"properties": {"code": {"type": "string", "pattern": "(a)\\1"}}}"#,
            &["`pattern`", "at #/properties/code"],
        ),
        (
            "bad-value.json",
            r#"{"type": "array", "items": {"type": "integer"}, "minItems": "two"}"#,
            &["`minItems` at #"],
        ),
        ("unsatisfiable.json", r#"{"type": "integer", "minimum": 5, "maximum": 1}"#, &["admits no value"]),
    ];
    for (name, text, needles) in cases {
        let path = scratch(name, text.as_bytes());
        for command in ["check", "convert"] {
            let o = run([OsString::from(command), "--schema".into(), path.clone().into()]);
            assert_eq!(code(&o), 2, "{command} {name}: {}{}", stdout(&o), stderr(&o));
            let err = stderr(&o);
            assert!(err.contains(name), "{command} {name}: {err}");
            for needle in needles {
                assert!(err.contains(needle), "{command} {name}: no {needle:?} in {err}");
            }
            assert!(!err.contains("panicked"), "{err}");
        }
    }
    let missing = fixtures().join("schemas/no-such-schema.json");
    let o = run([OsString::from("check"), "--schema".into(), missing.into()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("cannot read schema"), "{}", stderr(&o));
}

#[test]
fn schema_flags_need_a_schema_and_exclude_a_grammar() {
    let g = fixtures().join("gbnf/json.gbnf");
    let o = run([OsString::from("check"), "--grammar".into(), g.clone().into(), "--lenient".into()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("--schema"), "{}", stderr(&o));
    let o = run([OsString::from("check"), "--grammar".into(), g.into(), "--schema".into(), schema("tree").into()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
    let o = run([
        OsString::from("check"),
        "--schema".into(),
        schema("tree").into(),
        "--whitespace".into(),
        "compact".into(),
        "--max-whitespace".into(),
        "3".into(),
    ]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("--max-whitespace"), "{}", stderr(&o));
    let o = run([
        OsString::from("check"),
        "--schema".into(),
        schema("tree").into(),
        "--indent".into(),
        "2".into(),
        "--whitespace".into(),
        "compact".into(),
    ]);
    assert_eq!(code(&o), 2);
}

// -------------------------------------------------------------------------------- accepts

fn accepts(name: &str, vocab: &Path, flags: &[&str], text: &str) -> Output {
    let mut args: Vec<OsString> =
        vec!["accepts".into(), "--schema".into(), schema(name).into(), "--vocab".into(), vocab.into()];
    args.extend(flags.iter().map(Into::into));
    args.extend(["--text".into(), text.into()]);
    run(args)
}

#[test]
fn accepts_valid_instances_and_validates_them_too() {
    for (i, record) in records(&instances("person", "valid")).iter().enumerate() {
        let vocab = if i % 2 == 0 { smollm2() } else { gemma3() };
        let text = serde_json::to_string(record).unwrap();
        let o = accepts("person", &vocab, &["--whitespace", "compact"], &text);
        assert_eq!(code(&o), 0, "{text}: {}{}", stdout(&o), stderr(&o));
        let out = stdout(&o);
        assert!(out.starts_with("accepted ("), "{out}");
        assert!(out.contains("post-hoc validation: valid"), "{out}");
    }
    // The default shape: flexible whitespace.
    let o = accepts("person", &smollm2(), &[], r#"{"name": "Ada", "age": 36, "role": "employee"}"#);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
}

#[test]
fn any_order_accepts_properties_in_any_order_but_once() {
    let reordered = r#"{"role":"employee","age":36,"name":"Ada"}"#;
    let o = accepts("person", &smollm2(), &["--whitespace", "compact"], reordered);
    assert_eq!(code(&o), 1, "schema order by default: {}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("post-hoc validation: valid"), "{}", stdout(&o));
    let o = accepts("person", &smollm2(), &["--whitespace", "compact", "--any-order"], reordered);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    // A key written twice is refused by the grammar.
    let twice = r#"{"role":"employee","name":"Ada","role":"other"}"#;
    let o = accepts("person", &smollm2(), &["--whitespace", "compact", "--any-order"], twice);
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).starts_with("rejected: token"), "{}", stdout(&o));
}

#[test]
fn accepts_rejects_invalid_instances_with_both_verdicts() {
    let o = accepts("person", &smollm2(), &["--whitespace", "compact"], r#"{"name":"Bob","age":-1,"role":"employee"}"#);
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("rejected: token"), "{out}");
    assert!(out.contains("post-hoc validation: invalid (1 issue)"), "{out}");
    assert!(out.contains("at /age: `minimum`"), "{out}");
    // Not JSON at all.
    let o = accepts("tree", &gemma3(), &[], r#"{"label": "a""#);
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("text is incomplete"), "{}", stdout(&o));
    assert!(stdout(&o).contains("post-hoc validation: not JSON"), "{}", stdout(&o));
    // Valid, but not in the grammar's shape (compact output, spaces in the text).
    let o = accepts("tree", &gemma3(), &["--whitespace", "compact"], r#"{"label": "a"}"#);
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("post-hoc validation: valid"), "{}", stdout(&o));
}

#[test]
fn lenient_accepts_leaves_the_unenforced_keyword_to_validation() {
    let o = accepts(LENIENT, &smollm2(), &["--lenient"], r#"{"title": "Groceries", "tags": ["home", "home"]}"#);
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("accepted ("), "the grammar accepts it: {out}");
    assert!(out.contains("post-hoc validation: invalid"), "{out}");
    assert!(out.contains("at /tags: `uniqueItems`"), "{out}");
    assert!(out.contains("lenient mode"), "{out}");
    let o = accepts(LENIENT, &smollm2(), &["--lenient"], r#"{"title": "Groceries", "tags": ["home", "food"]}"#);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
}

// --------------------------------------------------------------------------------- sample

/// Runs `sample --random --schema` and returns the output and the decoded samples.
fn sample(name: &str, vocab: &Path, count: usize, seed: u64, flags: &[&str]) -> (Output, Vec<String>) {
    sample_random("--schema", &schema(name), vocab, count, seed, &[&["--max-tokens", "2000"], flags].concat())
}

/// Every printed sample is JSON, validates against the schema (checked here again, apart
/// from the CLI's own check), and is in the language of the schema's grammar (reference
/// recognizer); the CLI says every sample validated.
fn probe(name: &str, vocab: &Path, style: &Style, count: usize, seed: u64, lenient: bool) {
    let mut flags = style.flags.to_vec();
    let mut options = (style.options)();
    if lenient {
        flags.push("--lenient");
        options = options.lenient();
    }
    let (o, samples) = sample(name, vocab, count, seed, &flags);
    let label = format!("{name} {flags:?} {}", vocab.display());
    assert_eq!(code(&o), 0, "{label}: {}", stderr(&o));
    let document = read_json(&schema(name));
    let grammar = compile_schema(&document, &options).unwrap().grammar;
    let recognizer = Recognizer::new(&grammar).unwrap();
    for s in &samples {
        let v: Value = serde_json::from_str(s).unwrap_or_else(|e| panic!("{label}: sample not JSON: {s:?}: {e}"));
        if let Err(issues) = stencil_schema::validate(&document, &v, &Registry::new()) {
            panic!("{label}: sample does not validate: {s}\n{issues:?}");
        }
        assert!(recognizer.matches(s.as_bytes()), "{label}: sample not in the grammar: {s:?}");
    }
    let err = stderr(&o);
    assert!(samples.len() * 10 >= count * 8, "{label}: only {} of {count} samples printed:\n{err}", samples.len());
    if !lenient {
        assert!(err.contains("every complete sample validates against the schema"), "{label}: {err}");
    }
    eprintln!("{label}: {} of {count}", samples.len());
}

#[test]
fn samples_of_every_fixture_schema_validate_smollm2() {
    let styles = styles();
    for (i, name) in STRICT.iter().enumerate() {
        probe(name, &smollm2(), &styles[i % styles.len()], 12, i as u64, false);
    }
}

#[test]
fn samples_of_every_fixture_schema_validate_gemma3() {
    let styles = styles();
    for (i, name) in STRICT.iter().enumerate() {
        probe(name, &gemma3(), &styles[(i + 1) % styles.len()], 12, 100 + i as u64, false);
    }
}

#[test]
fn lenient_samples_that_fail_validation_are_reported_not_printed() {
    // Duplicate tags are possible in the grammar's language: such samples are reported and
    // counted, not printed; every printed sample validates.
    let (o, samples) = sample(LENIENT, &smollm2(), 20, 3, &["--lenient", "--whitespace", "compact"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let document = read_json(&schema(LENIENT));
    for s in &samples {
        let v: Value = serde_json::from_str(s).unwrap();
        assert!(stencil_schema::validate(&document, &v, &Registry::new()).is_ok(), "{s}");
    }
    let err = stderr(&o);
    let rejected = err.matches("rejected by post-hoc validation (lenient mode, not printed)").count();
    assert!(samples.len() + rejected >= 16, "{err}");
    if rejected > 0 {
        assert!(err.contains("`uniqueItems`"), "{err}");
        assert!(err.contains(&format!("{rejected} rejected by post-hoc validation")), "{err}");
    }
}

// -------------------------------------------------------------------------------- convert

/// The converted GBNF, parsed back, accepts exactly the serialized instances (valid and
/// invalid) that the schema's own grammar accepts, in every output shape; in strict mode
/// that is every valid instance and no invalid one.
#[test]
fn converted_gbnf_matches_the_schema_grammar() {
    for style in styles() {
        for name in STRICT.iter().copied().chain([LENIENT]) {
            let lenient = name == LENIENT;
            let mut args: Vec<OsString> = vec!["convert".into(), "--schema".into(), schema(name).into()];
            args.extend(style.flags.iter().map(Into::into));
            let mut options = (style.options)();
            if lenient {
                args.push("--lenient".into());
                options = options.lenient();
            }
            let label = format!("{name} {:?}", style.flags);
            let o = run(args);
            assert_eq!(code(&o), 0, "{label}: {}", stderr(&o));
            let text = stdout(&o);
            let converted = stencil_grammar::parse_gbnf(&text).unwrap_or_else(|e| panic!("{label}: {e}\n{text}"));
            assert!(text.lines().all(|l| l.starts_with('#') || l.contains(" ::= ")), "{label}: one rule per line");
            for line in text.lines().filter(|l| !l.starts_with('#')) {
                let rule = line.split(" ::= ").next().unwrap();
                assert!(stencil_grammar::is_gbnf_name(rule), "{label}: rule name {rule:?}");
            }
            let document = read_json(&schema(name));
            let own = compile_schema(&document, &options).unwrap().grammar;
            let (r_own, r_conv) = (Recognizer::new(&own).unwrap(), Recognizer::new(&converted).unwrap());
            for kind in ["valid", "invalid"] {
                for record in records(&instances(name, kind)) {
                    let s = (style.write)(&record);
                    let (a, b) = (r_own.matches(s.as_bytes()), r_conv.matches(s.as_bytes()));
                    assert_eq!(a, b, "{label}: schema grammar says {a}, converted GBNF says {b} on\n{s}");
                    if !lenient {
                        assert_eq!(a, kind == "valid", "{label}: {kind} instance, grammar says {a}:\n{s}");
                    }
                }
            }
            // Strings of the schema's grammar, and near misses.
            for seed in 0..20 {
                let Some(s) = stencil_grammar::random::random_string_in(&own, seed, 300) else { continue };
                assert!(r_conv.matches(&s), "{label}: converted GBNF refuses {:?}", String::from_utf8_lossy(&s));
                let mut t = s.clone();
                t.insert(s.len() / 2, b'"');
                assert_eq!(r_own.matches(&t), r_conv.matches(&t), "{label}: {:?}", String::from_utf8_lossy(&t));
            }
        }
    }
}

#[test]
fn lenient_convert_lists_the_unenforced_keywords_in_comments() {
    let o = run([OsString::from("convert"), "--schema".into(), schema(LENIENT).into(), "--lenient".into()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("# Lenient conversion: 1 keyword"), "{out}");
    assert!(out.contains("#   `uniqueItems` at #/properties/tags"), "{out}");
    assert!(stderr(&o).contains("`uniqueItems` at #/properties/tags"), "{}", stderr(&o));
    let o = run([OsString::from("convert"), "--schema".into(), schema(LENIENT).into()]);
    assert_eq!(code(&o), 2);
}

#[test]
fn converted_gbnf_has_root_and_no_regexes_or_oversized_repetitions() {
    // A pattern, a format and a string length above llama.cpp's repetition limit.
    let path = scratch(
        "long.json",
        br#"{"type": "object", "properties": {
            "id": {"type": "string", "pattern": "^[A-Z]{3}-\\d{4,6}$"},
            "when": {"type": "string", "format": "date-time"},
            "text": {"type": "string", "minLength": 2100, "maxLength": 4500}
        }, "required": ["id", "when", "text"], "additionalProperties": false}"#,
    );
    let o = run([OsString::from("convert"), "--schema".into(), path.into(), "--whitespace".into(), "compact".into()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = stdout(&o);
    let g = stencil_grammar::parse_gbnf(&text).unwrap();
    assert_eq!(g.rule(g.root).name, "root");
    // Every count written is below llama.cpp's limit of 2000.
    for count in text.split('{').skip(1).filter_map(|t| t.split('}').next()) {
        for n in count.split(',').filter(|n| !n.is_empty()) {
            if let Ok(n) = n.trim().parse::<u32>() {
                assert!(n < 2000, "count {n} in\n{text}");
            }
        }
    }
    let r = Recognizer::new(&g).unwrap();
    let doc =
        |len: usize| format!(r#"{{"id":"ABC-12345","when":"2024-02-29T12:30:00Z","text":"{}"}}"#, "x".repeat(len));
    for (len, ok) in [(2099, false), (2100, true), (4500, true), (4501, false)] {
        assert_eq!(r.matches(doc(len).as_bytes()), ok, "text of {len}");
    }
    assert!(!r.matches(br#"{"id":"AB-12345","when":"2024-02-29T12:30:00Z","text":"xx"}"#));
}

// ------------------------------------------------------------------------------- validate

fn validate(files: &[PathBuf]) -> Output {
    validate_with(&schema("person"), files)
}

fn validate_with(schema_path: &Path, files: &[PathBuf]) -> Output {
    let mut args: Vec<OsString> = vec!["validate".into(), "--schema".into(), schema_path.into()];
    args.extend(files.iter().map(|f| f.clone().into()));
    run(args)
}

#[test]
fn validate_passes_every_valid_fixture() {
    for name in STRICT.iter().chain([&LENIENT]) {
        let o = validate_with(&schema(name), &[instances(name, "valid")]);
        assert_eq!(code(&o), 0, "{name}: {}{}", stdout(&o), stderr(&o));
        let n = records(&instances(name, "valid")).len();
        assert_eq!(stdout(&o).trim(), format!("{n} records in 1 file: {n} valid, 0 invalid"), "{name}");
    }
}

#[test]
fn validate_reports_each_invalid_record_with_line_pointer_and_keyword() {
    for name in STRICT.iter().chain([&LENIENT]) {
        let file = instances(name, "invalid");
        let o = validate_with(&schema(name), std::slice::from_ref(&file));
        assert_eq!(code(&o), 1, "{name}: {}{}", stdout(&o), stderr(&o));
        let out = stdout(&o);
        let n = records(&file).len();
        for line in 1..=n {
            assert!(
                out.contains(&format!("{}:{line}: at ", file.display())),
                "{name}: line {line} not reported:\n{out}"
            );
        }
        assert!(out.trim_end().ends_with(&format!("{n} records in 1 file: 0 valid, {n} invalid")), "{out}");
    }
    let o = validate(&[instances("person", "invalid")]);
    let out = stdout(&o);
    let file = instances("person", "invalid").display().to_string();
    for expected in [
        format!("{file}:1: at (root): `required`: \"name\" is a required property"),
        format!("{file}:4: at /age: `minimum`: "),
        format!("{file}:10: at /address/country: `pattern`: "),
        format!("{file}:14: at /languages: `uniqueItems`: "),
    ] {
        assert!(out.contains(&expected), "no {expected:?} in\n{out}");
    }
}

#[test]
fn validate_reads_json_documents_and_several_files() {
    let good =
        scratch("good.json", br#"{"name": "Ada", "role": "employee", "address": {"city": "London", "country": "GB"}}"#);
    let bad = scratch("bad.json", b"{\n  \"name\": \"Ada\",\n  \"role\": \"queen\"\n}\n");
    let o = validate(std::slice::from_ref(&good));
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let o = validate(&[good.clone(), bad.clone(), instances("person", "valid")]);
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains(&format!("{}: at /role: `enum`", bad.display())), "{out}");
    assert!(out.trim_end().ends_with("7 records in 3 files: 6 valid, 1 invalid"), "{out}");
}

#[test]
fn validate_exits_2_on_unreadable_input_and_says_where() {
    let broken = scratch(
        "broken.jsonl",
        b"{\"name\": \"Ada\", \"role\": \"other\"}\n\n{\"name\": \"Bob\",\n{\"name\": \"Eve\", \"role\": \"boss\"}\n",
    );
    let o = validate(std::slice::from_ref(&broken));
    assert_eq!(code(&o), 2, "{}{}", stdout(&o), stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(&format!("{}:3: not JSON", broken.display())), "{err}");
    // The other records are still checked.
    let out = stdout(&o);
    assert!(out.contains(&format!("{}:4: at /role: `enum`", broken.display())), "{out}");
    assert!(out.trim_end().ends_with("2 records in 1 file: 1 valid, 1 invalid, 1 unreadable (see stderr)"), "{out}");

    let not_json = scratch("not-json.json", b"{\"name\": ");
    let o = validate(&[not_json.clone(), instances("person", "valid")]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains(&format!("{}: not JSON", not_json.display())), "{}", stderr(&o));

    let missing = fixtures().join("schemas/missing.jsonl");
    let o = validate(&[missing]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("cannot read file"), "{}", stderr(&o));

    let bad_utf8 = scratch("latin1.jsonl", b"{\"name\": \"caf\xE9\", \"role\": \"other\"}\n");
    let o = validate(&[bad_utf8]);
    assert_eq!(code(&o), 2, "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains(":1: not JSON"), "{}", stderr(&o));

    let bad_schema = scratch("bad-schema.json", b"[1, 2");
    let o = validate_with(&bad_schema, &[instances("person", "valid")]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("invalid schema"), "{}", stderr(&o));
}

#[test]
fn validate_needs_a_file() {
    let o = run([OsString::from("validate"), "--schema".into(), schema("person").into()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("FILE"), "{}", stderr(&o));
}

// ----------------------------------------------------------------------------------- help

#[test]
fn help_lists_the_schema_commands_and_flags() {
    let out = stdout(&run(["--help"]));
    for word in ["convert", "validate"] {
        assert!(out.contains(word), "{out}");
    }
    for command in ["check", "accepts", "sample", "convert"] {
        let out = stdout(&run([command, "--help"]));
        for flag in ["--schema", "--lenient", "--whitespace", "--max-whitespace", "--indent"] {
            assert!(out.contains(flag), "{command}: {flag} missing in\n{out}");
        }
    }
}
