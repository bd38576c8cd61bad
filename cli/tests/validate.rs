//! End-to-end tests of `stencil validate`, the CI validator (issue #5): files, JSONL,
//! directories, every kind of bad input (`fixtures/validate/`), the three report formats
//! (the JUnit one parsed back by a strict XML parser) and the exit statuses.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

mod common;
use common::*;

fn person() -> PathBuf {
    fixtures().join("schemas/person.json")
}

fn fx(path: &str) -> PathBuf {
    fixtures().join("validate").join(path)
}

/// `stencil validate --schema person.json ARGS...`.
fn validate<I: IntoIterator<Item = S>, S: Into<OsString>>(args: I) -> Output {
    let mut all: Vec<OsString> = vec!["validate".into(), "--schema".into(), person().into()];
    all.extend(args.into_iter().map(Into::into));
    run(all)
}

fn show(o: &Output) -> String {
    format!("exit {:?}\n--- stdout\n{}--- stderr\n{}", o.status.code(), stdout(o), stderr(o))
}

fn d(p: &Path) -> String {
    p.display().to_string()
}

// ---------------------------------------------------------------------------- text

#[test]
fn a_directory_of_valid_outputs_passes() {
    let o = validate([fx("good")]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    assert_eq!(stdout(&o), "4 records in 3 files: 4 valid, 0 invalid\n", "{}", show(&o));
    assert_eq!(stderr(&o), "", "no progress bar and no noise when stderr is not a terminal");
}

#[test]
fn every_failing_record_is_reported_with_file_line_pointer_and_keyword() {
    let o = validate([fx("mixed")]);
    assert_eq!(code(&o), 1, "{}", show(&o));
    let (jsonl, doc) = (d(&fx("mixed/people.jsonl")), d(&fx("mixed/queen.json")));
    let out = stdout(&o);
    for expected in [
        format!("{jsonl}:2: at /age: `minimum`: -1 is less than the minimum of 0\n"),
        format!("{jsonl}:3: at (root): `required`: \"name\" is a required property\n"),
        format!("{jsonl}:5: at /role: `enum`: "),
        format!("{jsonl}:5: at /address/country: `pattern`: "),
        format!("{jsonl}:6: at /languages: `uniqueItems`: "),
        format!("{doc}: at /role: `enum`: \"queen\" is not one of "),
    ] {
        assert!(out.contains(&expected), "no {expected:?} in\n{out}");
    }
    assert!(!out.contains(&format!("{jsonl}:1:")), "line 1 is valid");
    assert!(!out.contains(&format!("{jsonl}:4:")), "line 4 is blank");
    assert!(out.ends_with("6 records in 2 files: 1 valid, 5 invalid\n"), "{out}");
    assert_eq!(stderr(&o), "");
}

#[test]
fn files_and_directories_mix_in_the_order_given() {
    let o = validate([fx("mixed/queen.json"), fx("good"), fx("mixed/people.jsonl")]);
    assert_eq!(code(&o), 1, "{}", show(&o));
    let out = stdout(&o);
    let queen = out.find("queen.json: at").unwrap();
    let people = out.find("people.jsonl:2: at").unwrap();
    assert!(queen < people, "{out}");
    assert!(out.ends_with("10 records in 5 files: 5 valid, 5 invalid\n"), "{out}");
}

#[test]
fn a_file_named_on_the_command_line_is_read_whatever_its_extension() {
    // Not `.jsonl`: one JSON document, so a line-per-record file fails as a whole.
    let f = scratch("records.txt", b"{\"name\": \"Ada\", \"role\": \"other\"}\n");
    let o = validate([&f]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let f =
        scratch("records.ndjson", b"{\"name\": \"Ada\", \"role\": \"other\"}\n{\"name\": \"Bob\", \"role\": \"x\"}\n");
    let o = validate([&f]);
    assert_eq!(code(&o), 1, "{}", show(&o));
    assert!(stdout(&o).contains(&format!("{}:2: at /role: `enum`", d(&f))), "{}", show(&o));
}

#[test]
fn standard_input_is_jsonl() {
    let mut child = Command::new(BIN)
        .args(["validate", "--schema"])
        .arg(person())
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"name\": \"Ada\", \"role\": \"other\"}\n{\"role\": \"other\"}\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), 1, "{}", show(&o));
    assert!(stdout(&o).starts_with("<stdin>:2: at (root): `required`"), "{}", show(&o));
}

// ----------------------------------------------------------------------- bad input

/// Runs on one bad input: exit 2, and stderr has `error: PLACE: MESSAGE`.
fn assert_bad(o: &Output, place: &str, message: &str) {
    assert_eq!(code(o), 2, "{}", show(o));
    let expected = format!("error: {place}: {message}");
    assert!(stderr(o).contains(&expected), "no {expected:?} in\n{}", show(o));
    assert!(stdout(o).contains("unreadable (see stderr)"), "{}", show(o));
}

#[test]
fn a_truncated_last_line_is_bad_input_and_the_lines_before_are_checked() {
    let f = fx("broken/truncated.jsonl");
    let o = validate([&f]);
    assert_bad(&o, &format!("{}:2", d(&f)), "truncated record: the file ends in the middle of this line");
    assert_eq!(stdout(&o), "1 record in 1 file: 1 valid, 0 invalid, 1 unreadable (see stderr)\n");
}

#[test]
fn invalid_utf8_is_bad_input() {
    let f = fx("broken/latin1.jsonl");
    assert_bad(&validate([&f]), &format!("{}:2", d(&f)), "not JSON: invalid UTF-8 at byte 13 of the line");
}

#[test]
fn lines_that_are_not_json_are_bad_input_and_the_others_still_checked() {
    let f = fx("broken/not-json.jsonl");
    let o = validate([&f]);
    assert_bad(&o, &format!("{}:2", d(&f)), "not JSON: expected ident at column 2");
    assert_bad(&o, &format!("{}:3", d(&f)), "not JSON: trailing comma at column 16");
    assert!(stdout(&o).contains(&format!("{}:4: at /role: `enum`", d(&f))), "{}", show(&o));
    assert!(stdout(&o).ends_with("2 records in 1 file: 1 valid, 1 invalid, 2 unreadable (see stderr)\n"));
}

#[test]
fn json_documents_that_are_not_json_say_where() {
    let f = fx("broken/cut.json");
    assert_bad(&validate([&f]), &d(&f), "not JSON: EOF while parsing a string at line 3 column 14");
    let f = fx("broken/two-documents.json");
    let o = validate([&f]);
    assert_bad(&o, &d(&f), "not JSON: trailing characters at line 2 column 1");
    assert!(stderr(&o).contains("name the file .jsonl"), "{}", show(&o));
}

#[test]
fn empty_files_are_bad_input_unless_allowed() {
    for f in ["broken/empty.jsonl", "broken/blank.jsonl", "broken/empty.json"] {
        let f = fx(f);
        let o = validate([&f]);
        assert_bad(&o, &d(&f), "empty file: no record");
        let o = validate([OsString::from("--allow-empty"), f.into()]);
        assert_eq!(code(&o), 0, "{}", show(&o));
        assert_eq!(stdout(&o), "0 records in 1 file: 0 valid, 0 invalid\n");
    }
}

#[test]
fn missing_files_and_directories_without_json_are_bad_input() {
    let missing = fx("missing.jsonl");
    let o = validate([&missing, &fx("good/ada.json")]);
    assert_bad(&o, &d(&missing), "cannot read file: ");
    assert!(stdout(&o).ends_with("1 record in 2 files: 1 valid, 0 invalid, 1 unreadable (see stderr)\n"));
    let dir = fx("no-json");
    assert_bad(&validate([&dir]), &d(&dir), "directory holds no .json, .jsonl or .ndjson file");
}

#[test]
fn a_huge_record_is_skipped_with_an_error_and_the_next_line_checked() {
    // 3 MiB on one line, generated here rather than committed.
    let huge = format!("{{\"name\": \"Ada\", \"role\": \"other\", \"notes\": \"{}\"}}", "x".repeat(3 << 20));
    let bytes = format!("{{\"name\": \"Ada\", \"role\": \"other\"}}\n{huge}\n{{\"name\": \"Bob\", \"role\": \"x\"}}\n");
    let f = scratch("huge.jsonl", bytes.as_bytes());
    let o = validate([OsString::from("--max-record-bytes"), "1M".into(), f.clone().into()]);
    assert_bad(&o, &format!("{}:2", d(&f)), "record longer than the limit of 1048576 bytes: skipped");
    assert!(stdout(&o).contains(&format!("{}:3: at /role: `enum`", d(&f))), "{}", show(&o));
    // Under the default limit (64 MiB) it is read, and fails the schema.
    let o = validate([&f]);
    assert_eq!(code(&o), 1, "{}", show(&o));
    assert!(stdout(&o).contains(&format!("{}:2: at (root): `additionalProperties`", d(&f))), "{}", show(&o));
    // A JSON document over the limit.
    let doc = scratch("huge.json", huge.as_bytes());
    let o = validate([OsString::from("--max-record-bytes"), "65536".into(), doc.clone().into()]);
    assert_bad(&o, &d(&doc), "record longer than the limit of 65536 bytes: skipped");
}

#[test]
fn bad_schemas_are_bad_input() {
    let good = fx("good");
    let o =
        run([OsString::from("validate"), "--schema".into(), fx("schemas/not-json.json").into(), good.clone().into()]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(stderr(&o).contains("invalid schema"), "{}", show(&o));
    assert!(stdout(&o).is_empty());
    let o = run([OsString::from("validate"), "--schema".into(), fx("schemas/rejected.json").into(), good.into()]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(stderr(&o).contains("cannot be used"), "{}", show(&o));
    let o = run([OsString::from("validate"), "--schema".into(), fx("schemas/missing.json").into(), fx("good").into()]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    assert!(stderr(&o).contains("cannot read schema"), "{}", show(&o));
}

#[test]
fn bad_flags_are_usage_errors() {
    for size in ["0", "12X", "-1", "99999999999G"] {
        let o = validate([OsString::from(format!("--max-record-bytes={size}")), fx("good").into()]);
        assert_eq!(code(&o), 2, "{size}: {}", show(&o));
        assert!(stderr(&o).contains("--max-record-bytes"), "{}", show(&o));
    }
    let o = validate(["--format", "xml", "x.json"]);
    assert_eq!(code(&o), 2, "{}", show(&o));
}

// ---------------------------------------------------------------------------- json

#[test]
fn the_json_report_is_one_object_with_records_files_and_summary() {
    let missing = fx("missing.jsonl");
    let o = validate([OsString::from("--format"), "json".into(), fx("mixed").into(), missing.clone().into()]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}\n{}", show(&o)));
    assert_eq!(v["version"], 1);
    assert_eq!(v["schema"], d(&person()));
    let records = v["records"].as_array().unwrap();
    let places: Vec<(String, u64)> =
        records.iter().map(|r| (r["file"].as_str().unwrap().to_string(), r["line"].as_u64().unwrap())).collect();
    let (jsonl, doc) = (d(&fx("mixed/people.jsonl")), d(&fx("mixed/queen.json")));
    assert_eq!(places, [(jsonl.clone(), 2), (jsonl.clone(), 3), (jsonl.clone(), 5), (jsonl, 6), (doc, 1)]);
    assert_eq!(records[0]["status"], "invalid");
    assert_eq!(records[0]["issues"][0]["pointer"], "/age");
    assert_eq!(records[0]["issues"][0]["keyword"], "minimum");
    assert_eq!(records[0]["issues"][0]["schema_pointer"], "/properties/age/minimum");
    assert_eq!(records[2]["issues"].as_array().unwrap().len(), 2);
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 3);
    assert_eq!(files[0]["format"], "jsonl");
    assert_eq!(files[1]["format"], "json");
    assert_eq!(files[2]["path"], d(&missing));
    assert!(files[2]["error"].as_str().unwrap().starts_with("cannot read file"));
    assert_eq!(
        v["summary"],
        serde_json::json!({"files": 3, "records": 6, "valid": 1, "invalid": 5, "unreadable": 1, "ok": false, "exit_code": 2})
    );
    // The summary line goes to stderr for the CI log.
    assert_eq!(stderr(&o), "6 records in 3 files: 1 valid, 5 invalid, 1 unreadable\n");
}

// --------------------------------------------------------------------------- junit

#[test]
fn the_junit_report_has_a_suite_per_file_and_a_case_per_record() {
    let o = validate([OsString::from("--format"), "junit".into(), fx("mixed").into(), fx("broken").into()]);
    assert_eq!(code(&o), 2, "{}", show(&o));
    let xml = stdout(&o);
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("not well-formed: {e}\n{xml}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let suites: Vec<_> = root.children().filter(|n| n.has_tag_name("testsuite")).collect();
    let names: Vec<_> = suites.iter().map(|s| s.attribute("name").unwrap().to_string()).collect();
    let expected: Vec<String> = [
        "mixed/people.jsonl",
        "mixed/queen.json",
        "broken/blank.jsonl",
        "broken/cut.json",
        "broken/empty.json",
        "broken/empty.jsonl",
        "broken/latin1.jsonl",
        "broken/not-json.jsonl",
        "broken/truncated.jsonl",
        "broken/two-documents.json",
    ]
    .iter()
    .map(|f| d(&fx(f)))
    .collect();
    assert_eq!(names, expected);

    let count = |s: &roxmltree::Node, a: &str| s.attribute(a).unwrap().parse::<usize>().unwrap();
    let people = suites[0];
    assert_eq!((count(&people, "tests"), count(&people, "failures"), count(&people, "errors")), (5, 4, 0));
    let cases: Vec<_> = people.children().filter(|n| n.has_tag_name("testcase")).collect();
    let case_names: Vec<_> = cases.iter().map(|c| c.attribute("name").unwrap()).collect();
    let file = d(&fx("mixed/people.jsonl"));
    assert_eq!(case_names, [1, 2, 3, 5, 6].map(|l| format!("{file}:{l}")));
    assert!(cases[0].first_element_child().is_none());
    let failure = cases[1].first_element_child().unwrap();
    assert!(failure.has_tag_name("failure"));
    assert_eq!(failure.attribute("message"), Some("at /age: `minimum`: -1 is less than the minimum of 0"));
    // The record with XML specials in its values: escaped, and read back intact.
    let zoe = cases[4].first_element_child().unwrap();
    assert!(zoe.text().unwrap().contains(r#"["en","en"] has non-unique elements"#), "{:?}", zoe.text());

    // Unreadable records and files are <error>s.
    let not_json = suites[7];
    assert_eq!((count(&not_json, "tests"), count(&not_json, "failures"), count(&not_json, "errors")), (4, 1, 2));
    let empty = suites[5];
    let case = empty.first_element_child().unwrap();
    assert_eq!(case.attribute("name"), Some(d(&fx("broken/empty.jsonl")).as_str()));
    let error = case.first_element_child().unwrap();
    assert!(error.has_tag_name("error"));
    assert_eq!(error.attribute("message"), Some("empty file: no record"));
    let truncated = suites[8].children().filter(|n| n.has_tag_name("testcase")).nth(1).unwrap();
    let error = truncated.first_element_child().unwrap();
    assert!(error.attribute("message").unwrap().starts_with("truncated record"), "{xml}");

    assert!(stderr(&o).ends_with("unreadable\n"), "{}", show(&o));
}

#[test]
fn a_clean_run_gives_a_junit_report_without_failures() {
    let o = validate([OsString::from("--format"), "junit".into(), fx("good").into()]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let xml = stdout(&o);
    let doc = roxmltree::Document::parse(&xml).unwrap();
    assert_eq!(doc.descendants().filter(|n| n.has_tag_name("testcase")).count(), 4);
    assert!(!doc.descendants().any(|n| n.has_tag_name("failure") || n.has_tag_name("error")), "{xml}");
}

// ---------------------------------------------------------------------------- help

#[test]
fn help_documents_the_flags_and_exit_statuses() {
    let out = stdout(&run(["validate", "--help"]));
    for word in ["--format", "junit", "--max-record-bytes", "--allow-empty", "--no-progress", ".ndjson", "Exits 0"] {
        assert!(out.contains(word), "{word} missing in\n{out}");
    }
}
