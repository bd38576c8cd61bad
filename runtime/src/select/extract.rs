//! Answer extraction: the part of a candidate's text that votes.

use regex_automata::meta;
use serde_json::Value;

/// Why an [`Extractor`] could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExtractError {
    /// The answer regex does not compile.
    #[error("answer regex {pattern:?} does not compile: {message}")]
    Regex {
        /// The pattern as given.
        pattern: String,
        /// The regex engine's explanation.
        message: String,
    },
    /// The JSON pointer is not RFC 6901 syntax.
    #[error("JSON pointer {pointer:?} is not valid: {reason}")]
    Pointer {
        /// The pointer as given.
        pointer: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// A compiled answer regex (see [`Extractor::Regex`]).
#[derive(Clone, Debug)]
pub struct AnswerRegex {
    pattern: String,
    regex: meta::Regex,
}

impl AnswerRegex {
    /// Compiles `pattern` (the `regex` crate's syntax, Unicode on; flags such as `(?m)` or
    /// `(?i)` go in the pattern).
    ///
    /// # Errors
    /// [`ExtractError::Regex`] when the pattern does not parse or is too big.
    pub fn new(pattern: &str) -> Result<AnswerRegex, ExtractError> {
        meta::Regex::new(pattern)
            .map(|regex| AnswerRegex { pattern: pattern.to_string(), regex })
            .map_err(|e| ExtractError::Regex { pattern: pattern.to_string(), message: e.to_string() })
    }

    /// The pattern as given.
    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    /// The first (leftmost) match: capture group 1 when the pattern has groups, else the
    /// whole match. `None` when nothing matches or group 1 did not take part in the match
    /// (`(a)|b` matching `b`).
    pub fn find<'h>(&self, text: &'h str) -> Option<&'h str> {
        let mut caps = self.regex.create_captures();
        self.regex.captures(text, &mut caps);
        let group = if self.regex.captures_len() > 1 { 1 } else { 0 };
        let span = caps.get_group(group)?;
        text.get(span.range())
    }
}

/// An extracted answer, before [`Normalizer`](super::Normalizer) turns it into a vote key.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// Text cut out of the candidate ([`Extractor::Regex`], [`Extractor::LastLine`]).
    Text(String),
    /// The JSON value a pointer selected ([`Extractor::JsonPointer`]).
    Json(Value),
}

/// How to find the answer in a candidate's text. A candidate whose answer cannot be found
/// gets `None` from [`Extractor::extract`]: it abstains, it does not vote.
///
/// ```
/// use stencil_runtime::select::{Answer, Extractor};
///
/// let text = r#"{"reasoning": "6 times 7", "answer": 42}"#;
/// let answer = Extractor::json_pointer("/answer")?.extract(text);
/// assert_eq!(answer, Some(Answer::Json(serde_json::json!(42))));
///
/// let answer = Extractor::regex(r"answer is (\w+)")?.extract("I think the answer is yes.");
/// assert_eq!(answer, Some(Answer::Text("yes".into())));
///
/// assert_eq!(Extractor::LastLine.extract("6 times 7\n\n 42 \n"), Some(Answer::Text("42".into())));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub enum Extractor {
    /// Parse the whole text as one JSON document and take the value at this RFC 6901
    /// pointer (`""` is the whole document, `/answer`, `/steps/0`, `~1` for `/`, `~0` for
    /// `~`). Text that is not JSON, or has no value there, abstains. Build it with
    /// [`Extractor::json_pointer`] to have the syntax checked; a malformed pointer put here
    /// directly finds nothing.
    JsonPointer(String),
    /// The first match of a regex: see [`AnswerRegex::find`].
    Regex(AnswerRegex),
    /// The last line that is not blank, trimmed.
    LastLine,
}

impl Extractor {
    /// A [`Extractor::JsonPointer`], its syntax checked.
    ///
    /// # Errors
    /// [`ExtractError::Pointer`] when `pointer` is neither empty nor starts with `/`, or
    /// has a `~` not followed by `0` or `1`.
    pub fn json_pointer(pointer: &str) -> Result<Extractor, ExtractError> {
        check_pointer(pointer)?;
        Ok(Extractor::JsonPointer(pointer.to_string()))
    }

    /// A [`Extractor::Regex`].
    ///
    /// # Errors
    /// [`ExtractError::Regex`] when the pattern does not compile.
    pub fn regex(pattern: &str) -> Result<Extractor, ExtractError> {
        AnswerRegex::new(pattern).map(Extractor::Regex)
    }

    /// The answer in `text`, or `None` (the candidate abstains). Never panics.
    pub fn extract(&self, text: &str) -> Option<Answer> {
        match self {
            Extractor::JsonPointer(pointer) => {
                check_pointer(pointer).ok()?;
                let document: Value = serde_json::from_str(text).ok()?;
                document.pointer(pointer).cloned().map(Answer::Json)
            }
            Extractor::Regex(regex) => regex.find(text).map(|s| Answer::Text(s.to_string())),
            Extractor::LastLine => text
                .lines()
                .rev()
                .map(str::trim)
                .find(|line| !line.is_empty())
                .map(|line| Answer::Text(line.to_string())),
        }
    }
}

