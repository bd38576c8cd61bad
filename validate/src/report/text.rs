//! The text report.

use std::io::{self, Write};

use super::{describe_issue, Reporter};
use crate::{FileSummary, Input, InputKind, Outcome, Record, Summary};

/// The report for people.
///
/// On `out`, one line per issue of each invalid record, then the summary:
///
/// ```text
/// out/people.jsonl:4: at /age: `minimum`: -1 is less than the minimum of 0
/// out/doc.json: at /role: `enum`: "queen" is not one of ["employee","contractor","customer","supplier","other"]
/// 7 records in 2 files: 5 valid, 2 invalid, 1 unreadable (see stderr)
/// ```
///
/// On `err`, one line per unreadable record or file:
///
/// ```text
/// error: out/people.jsonl:3: not JSON: EOF while parsing an object at column 17
/// error: out/missing.jsonl: cannot read file: No such file or directory (os error 2)
/// ```
///
/// A record is named `FILE:LINE` in a JSONL file and `FILE` for a JSON document.
#[derive(Debug)]
pub struct TextReporter<O, E> {
    out: O,
    err: E,
}

impl<O: Write, E: Write> TextReporter<O, E> {
    /// A text report with issues and the summary on `out`, errors on `err`.
    pub fn new(out: O, err: E) -> Self {
        TextReporter { out, err }
    }
}

fn place(input: &Input, record: &Record) -> String {
    match input.kind {
        InputKind::Lines => format!("{}:{}", input.name(), record.line),
        InputKind::Document => input.name(),
    }
}

impl<O: Write, E: Write> Reporter for TextReporter<O, E> {
    fn record(&mut self, input: &Input, record: &Record) -> io::Result<()> {
        match &record.outcome {
            Outcome::Valid => Ok(()),
            Outcome::Invalid(issues) => {
                let place = place(input, record);
                for issue in issues {
                    writeln!(self.out, "{place}: {}", describe_issue(issue))?;
                }
                Ok(())
            }
            Outcome::Unreadable(e) => {
                // Errors writing to stderr are not worth stopping for.
                let _ = writeln!(self.err, "error: {}: {e}", place(input, record));
                Ok(())
            }
        }
    }

    fn end_file(&mut self, input: &Input, file: &FileSummary) -> io::Result<()> {
        if let Some(e) = &file.error {
            let _ = writeln!(self.err, "error: {}: {e}", input.name());
        }
        Ok(())
    }

    fn finish(&mut self, summary: &Summary) -> io::Result<()> {
        let _ = self.err.flush();
        let note = if summary.unreadable > 0 { " (see stderr)" } else { "" };
        writeln!(self.out, "{summary}{note}")?;
        self.out.flush()
    }
}
