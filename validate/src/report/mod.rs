//! Reports: what a run prints, record by record.
//!
//! A [`Reporter`] receives, in order, each file's start, its records and its end, then the
//! summary. Three formats come with the crate:
//!
//! | format | type | what |
//! |---|---|---|
//! | [`Format::Text`] | [`TextReporter`] | one line per issue, `FILE[:LINE]: at POINTER: `KEYWORD`: MESSAGE`, then the summary line |
//! | [`Format::Json`] | [`JsonReporter`] | one JSON object: the failing records, every file's tally, the summary |
//! | [`Format::Junit`] | [`JunitReporter`] | JUnit XML: a `<testsuite>` per file, a `<testcase>` per record |
//!
//! [`Collect`] keeps everything in memory (tests, library use).

mod json;
mod junit;
mod text;

use std::io::{self, Write};

pub use json::JsonReporter;
pub use junit::JunitReporter;
pub use text::TextReporter;

use crate::{FileSummary, Input, Record, Summary};

/// Receives a run's events. Every method but [`Reporter::record`] does nothing by default.
///
/// Errors are the reporter's own (a closed pipe, a full disk): they stop the run.
pub trait Reporter {
    /// A file is about to be read (also called for inputs that turn out unreadable).
    fn start_file(&mut self, _input: &Input) -> io::Result<()> {
        Ok(())
    }
    /// One record, in file order. Blank JSONL lines are not records.
    fn record(&mut self, input: &Input, record: &Record) -> io::Result<()>;
    /// The file is done; [`FileSummary::error`] says if it could not be read (wholly or
    /// from some point on).
    fn end_file(&mut self, _input: &Input, _file: &FileSummary) -> io::Result<()> {
        Ok(())
    }
    /// The run is done.
    fn finish(&mut self, _summary: &Summary) -> io::Result<()> {
        Ok(())
    }
}

impl<R: Reporter + ?Sized> Reporter for &mut R {
    fn start_file(&mut self, input: &Input) -> io::Result<()> {
        (**self).start_file(input)
    }
    fn record(&mut self, input: &Input, record: &Record) -> io::Result<()> {
        (**self).record(input, record)
    }
    fn end_file(&mut self, input: &Input, file: &FileSummary) -> io::Result<()> {
        (**self).end_file(input, file)
    }
    fn finish(&mut self, summary: &Summary) -> io::Result<()> {
        (**self).finish(summary)
    }
}

impl<R: Reporter + ?Sized> Reporter for Box<R> {
    fn start_file(&mut self, input: &Input) -> io::Result<()> {
        (**self).start_file(input)
    }
    fn record(&mut self, input: &Input, record: &Record) -> io::Result<()> {
        (**self).record(input, record)
    }
    fn end_file(&mut self, input: &Input, file: &FileSummary) -> io::Result<()> {
        (**self).end_file(input, file)
    }
    fn finish(&mut self, summary: &Summary) -> io::Result<()> {
        (**self).finish(summary)
    }
}

/// Keeps every record, file error and the summary in memory.
#[derive(Debug, Default)]
pub struct Collect {
    /// Every record, valid ones included, in order.
    pub records: Vec<(Input, Record)>,
    /// The files that could not be read, with the error's message.
    pub file_errors: Vec<(Input, String)>,
    /// Set by [`Reporter::finish`].
    pub summary: Option<Summary>,
}

impl Reporter for Collect {
    fn record(&mut self, input: &Input, record: &Record) -> io::Result<()> {
        self.records.push((input.clone(), record.clone()));
        Ok(())
    }
    fn end_file(&mut self, input: &Input, file: &FileSummary) -> io::Result<()> {
        if let Some(e) = &file.error {
            self.file_errors.push((input.clone(), e.to_string()));
        }
        Ok(())
    }
    fn finish(&mut self, summary: &Summary) -> io::Result<()> {
        self.summary = Some(*summary);
        Ok(())
    }
}

/// A report format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Format {
    /// For people: issues on `out`, unreadable records and files on `err`, a summary line.
    #[default]
    Text,
    /// One JSON object on `out` (see [`JsonReporter`]).
    Json,
    /// JUnit XML on `out` (see [`JunitReporter`]).
    Junit,
}

impl Format {
    /// A reporter of this format writing to `out` (and, for text, `err`). `schema` names
    /// the schema in the JSON and JUnit reports.
    ///
    /// ```
    /// use stencil_validate::report::Format;
    /// let mut out = Vec::new();
    /// let reporter = Format::Junit.reporter(&mut out, std::io::sink(), "person.json");
    /// # drop(reporter);
    /// ```
    pub fn reporter<'a>(self, out: impl Write + 'a, err: impl Write + 'a, schema: &str) -> Box<dyn Reporter + 'a> {
        match self {
            Format::Text => Box::new(TextReporter::new(out, err)),
            Format::Json => Box::new(JsonReporter::new(out, schema)),
            Format::Junit => Box::new(JunitReporter::new(out, schema)),
        }
    }
}

/// An error for [`Format`]'s `FromStr`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown report format {0:?} (expected text, json or junit)")]
pub struct UnknownFormat(pub String);

impl std::str::FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Format, UnknownFormat> {
        match s {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            "junit" => Ok(Format::Junit),
            _ => Err(UnknownFormat(s.to_string())),
        }
    }
}

/// An instance pointer for people: the root is `(root)`.
pub(crate) fn show_pointer(p: &str) -> &str {
    if p.is_empty() {
        "(root)"
    } else {
        p
    }
}

/// One issue on one line: ``at /a/0: `keyword`: message``.
pub(crate) fn describe_issue(issue: &stencil_schema::ValidationIssue) -> String {
    format!("at {}: `{}`: {}", show_pointer(&issue.instance_pointer), issue.keyword, issue.message)
}