fn check_pointer(pointer: &str) -> Result<(), ExtractError> {
    let error = |reason| Err(ExtractError::Pointer { pointer: pointer.to_string(), reason });
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return error("it must be empty or start with `/`");
    }
    let mut chars = pointer.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return error("`~` must be followed by `0` or `1`");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(s: &str) -> Option<Answer> {
        Some(Answer::Text(s.to_string()))
    }

    #[test]
    fn json_pointer_from_a_schema_shaped_output() {
        let extractor = Extractor::json_pointer("/answer").unwrap();
        let output = r#"{"reasoning": "7 + 35 = 42, so the total is 42.", "answer": 42}"#;
        assert_eq!(extractor.extract(output), Some(Answer::Json(json!(42))));
        // Whitespace around the document is JSON's; the value keeps its type.
        let output = "\n  {\"reasoning\": \"...\", \"answer\": \"yes\"}  \n";
        assert_eq!(extractor.extract(output), Some(Answer::Json(json!("yes"))));
        let output = r#"{"reasoning": "...", "answer": {"b": [1, 2], "a": null}}"#;
        assert_eq!(extractor.extract(output), Some(Answer::Json(json!({"a": null, "b": [1, 2]}))));
    }

    #[test]
    fn json_pointer_escapes_arrays_and_the_root() {
        let output = r#"{"a/b": [10, {"c~d": "deep"}], "": 7}"#;
        let at = |p: &str| Extractor::json_pointer(p).unwrap().extract(output);
        assert_eq!(at("/a~1b/0"), Some(Answer::Json(json!(10))));
        assert_eq!(at("/a~1b/1/c~0d"), Some(Answer::Json(json!("deep"))));
        assert_eq!(at("/"), Some(Answer::Json(json!(7))));
        assert_eq!(at(""), Some(Answer::Json(serde_json::from_str(output).unwrap())));
        // Absent members, out-of-range or malformed indexes abstain.
        assert_eq!(at("/answer"), None);
        assert_eq!(at("/a~1b/2"), None);
        assert_eq!(at("/a~1b/01"), None);
        assert_eq!(at("/a~1b/-"), None);
        assert_eq!(at("/a~1b/0/x"), None);
    }

    #[test]
    fn json_pointer_on_text_that_is_not_one_json_document_abstains() {
        let extractor = Extractor::json_pointer("/answer").unwrap();
        for output in ["", "answer: 42", r#"{"answer": 42"#, r#"{"answer": 42} and more"#, r#"{"answer": 4"#, "\u{0}"] {
            assert_eq!(extractor.extract(output), None, "{output:?}");
        }
    }

    #[test]
    fn bad_pointer_syntax_is_an_error() {
        for pointer in ["answer", "/a~2", "/a~", "~0"] {
            match Extractor::json_pointer(pointer) {
                Err(ExtractError::Pointer { pointer: p, .. }) => assert_eq!(p, pointer),
                other => panic!("{pointer:?}: {other:?}"),
            }
        }
        // Built by hand, a malformed pointer finds nothing rather than panicking.
        assert_eq!(Extractor::JsonPointer("answer".into()).extract(r#"{"answer": 1}"#), None);
        assert_eq!(Extractor::JsonPointer("/a~2".into()).extract(r#"{"a~2": 1}"#), None);
    }

    #[test]
    fn regex_takes_group_one_or_the_whole_match() {
        let grouped = Extractor::regex(r"answer: *(-?\d+)").unwrap();
        assert_eq!(grouped.extract("first answer: 12, final answer: 13"), text("12"));
        assert_eq!(grouped.extract("no number here"), None);
        let whole = Extractor::regex(r"\d+").unwrap();
        assert_eq!(whole.extract("it is 42, not 43"), text("42"));
        // Group 1 that did not take part in the match: no answer.
        let alternation = Extractor::regex(r"(yes)|no").unwrap();
        assert_eq!(alternation.extract("no"), None);
        assert_eq!(alternation.extract("yes"), text("yes"));
        // An empty group is an empty answer (the normalizer's key makes it abstain).
        assert_eq!(Extractor::regex(r"x(\d*)").unwrap().extract("x"), text(""));
        // Non-ASCII text and Unicode classes.
        assert_eq!(Extractor::regex(r"réponse : (\w+)").unwrap().extract("la réponse : 四十二"), text("四十二"));
    }

    #[test]
    fn bad_regex_is_an_error() {
        match Extractor::regex("(unclosed") {
            Err(ExtractError::Regex { pattern, message }) => {
                assert_eq!(pattern, "(unclosed");
                assert!(!message.is_empty());
            }
            other => panic!("{other:?}"),
        }
        let error = Extractor::regex("[z-a]").unwrap_err();
        assert!(error.to_string().starts_with("answer regex \"[z-a]\" does not compile: "), "{error}");
    }

    #[test]
    fn last_line_is_the_last_non_blank_line_trimmed() {
        assert_eq!(
            Extractor::LastLine.extract("step 1\nstep 2\n  The answer is 42.  \n\n \t\n"),
            text("The answer is 42.")
        );
        assert_eq!(Extractor::LastLine.extract("a\r\nb\r\n"), text("b"));
        assert_eq!(Extractor::LastLine.extract("only"), text("only"));
        assert_eq!(Extractor::LastLine.extract(""), None);
        assert_eq!(Extractor::LastLine.extract(" \n\t\n"), None);
    }
}
