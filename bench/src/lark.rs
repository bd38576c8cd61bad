//! Stencil's grammar IR → llguidance's Lark dialect.
//!
//! llguidance takes no GBNF in Rust (its GBNF path is a Python script,
//! `python/llguidance/gbnf_to_lark.py`), so the benchmark prints Lark from the very IR that
//! Stencil compiles: both engines see the same grammar.
//!
//! Two modes:
//! * [`Mode::Rules`] (default): every GBNF rule becomes a Lark parser rule (lowercase); each
//!   literal, character class and `.` becomes its own lexeme. This keeps GBNF's
//!   character-level meaning: llguidance's lexer is greedy, so merging text into longer
//!   lexemes can change which strings are accepted.
//! * [`Mode::Terminals`]: what llguidance's own `gbnf_to_lark.py` does: every rule except
//!   the root whose body uses only text and other such rules (so never a recursive one)
//!   becomes a terminal (uppercase), i.e. one greedy lexeme.
//!
//! Text: literals are JSON strings (the Lark lexer's string syntax); classes are regexes
//! `/[...]/` over code points written `\x{..}`; `.` is any code point; `{m,n}` is kept.

use stencil_grammar::{Expr, Grammar, TokenName};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Rules,
    Terminals,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Rules => "rules",
            Mode::Terminals => "terminals",
        }
    }
}

/// The Lark text, or why the grammar cannot be written in llguidance's Lark.
pub fn to_lark(g: &Grammar, mode: Mode) -> Result<String, String> {
    let n = g.rules.len();
    let terminal = match mode {
        Mode::Rules => vec![false; n],
        Mode::Terminals => terminal_rules(g),
    };
    let names = rule_names(g, &terminal);
    let mut out = String::new();
    // Root first (as `start`), then the rest in source order.
    let mut order: Vec<usize> = vec![g.root.0 as usize];
    order.extend((0..n).filter(|&i| i != g.root.0 as usize));
    for i in order {
        let body = expr(&g.rules[i].body, &names, true)?;
        out.push_str(&names[i]);
        out.push_str(": ");
        out.push_str(&body);
        out.push('\n');
    }
    Ok(out)
}

/// Rules to print as terminals (fixpoint, as gbnf_to_lark.py's `resolve`).
fn terminal_rules(g: &Grammar) -> Vec<bool> {
    let n = g.rules.len();
    let mut term = vec![false; n];
    loop {
        let mut changed = false;
        for i in 0..n {
            if i == g.root.0 as usize || term[i] {
                continue;
            }
            if is_text(&g.rules[i].body, &term) {
                term[i] = true;
                changed = true;
            }
        }
        if !changed {
            return term;
        }
    }
}

fn is_text(e: &Expr, term: &[bool]) -> bool {
    match e {
        Expr::Empty | Expr::Literal(_) | Expr::Class(_) | Expr::AnyChar | Expr::Regex(_) => true,
        Expr::Token(_) => false,
        Expr::Rule(r) => term[r.0 as usize],
        Expr::Seq(v) | Expr::Alt(v) => v.iter().all(|x| is_text(x, term)),
        Expr::Repeat { expr, .. } => is_text(expr, term),
    }
}

/// Lark names: `start` for the root, lowercase for rules, uppercase for terminals, unique.
fn rule_names(g: &Grammar, terminal: &[bool]) -> Vec<String> {
    let mut used = std::collections::HashSet::new();
    used.insert("start".to_string());
    g.rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            if i == g.root.0 as usize {
                return "start".to_string();
            }
            let mut s: String = r
                .name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c.to_ascii_lowercase() } else { '_' })
                .collect();
            if !s.starts_with(|c: char| c.is_ascii_lowercase()) {
                s = format!("r-{s}");
            }
            if terminal[i] {
                s = s.to_ascii_uppercase();
            }
            let mut name = s.clone();
            let mut k = 2;
            while !used.insert(name.clone()) {
                name = format!("{s}-{k}");
                k += 1;
            }
            name
        })
        .collect()
}

