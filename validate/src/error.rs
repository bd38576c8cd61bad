//! Why a record or a whole file could not be checked.

use std::path::PathBuf;

use thiserror::Error;

/// A record that could not be read as JSON. The other records of its file are still
/// checked.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordError {
    /// The record's bytes do not parse as one JSON value. `message` is serde_json's,
    /// without its position; `column` is 1-based; `line` is the line in the file for a
    /// JSON document and `None` for a JSONL line (the record's own line is the line).
    #[error("not JSON: {message} at {}column {column}{}", line_prefix(.line), trailing_hint(.message))]
    NotJson {
        /// What serde_json says, without its position.
        message: String,
        /// The line in the file (documents only).
        line: Option<usize>,
        /// The 1-based column in the line.
        column: usize,
    },
    /// The last line of a JSONL file has no newline and is not JSON: the file was most
    /// likely cut off while it was written.
    #[error("truncated record: the file ends in the middle of this line (no final newline) and it is not JSON: {message} at column {column}")]
    Truncated {
        /// What serde_json says, without its position.
        message: String,
        /// The 1-based column in the line.
        column: usize,
    },
    /// The record is not UTF-8 (JSON text must be); `offset` counts bytes from the start
    /// of the record (for a JSONL line, of the line).
    #[error("not JSON: invalid UTF-8 at byte {offset} of the {}", if *.in_document { "file" } else { "line" })]
    NotUtf8 {
        /// Bytes of valid UTF-8 before the first invalid byte.
        offset: usize,
        /// Whether the record is a whole JSON document (else a JSONL line).
        in_document: bool,
    },
    /// The record is longer than [`Options::max_record_bytes`](crate::Options): it was
    /// skipped without being read whole.
    #[error("record longer than the limit of {limit} bytes: skipped")]
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
}

fn line_prefix(line: &Option<usize>) -> String {
    match line {
        Some(l) => format!("line {l} "),
        None => String::new(),
    }
}

fn trailing_hint(message: &str) -> &'static str {
    if message.starts_with("trailing characters") {
        " (several JSON values in one document? name the file .jsonl to read one record per line)"
    } else {
        ""
    }
}

/// A file (or a path given on the command line) that could not be checked, wholly or from
/// some point on. It counts as one unreadable input.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FileError {
    /// The file cannot be opened, or reading it failed part way (the records before were
    /// checked and reported).
    #[error("cannot read file: {source}")]
    Read {
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A directory cannot be listed.
    #[error("cannot list directory {}: {source}", .dir.display())]
    ListDir {
        /// The directory (the one given, or one below it).
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A directory holds no `.json`, `.jsonl` or `.ndjson` file, at any depth.
    #[error("directory holds no .json, .jsonl or .ndjson file")]
    NoJsonFiles,
    /// The file holds no record at all (empty, or only blank lines), which an extraction
    /// pipeline does not normally produce; allowed with
    /// [`Options::allow_empty`](crate::Options).
    #[error("empty file: no record")]
    Empty,
}
