//! The checker and its reports over in-memory and fixture inputs: line numbers, every kind
//! of bad input, the three report formats (the JUnit one parsed back by a strict XML
//! parser), parallel and sequential runs agreeing.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use stencil_schema::{Registry, Validator};
use stencil_validate::report::{Collect, Format};
use stencil_validate::{expand, Checker, FileError, Input, InputKind, Options, Outcome, RecordError, Summary};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

fn person() -> Value {
    serde_json::from_slice(&std::fs::read(fixtures().join("schemas/person.json")).unwrap()).unwrap()
}

fn checker(options: Options) -> Checker {
    Checker::new(Validator::new(&person(), &Registry::new()).unwrap(), options)
}

/// Checks `bytes` as the file `name`; the records and the file's error message.
fn check(name: &str, bytes: &[u8], options: Options) -> (Vec<(usize, Outcome)>, Option<String>) {
    let mut collect = Collect::default();
    let file = checker(options).check_reader(&Input::new(name), bytes, &mut collect).unwrap();
    let records: Vec<_> = collect.records.into_iter().map(|(_, r)| (r.line, r.outcome)).collect();
    assert_eq!(records.len(), file.records + file.unreadable);
    (records, file.error.map(|e| e.to_string()))
}

fn unreadable(outcome: &Outcome) -> &RecordError {
    match outcome {
        Outcome::Unreadable(e) => e,
        other => panic!("expected an unreadable record, got {other:?}"),
    }
}

const ADA: &str = r#"{"name": "Ada", "role": "other"}"#;
const BOB: &str = r#"{"name": "Bob", "age": -1, "role": "employee"}"#;

// ----------------------------------------------------------------------------- reading

#[test]
fn jsonl_records_keep_their_line_numbers_blank_lines_crlf_and_bom() {
    let text = format!("\u{feff}{ADA}\r\n\r\n   \n{BOB}\n{ADA}");
    let (records, error) = check("a.jsonl", text.as_bytes(), Options::default());
    assert_eq!(error, None);
    let lines: Vec<usize> = records.iter().map(|r| r.0).collect();
    assert_eq!(lines, [1, 4, 5]);
    assert_eq!(records[0].1, Outcome::Valid);
    let Outcome::Invalid(issues) = &records[1].1 else { panic!("{records:?}") };
    assert_eq!(issues.len(), 1);
    assert_eq!((issues[0].instance_pointer.as_str(), issues[0].keyword.as_str()), ("/age", "minimum"));
    assert_eq!(issues[0].schema_pointer, "/properties/age/minimum");
    // A last line without newline is fine when it is JSON.
    assert_eq!(records[2].1, Outcome::Valid);
}

#[test]
fn a_truncated_last_line_is_reported_as_such() {
    let text = format!("{ADA}\n{{\"name\": \"Bob\", \"ro");
    let (records, _) = check("a.jsonl", text.as_bytes(), Options::default());
    assert_eq!(records.len(), 2);
    assert_eq!(records[1].0, 2);
    let e = unreadable(&records[1].1);
    assert!(matches!(e, RecordError::Truncated { .. }), "{e:?}");
    assert!(e.to_string().starts_with("truncated record: the file ends in the middle of this line"), "{e}");
}

#[test]
fn lines_that_are_not_json_or_not_utf8_are_reported_and_the_rest_checked() {
    let mut bytes = format!("{ADA}\nname: Bob\n{{\"name\": \"Eve\",}}\n").into_bytes();
    bytes.extend_from_slice(b"{\"name\": \"Caf\xE9\", \"role\": \"other\"}\n");
    bytes.extend_from_slice(BOB.as_bytes());
    bytes.push(b'\n');
    let (records, _) = check("a.jsonl", &bytes, Options::default());
    let lines: Vec<usize> = records.iter().map(|r| r.0).collect();
    assert_eq!(lines, [1, 2, 3, 4, 5]);
    assert_eq!(unreadable(&records[1].1).to_string(), "not JSON: expected ident at column 2");
    assert_eq!(
        unreadable(&records[2].1).to_string(),
        "not JSON: trailing comma at column 16",
        "the position is the column in the line, not `line 1`"
    );
    assert_eq!(
        unreadable(&records[3].1),
        &RecordError::NotUtf8 { offset: 13, in_document: false },
        "the offset of the first bad byte"
    );
    assert_eq!(unreadable(&records[3].1).to_string(), "not JSON: invalid UTF-8 at byte 13 of the line");
    assert!(matches!(records[4].1, Outcome::Invalid(_)));
}

