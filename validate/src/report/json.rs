//! The JSON report.

use std::io::{self, Write};

use serde::Serialize;

use super::Reporter;
use crate::{FileSummary, Input, Outcome, Record, Summary};

/// The version of the JSON report's layout, its `"version"` member.
pub const JSON_REPORT_VERSION: u32 = 1;

/// One JSON object for machines, streamed (records are written as they come, one per
/// line). Members, in this order:
///
/// - `version`: the layout's version, 1;
/// - `schema`: the schema's name as given;
/// - `records`: every record that is *not* valid, in order (valid records are only
///   counted), each `{"file", "line", "status": "invalid", "issues": [{"pointer",
///   "keyword", "schema_pointer", "message"}]}` or `{"file", "line", "status":
///   "unreadable", "error"}`;
/// - `files`: every input in order, `{"path", "format": "json"|"jsonl", "records",
///   "valid", "invalid", "unreadable", "error": null | "message"}`;
/// - `summary`: `{"files", "records", "valid", "invalid", "unreadable", "ok",
///   "exit_code"}`.
///
/// `records` counts records that are JSON (valid + invalid); `unreadable` counts records
/// that are not, and in `summary`, also inputs whose `error` is set. `pointer` is the JSON
/// pointer into the record (`""`: the whole record); `line` is 1 for a JSON document
/// unless it is not JSON past its first line.
///
/// ```json
/// {"version":1,"schema":"person.json","records":[
/// {"file":"out/a.jsonl","line":2,"status":"invalid","issues":[{"pointer":"/age","keyword":"minimum","schema_pointer":"/properties/age/minimum","message":"-1 is less than the minimum of 0"}]},
/// {"file":"out/a.jsonl","line":3,"status":"unreadable","error":"not JSON: EOF while parsing an object at column 9"}
/// ],"files":[
/// {"path":"out/a.jsonl","format":"jsonl","records":2,"valid":1,"invalid":1,"unreadable":1,"error":null}
/// ],"summary":{"files":1,"records":2,"valid":1,"invalid":1,"unreadable":1,"ok":false,"exit_code":2}}
/// ```
#[derive(Debug)]
pub struct JsonReporter<W> {
    out: W,
    schema: String,
    started: bool,
    records: usize,
    files: Vec<FileEntry>,
}

#[derive(Serialize)]
struct Issue<'a> {
    pointer: &'a str,
    keyword: &'a str,
    schema_pointer: &'a str,
    message: &'a str,
}

#[derive(Serialize)]
struct RecordEntry<'a> {
    file: &'a str,
    line: usize,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    issues: Option<Vec<Issue<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Debug, Serialize)]
struct FileEntry {
    path: String,
    format: &'static str,
    records: usize,
    valid: usize,
    invalid: usize,
    unreadable: usize,
    error: Option<String>,
}

#[derive(Serialize)]
struct SummaryEntry {
    #[serde(flatten)]
    summary: Summary,
    ok: bool,
    exit_code: u8,
}

impl<W: Write> JsonReporter<W> {
    /// A JSON report on `out`, naming `schema`.
    pub fn new(out: W, schema: &str) -> Self {
        JsonReporter { out, schema: schema.to_string(), started: false, records: 0, files: Vec::new() }
    }

    fn start(&mut self) -> io::Result<()> {
        if !self.started {
            self.started = true;
            write!(self.out, "{{\"version\":{JSON_REPORT_VERSION},\"schema\":")?;
            serde_json::to_writer(&mut self.out, &self.schema)?;
            write!(self.out, ",\"records\":[")?;
        }
        Ok(())
    }
}

impl<W: Write> Reporter for JsonReporter<W> {
    fn start_file(&mut self, _input: &Input) -> io::Result<()> {
        self.start()
    }

    fn record(&mut self, input: &Input, record: &Record) -> io::Result<()> {
        let name = input.name();
        let entry = match &record.outcome {
            Outcome::Valid => return Ok(()),
            Outcome::Invalid(issues) => RecordEntry {
                file: &name,
                line: record.line,
                status: "invalid",
                issues: Some(
                    issues
                        .iter()
                        .map(|i| Issue {
                            pointer: &i.instance_pointer,
                            keyword: &i.keyword,
                            schema_pointer: &i.schema_pointer,
                            message: &i.message,
                        })
                        .collect(),
                ),
                error: None,
            },
            Outcome::Unreadable(e) => RecordEntry {
                file: &name,
                line: record.line,
                status: "unreadable",
                issues: None,
                error: Some(e.to_string()),
            },
        };
        self.start()?;
        self.out.write_all(if self.records == 0 { b"\n" } else { b",\n" })?;
        self.records += 1;
        serde_json::to_writer(&mut self.out, &entry)?;
        Ok(())
    }

    fn end_file(&mut self, input: &Input, file: &FileSummary) -> io::Result<()> {
        self.files.push(FileEntry {
            path: input.name(),
            format: input.kind.as_str(),
            records: file.records,
            valid: file.valid,
            invalid: file.invalid,
            unreadable: file.unreadable,
            error: file.error.as_ref().map(ToString::to_string),
        });
        Ok(())
    }

    fn finish(&mut self, summary: &Summary) -> io::Result<()> {
        self.start()?;
        write!(self.out, "{}],\"files\":[", if self.records == 0 { "" } else { "\n" })?;
        for (i, file) in self.files.iter().enumerate() {
            self.out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
            serde_json::to_writer(&mut self.out, file)?;
        }
        write!(self.out, "{}],\"summary\":", if self.files.is_empty() { "" } else { "\n" })?;
        let entry = SummaryEntry { summary: *summary, ok: summary.is_ok(), exit_code: summary.exit_code() };
        serde_json::to_writer(&mut self.out, &entry)?;
        writeln!(self.out, "}}")?;
        self.out.flush()
    }
}
