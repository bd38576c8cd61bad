//! # stencil-validate
//!
//! Checks the outputs of an extraction pipeline — JSON documents, JSONL files and
//! directories of them — against a JSON Schema, and reports every failing record with its
//! file, line, JSON pointer, keyword and message, as text, JSON or JUnit XML. It is the
//! library behind `stencil validate`, the CI validator (see `validate/README.md` for the
//! CI recipe).
//!
//! ## Should I use this crate?
//! To validate one value, [`stencil_schema::Validator`] is enough. This crate adds what a
//! batch needs: reading files record by record with bounded memory, reporting bad input
//! (not JSON, invalid UTF-8, truncated or oversized records, missing files) without
//! stopping, parallel validation in file order, and report formats for people and CI.
//!
//! ## Example
//!
//! ```
//! use serde_json::json;
//! use stencil_schema::{Registry, Validator};
//! use stencil_validate::{report::Format, Checker, Input, Options};
//!
//! let schema = json!({
//!     "type": "object",
//!     "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
//!     "required": ["name"]
//! });
//! // Compile the schema once; the checker shares it across records and threads.
//! let checker = Checker::new(Validator::new(&schema, &Registry::new())?, Options::default());
//!
//! let jsonl = "{\"name\": \"Ada\", \"age\": 36}\n{\"name\": \"Bob\", \"age\": -1}\n";
//! let mut out = Vec::new();
//! let mut reporter = Format::Text.reporter(&mut out, std::io::sink(), "person.json");
//! let file = checker.check_reader(&Input::new("people.jsonl"), jsonl.as_bytes(), &mut reporter)?;
//! assert_eq!((file.valid, file.invalid), (1, 1));
//! drop(reporter);
//! assert_eq!(
//!     String::from_utf8(out)?,
//!     "people.jsonl:2: at /age: `minimum`: -1 is less than the minimum of 0\n"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Files and directories go through [`Checker::check_paths`], which also reports the
//! summary; [`Summary::exit_code`] is the CLI's exit status.
//!
//! ## Inputs
//! A file's layout comes from its name ([`InputKind::of`]): `.jsonl` and `.ndjson` (any
//! case) and `-` (standard input) are JSON Lines, one record per line, blank lines
//! skipped, `\r\n` accepted; any other file named on the command line is one JSON
//! document. Directories are searched recursively for `.json`, `.jsonl` and `.ndjson`
//! files, in sorted order ([`expand`]). A UTF-8 byte order mark at the start of a file is
//! skipped.
//!
//! ## Bad input
//! Records that cannot be read are [`RecordError`]s, reported with their line; the rest of
//! the file is still checked. Inputs that cannot be read are [`FileError`]s. Neither
//! stops the run, and neither is a Rust error: only the reporter's own write errors are.
//!
//! ## Memory and speed
//! A JSONL file is read line by line through a bounded buffer: a line longer than
//! [`Options::max_record_bytes`] is skipped without being held. A JSON document is read
//! whole, up to the same cap. Records are parsed and validated in parallel (rayon) in
//! chunks of about a thousand records, and reported in file order. `examples/throughput.rs`
//! measures records per second.

#![deny(missing_docs)]
#![warn(missing_debug_implementations)]

mod check;
mod error;
mod input;
mod read;
pub mod report;

pub use check::{
    Checker, FileSummary, Options, Outcome, Record, Summary, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_RECORD_BYTES,
};
pub use error::{FileError, RecordError};
pub use input::{expand, Input, InputError, InputKind};
pub use report::Reporter;
pub use stencil_schema::{ValidationIssue, Validator};
