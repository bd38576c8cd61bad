//! `stencil accepts`: does the grammar accept a text, as the vocabulary tokenizes it? For
//! a schema, the text is also validated post hoc against the schema.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::Value;
use stencil_mask::{bitmask, CompiledGrammar, MatchError, Matcher, Vocabulary};

use crate::error::CliError;
use crate::print_line;
use crate::source::{describe_issue, GrammarSource};
use crate::text::{escape, locate};
use crate::vocab::LoadedVocab;

/// The text to test.
pub enum Input {
    Text(String),
    File(PathBuf),
}

impl Input {
    fn read(&self) -> Result<String, CliError> {
        match self {
            Input::Text(t) => Ok(t.clone()),
            Input::File(path) => {
                let bytes = std::fs::read(path).map_err(|source| CliError::Read {
                    what: "text file",
                    path: path.clone(),
                    source,
                })?;
                String::from_utf8(bytes)
                    .map_err(|e| CliError::TextNotUtf8 { path: path.clone(), offset: e.utf8_error().valid_up_to() })
            }
        }
    }
}

pub fn run(source: &GrammarSource, vocab_path: &Path, input: &Input) -> Result<ExitCode, CliError> {
    let text = input.read()?;
    let loaded = source.load()?;
    let vocab = LoadedVocab::load(vocab_path)?;
    let (compiled, _) = source.compile(&loaded.grammar, vocab.vocab.clone(), Some(vocab_path))?;
    let accepted = grammar_verdict(compiled, &vocab, &text)?;
    let Some(schema) = &loaded.schema else {
        return Ok(ExitCode::from(if accepted { 0 } else { 1 }));
    };
    // Post-hoc validation of the same text.
    let instance: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) if accepted => {
            return Err(CliError::EngineBug(format!(
                "SOUNDNESS BUG: the grammar of schema {} accepted a text that is not JSON ({e})",
                source.path().display()
            )))
        }
        Err(e) => {
            print_line(&format!("post-hoc validation: not JSON ({e})"))?;
            return Ok(ExitCode::from(1));
        }
    };
    let issues = match schema.validate(&instance) {
        Ok(()) => {
            print_line("post-hoc validation: valid")?;
            return Ok(ExitCode::from(if accepted { 0 } else { 1 }));
        }
        Err(issues) => issues,
    };
    if accepted && schema.is_exact() {
        let list: Vec<String> = issues.iter().map(|i| format!("  {}", describe_issue(i))).collect();
        return Err(CliError::EngineBug(format!(
            "SOUNDNESS BUG: the grammar of schema {} accepted an instance that does not validate, although it \
             enforces every keyword:\n{}",
            source.path().display(),
            list.join("\n")
        )));
    }
    print_line(&format!(
        "post-hoc validation: invalid ({} issue{})",
        issues.len(),
        if issues.len() == 1 { "" } else { "s" }
    ))?;
    for issue in &issues {
        print_line(&format!("  {}", describe_issue(issue)))?;
    }
    if accepted {
        print_line(&format!(
            "  (lenient mode: the grammar leaves {} keyword{} to post-hoc validation; see `stencil check`)",
            schema.warnings.len(),
            if schema.warnings.len() == 1 { "" } else { "s" }
        ))?;
    }
    Ok(ExitCode::from(1))
}

/// Feeds the text's tokens to the matcher and prints the grammar's verdict: true when
/// every token is allowed and the grammar can end after the last one.
fn grammar_verdict(compiled: Arc<CompiledGrammar>, vocab: &LoadedVocab, text: &str) -> Result<bool, CliError> {
    let tokens = vocab.tokenizer()?.encode(text).map_err(CliError::Tokenize)?;
    let v = &vocab.vocab;
    let mut matcher = Matcher::new(compiled);
    let mut offset = 0;
    for (i, &token) in tokens.iter().enumerate() {
        match matcher.accept_token(token) {
            Ok(()) => offset += token_len(v, token),
            Err(MatchError::TokenRejected { byte_offset, .. }) => {
                let at = offset + byte_offset.unwrap_or(0);
                let (line, col, shown, pad) = locate(text.as_bytes(), at);
                let place = match byte_offset {
                    Some(k) => format!("byte {k} of the token"),
                    None => "its first byte".to_string(),
                };
                print_line(&format!(
                    "rejected: token {i} of {} (id {token}, {}) is not allowed; the text fails at byte {at} \
                     (line {line}, column {col}; {place})",
                    tokens.len(),
                    escape(v.token_bytes(token)),
                ))?;
                print_line(&format!("  {shown}\n  {pad}^"))?;
                print_line(&format!("  accepted so far: {}", accepted_tail(text, offset)))?;
                print_line(&format!("  {}", describe_allowed(&mut matcher, v)?))?;
                return Ok(false);
            }
            Err(e) => return Err(CliError::Match(e)),
        }
    }
    if matcher.can_end() {
        print_line(&format!("accepted ({} tokens)", tokens.len()))?;
        return Ok(true);
    }
    print_line(&format!(
        "rejected: text is incomplete: the grammar cannot end here (after {} tokens, {} bytes)",
        tokens.len(),
        text.len()
    ))?;
    let forced = matcher.forced_bytes(40);
    if !forced.is_empty() {
        print_line(&format!("  the grammar continues with {}", escape(&forced)))?;
    } else {
        print_line(&format!("  {}", describe_allowed(&mut matcher, v)?))?;
    }
    Ok(false)
}

/// The accepted text (its last 80 characters, after `...`, when longer), escaped.
fn accepted_tail(text: &str, offset: usize) -> String {
    let accepted = &text.as_bytes()[..offset.min(text.len())];
    // `offset` can fall inside a character (a token can end inside one): count back 80
    // character starts on the bytes.
    let (mut start, mut chars) = (accepted.len(), 0);
    while start > 0 && chars < 80 {
        start -= 1;
        if accepted[start] & 0xC0 != 0x80 {
            chars += 1;
        }
    }
    match start {
        0 => escape(accepted),
        _ => format!("...{}", escape(&accepted[start..])),
    }
}

/// Bytes a token adds to the text (control tokens add none).
fn token_len(v: &Vocabulary, token: u32) -> usize {
    if v.is_text(token) {
        v.token_bytes(token).len()
    } else {
        0
    }
}

/// "allowed here: N tokens, e.g. ..." with a few of the shortest allowed tokens.
fn describe_allowed(matcher: &mut Matcher, v: &Vocabulary) -> Result<String, CliError> {
    let mut mask = bitmask::new_mask(v.mask_width());
    matcher.fill_mask(&mut mask).map_err(CliError::Match)?;
    let n = bitmask::count(&mask);
    let mut ids: Vec<u32> = bitmask::allowed(&mask).collect();
    ids.sort_by_key(|&id| (!v.is_text(id), v.token_bytes(id).len(), id));
    let mut shown: Vec<String> = Vec::new();
    for id in ids {
        if shown.len() == 8 {
            break;
        }
        let s = if v.is_eos(id) { "EOS".to_string() } else { escape(v.token_bytes(id)) };
        if !shown.contains(&s) {
            shown.push(s);
        }
    }
    Ok(match n {
        0 => "no token is allowed here".to_string(),
        _ => format!("allowed here: {n} token{}, e.g. {}", if n == 1 { "" } else { "s" }, shown.join(", ")),
    })
}
