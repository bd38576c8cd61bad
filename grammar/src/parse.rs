//! The GBNF front end: llama.cpp's grammar syntax, read with `pest` (`gbnf.pest`), into a
//! [`Grammar`].
//!
//! It accepts what llama.cpp's `src/llama-grammar.cpp` accepts (rule names are
//! `[a-zA-Z0-9-]+`, without `_`; a newline ends a rule except inside parentheses and after
//! `::=` or `|`; a rule defined twice keeps its last definition), with these deliberate
//! differences:
//!
//! - Left recursion is accepted (llama.cpp refuses to build such grammars).
//! - Of llama.cpp's limits on `{m,n}`, only `m <= 2000` is kept; its limit on how many rules
//!   a repetition expands to is not (it depends on llama.cpp's expansion; Stencil's compiler
//!   has its own limits). A maximum above 2000 stays as written (llama.cpp silently makes it
//!   unbounded); a count that does not fit in `u32`, or `m > n`, is an error.
//! - A character class that matches no code point (`[]`, `[^]`, `[z-a]`,
//!   `[^\x00-\U0010FFFF]`) is an error; llama.cpp compiles `[]` and `[^]` to the empty string.
//! - An escape that gives a surrogate or a value above U+10FFFF is an error, and so is a
//!   token id that does not fit in `u32` (llama.cpp truncates it).
//! - A NUL character is only allowed in comments (llama.cpp stops reading at it).
//! - A reference to an undefined rule is an error even in a definition that a later one
//!   replaced.
//!
//! `<text>` tokens keep their angle brackets: [`TokenName::Text`] holds `"<text>"`, the text
//! llama.cpp looks up in the vocabulary.

use std::collections::HashMap;
use std::fmt;

use pest::iterators::Pair;
use pest::Parser as _;

use crate::ir::{CharClass, Expr, Grammar, RuleId, TokenName, TokenRef, MAX_CODE_POINT};

#[derive(pest_derive::Parser)]
#[grammar = "gbnf.pest"]
struct GbnfParser;

/// llama.cpp's `MAX_REPETITION_THRESHOLD`: the largest minimum count of `{m,n}`.
pub const MAX_REPETITION_MIN: u32 = 2000;

/// Options for [`parse_gbnf_with`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseOptions {
    /// The start rule. Default `"root"`.
    pub root: String,
    /// How deep parentheses and quantifiers may nest. Default 256. Keep it in the hundreds:
    /// parsing recurses once per level.
    pub max_nesting: usize,
    /// The largest source accepted, in bytes. Default 4 MiB.
    pub max_source_bytes: usize,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions { root: "root".to_string(), max_nesting: 256, max_source_bytes: 4 << 20 }
    }
}

/// Why a GBNF grammar was rejected. Every variant with a place in the source carries its
/// 1-based `line` and `col` (in characters) and the text of that line (`snippet`), and its
/// `Display` shows the message, the line, and a caret under the column.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GbnfError {
    /// The text does not follow GBNF's syntax; `expected` names what could come next.
    /// `at_end`: the grammar ended too early (an unclosed `(`, `[` or `"`); the place is
    /// then just after its last non-blank character.
    Syntax { line: usize, col: usize, expected: Vec<String>, snippet: String, at_end: bool },
    /// An escape llama.cpp does not know (`\q`), or `\x`, `\u`, `\U` without 2, 4 or 8 hex
    /// digits. `escape` is the text of the escape.
    InvalidEscape { line: usize, col: usize, escape: String, snippet: String },
    /// An escape that gives a surrogate or a value above U+10FFFF.
    InvalidCodePoint { line: usize, col: usize, value: u32, snippet: String },
    /// A character class that matches no code point, or lists none (`[^]`).
    EmptyClass { line: usize, col: usize, snippet: String },
    /// A quantifier after an item llama.cpp compiles to nothing: `""` or `x{0}`.
    NothingToRepeat { line: usize, col: usize, snippet: String },
    /// A repetition count above `limit` (2000 for a minimum, as in llama.cpp; `u32::MAX`
    /// for a maximum).
    RepetitionTooLarge { line: usize, col: usize, count: String, limit: u32, snippet: String },
    /// `{min,max}` with `min > max`.
    RepetitionBounds { line: usize, col: usize, min: u32, max: u32, snippet: String },
    /// `<[id]>` with an id that does not fit in `u32`.
    TokenIdTooLarge { line: usize, col: usize, id: String, snippet: String },
    /// A reference to a rule that is never defined (at its first reference).
    UndefinedRule { name: String, line: usize, col: usize, snippet: String },
    /// The start rule is not defined.
    MissingRoot { root: String },
    /// Parentheses and quantifiers nest deeper than [`ParseOptions::max_nesting`].
    NestingTooDeep { limit: usize, line: usize, col: usize, snippet: String },
    /// The source is longer than [`ParseOptions::max_source_bytes`].
    SourceTooLarge { size: usize, limit: usize },
    /// The bytes given to [`parse_gbnf_bytes`] are not UTF-8.
    InvalidUtf8 { line: usize, col: usize, snippet: String },
}

