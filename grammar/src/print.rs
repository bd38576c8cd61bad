//! The GBNF printer: [`to_gbnf`] writes a [`Grammar`] back as GBNF text that
//! [`parse_gbnf_with`](crate::parse_gbnf_with) reads back into the same grammar.

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::ir::{CharClass, Expr, Grammar, RuleId, TokenName, TokenRef, MAX_CODE_POINT};
use crate::parse::MAX_REPETITION_MIN;

/// Why a grammar cannot be written as GBNF. `rule` names the rule where the problem is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PrintError {
    #[error("rule name `{name}` is not a GBNF name (letters, digits and `-`)")]
    InvalidRuleName { name: String },
    #[error("two rules are named `{name}`")]
    DuplicateRuleName { name: String },
    #[error("rule `{rule}` refers to rule id {id}, which does not exist")]
    UnknownRule { rule: String, id: u32 },
    #[error("rule `{rule}` contains a regular expression, which GBNF cannot express")]
    RegexNotPrintable { rule: String },
    #[error("rule `{rule}` has a literal that is not UTF-8, which GBNF cannot express")]
    NotUtf8 { rule: String },
    #[error("rule `{rule}` has a character class with {value:#X}, which is not a Unicode scalar value")]
    InvalidCodePoint { rule: String, value: u32 },
    #[error("rule `{rule}` has a character class that lists or matches nothing, which GBNF cannot express")]
    EmptyClass { rule: String },
    #[error("rule `{rule}` has an alternation with no alternatives, which GBNF cannot express")]
    EmptyAlternation { rule: String },
    #[error("rule `{rule}` has token text {text:?}, which GBNF cannot write: it must be `<...>`, with no other `>` and not starting with `<[`")]
    InvalidToken { rule: String, text: String },
    #[error("rule `{rule}` repeats {min} to {max:?} times: the minimum must be at most the maximum and at most 2000")]
    InvalidRepeat { rule: String, min: u32, max: Option<u32> },
}

/// Writes `g` as GBNF: every rule as `name ::= body` on its own line, in id order, with
/// non-printable and special characters escaped (`\xHH`, `\uHHHH`, `\UHHHHHHHH`).
///
/// Parsing the output with the start rule's name as root gives back `g` for every grammar
/// the parser produces. The start rule is not marked: it is up to the reader to use its name.
///
/// ```
/// use stencil_grammar::{parse_gbnf, to_gbnf};
/// let g = parse_gbnf("root ::= (\"a\" | [^\\n\\x00])+ ws\nws ::= | \" \"").unwrap();
/// let text = to_gbnf(&g).unwrap();
/// assert_eq!(text, "root ::= (\"a\" | [^\\n\\x00])+ ws\nws ::= () | \" \"\n");
/// assert_eq!(parse_gbnf(&text).unwrap(), g);
/// ```
pub fn to_gbnf(g: &Grammar) -> Result<String, PrintError> {
    let mut seen = HashSet::new();
    for rule in &g.rules {
        if !is_gbnf_name(&rule.name) {
            return Err(PrintError::InvalidRuleName { name: rule.name.clone() });
        }
        if !seen.insert(rule.name.as_str()) {
            return Err(PrintError::DuplicateRuleName { name: rule.name.clone() });
        }
    }
    let mut out = String::new();
    for rule in &g.rules {
        let mut p = Printer { g, rule: &rule.name, out: String::new() };
        p.alternation(&rule.body)?;
        let _ = writeln!(out, "{} ::= {}", rule.name, p.out);
    }
    Ok(out)
}

/// Whether `name` is a GBNF rule name, as llama.cpp reads them: `[a-zA-Z0-9-]+`.
pub fn is_gbnf_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

struct Printer<'a> {
    g: &'a Grammar,
    rule: &'a str,
    out: String,
}

