//! The checker: records in, outcomes out, in file order.

use std::io::{self, BufReader, Read};
use std::path::PathBuf;

use rayon::prelude::*;
use serde_json::Value;
use stencil_schema::{ValidationIssue, Validator};

use crate::read::{read_capped, read_line, Line, BOM};
use crate::{expand, FileError, Input, InputError, InputKind, RecordError, Reporter};

/// The default of [`Options::max_record_bytes`]: 64 MiB.
pub const DEFAULT_MAX_RECORD_BYTES: usize = 64 << 20;

/// The default of [`Options::max_message_bytes`].
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1000;

/// Records handed to the thread pool at once (fewer when [`CHUNK_BYTES`] is reached first).
const CHUNK_RECORDS: usize = 1024;
/// Bytes of JSONL records buffered at once for the thread pool (one record may exceed it).
const CHUNK_BYTES: usize = 8 << 20;

/// How records are read and checked. [`Options::default`]: records up to 64 MiB, messages
/// up to 1000 bytes, empty files refused, records checked on all cores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The longest record read, in bytes: a JSONL line (without its newline) or a whole
    /// JSON document. A longer record is reported as [`RecordError::TooLarge`] and
    /// skipped; it is never held in memory whole. Memory use is about this much plus
    /// the parsed record, per thread.
    pub max_record_bytes: usize,
    /// Validation messages longer than this are cut at a character boundary and end in
    /// `…`: a message can quote the whole failing value, and a report must stay readable.
    pub max_message_bytes: usize,
    /// Accept a file with no record (empty, or only blank lines) as holding zero records;
    /// by default it is [`FileError::Empty`].
    pub allow_empty: bool,
    /// Parse and validate the records of a JSONL file in parallel (rayon's global pool:
    /// all cores, or `RAYON_NUM_THREADS`). Reports keep the file order either way.
    pub parallel: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            allow_empty: false,
            parallel: true,
        }
    }
}

/// What came of one record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The record validates against the schema.
    Valid,
    /// The record is JSON but does not validate: every issue, in the validator's order.
    Invalid(Vec<ValidationIssue>),
    /// The record is not JSON (or cannot be read): it is not validated.
    Unreadable(RecordError),
}

/// One record of a file and its outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// 1-based line: the record's line in a JSONL file; in a JSON document, 1, or the line
    /// where it stops being JSON.
    pub line: usize,
    /// Bytes of the file read once this record was (for progress).
    pub end_offset: u64,
    /// Valid, invalid (with the issues) or unreadable (with why).
    pub outcome: Outcome,
}

/// The tally of one file.
#[derive(Debug, Default)]
pub struct FileSummary {
    /// Records that are JSON: `valid + invalid`.
    pub records: usize,
    /// Records that validate.
    pub valid: usize,
    /// Records that are JSON but do not validate.
    pub invalid: usize,
    /// Records that are not JSON.
    pub unreadable: usize,
    /// Why the file could not be read (at all, or past some point).
    pub error: Option<FileError>,
}

impl FileSummary {
    fn add(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Valid => {
                self.records += 1;
                self.valid += 1;
            }
            Outcome::Invalid(_) => {
                self.records += 1;
                self.invalid += 1;
            }
            Outcome::Unreadable(_) => self.unreadable += 1,
        }
    }
}

/// The tally of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    /// Inputs: files checked, plus paths that gave no file (missing, or a directory
    /// without JSON files).
    pub files: usize,
    /// Records that are JSON: `valid + invalid`.
    pub records: usize,
    /// Records that validate.
    pub valid: usize,
    /// Records that are JSON but do not validate.
    pub invalid: usize,
    /// Records that are not JSON, plus inputs that could not be read (wholly or in part).
    pub unreadable: usize,
}

impl Summary {
    fn add(&mut self, file: &FileSummary) {
        self.files += 1;
        self.records += file.records;
        self.valid += file.valid;
        self.invalid += file.invalid;
        self.unreadable += file.unreadable + usize::from(file.error.is_some());
    }

