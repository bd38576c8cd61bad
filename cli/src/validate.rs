//! `stencil validate`: JSON documents, JSONL files and directories of them against a JSON
//! Schema, post hoc — glue over the `stencil-validate` crate, which reads, checks and
//! writes the reports (text, JSON, JUnit XML). This module reads the schema, picks the
//! report, shows a progress bar on a terminal and turns the summary into the exit status.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stencil_schema::{Registry, Validator};
use stencil_validate::report::Format;
use stencil_validate::{expand, Checker, FileSummary, Input, InputError, Options, Outcome, Record, Reporter, Summary};

use crate::error::CliError;
use crate::source::read_schema;
use crate::ValidateArgs;

/// `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// Issues and a summary line on stdout, unreadable records and files on stderr.
    Text,
    /// One JSON object: the failing records, every file's tally, the summary.
    Json,
    /// JUnit XML: a test suite per file, a test case per record.
    Junit,
}

impl From<ReportFormat> for Format {
    fn from(f: ReportFormat) -> Format {
        match f {
            ReportFormat::Text => Format::Text,
            ReportFormat::Json => Format::Json,
            ReportFormat::Junit => Format::Junit,
        }
    }
}

/// `--max-record-bytes`: a number of bytes, optionally with a binary suffix (`K`, `KiB`,
/// `M`, `MiB`, `G`, `GiB`, any case; `B` alone for bytes).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, suffix) = t.split_at(digits);
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("{s:?} is not a size (expected a number of bytes, or with K, M or G)")),
    };
    let n: usize = number.parse().map_err(|_| format!("{s:?} is not a size (expected a number of bytes)"))?;
    if n == 0 {
        return Err("the size must be at least 1 byte".into());
    }
    n.checked_mul(1 << shift).ok_or_else(|| format!("{s:?} is too large"))
}

pub fn run(args: &ValidateArgs) -> Result<ExitCode, CliError> {
    let schema = read_schema(&args.schema)?;
    // Compiled once for the whole run. A schema that the validator cannot use is bad
    // input, not a failing record.
    let validator = Validator::new(&schema, &Registry::new())
        .map_err(|e| CliError::Usage(format!("schema {} cannot be used: {e}", args.schema.display())))?;
    let options =
        Options { max_record_bytes: args.max_record_bytes, allow_empty: args.allow_empty, ..Options::default() };
    let checker = Checker::new(validator, options);
    let inputs = expand(&args.files);

    let stdout = std::io::stdout();
    let out: Box<dyn Write> = if stdout.is_terminal() {
        Box::new(stdout.lock()) // line-buffered
    } else {
        Box::new(std::io::BufWriter::with_capacity(1 << 16, stdout.lock()))
    };
    let format = Format::from(args.format);
    let reporter = format.reporter(out, std::io::stderr(), &args.schema.display().to_string());
    let show_progress = !args.no_progress && std::io::stderr().is_terminal();
    let summary = if show_progress {
        let mut reporter = WithProgress::new(reporter, &inputs);
        checker.check_inputs(inputs, &mut reporter)
    } else {
        let mut reporter = reporter;
        checker.check_inputs(inputs, &mut reporter)
    }
    .map_err(CliError::from_stdout)?;
    if format != Format::Text {
        // The report is on stdout, for the CI system; the log still gets a line.
        eprintln!("{summary}");
    }
    Ok(ExitCode::from(summary.exit_code()))
}

/// A progress bar on stderr (bytes read over the total size of the files), suspended
/// while the report writes a failure.
struct WithProgress<R> {
    inner: R,
    bar: ProgressBar,
    /// Bytes of the files already done.
    done: u64,
    records: u64,
}

impl<R: Reporter> WithProgress<R> {
    fn new(inner: R, inputs: &[Result<Input, InputError>]) -> Self {
        let total: u64 = inputs
            .iter()
            .filter_map(|i| i.as_ref().ok())
            .filter(|i| !i.is_stdin())
            .filter_map(|i| std::fs::metadata(&i.path).ok())
            .map(|m| m.len())
            .sum();
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{bytes}/{total_bytes} [{wide_bar}] {msg} ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        WithProgress { inner, bar, done: 0, records: 0 }
    }
}

impl<R: Reporter> Reporter for WithProgress<R> {
    fn start_file(&mut self, input: &Input) -> std::io::Result<()> {
        self.inner.start_file(input)
    }

    fn record(&mut self, input: &Input, record: &Record) -> std::io::Result<()> {
        self.records += 1;
        self.bar.set_position(self.done + record.end_offset);
        if self.records % 1024 == 1 {
            self.bar.set_message(format!("{} records", self.records));
        }
        match record.outcome {
            Outcome::Valid => self.inner.record(input, record),
            _ => self.bar.suspend(|| self.inner.record(input, record)),
        }
    }

    fn end_file(&mut self, input: &Input, file: &FileSummary) -> std::io::Result<()> {
        if !input.is_stdin() {
            self.done += std::fs::metadata(&input.path).map(|m| m.len()).unwrap_or(0);
            self.bar.set_position(self.done);
        }
        self.bar.suspend(|| self.inner.end_file(input, file))
    }

    fn finish(&mut self, summary: &Summary) -> std::io::Result<()> {
        self.bar.finish_and_clear();
        self.inner.finish(summary)
    }
}