impl Printer<'_> {
    /// `a | b c | ...`
    fn alternation(&mut self, e: &Expr) -> Result<(), PrintError> {
        match e {
            Expr::Alt(alts) if alts.is_empty() => Err(PrintError::EmptyAlternation { rule: self.rule.into() }),
            Expr::Alt(alts) => {
                for (i, alt) in alts.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(" | ");
                    }
                    self.sequence(alt)?;
                }
                Ok(())
            }
            _ => self.sequence(e),
        }
    }

    /// `a b c`
    fn sequence(&mut self, e: &Expr) -> Result<(), PrintError> {
        match e {
            Expr::Seq(items) if !items.is_empty() => {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push(' ');
                    }
                    self.item(item)?;
                }
                Ok(())
            }
            _ => self.item(e),
        }
    }

    /// One item of a sequence; alternations and sequences go in parentheses.
    fn item(&mut self, e: &Expr) -> Result<(), PrintError> {
        match e {
            // `()` rather than nothing: after `::=` or `|` a newline would not end the rule.
            Expr::Empty => self.out.push_str("()"),
            Expr::Seq(items) if items.is_empty() => self.out.push_str("()"),
            Expr::Literal(bytes) => self.literal(bytes)?,
            Expr::Class(class) => self.class(class)?,
            Expr::AnyChar => self.out.push('.'),
            Expr::Regex(_) => return Err(PrintError::RegexNotPrintable { rule: self.rule.into() }),
            Expr::Rule(id) => self.rule_ref(*id)?,
            Expr::Token(token) => self.token(token)?,
            Expr::Seq(_) | Expr::Alt(_) => {
                self.out.push('(');
                self.alternation(e)?;
                self.out.push(')');
            }
            Expr::Repeat { expr, min, max } => {
                if *min > MAX_REPETITION_MIN || max.is_some_and(|max| max < *min) {
                    return Err(PrintError::InvalidRepeat { rule: self.rule.into(), min: *min, max: *max });
                }
                // llama.cpp compiles `""` and `x{0}` to nothing, and nothing cannot be
                // repeated: such operands go in parentheses.
                let empty = matches!(**expr, Expr::Literal(ref b) if b.is_empty())
                    || matches!(**expr, Expr::Repeat { max: Some(0), .. });
                if empty {
                    self.out.push('(');
                    self.alternation(expr)?;
                    self.out.push(')');
                } else {
                    self.item(expr)?;
                }
                match (*min, *max) {
                    (0, None) => self.out.push('*'),
                    (1, None) => self.out.push('+'),
                    (0, Some(1)) => self.out.push('?'),
                    (m, None) => {
                        let _ = write!(self.out, "{{{m},}}");
                    }
                    (m, Some(n)) if m == n => {
                        let _ = write!(self.out, "{{{m}}}");
                    }
                    (m, Some(n)) => {
                        let _ = write!(self.out, "{{{m},{n}}}");
                    }
                }
            }
        }
        Ok(())
    }

    fn rule_ref(&mut self, id: RuleId) -> Result<(), PrintError> {
        let rule = self
            .g
            .rules
            .get(id.0 as usize)
            .ok_or_else(|| PrintError::UnknownRule { rule: self.rule.into(), id: id.0 })?;
        self.out.push_str(&rule.name);
        Ok(())
    }

    fn literal(&mut self, bytes: &[u8]) -> Result<(), PrintError> {
        // A `\xHH` escape gives a code point, never a lone byte: other bytes cannot be written.
        let text = std::str::from_utf8(bytes).map_err(|_| PrintError::NotUtf8 { rule: self.rule.into() })?;
        self.out.push('"');
        for c in text.chars() {
            match c {
                '"' | '\\' => {
                    self.out.push('\\');
                    self.out.push(c);
                }
                _ => push_char(&mut self.out, c),
            }
        }
        self.out.push('"');
        Ok(())
    }

    fn class(&mut self, class: &CharClass) -> Result<(), PrintError> {
        for &(lo, hi) in &class.ranges {
            for value in [lo, hi] {
                if value > MAX_CODE_POINT || (0xD800..=0xDFFF).contains(&value) {
                    return Err(PrintError::InvalidCodePoint { rule: self.rule.into(), value });
                }
            }
        }
        if class.ranges.is_empty() || class.is_empty() {
            return Err(PrintError::EmptyClass { rule: self.rule.into() });
        }
        self.out.push_str(if class.negated { "[^" } else { "[" });
        for &(lo, hi) in &class.ranges {
            self.class_char(lo);
            if hi != lo {
                self.out.push('-');
                self.class_char(hi);
            }
        }
        self.out.push(']');
        Ok(())
    }

    fn class_char(&mut self, value: u32) {
        let c = char::from_u32(value).expect("checked by class()");
        match c {
            '\\' | ']' | '[' | '-' => {
                self.out.push('\\');
                self.out.push(c);
            }
            // `^` has no escape of its own and negates the class when first.
            '^' => self.out.push_str("\\x5E"),
            _ => push_char(&mut self.out, c),
        }
    }

    fn token(&mut self, token: &TokenRef) -> Result<(), PrintError> {
        if token.negated {
            self.out.push('!');
        }
        match &token.token {
            TokenName::Id(id) => {
                let _ = write!(self.out, "<[{id}]>");
            }
            TokenName::Text(text) => {
                let inner = text.strip_prefix('<').and_then(|t| t.strip_suffix('>'));
                match inner {
                    Some(inner) if !inner.starts_with('[') && !inner.contains(['>', '\0']) => self.out.push_str(text),
                    _ => return Err(PrintError::InvalidToken { rule: self.rule.into(), text: text.clone() }),
                }
            }
        }
        Ok(())
    }
}

/// Pushes `c` as itself when it is visible, else as an escape.
fn push_char(out: &mut String, c: char) {
    match c {
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        _ if is_invisible(c) => {
            let v = c as u32;
            let _ = match v {
                0..=0xFF => write!(out, "\\x{v:02X}"),
                0x100..=0xFFFF => write!(out, "\\u{v:04X}"),
                _ => write!(out, "\\U{v:08X}"),
            };
        }
        _ => out.push(c),
    }
}

/// Control, format, space (other than ` `), private-use and noncharacter code points.
fn is_invisible(c: char) -> bool {
    let v = c as u32;
    c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(v, 0xAD | 0x34F | 0x61C | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180B..=0x180F | 0x3164 | 0xFFA0)
        || matches!(v, 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0xFE00..=0xFE0F | 0xFEFF)
        || matches!(v, 0xFFF0..=0xFFFB | 0xE000..=0xF8FF | 0xFDD0..=0xFDEF | 0xE0000..=0xE0FFF | 0xF0000..)
        || (v & 0xFFFE) == 0xFFFE
}