    /// Whether everything was read and validates.
    pub fn is_ok(&self) -> bool {
        self.invalid == 0 && self.unreadable == 0
    }

    /// The exit status of `stencil validate`: 0 everything validates, 1 some record does
    /// not validate (and everything was read), 2 something could not be read.
    ///
    /// ```
    /// let mut s = stencil_validate::Summary { files: 1, records: 3, valid: 3, invalid: 0, unreadable: 0 };
    /// assert_eq!(s.exit_code(), 0);
    /// s.invalid = 1;
    /// assert_eq!(s.exit_code(), 1);
    /// s.unreadable = 1;
    /// assert_eq!(s.exit_code(), 2);
    /// ```
    pub fn exit_code(&self) -> u8 {
        match (self.unreadable, self.invalid) {
            (0, 0) => 0,
            (0, _) => 1,
            _ => 2,
        }
    }
}

/// `3 records in 2 files: 2 valid, 1 invalid` (`, N unreadable` when some records are not JSON or some input could not be read).
impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = |n: usize| if n == 1 { "" } else { "s" };
        write!(
            f,
            "{} record{} in {} file{}: {} valid, {} invalid",
            self.records,
            s(self.records),
            self.files,
            s(self.files),
            self.valid,
            self.invalid
        )?;
        if self.unreadable > 0 {
            write!(f, ", {} unreadable", self.unreadable)?;
        }
        Ok(())
    }
}

/// A compiled schema and the options: checks files, readers and single records, and hands
/// every record's outcome to a [`Reporter`] in file order.
///
/// ```
/// use serde_json::json;
/// use stencil_schema::{Registry, Validator};
/// use stencil_validate::{report::Collect, Checker, Input, Options, Outcome};
///
/// let schema = json!({"type": "object", "required": ["name"]});
/// let checker = Checker::new(Validator::new(&schema, &Registry::new())?, Options::default());
/// let jsonl = "{\"name\": \"Ada\"}\n\n{\"age\": 36}\n{\"name\": \n";
/// let mut collect = Collect::default();
/// let summary = checker.check_reader(&Input::new("out.jsonl"), jsonl.as_bytes(), &mut collect)?;
/// assert_eq!((summary.valid, summary.invalid, summary.unreadable), (1, 1, 1));
/// let lines: Vec<usize> = collect.records.iter().map(|(_, r)| r.line).collect();
/// assert_eq!(lines, [1, 3, 4]); // blank line 2 skipped
/// let Outcome::Invalid(issues) = &collect.records[1].1.outcome else { panic!() };
/// assert_eq!(issues[0].keyword, "required");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Checker {
    validator: Validator,
    options: Options,
}

/// A JSONL line waiting to be checked.
struct Pending {
    line: usize,
    end_offset: u64,
    /// The line's bytes and whether a newline ended it; `None`: too long.
    body: Option<(Vec<u8>, bool)>,
}

impl Checker {
    /// A checker for `validator` (compiled once, shared by every record and thread).
    pub fn new(validator: Validator, options: Options) -> Checker {
        Checker { validator, options }
    }

    /// The options.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Checks the files and directories `paths` (see [`expand`]) and reports them in order,
    /// then the summary ([`Reporter::finish`]).
    ///
    /// # Errors
    /// Only the reporter's: read errors are reported and counted, never returned.
    pub fn check_paths(&self, paths: &[PathBuf], reporter: &mut dyn Reporter) -> io::Result<Summary> {
        self.check_inputs(expand(paths), reporter)
    }