fn is_atom(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Empty
            | Expr::Literal(_)
            | Expr::Class(_)
            | Expr::AnyChar
            | Expr::Regex(_)
            | Expr::Rule(_)
            | Expr::Token(_)
    )
}

fn expr(e: &Expr, names: &[String], top: bool) -> Result<String, String> {
    Ok(match e {
        Expr::Empty => "\"\"".to_string(),
        Expr::Literal(b) => {
            let s = std::str::from_utf8(b).map_err(|_| format!("literal {b:?} is not UTF-8; Lark strings are text"))?;
            json_string(s)
        }
        Expr::Class(c) => {
            let cps = c.code_points();
            if cps.is_empty() {
                return Err("empty character class".into());
            }
            class_regex(&cps)
        }
        Expr::AnyChar => class_regex(&[(0, 0x10FFFF)]),
        Expr::Regex(r) => format!("/{}/", r.replace('/', "\\/")),
        Expr::Rule(r) => names[r.0 as usize].clone(),
        Expr::Token(t) => match (&t.token, t.negated) {
            (TokenName::Id(id), false) => format!("<[{id}]>"),
            (TokenName::Id(id), true) => format!("<[^{id}]>"),
            (TokenName::Text(s), false) => format!("<{s}>"),
            (TokenName::Text(s), true) => return Err(format!("negated token by text !<{s}> has no Lark form")),
        },
        Expr::Seq(v) => {
            if v.is_empty() {
                "\"\"".to_string()
            } else {
                let parts: Result<Vec<String>, String> = v
                    .iter()
                    .map(|x| {
                        expr(x, names, false).map(|s| if matches!(x, Expr::Alt(_)) { format!("({s})") } else { s })
                    })
                    .collect();
                parts?.join(" ")
            }
        }
        Expr::Alt(v) => {
            if v.is_empty() {
                return Err("empty alternation".into());
            }
            let parts: Result<Vec<String>, String> = v.iter().map(|x| expr(x, names, false)).collect();
            let s = parts?.join(" | ");
            if top {
                s
            } else {
                format!("({s})")
            }
        }
        Expr::Repeat { expr: inner, min, max } => {
            let s = expr(inner, names, false)?;
            let s = if is_atom(inner) || matches!(**inner, Expr::Alt(_)) { s } else { format!("({s})") };
            let suffix = match (*min, *max) {
                (0, None) => "*".to_string(),
                (1, None) => "+".to_string(),
                (0, Some(1)) => "?".to_string(),
                (m, None) => format!("{{{m},}}"),
                (m, Some(x)) if m == x => format!("{{{m}}}"),
                (m, Some(x)) => format!("{{{m},{x}}}"),
            };
            format!("{s}{suffix}")
        }
    })
}

/// A string in the JSON syntax llguidance's Lark lexer takes (no raw control chars or DEL).
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7F => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn class_regex(ranges: &[(u32, u32)]) -> String {
    let mut s = String::from("/[");
    for &(lo, hi) in ranges {
        if lo == hi {
            s.push_str(&format!("\\x{{{lo:X}}}"));
        } else {
            s.push_str(&format!("\\x{{{lo:X}}}-\\x{{{hi:X}}}"));
        }
    }
    s.push_str("]/");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_json_grammar() {
        let g = stencil_grammar::parse_gbnf(
            "root ::= obj\nobj ::= \"{\" ws \"}\" | \"[\" [0-9]{1,3} \"]\"\nws ::= | \" \" | \"\\n\" [ \\t]*\n",
        )
        .unwrap();
        let rules = to_lark(&g, Mode::Rules).unwrap();
        assert!(rules.starts_with("start: obj\n"), "{rules}");
        assert!(rules.contains("/[\\x{30}-\\x{39}]/{1,3}"), "{rules}");
        let terms = to_lark(&g, Mode::Terminals).unwrap();
        assert!(terms.contains("WS: "), "{terms}");
    }

    #[test]
    fn escapes_strings() {
        assert_eq!(json_string("a\"\\\u{7f}\u{1}é"), "\"a\\\"\\\\\\u007f\\u0001é\"");
    }
}
