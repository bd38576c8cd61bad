//! A study's output files: `samples.jsonl.gz` (one [`Sample`] per line, gzip-compressed)
//! and `run.json` (the [`Run`] record), read and written as the report re-renders them.
//!
//! The compressed file is deterministic (no timestamp in the gzip header), so rewriting the
//! same samples gives the same bytes.
//!
//! ```
//! use stencil_experiment::{files, Sample};
//! let dir = std::env::temp_dir().join(format!("stencil-files-doc-{}", std::process::id()));
//! let samples = vec![Sample::text("m", "t", "p", "T 0", 1, "a, \"quoted\"\ntext", &[1, 2])];
//! files::write_samples(&dir, &samples)?;
//! assert_eq!(files::read_samples(&dir)?, samples);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::{Compression, GzBuilder};

use crate::report::Run;
use crate::Sample;

/// The samples file's name.
pub const SAMPLES: &str = "samples.jsonl.gz";
/// The run record's name.
pub const RUN: &str = "run.json";

/// A study file that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// The file system refused.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line (1-based; 0 for the whole file) that is not what it should be.
    #[error("{}:{line}: {source}", .path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The line.
        line: usize,
        /// Why.
        source: serde_json::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FilesError + '_ {
    move |source| FilesError::Io { path: path.to_path_buf(), source }
}

/// Writes `dir/samples.jsonl.gz` (creating `dir`).
///
/// # Errors
///
/// [`FilesError::Io`] when `dir` or the file cannot be written.
pub fn write_samples(dir: &Path, samples: &[Sample]) -> Result<(), FilesError> {
    let path = dir.join(SAMPLES);
    fs::create_dir_all(dir).map_err(io(dir))?;
    let mut gz: GzEncoder<Vec<u8>> = GzBuilder::new().mtime(0).write(Vec::new(), Compression::best());
    for s in samples {
        let line =
            serde_json::to_string(s).map_err(|source| FilesError::Json { path: path.clone(), line: 0, source })?;
        gz.write_all(line.as_bytes()).and_then(|()| gz.write_all(b"\n")).map_err(io(&path))?;
    }
    let bytes = gz.finish().map_err(io(&path))?;
    fs::write(&path, bytes).map_err(io(&path))
}

/// Reads `dir/samples.jsonl.gz`.
///
/// # Errors
///
/// [`FilesError::Io`] when it cannot be read or decompressed, [`FilesError::Json`] (with
/// the line) for a line that is not a sample.
pub fn read_samples(dir: &Path) -> Result<Vec<Sample>, FilesError> {
    let path = dir.join(SAMPLES);
    let bytes = fs::read(&path).map_err(io(&path))?;
    let mut text = String::new();
    GzDecoder::new(bytes.as_slice()).read_to_string(&mut text).map_err(io(&path))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|source| FilesError::Json { path: path.clone(), line: i + 1, source })
        })
        .collect()
}

/// Writes `dir/run.json`.
///
/// # Errors
///
/// [`FilesError::Io`] when it cannot be written.
pub fn write_run(dir: &Path, run: &Run) -> Result<(), FilesError> {
    let path = dir.join(RUN);
    fs::create_dir_all(dir).map_err(io(dir))?;
    let text =
        serde_json::to_string_pretty(run).map_err(|source| FilesError::Json { path: path.clone(), line: 0, source })?;
    fs::write(&path, text + "\n").map_err(io(&path))
}

/// Reads `dir/run.json`.
///
/// # Errors
///
/// [`FilesError::Io`] when it cannot be read, [`FilesError::Json`] when it is not a run
/// record.
pub fn read_run(dir: &Path) -> Result<Run, FilesError> {
    let path = dir.join(RUN);
    let text = fs::read_to_string(&path).map_err(io(&path))?;
    serde_json::from_str(&text).map_err(|source| FilesError::Json { path, line: 0, source })
}