impl GbnfError {
    /// The 1-based line and column of the error, if it has a place.
    pub fn line_col(&self) -> Option<(usize, usize)> {
        use GbnfError::*;
        match self {
            Syntax { line, col, .. }
            | InvalidEscape { line, col, .. }
            | InvalidCodePoint { line, col, .. }
            | EmptyClass { line, col, .. }
            | NothingToRepeat { line, col, .. }
            | RepetitionTooLarge { line, col, .. }
            | RepetitionBounds { line, col, .. }
            | TokenIdTooLarge { line, col, .. }
            | UndefinedRule { line, col, .. }
            | NestingTooDeep { line, col, .. }
            | InvalidUtf8 { line, col, .. } => Some((*line, *col)),
            MissingRoot { .. } | SourceTooLarge { .. } => None,
        }
    }

    fn snippet(&self) -> Option<&str> {
        use GbnfError::*;
        match self {
            Syntax { snippet, .. }
            | InvalidEscape { snippet, .. }
            | InvalidCodePoint { snippet, .. }
            | EmptyClass { snippet, .. }
            | NothingToRepeat { snippet, .. }
            | RepetitionTooLarge { snippet, .. }
            | RepetitionBounds { snippet, .. }
            | TokenIdTooLarge { snippet, .. }
            | UndefinedRule { snippet, .. }
            | NestingTooDeep { snippet, .. }
            | InvalidUtf8 { snippet, .. } => Some(snippet),
            MissingRoot { .. } | SourceTooLarge { .. } => None,
        }
    }

    /// The one-line message, and what to show after the caret.
    fn message(&self) -> (String, String) {
        use GbnfError::*;
        match self {
            Syntax { expected, at_end, .. } => (
                if *at_end { "unexpected end of grammar" } else { "syntax error" }.into(),
                format!("expected {}", join_or(expected)),
            ),
            InvalidEscape { escape, .. } => (
                format!("invalid escape `{escape}`"),
                r#"expected \xHH, \uHHHH, \UHHHHHHHH, \t, \n, \r, \\, \", \[, \] or \-"#.into(),
            ),
            InvalidCodePoint { value, .. } => (
                format!("escape gives {value:#X}, which is not a Unicode scalar value"),
                "surrogates and values above U+10FFFF cannot be encoded".into(),
            ),
            EmptyClass { .. } => ("empty character class".into(), "it matches no character".into()),
            NothingToRepeat { .. } => (
                "nothing to repeat".into(),
                "the item before this is empty (`\"\"` or `{0}`); wrap it in parentheses".into(),
            ),
            RepetitionTooLarge { count, limit, .. } => {
                (format!("repetition count {count} is too large"), format!("the most allowed here is {limit}"))
            }
            RepetitionBounds { min, max, .. } => {
                (format!("repetition minimum {min} is larger than its maximum {max}"), String::new())
            }
            TokenIdTooLarge { id, .. } => (format!("token id {id} does not fit in 32 bits"), String::new()),
            UndefinedRule { name, .. } => (format!("undefined rule `{name}`"), String::new()),
            MissingRoot { root } => (format!("the grammar has no rule `{root}` to start from"), String::new()),
            NestingTooDeep { limit, .. } => {
                (format!("nesting deeper than {limit} levels"), "parentheses and quantifiers nest too deep here".into())
            }
            SourceTooLarge { size, limit } => {
                (format!("grammar is {size} bytes, more than the limit of {limit}"), String::new())
            }
            InvalidUtf8 { .. } => ("invalid UTF-8".into(), String::new()),
        }
    }
}