#[test]
fn a_line_over_the_limit_is_skipped_without_being_kept() {
    let huge = format!(r#"{{"name": "{}", "role": "other"}}"#, "x".repeat(5000));
    let text = format!("{ADA}\n{huge}\n{BOB}\n{huge}");
    let options = Options { max_record_bytes: 1000, ..Options::default() };
    let (records, _) = check("a.jsonl", text.as_bytes(), options);
    let lines: Vec<usize> = records.iter().map(|r| r.0).collect();
    assert_eq!(lines, [1, 2, 3, 4]);
    assert_eq!(unreadable(&records[1].1), &RecordError::TooLarge { limit: 1000 });
    assert_eq!(unreadable(&records[1].1).to_string(), "record longer than the limit of 1000 bytes: skipped");
    assert!(matches!(records[2].1, Outcome::Invalid(_)));
    assert_eq!(unreadable(&records[3].1), &RecordError::TooLarge { limit: 1000 });
    // The same line under a large enough limit is read, and it is too long for the schema.
    let (records, _) = check("a.jsonl", huge.as_bytes(), Options::default());
    let Outcome::Invalid(issues) = &records[0].1 else { panic!("{records:?}") };
    assert_eq!(issues[0].keyword, "maxLength");
}

#[test]
fn long_messages_are_shortened() {
    let huge = format!(r#"{{"name": "{}", "role": "other"}}"#, "é".repeat(5000));
    let options = Options { max_message_bytes: 101, ..Options::default() };
    let (records, _) = check("a.json", huge.as_bytes(), options);
    let Outcome::Invalid(issues) = &records[0].1 else { panic!("{records:?}") };
    assert!(issues[0].message.ends_with('…'), "{}", issues[0].message);
    assert!(issues[0].message.len() <= 101 + '…'.len_utf8());
}

#[test]
fn documents_are_one_record_on_line_one_or_where_the_json_breaks() {
    let pretty = "{\n  \"name\": \"Ada\",\n  \"role\": \"queen\"\n}\n";
    let (records, _) = check("a.json", pretty.as_bytes(), Options::default());
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].0, 1);
    assert!(matches!(&records[0].1, Outcome::Invalid(i) if i[0].keyword == "enum"));

    let cut = "{\n  \"name\": \"Ada\",\n  \"role\": \"oth";
    let (records, _) = check("a.json", cut.as_bytes(), Options::default());
    assert_eq!(records[0].0, 3);
    assert_eq!(unreadable(&records[0].1).to_string(), "not JSON: EOF while parsing a string at line 3 column 14");

    let two = format!("{ADA}\n{ADA}\n");
    let (records, _) = check("a.json", two.as_bytes(), Options::default());
    assert_eq!(records[0].0, 2);
    let message = unreadable(&records[0].1).to_string();
    assert!(message.contains("trailing characters at line 2 column 1"), "{message}");
    assert!(message.contains("name the file .jsonl"), "{message}");

    let (records, _) = check("a.json", b"{\n\"name\": \"\xFF\"}", Options::default());
    assert_eq!(records[0].0, 2);
    assert_eq!(unreadable(&records[0].1), &RecordError::NotUtf8 { offset: 11, in_document: true });

    let options = Options { max_record_bytes: 10, ..Options::default() };
    let (records, _) = check("a.json", pretty.as_bytes(), options);
    assert_eq!(unreadable(&records[0].1), &RecordError::TooLarge { limit: 10 });
}

#[test]
fn empty_files_are_errors_unless_allowed() {
    for (name, text) in [("a.jsonl", ""), ("a.jsonl", "\n \n\r\n"), ("a.json", ""), ("a.json", " \n")] {
        let (records, error) = check(name, text.as_bytes(), Options::default());
        assert!(records.is_empty());
        assert_eq!(error.as_deref(), Some("empty file: no record"), "{name} {text:?}");
        let (records, error) = check(name, text.as_bytes(), Options { allow_empty: true, ..Options::default() });
        assert!(records.is_empty());
        assert_eq!(error, None);
    }
}

/// A reader that fails after some bytes.
struct Failing<'a>(&'a [u8]);

