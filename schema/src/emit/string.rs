//! Strings: the escaped contents of a node's strings — length bounds, one `pattern` or
//! `format` (translated to a character language, intersected with the length when its
//! shape allows, then escaped as JSON text), or "any string but these" for excluded
//! values; shared rules for any string and for its exclusions.
//!
//! Strings and formats are regexes over the JSON-escaped text (`ecma.rs` translates the
//! patterns, `formats.rs` the formats, `escape.rs` escapes). A string with a length bound
//! of 64 or more is a rule of its own, quotes included: properties with the same bounds
//! share one automaton, and long ones take the engine's chain (`chain.rs` in
//! `stencil-mask`).
//!
//! Invariant: the grammar's strings are JSON strings in serde_json's canonical escapes
//! whose decoded text is in the node's language, up to the keywords reported unenforced.

use regex_syntax::hir::{Hir, HirKind, Repetition};
use stencil_grammar::Expr;

use super::{hir_expr, lit, sanitize, seq, Emitter};
use crate::compile::Ctx;
use crate::escape::{escape_hir, length_hir};
use crate::node::Node;
use crate::SchemaError;

/// A string schema's escaped contents (see [`Ctx::string_expr`]).
enum Contents {
    /// The whole string, quotes included, built another way (any string; any but some).
    Whole(Expr),
    /// The contents, exactly the schema's.
    Exact(Expr),
    /// The contents, with a keyword left unenforced (and said so, for this schema only).
    Loosened(Expr),
}

/// Strings with a length bound from this count up are rules of their own (see
/// `string_expr`): inlined, each property would carry its own copy of the count's states.
const OWN_RULE_LENGTH: u64 = 64;

impl<'o> Ctx<'o> {
    /// The grammar of the node's strings, quotes included, other than `excluded`; `None`
    /// when the length bounds admit none.
    pub(crate) fn string_expr(&mut self, node: &Node, excluded: &[String]) -> Result<Option<Expr>, SchemaError> {
        let s = &node.str;
        let ptr = node.members.first().map(|&m| self.loc.ptr(m)).unwrap_or_default();
        if let Some(max) = s.max_len {
            if s.min_len > max {
                return Ok(None);
            }
        }
        // A string of one pattern or format and its length bounds is the same wherever it
        // appears (schemas repeat `format: date-time`): translated and escaped once.
        let key = match (&s.patterns[..], &s.formats[..]) {
            ([(p, _)], []) if excluded.is_empty() => Some((false, p.clone(), s.min_len, s.max_len)),
            ([], [(f, _)]) if excluded.is_empty() => Some((true, f.clone(), s.min_len, s.max_len)),
            _ => None,
        };
        let known = key.as_ref().and_then(|k| self.memo.string_contents.get(k)).cloned();
        let contents = match known {
            Some(contents) => contents,
            None => match self.string_contents_of(node, excluded, &ptr)? {
                Contents::Whole(string) => return Ok(Some(string)),
                Contents::Exact(contents) => {
                    if let Some(k) = key {
                        self.memo.string_contents.insert(k, contents.clone());
                    }
                    contents
                }
                Contents::Loosened(contents) => contents,
            },
        };
        let counted = s.max_len.is_some_and(|m| m >= OWN_RULE_LENGTH) || s.min_len >= OWN_RULE_LENGTH;
        let string = seq(vec![lit("\""), contents, lit("\"")]);
        if counted {
            // A rule of its own, quotes included (called mid-string, the caller would wait
            // at every byte for the closing quote): properties with the same bounds share
            // one automaton, and the engine builds a long count's directly (or splits it).
            let name = format!("{}-maxLength-{}", sanitize(&ptr), s.max_len.unwrap_or(s.min_len));
            return Ok(Some(Expr::Rule(self.out.add_rule(&name, string))));
        }
        Ok(Some(string))
    }

    /// The escaped contents of `node`'s strings (see [`Ctx::string_expr`]).
    fn string_contents_of(&mut self, node: &Node, excluded: &[String], ptr: &str) -> Result<Contents, SchemaError> {
        let s = &node.str;
        let mut exact = true;
        // Character-level languages to intersect.
        let mut patterns = Vec::new();
        for (p, pp) in &s.patterns {
            patterns.push(self.pattern_hir(p, |_| pp.clone())?);
        }
        let formats: Vec<_> = s.formats.iter().map(|(f, _)| crate::formats::format_hir(f).expect("known")).collect();
        let mut parts: Vec<(&Hir, &str, &String)> = Vec::new(); // (hir, keyword, pointer)
        parts.extend(patterns.iter().zip(&s.patterns).map(|(h, (_, pp))| (&**h, "pattern", pp)));
        parts.extend(formats.iter().zip(&s.formats).map(|(h, (_, fp))| (&**h, "format", fp)));
        let has_len = s.min_len > 0 || s.max_len.is_some();
        let content: Hir = if parts.is_empty() {
            if !excluded.is_empty() {
                if has_len {
                    self.diag.unenforced("not", ptr, "excluding strings together with a length bound")?;
                    exact = false;
                } else {
                    return Ok(Contents::Whole(self.out.string_not_in(excluded)));
                }
            }
            if !has_len {
                return Ok(Contents::Whole(self.out.any_string()));
            }
            length_hir(s.min_len.min(u32::MAX as u64) as u32, s.max_len.map(|m| m.min(u32::MAX as u64) as u32))
        } else {
            if !excluded.is_empty() {
                self.diag.unenforced("not", ptr, "excluding strings together with a pattern or format")?;
                exact = false;
            }
            let (first, _, _) = parts.remove(0);
            let mut h = std::borrow::Cow::Borrowed(first);
            if has_len {
                match with_length(&h, s.min_len, s.max_len) {
                    Some(x) => h = std::borrow::Cow::Owned(x),
                    None => {
                        let kw = if s.max_len.is_some() { "maxLength" } else { "minLength" };
                        self.diag.unenforced(
                            kw,
                            ptr,
                            "a length bound combined with a pattern or format of this shape",
                        )?;
                        exact = false;
                    }
                }
            }
            for (_, kw, p) in parts {
                self.diag.unenforced(kw, p, "a second pattern/format on the same string")?;
                exact = false;
            }
            escape_hir(&h).map_err(|e| SchemaError::BadPattern {
                pointer: ptr.to_string(),
                pattern: String::new(),
                reason: e,
            })?
        };
        let contents = hir_expr(content);
        Ok(if exact { Contents::Exact(contents) } else { Contents::Loosened(contents) })
    }
}