impl fmt::Display for GbnfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (message, hint) = self.message();
        let (Some((line, col)), Some(snippet)) = (self.line_col(), self.snippet()) else {
            return f.write_str(&message);
        };
        let (shown, pad) = crate::caret_window(snippet, col);
        write!(f, "{message} at line {line}, column {col}\n{shown}\n{pad}^")?;
        if !hint.is_empty() {
            write!(f, " {hint}")?;
        }
        Ok(())
    }
}

/// `a`, `a or b`, `a, b or c`.
fn join_or(items: &[String]) -> String {
    match items {
        [] => "something else".into(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// Line (1-based), column (1-based, in characters) and the text of the line at byte
/// `offset`. `\n`, `\r\n` and a lone `\r` all end a line, as in llama.cpp.
fn locate(src: &str, offset: usize) -> (usize, usize, String) {
    let bytes = src.as_bytes();
    let offset = offset.min(src.len());
    let mut line = 1;
    let mut start = 0;
    for (i, &b) in bytes[..offset].iter().enumerate() {
        if b == b'\n' || (b == b'\r' && bytes.get(i + 1) != Some(&b'\n')) {
            line += 1;
            start = i + 1;
        }
    }
    let end = bytes[start..].iter().position(|&b| b == b'\n' || b == b'\r').map_or(src.len(), |n| start + n);
    let col = src[start..offset].chars().count() + 1;
    (line, col, src[start..end].to_string())
}

/// Parses a GBNF grammar whose start rule is `root`.
///
/// Rules get ids in the order of their definitions; a rule may be used before it is
/// defined. See [`parse_gbnf_with`] for the limits applied.
///
/// ```
/// use stencil_grammar::{parse_gbnf, Expr};
/// let g = parse_gbnf("root ::= \"a\" digit+\ndigit ::= [0-9]\n").unwrap();
/// assert_eq!(g.rule(g.root).name, "root");
/// let digit = g.rule_id("digit").unwrap();
/// assert_eq!(g.rule(g.root).body, Expr::seq([Expr::literal("a"), Expr::plus(Expr::Rule(digit))]));
/// assert!(parse_gbnf("root ::= (\"a\"").is_err());
/// ```
pub fn parse_gbnf(src: &str) -> Result<Grammar, GbnfError> {
    parse_gbnf_with(src, &ParseOptions::default())
}

/// Parses a GBNF grammar with the start rule, nesting limit and size limit of `options`.
///
/// ```
/// use stencil_grammar::{parse_gbnf_with, GbnfError, ParseOptions};
/// let options = ParseOptions { root: "start".into(), ..ParseOptions::default() };
/// let g = parse_gbnf_with("start ::= \"x\"", &options).unwrap();
/// assert_eq!(g.rule(g.root).name, "start");
/// let deep = format!("start ::= {}\"x\"{}", "(".repeat(1000), ")".repeat(1000));
/// assert!(matches!(parse_gbnf_with(&deep, &options), Err(GbnfError::NestingTooDeep { .. })));
/// ```
pub fn parse_gbnf_with(src: &str, options: &ParseOptions) -> Result<Grammar, GbnfError> {
    if src.len() > options.max_source_bytes {
        return Err(GbnfError::SourceTooLarge { size: src.len(), limit: options.max_source_bytes });
    }
    // pest recurses once per parenthesis: refuse deep nesting before running it.
    check_paren_depth(src, options.max_nesting)?;
    let mut pairs = GbnfParser::parse(Rule::grammar, src).map_err(|e| syntax_error(src, e, options))?;
    let top = pairs.next().expect("pest returns the grammar rule");
    Builder::new(src, options).build(top)
}

/// Parses GBNF from bytes, reporting where they stop being UTF-8; otherwise like
/// [`parse_gbnf`].
///
/// ```
/// use stencil_grammar::{parse_gbnf_bytes, GbnfError};
/// let err = parse_gbnf_bytes(b"root ::= \"\xFF\"").unwrap_err();
/// assert!(matches!(err, GbnfError::InvalidUtf8 { line: 1, col: 11, .. }));
/// ```
pub fn parse_gbnf_bytes(src: &[u8]) -> Result<Grammar, GbnfError> {
    parse_gbnf_bytes_with(src, &ParseOptions::default())
}

/// [`parse_gbnf_bytes`] with options.
pub fn parse_gbnf_bytes_with(src: &[u8], options: &ParseOptions) -> Result<Grammar, GbnfError> {
    if src.len() > options.max_source_bytes {
        return Err(GbnfError::SourceTooLarge { size: src.len(), limit: options.max_source_bytes });
    }
    match std::str::from_utf8(src) {
        Ok(text) => parse_gbnf_with(text, options),
        Err(e) => {
            let valid = std::str::from_utf8(&src[..e.valid_up_to()]).expect("valid prefix");
            let (line, col, _) = locate(valid, valid.len());
            // The line's text, up to the next line break, shown lossily.
            let start = valid.len() - valid.rsplit(['\n', '\r']).next().map_or(0, str::len);
            let rest = &src[start..];
            let end = rest.iter().position(|&b| b == b'\n' || b == b'\r').unwrap_or(rest.len());
            let snippet = String::from_utf8_lossy(&rest[..end]).into_owned();
            Err(GbnfError::InvalidUtf8 { line, col, snippet })
        }
    }
}

/// Fails if parentheses nest deeper than `limit`, skipping what pest would read as string
/// literals, classes, tokens and comments (up to where pest would fail anyway).
fn check_paren_depth(src: &str, limit: usize) -> Result<(), GbnfError> {
    let b = src.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            open @ (b'"' | b'[') => {
                let close = if open == b'"' { b'"' } else { b']' };
                i += 1;
                while i < b.len() && b[i] != close {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'<' => {
                while i < b.len() && b[i] != b'>' {
                    i += 1;
                }
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' && b[i] != b'\r' {
                    i += 1;
                }
            }
            b'(' => {
                depth += 1;
                if depth > limit {
                    let (line, col, snippet) = locate(src, i);
                    return Err(GbnfError::NestingTooDeep { limit, line, col, snippet });
                }
            }
            b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

fn syntax_error(src: &str, e: pest::error::Error<Rule>, options: &ParseOptions) -> GbnfError {
    let mut offset = match e.location {
        pest::error::InputLocation::Pos(p) => p,
        pest::error::InputLocation::Span((p, _)) => p,
    };
    // Nothing but blanks left: point after the last character rather than past them.
    let at_end = src.get(offset..).is_some_and(|rest| rest.trim().is_empty());
    if at_end {
        offset = offset.min(src.trim_end().len());
    }
    let (line, col, snippet) = locate(src, offset);
    let positives = match e.variant {
        pest::error::ErrorVariant::ParsingError { positives, .. } => positives,
        // pest's own stack guard ("stack limit reached"); check_paren_depth should prevent it.
        pest::error::ErrorVariant::CustomError { .. } => {
            return GbnfError::NestingTooDeep { limit: options.max_nesting, line, col, snippet }
        }
    };
    GbnfError::Syntax { line, col, expected: expected_names(&positives), snippet, at_end }
}

/// Readable names for what pest expected, in a fixed order, with the six kinds of item
/// folded into "an item" when all are possible.
fn expected_names(positives: &[Rule]) -> Vec<String> {
    const ITEMS: [Rule; 6] = [Rule::string, Rule::class, Rule::token, Rule::name, Rule::group, Rule::any_char];
    let has = |r: Rule| positives.contains(&r) || (r == Rule::group && positives.contains(&Rule::lparen));
    let all_items = ITEMS.iter().all(|&r| has(r));
    let table: &[(&[Rule], &str)] = &[
        (&[Rule::name], "a rule name"),
        (&[Rule::assign], "`::=`"),
        (&[Rule::string], "a string literal"),
        (&[Rule::class], "a character class"),
        (&[Rule::token, Rule::token_id, Rule::token_text], "a token (`<...>`)"),
        (&[Rule::group, Rule::lparen], "`(`"),
        (&[Rule::any_char], "`.`"),
        (&[Rule::quant_top, Rule::quant_nest], "a quantifier"),
        (&[Rule::count], "an integer"),
        (&[Rule::comma], "`,`"),
        (&[Rule::rbrace], "`}`"),
        (&[Rule::string_end], "`\"`"),
        (&[Rule::rbracket], "`]`"),
        (&[Rule::token_end], "`>`"),
        (&[Rule::pipe], "`|`"),
        (&[Rule::rparen], "`)`"),
        (&[Rule::rule_end], "the end of the line"),
        (&[Rule::rule_def], "a rule definition"),
        (&[Rule::EOI], "the end of the input"),
    ];
    let mut out = Vec::new();
    if all_items {
        out.push("an item".to_string());
    }
    for (rules, text) in table {
        let is_item = rules.iter().any(|r| ITEMS.contains(r) || *r == Rule::lparen);
        if (all_items && is_item) || !rules.iter().any(|&r| positives.contains(&r)) {
            continue;
        }
        if !out.iter().any(|o| o == text) {
            out.push(text.to_string());
        }
    }
    out
}

/// Turns pest's parse tree into a [`Grammar`].
struct Builder<'a> {
    src: &'a str,
    options: &'a ParseOptions,
    ids: HashMap<&'a str, RuleId>,
    /// The first reference to an undefined rule, and where it is.
    undefined: Option<(&'a str, usize)>,
}

/// Marks a reference to an undefined rule until the error is reported.
const UNDEFINED: RuleId = RuleId(u32::MAX);

impl<'a> Builder<'a> {
    fn new(src: &'a str, options: &'a ParseOptions) -> Self {
        Builder { src, options, ids: HashMap::new(), undefined: None }
    }

    fn build(mut self, top: Pair<'a, Rule>) -> Result<Grammar, GbnfError> {
        let defs: Vec<Pair<'a, Rule>> = top.into_inner().filter(|p| p.as_rule() == Rule::rule_def).collect();
        let mut g = Grammar::new();
        for def in &defs {
            let name = def.clone().into_inner().next().expect("rule name").as_str();
            self.ids.entry(name).or_insert_with(|| g.add_rule(name, Expr::Empty));
        }
        for def in defs {
            let mut inner = def.into_inner();
            let id = self.ids[inner.next().expect("rule name").as_str()];
            let alts = inner.find(|p| p.as_rule() == Rule::alts_top).expect("rule body");
            let body = self.alternates(alts, 0)?;
            // As in llama.cpp, a later definition replaces an earlier one.
            g.set_body(id, body);
        }
        if let Some((name, offset)) = self.undefined {
            let (line, col, snippet) = locate(self.src, offset);
            return Err(GbnfError::UndefinedRule { name: name.to_string(), line, col, snippet });
        }
        let root = self.options.root.as_str();
        g.root = *self.ids.get(root).ok_or_else(|| GbnfError::MissingRoot { root: root.to_string() })?;
        Ok(g)
    }

    fn error_at(&self, offset: usize, make: impl FnOnce(usize, usize, String) -> GbnfError) -> GbnfError {
        let (line, col, snippet) = locate(self.src, offset);
        make(line, col, snippet)
    }

    /// `alts_top` / `alts_nest`: sequences separated by `|`.
    fn alternates(&mut self, pair: Pair<'a, Rule>, depth: usize) -> Result<Expr, GbnfError> {
        let mut alts = Vec::new();
        for seq in pair.into_inner().filter(|p| p.as_rule() != Rule::pipe) {
            alts.push(self.sequence(seq, depth)?);
        }
        Ok(if alts.len() == 1 { alts.pop().expect("one") } else { Expr::Alt(alts) })
    }

    /// `seq_top` / `seq_nest`: atoms, each followed by its quantifiers.
    ///
    /// `depth` counts the groups and quantifiers around an item: an atom with `k`
    /// quantifiers is at `depth + k`, and a group's contents one deeper than the group.
    fn sequence(&mut self, pair: Pair<'a, Rule>, depth: usize) -> Result<Expr, GbnfError> {
        let is_quantifier = |p: &Pair<'a, Rule>| matches!(p.as_rule(), Rule::quant_top | Rule::quant_nest);
        let children: Vec<Pair<'a, Rule>> = pair.into_inner().collect();
        let mut items = Vec::new();
        let mut i = 0;
        while i < children.len() {
            let atom = children[i].clone();
            let quantifiers: Vec<Pair<'a, Rule>> =
                children[i + 1..].iter().take_while(|p| is_quantifier(p)).cloned().collect();
            i += 1 + quantifiers.len();
            let limit = self.options.max_nesting;
            if depth + quantifiers.len() > limit {
                let offset = quantifiers[limit.saturating_sub(depth)].as_span().start();
                return Err(self.error_at(offset, |line, col, snippet| GbnfError::NestingTooDeep {
                    limit,
                    line,
                    col,
                    snippet,
                }));
            }
            // llama.cpp compiles `""` and `x{0}` to nothing, and refuses to repeat nothing.
            let mut repeatable = !(atom.as_rule() == Rule::string && atom.as_str() == "\"\"");
            let mut item = self.atom(atom, depth + quantifiers.len())?;
            for q in quantifiers {
                if !repeatable {
                    return Err(self.error_at(q.as_span().start(), |line, col, snippet| GbnfError::NothingToRepeat {
                        line,
                        col,
                        snippet,
                    }));
                }
                let (min, max) = self.quantifier(q)?;
                repeatable = max != Some(0);
                item = Expr::repeat(item, min, max);
            }
            items.push(item);
        }
        Ok(match items.len() {
            0 => Expr::Empty,
            1 => items.pop().expect("one"),
            _ => Expr::Seq(items),
        })
    }

    /// `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}` as (min, max).
    fn quantifier(&self, pair: Pair<'a, Rule>) -> Result<(u32, Option<u32>), GbnfError> {
        match pair.as_str().as_bytes()[0] {
            b'*' => return Ok((0, None)),
            b'+' => return Ok((1, None)),
            b'?' => return Ok((0, Some(1))),
            _ => {}
        }
        let start = pair.as_span().start();
        let mut counts = Vec::new();
        let mut comma = false;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::count => counts.push(p),
                Rule::comma => comma = true,
                _ => {}
            }
        }
        let min_pair = &counts[0];
        let min = match min_pair.as_str().parse::<u32>() {
            Ok(n) if n <= MAX_REPETITION_MIN => n,
            _ => {
                let count = min_pair.as_str().to_string();
                return Err(self.error_at(min_pair.as_span().start(), |line, col, snippet| {
                    GbnfError::RepetitionTooLarge { line, col, count, limit: MAX_REPETITION_MIN, snippet }
                }));
            }
        };
        let max = match (comma, counts.get(1)) {
            (false, _) => Some(min),
            (true, None) => None,
            (true, Some(p)) => {
                let Ok(max) = p.as_str().parse::<u32>() else {
                    let count = p.as_str().to_string();
                    return Err(self.error_at(p.as_span().start(), |line, col, snippet| {
                        GbnfError::RepetitionTooLarge { line, col, count, limit: u32::MAX, snippet }
                    }));
                };
                if min > max {
                    return Err(self.error_at(start, |line, col, snippet| GbnfError::RepetitionBounds {
                        line,
                        col,
                        min,
                        max,
                        snippet,
                    }));
                }
                Some(max)
            }
        };
        Ok((min, max))
    }

    fn atom(&mut self, pair: Pair<'a, Rule>, depth: usize) -> Result<Expr, GbnfError> {
        let start = pair.as_span().start();
        match pair.as_rule() {
            Rule::string => {
                let body = pair.into_inner().next().expect("string body");
                let (text, base) = (body.as_str(), body.as_span().start());
                let mut bytes = Vec::with_capacity(text.len());
                let mut i = 0;
                while i < text.len() {
                    let (c, next) = self.char_at(text, base, i)?;
                    let c = char::from_u32(c).expect("char_at checks code points");
                    bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                    i = next;
                }
                Ok(Expr::Literal(bytes))
            }
            Rule::class => {
                let body = pair.into_inner().next().expect("class body");
                let (mut text, mut base) = (body.as_str(), body.as_span().start());
                let negated = text.starts_with('^');
                if negated {
                    text = &text[1..];
                    base += 1;
                }
                // As llama.cpp: a `-` not followed by the closing `]` makes a range.
                let mut ranges = Vec::new();
                let mut i = 0;
                while i < text.len() {
                    let (lo, next) = self.char_at(text, base, i)?;
                    i = next;
                    let mut hi = lo;
                    if text[i..].starts_with('-') && i + 1 < text.len() {
                        (hi, i) = self.char_at(text, base, i + 1)?;
                    }
                    ranges.push((lo, hi));
                }
                let class = CharClass { ranges, negated };
                // `[]` and `[^]` included: llama.cpp compiles both to the empty string.
                if class.ranges.is_empty() || class.is_empty() {
                    return Err(self.error_at(start, |line, col, snippet| GbnfError::EmptyClass {
                        line,
                        col,
                        snippet,
                    }));
                }
                Ok(Expr::Class(class))
            }
            Rule::token => {
                let negated = pair.as_str().starts_with('!');
                let inner = pair.into_inner().next().expect("token kind");
                let token =
                    if inner.as_rule() == Rule::token_id {
                        let count = inner.into_inner().next().expect("token id");
                        let id =
                            count.as_str().parse::<u32>().map_err(|_| {
                                let id = count.as_str().to_string();
                                self.error_at(count.as_span().start(), |line, col, snippet| {
                                    GbnfError::TokenIdTooLarge { line, col, id, snippet }
                                })
                            })?;
                        TokenName::Id(id)
                    } else {
                        // The text with its angle brackets: what llama.cpp looks up in the vocabulary.
                        TokenName::Text(inner.as_str().to_string())
                    };
                Ok(Expr::Token(TokenRef { token, negated }))
            }
            Rule::name => {
                let name = pair.as_str();
                Ok(Expr::Rule(match self.ids.get(name) {
                    Some(&id) => id,
                    None => {
                        self.undefined.get_or_insert((name, start));
                        UNDEFINED
                    }
                }))
            }
            Rule::group => {
                if depth + 1 > self.options.max_nesting {
                    let limit = self.options.max_nesting;
                    return Err(self.error_at(start, |line, col, snippet| GbnfError::NestingTooDeep {
                        limit,
                        line,
                        col,
                        snippet,
                    }));
                }
                let alts = pair.into_inner().find(|p| p.as_rule() == Rule::alts_nest).expect("group body");
                self.alternates(alts, depth + 1)
            }
            Rule::any_char => Ok(Expr::AnyChar),
            other => unreachable!("not an atom: {other:?}"),
        }
    }

    /// The code point at byte `i` of a string or class body (which starts at `base` in the
    /// source), and the index after it. Escapes as in llama.cpp's `parse_char`.
    fn char_at(&self, text: &str, base: usize, i: usize) -> Result<(u32, usize), GbnfError> {
        let rest = &text[i..];
        let mut chars = rest.chars();
        let first = chars.next().expect("i < text.len()");
        if first != '\\' {
            return Ok((first as u32, i + first.len_utf8()));
        }
        // The lexer puts a character after every backslash.
        let kind = chars.next().expect("escaped character");
        let digits = match kind {
            'x' => 2,
            'u' => 4,
            'U' => 8,
            _ => {
                let value = match kind {
                    't' => '\t',
                    'r' => '\r',
                    'n' => '\n',
                    '\\' | '"' | '[' | ']' | '-' => kind,
                    _ => {
                        let escape = format!("\\{kind}");
                        return Err(self.error_at(base + i, |line, col, snippet| GbnfError::InvalidEscape {
                            line,
                            col,
                            escape,
                            snippet,
                        }));
                    }
                };
                return Ok((value as u32, i + 1 + kind.len_utf8()));
            }
        };
        let hex: String = rest[2..].chars().take(digits).take_while(char::is_ascii_hexdigit).collect();
        if hex.len() < digits {
            let escape = format!("\\{kind}{hex}");
            return Err(self.error_at(base + i, |line, col, snippet| GbnfError::InvalidEscape {
                line,
                col,
                escape,
                snippet,
            }));
        }
        let value = u32::from_str_radix(&hex, 16).expect("hex digits");
        if value > MAX_CODE_POINT || (0xD800..=0xDFFF).contains(&value) {
            return Err(self.error_at(base + i, |line, col, snippet| GbnfError::InvalidCodePoint {
                line,
                col,
                value,
                snippet,
            }));
        }
        Ok((value, i + 2 + digits))
    }
}
