//! The JUnit XML report.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::{describe_issue, Reporter};
use crate::{FileSummary, Input, Outcome, Record, Summary};

/// JUnit XML, the test report format CI systems show (GitLab, Jenkins, GitHub actions
/// that read JUnit, Azure Pipelines...): one `<testsuite>` per input file, one
/// `<testcase>` per record, named `FILE:LINE` (line 1 for a JSON document), with a
/// `<failure>` listing its issues when the record does not validate and an `<error>` when
/// it is not JSON. A file that cannot be read gets a `<testcase>` named `FILE` with an
/// `<error>`.
///
/// ```xml
/// <?xml version="1.0" encoding="UTF-8"?>
/// <testsuites name="stencil validate: person.json">
///   <testsuite name="out/a.jsonl" tests="3" failures="1" errors="1" skipped="0">
///     <testcase name="out/a.jsonl:1" classname="out/a.jsonl"/>
///     <testcase name="out/a.jsonl:2" classname="out/a.jsonl">
///       <failure type="invalid" message="at /age: `minimum`: -1 is less than the minimum of 0">at /age: `minimum`: -1 is less than the minimum of 0
/// </failure>
///     </testcase>
///     <testcase name="out/a.jsonl:3" classname="out/a.jsonl">
///       <error type="unreadable" message="not JSON: EOF while parsing an object at column 9">not JSON: EOF while parsing an object at column 9</error>
///     </testcase>
///   </testsuite>
/// </testsuites>
/// ```
///
/// Text is escaped for XML 1.0; control characters that XML 1.0 cannot carry at all are
/// written as `\uXXXX`. Each file's test cases are buffered until the file ends (the
/// `<testsuite>` element carries the counts), about 100 bytes per valid record.
#[derive(Debug)]
pub struct JunitReporter<W> {
    out: W,
    name: String,
    started: bool,
    suite: String,
    tests: usize,
    failures: usize,
    errors: usize,
}

impl<W: Write> JunitReporter<W> {
    /// A JUnit report on `out`; the `<testsuites>` element is named after `schema`.
    pub fn new(out: W, schema: &str) -> Self {
        JunitReporter {
            out,
            name: format!("stencil validate: {schema}"),
            started: false,
            suite: String::new(),
            tests: 0,
            failures: 0,
            errors: 0,
        }
    }

    fn start(&mut self) -> io::Result<()> {
        if !self.started {
            self.started = true;
            writeln!(self.out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>")?;
            writeln!(self.out, "<testsuites name=\"{}\">", escape(&self.name, true))?;
        }
        Ok(())
    }

    /// Adds a test case with one `<failure>` or `<error>` child (or none).
    fn case(&mut self, name: &str, class: &str, child: Option<(&str, &str, &str, &str)>) {
        let (name, class) = (escape(name, true), escape(class, true));
        self.tests += 1;
        let s = &mut self.suite;
        match child {
            None => {
                let _ = writeln!(s, "    <testcase name=\"{name}\" classname=\"{class}\"/>");
            }
            Some((tag, kind, message, body)) => {
                let _ = writeln!(s, "    <testcase name=\"{name}\" classname=\"{class}\">");
                let _ = writeln!(
                    s,
                    "      <{tag} type=\"{kind}\" message=\"{}\">{}</{tag}>",
                    escape(message, true),
                    escape(body, false)
                );
                let _ = writeln!(s, "    </testcase>");
            }
        }
    }
}

impl<W: Write> Reporter for JunitReporter<W> {
    fn start_file(&mut self, _input: &Input) -> io::Result<()> {
        self.suite.clear();
        (self.tests, self.failures, self.errors) = (0, 0, 0);
        self.start()
    }

    fn record(&mut self, input: &Input, record: &Record) -> io::Result<()> {
        let file = input.name();
        let name = format!("{file}:{}", record.line);
        match &record.outcome {
            Outcome::Valid => self.case(&name, &file, None),
            Outcome::Invalid(issues) => {
                self.failures += 1;
                let lines: Vec<String> = issues.iter().map(describe_issue).collect();
                let message = match lines.len() {
                    1 => lines[0].clone(),
                    n => format!("{n} issues; first {}", lines[0]),
                };
                let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
                self.case(&name, &file, Some(("failure", "invalid", &message, &body)));
            }
            Outcome::Unreadable(e) => {
                self.errors += 1;
                let message = e.to_string();
                self.case(&name, &file, Some(("error", "unreadable", &message, &message)));
            }
        }
        Ok(())
    }

    fn end_file(&mut self, input: &Input, file: &FileSummary) -> io::Result<()> {
        let name = input.name();
        if let Some(e) = &file.error {
            self.errors += 1;
            let message = e.to_string();
            self.case(&name, &name, Some(("error", "unreadable", &message, &message)));
        }
        writeln!(
            self.out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\">",
            escape(&name, true),
            self.tests,
            self.failures,
            self.errors
        )?;
        self.out.write_all(self.suite.as_bytes())?;
        writeln!(self.out, "  </testsuite>")?;
        self.suite.clear();
        Ok(())
    }

    fn finish(&mut self, _summary: &Summary) -> io::Result<()> {
        self.start()?;
        writeln!(self.out, "</testsuites>")?;
        self.out.flush()
    }
}

/// Escapes `s` for XML 1.0 text (`attribute`: for a double-quoted attribute value, where
/// tabs and line ends are written as character references so that they survive
/// attribute-value normalization). Characters XML 1.0 does not allow at all (C0 controls
/// other than tab, LF and CR; U+FFFE, U+FFFF) become `\uXXXX`.
pub(crate) fn escape(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' if attribute => out.push_str("&#9;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' | '\n' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes_markup_quotes_and_controls() {
        assert_eq!(escape(r#"a<b>&"c"'d'"#, false), "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;");
        assert_eq!(escape("x\ty\nz\r", false), "x\ty\nz&#13;");
        assert_eq!(escape("x\ty\nz\r", true), "x&#9;y&#10;z&#13;");
        assert_eq!(escape("\u{0}\u{1b}\u{fffe}é", false), "\\u0000\\u001B\\uFFFEé");
    }
}
