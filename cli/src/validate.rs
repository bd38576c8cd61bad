//! `stencil validate`: JSON documents and JSONL files against a JSON Schema, post hoc.
//!
//! Each failing record gives one line per issue on stdout,
//! `FILE[:LINE]: at POINTER: `KEYWORD`: MESSAGE`, and a summary line ends the report.
//! Files that cannot be read and records that are not JSON are reported on stderr (with
//! their file and line) and make the exit status 2; the other records are still checked.
//! JSONL files are read line by line.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;
use stencil_schema::Registry;

use crate::error::CliError;
use crate::print_line;
use crate::source::{describe_issue, read_schema};

#[derive(Default)]
struct Tally {
    records: usize,
    invalid: usize,
    /// Records that are not JSON, and files that cannot be read.
    unreadable: usize,
}

pub fn run(schema_path: &Path, files: &[PathBuf]) -> Result<ExitCode, CliError> {
    let schema = read_schema(schema_path)?;
    let registry = Registry::new();
    // A schema that the validator cannot use is bad input, not a failing record.
    if let Err(issues) = stencil_schema::validate(&schema, &Value::Null, &registry) {
        if let Some(bad) = issues.iter().find(|i| i.keyword == "schema" && i.schema_pointer.is_empty()) {
            return Err(CliError::Usage(format!("schema {} cannot be used: {}", schema_path.display(), bad.message)));
        }
    }
    let mut tally = Tally::default();
    for file in files {
        let is_jsonl = file.extension().is_some_and(|e| e.eq_ignore_ascii_case("jsonl"));
        let result = if is_jsonl {
            check_jsonl(&schema, &registry, file, &mut tally)
        } else {
            check_document(&schema, &registry, file, &mut tally)
        };
        match result {
            Ok(()) => {}
            Err(CliError::BrokenPipe) => return Err(CliError::BrokenPipe),
            Err(e @ CliError::Stdout(_)) => return Err(e),
            Err(e) => {
                tally.unreadable += 1;
                eprintln!("error: {e}");
            }
        }
    }
    let valid = tally.records - tally.invalid;
    let files_n = files.len();
    let mut summary = format!(
        "{} record{} in {files_n} file{}: {valid} valid, {} invalid",
        tally.records,
        if tally.records == 1 { "" } else { "s" },
        if files_n == 1 { "" } else { "s" },
        tally.invalid
    );
    if tally.unreadable > 0 {
        summary.push_str(&format!(", {} not readable as JSON (see stderr)", tally.unreadable));
    }
    print_line(&summary)?;
    Ok(ExitCode::from(match (tally.unreadable, tally.invalid) {
        (0, 0) => 0,
        (0, _) => 1,
        _ => 2,
    }))
}

/// One JSON document.
fn check_document(schema: &Value, registry: &Registry, path: &Path, tally: &mut Tally) -> Result<(), CliError> {
    let bytes =
        std::fs::read(path).map_err(|source| CliError::Read { what: "file", path: path.to_path_buf(), source })?;
    let instance: Value =
        serde_json::from_slice(&bytes).map_err(|e| CliError::Usage(format!("{}: not JSON: {e}", path.display())))?;
    check_record(schema, registry, &path.display().to_string(), &instance, tally)
}

/// One record per line; blank lines are skipped.
fn check_jsonl(schema: &Value, registry: &Registry, path: &Path, tally: &mut Tally) -> Result<(), CliError> {
    let read_err = |source| CliError::Read { what: "file", path: path.to_path_buf(), source };
    let mut reader = BufReader::new(std::fs::File::open(path).map_err(read_err)?);
    let mut line = Vec::new();
    let mut line_no = 0usize;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(read_err)? == 0 {
            return Ok(());
        }
        line_no += 1;
        let place = format!("{}:{line_no}", path.display());
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(&line) {
            Ok(instance) => check_record(schema, registry, &place, &instance, tally)?,
            Err(e) => {
                tally.unreadable += 1;
                eprintln!("error: {place}: not JSON: {e}");
            }
        }
    }
}

fn check_record(
    schema: &Value,
    registry: &Registry,
    place: &str,
    instance: &Value,
    tally: &mut Tally,
) -> Result<(), CliError> {
    tally.records += 1;
    if let Err(issues) = stencil_schema::validate(schema, instance, registry) {
        tally.invalid += 1;
        for issue in &issues {
            print_line(&format!("{place}: {}", describe_issue(issue)))?;
        }
    }
    Ok(())
}