impl io::Read for Failing<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.0.is_empty() {
            return Err(io::Error::other("disk on fire"));
        }
        let n = buf.len().min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

#[test]
fn a_read_error_ends_the_file_after_reporting_what_was_read() {
    let text = format!("{ADA}\n{BOB}\n");
    let mut collect = Collect::default();
    let file = checker(Options::default())
        .check_reader(&Input::new("a.jsonl"), Failing(text.as_bytes()), &mut collect)
        .unwrap();
    assert_eq!((file.valid, file.invalid), (1, 1));
    assert!(matches!(file.error, Some(FileError::Read { .. })));
    assert_eq!(file.error.unwrap().to_string(), "cannot read file: disk on fire");
}

#[test]
fn parallel_and_sequential_runs_agree_across_chunks() {
    // Over 1024 records (one chunk), with records of every kind.
    let mut text = String::new();
    for i in 0..3000 {
        match i % 7 {
            0 => text.push_str(BOB),
            3 => text.push_str("{oops"),
            5 => {}
            _ => text.push_str(&format!(r#"{{"name": "P{i}", "age": {}, "role": "other"}}"#, i % 120)),
        }
        text.push('\n');
    }
    let (parallel, _) = check("a.jsonl", text.as_bytes(), Options::default());
    let (sequential, _) = check("a.jsonl", text.as_bytes(), Options { parallel: false, ..Options::default() });
    assert_eq!(parallel.len(), 3000 - 3000 / 7);
    assert_eq!(parallel, sequential);
    assert!(parallel.windows(2).all(|w| w[0].0 < w[1].0), "file order");
}

// ------------------------------------------------------------------------------ inputs

#[test]
fn the_kind_comes_from_the_name() {
    assert_eq!(InputKind::of(Path::new("a.JSONL")), InputKind::Lines);
    assert_eq!(InputKind::of(Path::new("a.ndjson")), InputKind::Lines);
    assert_eq!(InputKind::of(Path::new("a.json")), InputKind::Document);
    assert_eq!(InputKind::of(Path::new("out")), InputKind::Document);
    assert_eq!(Input::new("-").name(), "<stdin>");
}

#[test]
fn directories_expand_to_their_json_files_in_sorted_order() {
    let dir = fixtures().join("validate");
    let found: Vec<PathBuf> = expand(&[dir.join("good")]).into_iter().map(|i| i.unwrap().path).collect();
    assert_eq!(
        found,
        ["ada.json", "nested/more.ndjson", "people.jsonl"].map(|f| dir.join("good").join(f)),
        "nested/ sorts before people.jsonl; ignored.txt is skipped"
    );
    let empty = expand(&[dir.join("no-json")]);
    assert_eq!(empty.len(), 1);
    let e = empty.into_iter().next().unwrap().unwrap_err();
    assert!(matches!(e.error, FileError::NoJsonFiles));
    // A file named on the command line is read whatever its name; a missing one is kept
    // so that opening it reports the error.
    let named = expand(&[dir.join("good/nested/ignored.txt"), dir.join("missing.jsonl")]);
    assert_eq!(named.len(), 2);
    assert_eq!(named[0].as_ref().unwrap().kind, InputKind::Document);
}

#[test]
fn checking_paths_counts_every_input() {
    let dir = fixtures().join("validate");
    let mut collect = Collect::default();
    let paths = [dir.join("good"), dir.join("mixed"), dir.join("missing.json"), dir.join("no-json")];
    let summary = checker(Options::default()).check_paths(&paths, &mut collect).unwrap();
    // good/: 4 valid; mixed/: 1 valid and 5 invalid; a missing file; a directory without JSON.
    assert_eq!(summary, Summary { files: 7, records: 10, valid: 5, invalid: 5, unreadable: 2 });
    assert_eq!(collect.summary, Some(summary));
    assert_eq!(collect.file_errors.len(), 2);
    assert!(collect.file_errors[0].1.starts_with("cannot read file: "), "{:?}", collect.file_errors);
    assert_eq!(collect.file_errors[1].1, "directory holds no .json, .jsonl or .ndjson file");
    assert_eq!(summary.exit_code(), 2);
}

// ----------------------------------------------------------------------------- reports

/// The three fixture-like inputs every report test uses: a JSONL file with a valid, an
/// invalid and an unreadable record; an invalid document; a missing file.
fn report(format: Format) -> (String, String, Summary) {
    let checker = checker(Options::default());
    let mut out = Vec::new();
    let mut err = Vec::new();
    let jsonl = format!("{ADA}\n{BOB}\n{{\"name\": \n");
    let doc = r#"{"name": "Zoë <&>", "role": "queen\u0001'\"", "age": 200}"#;
    let summary = {
        let mut reporter = format.reporter(&mut out, &mut err, "person.json");
        let mut summary = Summary::default();
        for (name, bytes) in [("out/a.jsonl", jsonl.as_bytes()), ("out/b.json", doc.as_bytes())] {
            let file = checker.check_reader(&Input::new(name), bytes, &mut reporter).unwrap();
            summary.files += 1;
            summary.records += file.records;
            summary.valid += file.valid;
            summary.invalid += file.invalid;
            summary.unreadable += file.unreadable;
        }
        let missing = Input::new("out/<missing>.jsonl");
        let file = checker.check_input(&missing, &mut reporter).unwrap();
        summary.files += 1;
        summary.unreadable += usize::from(file.error.is_some());
        reporter.finish(&summary).unwrap();
        summary
    };
    (String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap(), summary)
}

#[test]
fn text_report() {
    let (out, err, summary) = report(Format::Text);
    assert_eq!(summary, Summary { files: 3, records: 3, valid: 1, invalid: 2, unreadable: 2 });
    let out: Vec<&str> = out.lines().collect();
    assert_eq!(out[0], "out/a.jsonl:2: at /age: `minimum`: -1 is less than the minimum of 0");
    assert!(out[1..3].iter().all(|l| l.starts_with("out/b.json: at /")), "{out:?}");
    assert!(out.iter().any(|l| l.starts_with("out/b.json: at /role: `enum`: ")), "{out:?}");
    assert_eq!(out[3], "3 records in 3 files: 1 valid, 2 invalid, 2 unreadable (see stderr)");
    assert_eq!(out.len(), 4);
    let err: Vec<&str> = err.lines().collect();
    assert_eq!(err[0], "error: out/a.jsonl:3: not JSON: EOF while parsing a value at column 9");
    assert!(err[1].starts_with("error: out/<missing>.jsonl: cannot read file: "), "{err:?}");
}

#[test]
fn json_report() {
    let (out, _, _) = report(Format::Json);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert_eq!(v["version"], 1);
    assert_eq!(v["schema"], "person.json");
    let records = v["records"].as_array().unwrap();
    assert_eq!(records.len(), 3, "only records that are not valid: {out}");
    assert_eq!(
        records[0],
        json!({"file": "out/a.jsonl", "line": 2, "status": "invalid", "issues": [{
            "pointer": "/age", "keyword": "minimum", "schema_pointer": "/properties/age/minimum",
            "message": "-1 is less than the minimum of 0"}]})
    );
    assert_eq!(
        records[1],
        json!({"file": "out/a.jsonl", "line": 3, "status": "unreadable",
               "error": "not JSON: EOF while parsing a value at column 9"})
    );
    assert_eq!(records[2]["file"], "out/b.json");
    assert_eq!(records[2]["line"], 1);
    assert_eq!(records[2]["issues"].as_array().unwrap().len(), 2);
    let files = v["files"].as_array().unwrap();
    assert_eq!(
        files[0],
        json!({"path": "out/a.jsonl", "format": "jsonl", "records": 2, "valid": 1, "invalid": 1,
               "unreadable": 1, "error": null})
    );
    assert_eq!(files[1]["format"], "json");
    assert!(files[2]["error"].as_str().unwrap().starts_with("cannot read file: "));
    assert_eq!(
        v["summary"],
        json!({"files": 3, "records": 3, "valid": 1, "invalid": 2, "unreadable": 2, "ok": false, "exit_code": 2})
    );
    // One record per line, for people reading it raw.
    assert!(out.lines().any(|l| l.starts_with(r#"{"file":"out/a.jsonl","line":2,"#)), "{out}");
}

#[test]
fn json_report_of_nothing_is_still_json() {
    let mut out = Vec::new();
    let mut reporter = Format::Json.reporter(&mut out, io::sink(), "s.json");
    reporter.finish(&Summary::default()).unwrap();
    drop(reporter);
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["records"], json!([]));
    assert_eq!(v["files"], json!([]));
    assert_eq!(v["summary"]["ok"], true);
}

#[test]
fn junit_report_is_well_formed_and_has_a_case_per_record() {
    let (out, err, _) = report(Format::Junit);
    assert!(err.is_empty());
    let doc = roxmltree::Document::parse(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(root.attribute("name"), Some("stencil validate: person.json"));
    let suites: Vec<_> = root.children().filter(|n| n.is_element()).collect();
    assert_eq!(suites.len(), 3);
    let attrs = |n: roxmltree::Node, names: &[&str]| -> Vec<String> {
        names.iter().map(|a| n.attribute(*a).unwrap_or("-").to_string()).collect()
    };
    let counts = ["name", "tests", "failures", "errors"];
    assert_eq!(attrs(suites[0], &counts), ["out/a.jsonl", "3", "1", "1"]);
    assert_eq!(attrs(suites[1], &counts), ["out/b.json", "1", "1", "0"]);
    assert_eq!(attrs(suites[2], &counts), ["out/<missing>.jsonl", "1", "0", "1"]);

    let cases: Vec<_> = suites[0].children().filter(|n| n.is_element()).collect();
    let names: Vec<_> = cases.iter().map(|c| c.attribute("name").unwrap()).collect();
    assert_eq!(names, ["out/a.jsonl:1", "out/a.jsonl:2", "out/a.jsonl:3"]);
    assert!(cases.iter().all(|c| c.attribute("classname") == Some("out/a.jsonl")));
    assert!(cases[0].children().all(|n| !n.is_element()), "a valid record has no child");
    let failure = cases[1].first_element_child().unwrap();
    assert_eq!(failure.tag_name().name(), "failure");
    assert_eq!(failure.attribute("message"), Some("at /age: `minimum`: -1 is less than the minimum of 0"));
    assert_eq!(failure.text(), Some("at /age: `minimum`: -1 is less than the minimum of 0\n"));
    let error = cases[2].first_element_child().unwrap();
    assert_eq!(error.tag_name().name(), "error");
    assert_eq!(error.attribute("message"), Some("not JSON: EOF while parsing a value at column 9"));

    // Markup, quotes and a control character in the values survive escaping.
    let failure = suites[1].first_element_child().unwrap().first_element_child().unwrap();
    let message = failure.attribute("message").unwrap();
    assert!(message.starts_with("2 issues; first at /"), "{message}");
    let body = failure.text().unwrap();
    assert!(body.contains(r#""queen\u0001'\"" is not one of"#), "{body}");
    assert_eq!(body.lines().count(), 2);

    let missing = suites[2].first_element_child().unwrap();
    assert_eq!(missing.attribute("name"), Some("out/<missing>.jsonl"));
    assert_eq!(missing.first_element_child().unwrap().tag_name().name(), "error");
}

#[test]
fn junit_escapes_what_xml_cannot_hold() {
    let checker = checker(Options::default());
    let mut out = Vec::new();
    {
        let mut reporter = Format::Junit.reporter(&mut out, io::sink(), "a&b\".json");
        // A raw control character inside a JSON string is not JSON; serde's message
        // names it, and the file name holds XML specials.
        let text = "{\"name\": \"a\u{1}b\", \"role\": \"other\"}\n{\"name\": \"n\", \"role\": \"]]>\"}\n";
        let input = Input::new("we'ird <&> \"name\".jsonl");
        checker.check_reader(&input, text.as_bytes(), &mut reporter).unwrap();
        // A control character in a file name (Unix allows it) cannot be XML at all.
        let input = Input::new("bell\u{7}.jsonl");
        checker.check_reader(&input, text.as_bytes(), &mut reporter).unwrap();
        reporter.finish(&Summary::default()).unwrap();
    }
    let out = String::from_utf8(out).unwrap();
    let doc = roxmltree::Document::parse(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    let suite = doc.root_element().first_element_child().unwrap();
    assert_eq!(suite.attribute("name"), Some("we'ird <&> \"name\".jsonl"));
    let bell = suite.next_sibling_element().unwrap();
    assert_eq!(bell.attribute("name"), Some("bell\\u0007.jsonl"));
    assert_eq!(doc.root_element().attribute("name"), Some("stencil validate: a&b\".json"));
    let texts: Vec<String> = doc.descendants().filter_map(|n| n.text()).map(str::to_string).collect();
    assert!(texts.iter().any(|t| t.contains("]]>")), "{out}");
}