impl Emitter {
    /// A JSON string that is none of `excluded` (see [`crate::not_in`]); the first call
    /// adds the shared rules it ends in.
    pub(crate) fn string_not_in(&mut self, excluded: &[String]) -> Expr {
        let mut names = excluded.to_vec();
        names.sort_unstable();
        names.dedup();
        if let Some(&r) = self.keys_not_in.get(&names) {
            return Expr::Rule(r);
        }
        if self.string_rests.is_none() {
            let [any, other] = crate::not_in::StringRests::bodies();
            let any = Expr::Rule(self.add_kept_rule("string-rest", any));
            let other = Expr::Rule(self.add_kept_rule("string-rest-other", other));
            self.string_rests = Some(crate::not_in::StringRests { any, other });
        }
        let body = crate::not_in::string_not_in(&names, self.string_rests.as_ref().expect("set above"));
        let r = self.add_kept_rule("other-key", body);
        self.keys_not_in.insert(names, r);
        Expr::Rule(r)
    }

    /// The contents of any string, as one shared rule.
    pub(crate) fn any_string(&mut self) -> Expr {
        if let Some(id) = self.any_string {
            return Expr::Rule(id);
        }
        let body = seq(vec![lit("\""), hir_expr(length_hir(0, None)), lit("\"")]);
        let id = self.add_rule("string", body);
        self.any_string = Some(id);
        Expr::Rule(id)
    }
}

pub(crate) fn length_hir_chars(min: u32, max: Option<u32>) -> Hir {
    Hir::repetition(Repetition {
        min,
        max,
        greedy: true,
        sub: Box::new(Hir::class(regex_syntax::hir::Class::Unicode(regex_syntax::hir::ClassUnicode::new([
            regex_syntax::hir::ClassUnicodeRange::new('\0', char::MAX),
        ])))),
    })
}

/// Character count of a fixed-length piece, if fixed.
fn fixed_len(h: &Hir) -> Option<u64> {
    match h.kind() {
        HirKind::Empty => Some(0),
        HirKind::Literal(l) => std::str::from_utf8(&l.0).ok().map(|s| s.chars().count() as u64),
        HirKind::Class(_) => Some(1),
        HirKind::Capture(c) => fixed_len(&c.sub),
        HirKind::Repetition(r) if r.max == Some(r.min) => fixed_len(&r.sub).map(|n| n * r.min as u64),
        HirKind::Concat(v) => v.iter().map(fixed_len).sum(),
        HirKind::Alternation(v) => {
            let f: Vec<Option<u64>> = v.iter().map(fixed_len).collect();
            if f.iter().all(|x| x.is_some() && *x == f[0]) {
                f[0]
            } else {
                None
            }
        }
        HirKind::Look(_) => Some(0),
        _ => None,
    }
}

/// Intersects a character language with "length in [min, max]" when the language is a
/// concatenation of fixed-length pieces and at most one repetition of a fixed-length piece
/// (`^[a-z]+$`, `^x-[0-9]{2,}$`, unanchored `.*abc.*` excepted).
pub(crate) fn with_length(h: &Hir, min: u64, max: Option<u64>) -> Option<Hir> {
    let items: Vec<Hir> = match h.kind() {
        HirKind::Concat(v) => v.clone(),
        HirKind::Capture(c) => return with_length(&c.sub, min, max),
        _ => vec![h.clone()],
    };
    let mut fixed_total = 0u64;
    let mut var: Option<usize> = None;
    for (i, it) in items.iter().enumerate() {
        match fixed_len(it) {
            Some(n) => fixed_total += n,
            None => {
                if var.is_some() {
                    return None;
                }
                var = Some(i);
            }
        }
    }
    match var {
        None => {
            // Fixed length: either in range (no change) or empty.
            if fixed_total >= min && max.is_none_or(|m| fixed_total <= m) {
                Some(h.clone())
            } else {
                Some(Hir::fail())
            }
        }
        Some(i) => {
            let HirKind::Repetition(r) = items[i].kind() else { return None };
            let unit = fixed_len(&r.sub)?;
            if unit == 0 {
                return None;
            }
            let lo_total = min.saturating_sub(fixed_total);
            let lo = lo_total.div_ceil(unit).max(r.min as u64);
            let hi = match (max, r.max) {
                (Some(m), rm) => {
                    if m < fixed_total {
                        return Some(Hir::fail());
                    }
                    let h = (m - fixed_total) / unit;
                    Some(rm.map_or(h, |x| h.min(x as u64)))
                }
                (None, rm) => rm.map(|x| x as u64),
            };
            if hi.is_some_and(|h| h < lo) {
                return Some(Hir::fail());
            }
            let mut items = items.clone();
            items[i] = Hir::repetition(Repetition {
                min: lo.min(u32::MAX as u64) as u32,
                max: hi.map(|h| h.min(u32::MAX as u64) as u32),
                greedy: true,
                sub: r.sub.clone(),
            });
            Some(Hir::concat(items))
        }
    }
}