    /// Checks already expanded inputs (as [`expand`] gives them) in order, then reports the
    /// summary.
    ///
    /// # Errors
    /// Only the reporter's.
    pub fn check_inputs(
        &self,
        inputs: impl IntoIterator<Item = Result<Input, InputError>>,
        reporter: &mut dyn Reporter,
    ) -> io::Result<Summary> {
        let mut summary = Summary::default();
        for input in inputs {
            let file = match input {
                Ok(input) => self.check_input(&input, reporter)?,
                Err(InputError { input, error }) => {
                    reporter.start_file(&input)?;
                    let file = FileSummary { error: Some(error), ..FileSummary::default() };
                    reporter.end_file(&input, &file)?;
                    file
                }
            };
            summary.add(&file);
        }
        reporter.finish(&summary)?;
        Ok(summary)
    }

    /// Opens and checks one file (`-`: standard input).
    ///
    /// # Errors
    /// Only the reporter's.
    pub fn check_input(&self, input: &Input, reporter: &mut dyn Reporter) -> io::Result<FileSummary> {
        if input.is_stdin() {
            return self.check_reader(input, io::stdin().lock(), reporter);
        }
        match std::fs::File::open(&input.path) {
            Ok(file) => self.check_reader(input, file, reporter),
            Err(source) => {
                reporter.start_file(input)?;
                let file = FileSummary { error: Some(FileError::Read { source }), ..FileSummary::default() };
                reporter.end_file(input, &file)?;
                Ok(file)
            }
        }
    }

    /// Checks the records read from `reader`, laid out as `input.kind` says, reporting them
    /// as `input`'s.
    ///
    /// # Errors
    /// Only the reporter's: a read error ends the file with [`FileError::Read`].
    pub fn check_reader(
        &self,
        input: &Input,
        reader: impl Read,
        reporter: &mut dyn Reporter,
    ) -> io::Result<FileSummary> {
        reporter.start_file(input)?;
        let mut file = FileSummary::default();
        match input.kind {
            InputKind::Lines => self.check_lines(input, reader, reporter, &mut file)?,
            InputKind::Document => self.check_document(input, reader, reporter, &mut file)?,
        }
        if file.error.is_none() && !self.options.allow_empty && file.records + file.unreadable == 0 {
            file.error = Some(FileError::Empty);
        }
        reporter.end_file(input, &file)?;
        Ok(file)
    }

