//! The output style: where whitespace goes between JSON tokens, the separators, and the
//! indented layout ([`crate::SchemaOptions::indent`]), plus [`Style::literal_value`], a
//! constant's text in that style.
//!
//! Invariant: every emitter writes structure only through these pieces, so one schema
//! compiled in two styles differs only in its whitespace and separators (and, indented,
//! in one rule per nesting depth: [`Style::child_depth`]).

use serde_json::Value;
use stencil_grammar::Expr;

use crate::emit::{alt, lit, name_hash, seq, Emitter};
use crate::escape::json_string;
use crate::numbers::Decimal;
use crate::{SchemaOptions, Whitespace};

/// The pieces of JSON text between tokens, from the options.
pub(crate) struct Style {
    /// Optional whitespace (the flexible style's `ws` rule).
    ws: Option<Expr>,
    item_sep: String,
    key_sep: String,
    /// Spaces per level of the indented style.
    pub(crate) indent: Option<usize>,
}

impl Style {
    /// The style of `opts`; the flexible style's whitespace rule `ws` is added to `out`.
    pub(crate) fn new(opts: &SchemaOptions, out: &mut Emitter) -> Style {
        let o = opts;
        if let Some(n) = o.indent {
            return Style {
                ws: None,
                item_sep: o.item_separator.trim_end().to_string(),
                key_sep: o.key_separator.clone(),
                indent: Some(n),
            };
        }
        match o.whitespace {
            Whitespace::Compact => {
                Style { ws: None, item_sep: o.item_separator.clone(), key_sep: o.key_separator.clone(), indent: None }
            }
            Whitespace::Flexible { max_run } => {
                let ws = if max_run == 0 {
                    // The name stays taken, as when the rule is there.
                    out.names.insert(name_hash("ws"));
                    None
                } else {
                    let body =
                        Expr::repeat(Expr::class([(' ', ' '), ('\t', '\t'), ('\n', '\n')]), 0, Some(max_run as u32));
                    Some(Expr::Rule(out.add_rule("ws", body)))
                };
                Style { ws, item_sep: ",".into(), key_sep: ":".into(), indent: None }
            }
        }
    }

    /// Optional whitespace between tokens (nothing in the compact and indented styles).
    fn ws(&self) -> Expr {
        self.ws.clone().unwrap_or(Expr::Empty)
    }

    /// Before the first member of a non-empty container at `depth`.
    pub(crate) fn first_prefix(&self, depth: usize) -> Expr {
        match self.indent {
            Some(n) => lit(&format!("\n{}", " ".repeat(n * (depth + 1)))),
            None => self.ws(),
        }
    }
    /// Between two members of a container at `depth`.
    pub(crate) fn item_sep(&self, depth: usize) -> Expr {
        match self.indent {
            Some(n) => lit(&format!("{}\n{}", self.item_sep, " ".repeat(n * (depth + 1)))),
            None => seq(vec![self.ws(), lit(&self.item_sep), self.ws()]),
        }
    }
    /// Between a key and its value.
    pub(crate) fn key_sep(&self) -> Expr {
        seq(vec![self.ws(), lit(&self.key_sep), self.ws()])
    }
    /// Before the closing bracket of a non-empty container.
    pub(crate) fn close_prefix(&self, depth: usize) -> Expr {
        match self.indent {
            Some(n) => lit(&format!("\n{}", " ".repeat(n * depth))),
            None => self.ws(),
        }
    }
    /// Inside an empty container.
    pub(crate) fn empty_inside(&self) -> Expr {
        match self.indent {
            Some(_) => Expr::Empty,
            None => self.ws(),
        }
    }
    /// The depth of a container's members (always 0 but in the indented style).
    pub(crate) fn child_depth(&self, depth: usize) -> usize {
        if self.indent.is_some() {
            depth + 1
        } else {
            0
        }
    }

    /// The text of the constant `v` at `depth`, in this style.
    pub(crate) fn literal_value(&self, v: &Value, depth: usize) -> Expr {
        match v {
            Value::Array(a) if !a.is_empty() => {
                let cd = self.child_depth(depth);
                let mut items = vec![lit("["), self.first_prefix(depth)];
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        items.push(self.item_sep(depth));
                    }
                    items.push(self.literal_value(x, cd));
                }
                items.push(self.close_prefix(depth));
                items.push(lit("]"));
                seq(items)
            }
            Value::Object(m) if !m.is_empty() => {
                let cd = self.child_depth(depth);
                let mut items = vec![lit("{"), self.first_prefix(depth)];
                for (i, (k, x)) in m.iter().enumerate() {
                    if i > 0 {
                        items.push(self.item_sep(depth));
                    }
                    items.push(lit(&json_string(k)));
                    items.push(self.key_sep());
                    items.push(self.literal_value(x, cd));
                }
                items.push(self.close_prefix(depth));
                items.push(lit("}"));
                seq(items)
            }
            Value::Array(_) => seq(vec![lit("["), self.empty_inside(), lit("]")]),
            Value::Object(_) => seq(vec![lit("{"), self.empty_inside(), lit("}")]),
            Value::Number(n) => {
                // Equal numbers have several spellings (1, 1.0): accept serde_json's and the
                // plain decimal one.
                let mut spellings = vec![n.to_string()];
                if let Some(d) = Decimal::from_number(n) {
                    spellings.push(d.to_string());
                    if d.is_integer() {
                        spellings.push(format!("{d}.0"));
                    }
                }
                spellings.sort();
                spellings.dedup();
                alt(spellings.iter().map(|s| lit(s)).collect()).unwrap()
            }
            other => lit(&other.to_string()),
        }
    }
}