    /// Validates one record's bytes (a JSONL line without its newline, or a whole
    /// document's text).
    ///
    /// ```
    /// use stencil_schema::{Registry, Validator};
    /// use stencil_validate::{Checker, Options, Outcome, RecordError};
    ///
    /// let schema = serde_json::json!({"type": "integer"});
    /// let checker = Checker::new(Validator::new(&schema, &Registry::new())?, Options::default());
    /// assert_eq!(checker.check_record(b"42"), Outcome::Valid);
    /// assert!(matches!(checker.check_record(b"4.5"), Outcome::Invalid(_)));
    /// assert!(matches!(checker.check_record(b"[4,"), Outcome::Unreadable(RecordError::NotJson { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_record(&self, bytes: &[u8]) -> Outcome {
        self.outcome(bytes, true, false).1
    }

    /// The outcome of one record and its line within the record (1 unless the record is
    /// a document that is not JSON past its first line).
    fn outcome(&self, bytes: &[u8], newline: bool, in_document: bool) -> (usize, Outcome) {
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let offset = e.valid_up_to();
                let line = 1 + bytes[..offset].iter().filter(|&&b| b == b'\n').count();
                return (line, Outcome::Unreadable(RecordError::NotUtf8 { offset, in_document }));
            }
        };
        let instance: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                let (line, column) = (e.line(), e.column());
                let full = e.to_string();
                let message =
                    full.strip_suffix(&format!(" at line {line} column {column}")).unwrap_or(&full).to_string();
                let error = if in_document {
                    RecordError::NotJson { message, line: Some(line), column }
                } else if !newline {
                    RecordError::Truncated { message, column }
                } else {
                    RecordError::NotJson { message, line: None, column }
                };
                return (line.max(1), Outcome::Unreadable(error));
            }
        };
        match self.validator.validate(&instance) {
            Ok(()) => (1, Outcome::Valid),
            Err(mut issues) => {
                for issue in &mut issues {
                    shorten(&mut issue.message, self.options.max_message_bytes);
                }
                (1, Outcome::Invalid(issues))
            }
        }
    }

    fn check_document(
        &self,
        input: &Input,
        reader: impl Read,
        reporter: &mut dyn Reporter,
        file: &mut FileSummary,
    ) -> io::Result<()> {
        let mut buf = Vec::new();
        let mut consumed = 0;
        let (line, outcome) = match read_capped(reader, &mut buf, self.options.max_record_bytes, &mut consumed) {
            Err(source) => {
                file.error = Some(FileError::Read { source });
                return Ok(());
            }
            Ok(false) => (1, Outcome::Unreadable(RecordError::TooLarge { limit: self.options.max_record_bytes })),
            Ok(true) => {
                let bytes = buf.strip_prefix(BOM).unwrap_or(&buf);
                if bytes.iter().all(u8::is_ascii_whitespace) {
                    return Ok(()); // empty: no record
                }
                self.outcome(bytes, true, true)
            }
        };
        file.add(&outcome);
        reporter.record(input, &Record { line, end_offset: consumed, outcome })
    }

    fn check_lines(
        &self,
        input: &Input,
        reader: impl Read,
        reporter: &mut dyn Reporter,
        file: &mut FileSummary,
    ) -> io::Result<()> {
        let mut reader = BufReader::with_capacity(256 * 1024, reader);
        let mut buf = Vec::new();
        let mut consumed = 0u64;
        let mut line = 0usize;
        let mut pending = Vec::new();
        let mut pending_bytes = 0usize;
        loop {
            let read = match read_line(&mut reader, &mut buf, self.options.max_record_bytes, &mut consumed) {
                Ok(read) => read,
                Err(source) => {
                    file.error = Some(FileError::Read { source });
                    break;
                }
            };
            let body = match read {
                Line::Eof => break,
                Line::TooLong => None,
                Line::Complete { newline } => {
                    let bytes = if line == 0 { buf.strip_prefix(BOM).unwrap_or(&buf) } else { &buf[..] };
                    if bytes.iter().all(u8::is_ascii_whitespace) {
                        line += 1;
                        continue;
                    }
                    pending_bytes += bytes.len();
                    Some((bytes.to_vec(), newline))
                }
            };
            line += 1;
            pending.push(Pending { line, end_offset: consumed, body });
            if pending.len() >= CHUNK_RECORDS || pending_bytes >= CHUNK_BYTES {
                self.flush(input, &mut pending, reporter, file)?;
                pending_bytes = 0;
            }
        }
        self.flush(input, &mut pending, reporter, file)
    }

    /// Checks the pending lines (in parallel if allowed) and reports them in order.
    fn flush(
        &self,
        input: &Input,
        pending: &mut Vec<Pending>,
        reporter: &mut dyn Reporter,
        file: &mut FileSummary,
    ) -> io::Result<()> {
        let check = |p: &Pending| match &p.body {
            None => Outcome::Unreadable(RecordError::TooLarge { limit: self.options.max_record_bytes }),
            Some((bytes, newline)) => self.outcome(bytes, *newline, false).1,
        };
        let outcomes: Vec<Outcome> = if self.options.parallel && pending.len() > 1 {
            pending.par_iter().map(check).collect()
        } else {
            pending.iter().map(check).collect()
        };
        for (p, outcome) in pending.drain(..).zip(outcomes) {
            file.add(&outcome);
            reporter.record(input, &Record { line: p.line, end_offset: p.end_offset, outcome })?;
        }
        Ok(())
    }
}

/// Cuts `message` to at most `max` bytes (at a character boundary) plus `…`.
fn shorten(message: &mut String, max: usize) {
    if message.len() <= max {
        return;
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message.truncate(end);
    message.push('…');
}
