//! JSON → the typed [`Node`] tree, with every error located by JSON pointer.
//!
//! Accepts what XGrammar 0.2 accepts: `{"type": "structural_tag", "format": …}` (the `type`
//! optional), the legacy `{"type": "structural_tag", "structures": [{"begin", "schema",
//! "end"}], "triggers": […]}` (a `triggered_tags` of those tags), and format objects
//! without `type`, whose format is then guessed from their fields in XGrammar's order.
//! XGrammar formats and fields Stencil does not support are [`ErrorKind::Unsupported`].

use serde_json::{Map, Value};

use crate::ast::{AnyText, Delimiter, End, Format, JsonStyle, Node, Tag, TokenSpec, TriggeredTags};
use crate::error::{ErrorKind, StructuralError};

/// Format objects nested deeper than this are refused (each level is a recursive call).
pub const MAX_NESTING: usize = 64;

type Result<T> = std::result::Result<T, StructuralError>;

/// Parses a structural tag (the whole request object) into its root format.
///
/// ```
/// use stencil_structural::{parse_tag, Format};
/// let tag = serde_json::json!({"type": "structural_tag",
///     "format": {"type": "const_string", "value": "yes"}});
/// let node = parse_tag(&tag)?;
/// assert_eq!(node.format, Format::ConstString("yes".into()));
/// assert_eq!(node.pointer, "/format");
/// # Ok::<(), stencil_structural::StructuralError>(())
/// ```
///
/// # Errors
///
/// [`StructuralError`] naming the pointer of the first field at fault.
pub fn parse_tag(tag: &Value) -> Result<Node> {
    let obj = object(tag, "")?;
    if let Some(t) = obj.get("type") {
        if t.as_str() != Some("structural_tag") {
            return Err(StructuralError::invalid("/type", "a structural tag's `type` must be \"structural_tag\""));
        }
    }
    if let Some(format) = obj.get("format") {
        return Parser { depth: 0 }.format(format, "/format");
    }
    if obj.contains_key("structures") {
        return legacy(obj);
    }
    Err(StructuralError::invalid("", "a structural tag needs a `format` (or the legacy `structures` and `triggers`)"))
}

/// The legacy form: `structures` of `{begin, schema, end}` and `triggers`.
fn legacy(obj: &Map<String, Value>) -> Result<Node> {
    let structures = array(obj.get("structures"), "/structures", "structures")?;
    let mut tags = Vec::with_capacity(structures.len());
    for (i, s) in structures.iter().enumerate() {
        let p = format!("/structures/{i}");
        let o = object(s, &p)?;
        let begin = string(o.get("begin"), &format!("{p}/begin"), "begin")?;
        let end = string(o.get("end"), &format!("{p}/end"), "end")?;
        let sp = format!("{p}/schema");
        let schema = match o.get("schema") {
            Some(Value::String(text)) => {
                serde_json::from_str(text).map_err(|e| StructuralError::new(&sp, ErrorKind::Json(e.to_string())))?
            }
            Some(v @ (Value::Object(_) | Value::Bool(_))) => v.clone(),
            _ => return Err(StructuralError::invalid(&sp, "`schema` must be a JSON Schema (an object or a boolean)")),
        };
        let content =
            Node { pointer: sp, format: Format::JsonSchema { schema, style: JsonStyle::Json, max_whitespace: None } };
        tags.push(Tag {
            pointer: p,
            begin: Delimiter::Text(begin),
            content: Box::new(content),
            end: End::Texts(vec![end]),
        });
    }
    let triggers = strings(obj.get("triggers"), "/triggers", "triggers")?;
    let tt = TriggeredTags { triggers, tags, excludes: Vec::new(), at_least_one: false, stop_after_first: false };
    check_triggered(&tt, "")?;
    Ok(Node { pointer: String::new(), format: Format::TriggeredTags(tt) })
}

struct Parser {
    depth: usize,
}

impl Parser {
    fn format(&mut self, v: &Value, p: &str) -> Result<Node> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(StructuralError::new(
                p,
                ErrorKind::TooLarge {
                    what: "the format nesting".into(),
                    value: self.depth as u64,
                    limit: MAX_NESTING as u64,
                    name: "MAX_NESTING",
                },
            ));
        }
        let r = self.format_inner(v, p);
        self.depth -= 1;
        r
    }

    fn format_inner(&mut self, v: &Value, p: &str) -> Result<Node> {
        let o = object(v, p)?;
        let ty = match o.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(_) => return Err(StructuralError::invalid(&field(p, "type"), "a format's `type` must be a string")),
            None => guess_type(o)
                .ok_or_else(|| StructuralError::invalid(p, "a format without `type` whose fields match no format"))?,
        };
        let format = match ty {
            "const_string" => Format::ConstString(string(o.get("value"), &field(p, "value"), "value")?),
            "json_schema" => json_schema(o, p, None)?,
            "qwen_xml_parameter" => json_schema(o, p, Some(JsonStyle::QwenXml))?,
            "regex" => Format::Regex(non_empty(o.get("pattern"), &field(p, "pattern"), "pattern")?),
            "grammar" => Format::Grammar(non_empty(o.get("grammar"), &field(p, "grammar"), "grammar")?),
            "any_text" => Format::AnyText(AnyText {
                excludes: strings_or_empty(o.get("excludes"), &field(p, "excludes"), "excludes")?,
                max_chars: budget(o.get("max_chars"), &field(p, "max_chars"))?,
                max_tokens: budget(o.get("max_tokens"), &field(p, "max_tokens"))?,
            }),
            "sequence" | "or" => {
                let ep = field(p, "elements");
                let elements = array(o.get("elements"), &ep, "elements")?;
                if elements.is_empty() {
                    return Err(StructuralError::invalid(&ep, format!("`{ty}` needs at least one element")));
                }
                let nodes = elements
                    .iter()
                    .enumerate()
                    .map(|(i, e)| self.format(e, &format!("{ep}/{i}")))
                    .collect::<Result<Vec<_>>>()?;
                if ty == "sequence" {
                    Format::Sequence(nodes)
                } else {
                    Format::Or(nodes)
                }
            }
            "optional" | "star" | "plus" | "repeat" => {
                let content = Box::new(self.content(o, p)?);
                let (min, max) = match ty {
                    "optional" => (0, Some(1)),
                    "star" => (0, None),
                    "plus" => (1, None),
                    _ => repeat_bounds(o, p)?,
                };
                Format::Repeat { content, min, max }
            }
            "tag" => Format::Tag(self.tag_fields(o, p)?),
            "triggered_tags" => {
                let tt = TriggeredTags {
                    triggers: non_empty_strings(o.get("triggers"), &field(p, "triggers"), "triggers")?,
                    tags: self.tags(o, p)?,
                    excludes: non_empty_strings_or_empty(o.get("excludes"), &field(p, "excludes"), "excludes")?,
                    at_least_one: flag(o, p, "at_least_one")?,
                    stop_after_first: flag(o, p, "stop_after_first")?,
                };
                check_triggered(&tt, p)?;
                Format::TriggeredTags(tt)
            }
            "tags_with_separator" => Format::TagsWithSeparator {
                tags: self.tags(o, p)?,
                separator: string(o.get("separator"), &field(p, "separator"), "separator")?,
                at_least_one: flag(o, p, "at_least_one")?,
                stop_after_first: flag(o, p, "stop_after_first")?,
            },
            "token" => Format::Token(token(o.get("token"), &field(p, "token"))?),
            "exclude_token" => {
                Format::ExcludeToken(tokens_or_empty(o.get("exclude_tokens"), &field(p, "exclude_tokens"))?)
            }
            "token_triggered_tags" => {
                let tp = field(p, "trigger_tokens");
                let triggers = tokens_or_empty(o.get("trigger_tokens"), &tp)?;
                if triggers.is_empty() {
                    return Err(StructuralError::invalid(&tp, "`trigger_tokens` must be a non-empty array"));
                }
                let tags = self.tags(o, p)?;
                for t in &tags {
                    if !matches!(t.begin, Delimiter::Token(_)) {
                        return Err(StructuralError::invalid(
                            &field(&t.pointer, "begin"),
                            "tags of a `token_triggered_tags` must begin with a `token`",
                        ));
                    }
                }
                Format::TokenTriggeredTags {
                    triggers,
                    tags,
                    excludes: tokens_or_empty(o.get("exclude_tokens"), &field(p, "exclude_tokens"))?,
                    at_least_one: flag(o, p, "at_least_one")?,
                    stop_after_first: flag(o, p, "stop_after_first")?,
                }
            }
            "any_tokens" => {
                return Err(StructuralError::unsupported(
                    p,
                    "any_tokens",
                    "a run of arbitrary tokens has no text to constrain; use `any_text` or `exclude_token` in a `star`",
                ))
            }
            "dispatch" | "token_dispatch" => {
                return Err(StructuralError::unsupported(
                    p,
                    ty,
                    "use `triggered_tags` (or `token_triggered_tags`), whose tags carry the dispatched formats",
                ))
            }
            other => return Err(StructuralError::invalid(&field(p, "type"), format!("unknown format type {other:?}"))),
        };
        Ok(Node { pointer: p.to_string(), format })
    }

    fn content(&mut self, o: &Map<String, Value>, p: &str) -> Result<Node> {
        match o.get("content") {
            Some(c) => self.format(c, &field(p, "content")),
            None => Err(StructuralError::invalid(p, "missing `content`")),
        }
    }

    fn tags(&mut self, o: &Map<String, Value>, p: &str) -> Result<Vec<Tag>> {
        let tp = field(p, "tags");
        let arr = array(o.get("tags"), &tp, "tags")?;
        if arr.is_empty() {
            return Err(StructuralError::invalid(&tp, "`tags` must be a non-empty array"));
        }
        arr.iter()
            .enumerate()
            .map(|(i, t)| {
                let q = format!("{tp}/{i}");
                let to = object(t, &q)?;
                if let Some(ty) = to.get("type") {
                    if ty.as_str() != Some("tag") {
                        return Err(StructuralError::invalid(
                            &field(&q, "type"),
                            "an element of `tags` must be a `tag`",
                        ));
                    }
                }
                self.tag_fields(to, &q)
            })
            .collect()
    }

    fn tag_fields(&mut self, o: &Map<String, Value>, p: &str) -> Result<Tag> {
        let bp = field(p, "begin");
        let begin = match o.get("begin") {
            Some(Value::String(s)) => Delimiter::Text(s.clone()),
            Some(Value::Object(t)) => Delimiter::Token(token_format(t, &bp)?),
            _ => return Err(StructuralError::invalid(&bp, "a tag's `begin` must be a string or a `token` format")),
        };
        let content = Box::new(self.content(o, p)?);
        let ep = field(p, "end");
        let end = match o.get("end") {
            Some(Value::String(s)) => End::Texts(vec![s.clone()]),
            Some(Value::Array(a)) => {
                if a.is_empty() {
                    return Err(StructuralError::invalid(&ep, "a tag's `end` array cannot be empty"));
                }
                End::Texts(strings(o.get("end"), &ep, "end")?)
            }
            Some(Value::Object(t)) => End::Token(token_format(t, &ep)?),
            _ => {
                return Err(StructuralError::invalid(
                    &ep,
                    "a tag's `end` must be a string, an array of strings or a `token` format",
                ))
            }
        };
        Ok(Tag { pointer: p.to_string(), begin, content, end })
    }
}

/// XGrammar's order of guesses for a format object without `type`.
fn guess_type(o: &Map<String, Value>) -> Option<&'static str> {
    let has = |k: &str| o.contains_key(k);
    Some(if has("begin") && has("content") && has("end") {
        "tag"
    } else if o.get("value").is_some_and(Value::is_string) {
        "const_string"
    } else if has("json_schema") {
        "json_schema"
    } else if has("excludes") && !has("triggers") && !has("rules") {
        "any_text"
    } else if has("elements") {
        "sequence"
    } else if has("triggers") && has("tags") {
        "triggered_tags"
    } else if has("tags") && has("separator") {
        "tags_with_separator"
    } else if has("content") && !has("min") {
        "optional"
    } else if has("content") {
        "repeat"
    } else if has("rules") {
        "dispatch"
    } else {
        return None;
    })
}

fn json_schema(o: &Map<String, Value>, p: &str, forced: Option<JsonStyle>) -> Result<Format> {
    let schema = match o.get("json_schema") {
        Some(v @ (Value::Object(_) | Value::Bool(_))) => v.clone(),
        _ => {
            return Err(StructuralError::invalid(
                &field(p, "json_schema"),
                "`json_schema` must be a JSON Schema (an object or a boolean)",
            ))
        }
    };
    let style = match (forced, o.get("style")) {
        (Some(s), _) => s,
        (None, None) => JsonStyle::Json,
        (None, Some(Value::String(s))) => match s.as_str() {
            "json" => JsonStyle::Json,
            "qwen_xml" => JsonStyle::QwenXml,
            other => {
                return Err(StructuralError::unsupported(
                    &field(p, "style"),
                    other,
                    "the styles supported are \"json\" and \"qwen_xml\"",
                ))
            }
        },
        (None, Some(_)) => return Err(StructuralError::invalid(&field(p, "style"), "`style` must be a string")),
    };
    match o.get("any_order") {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => {
            return Err(StructuralError::unsupported(
                &field(p, "any_order"),
                "any_order",
                "properties are written in schema order",
            ))
        }
        Some(_) => return Err(StructuralError::invalid(&field(p, "any_order"), "`any_order` must be a boolean")),
    }
    match o.get("excludes") {
        None => {}
        Some(Value::Array(a)) if a.is_empty() => {}
        Some(Value::Array(_)) => {
            return Err(StructuralError::unsupported(
                &field(p, "excludes"),
                "excludes",
                "excluded substrings inside JSON strings are not supported",
            ))
        }
        Some(_) => return Err(StructuralError::invalid(&field(p, "excludes"), "`excludes` must be an array")),
    }
    let wp = field(p, "max_whitespace_cnt");
    let max_whitespace = match o.get("max_whitespace_cnt") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().filter(|&n| n <= u32::MAX as u64).ok_or_else(|| {
            StructuralError::invalid(&wp, "`max_whitespace_cnt` must be a non-negative integer or null")
        })? as u32),
    };
    Ok(Format::JsonSchema { schema, style, max_whitespace })
}

fn repeat_bounds(o: &Map<String, Value>, p: &str) -> Result<(u32, Option<u32>)> {
    let int = |k: &str| -> Result<i64> {
        o.get(k)
            .and_then(Value::as_i64)
            .ok_or_else(|| StructuralError::invalid(&field(p, k), format!("`repeat` needs an integer `{k}`")))
    };
    let (min, max) = (int("min")?, int("max")?);
    if min < 0 || min > i32::MAX as i64 {
        return Err(StructuralError::invalid(&field(p, "min"), "`min` must be between 0 and 2147483647"));
    }
    if max < -1 {
        return Err(StructuralError::invalid(&field(p, "max"), "`max` must be -1 (unbounded) or at least 0"));
    }
    if max >= 0 && min > max {
        return Err(StructuralError::invalid(&field(p, "min"), "`min` is above `max`"));
    }
    // XGrammar reads a `max` past 32 bits as unbounded.
    let max = (max >= 0 && max <= i32::MAX as i64).then_some(max as u32);
    Ok((min as u32, max))
}

/// Each tag's begin starts with exactly one trigger.
fn check_triggered(tt: &TriggeredTags, p: &str) -> Result<()> {
    for t in &tt.tags {
        let bp = field(&t.pointer, "begin");
        let Delimiter::Text(begin) = &t.begin else {
            return Err(StructuralError::invalid(&bp, "tags of a `triggered_tags` must begin with text, not a token"));
        };
        match tt.triggers.iter().filter(|tr| begin.starts_with(tr.as_str())).count() {
            1 => {}
            0 => {
                return Err(StructuralError::invalid(&bp, format!("begin {begin:?} starts with none of the triggers")))
            }
            _ => return Err(StructuralError::invalid(&bp, format!("begin {begin:?} starts with several triggers"))),
        }
    }
    let _ = p;
    Ok(())
}

pub(crate) fn field(p: &str, k: &str) -> String {
    format!("{p}/{}", k.replace('~', "~0").replace('/', "~1"))
}

fn object<'v>(v: &'v Value, p: &str) -> Result<&'v Map<String, Value>> {
    v.as_object().ok_or_else(|| StructuralError::invalid(p, "expected an object"))
}

fn array<'v>(v: Option<&'v Value>, p: &str, name: &str) -> Result<&'v Vec<Value>> {
    v.and_then(Value::as_array).ok_or_else(|| StructuralError::invalid(p, format!("`{name}` must be an array")))
}

fn string(v: Option<&Value>, p: &str, name: &str) -> Result<String> {
    v.and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| StructuralError::invalid(p, format!("`{name}` must be a string")))
}

fn non_empty(v: Option<&Value>, p: &str, name: &str) -> Result<String> {
    let s = string(v, p, name)?;
    if s.is_empty() {
        return Err(StructuralError::invalid(p, format!("`{name}` must be a non-empty string")));
    }
    Ok(s)
}

fn strings(v: Option<&Value>, p: &str, name: &str) -> Result<Vec<String>> {
    array(v, p, name)?.iter().enumerate().map(|(i, s)| string(Some(s), &format!("{p}/{i}"), name)).collect()
}

fn strings_or_empty(v: Option<&Value>, p: &str, name: &str) -> Result<Vec<String>> {
    match v {
        None => Ok(Vec::new()),
        Some(_) => strings(v, p, name),
    }
}

fn non_empty_strings_or_empty(v: Option<&Value>, p: &str, name: &str) -> Result<Vec<String>> {
    let out = strings_or_empty(v, p, name)?;
    if let Some(i) = out.iter().position(String::is_empty) {
        return Err(StructuralError::invalid(&format!("{p}/{i}"), format!("`{name}` must hold non-empty strings")));
    }
    Ok(out)
}

fn non_empty_strings(v: Option<&Value>, p: &str, name: &str) -> Result<Vec<String>> {
    let out = non_empty_strings_or_empty(v, p, name)?;
    if out.is_empty() {
        return Err(StructuralError::invalid(p, format!("`{name}` must be a non-empty array")));
    }
    Ok(out)
}

fn flag(o: &Map<String, Value>, p: &str, k: &str) -> Result<bool> {
    match o.get(k) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(StructuralError::invalid(&field(p, k), format!("`{k}` must be a boolean"))),
    }
}

fn budget(v: Option<&Value>, p: &str) -> Result<Option<u32>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|&n| n <= i32::MAX as u64)
            .map(|n| Some(n as u32))
            .ok_or_else(|| StructuralError::invalid(p, "must be a non-negative 32-bit integer or null")),
    }
}

fn token(v: Option<&Value>, p: &str) -> Result<TokenSpec> {
    match v {
        Some(Value::String(s)) if !s.is_empty() => Ok(TokenSpec::Text(s.clone())),
        Some(Value::Number(n)) => n
            .as_u64()
            .filter(|&n| n <= i32::MAX as u64)
            .map(|n| TokenSpec::Id(n as u32))
            .ok_or_else(|| StructuralError::invalid(p, "a token id must be a non-negative integer")),
        _ => Err(StructuralError::invalid(p, "a token must be an id or a non-empty string")),
    }
}

fn token_format(o: &Map<String, Value>, p: &str) -> Result<TokenSpec> {
    if let Some(t) = o.get("type") {
        if t.as_str() != Some("token") {
            return Err(StructuralError::invalid(&field(p, "type"), "expected a `token` format"));
        }
    }
    token(o.get("token"), &field(p, "token"))
}

fn tokens_or_empty(v: Option<&Value>, p: &str) -> Result<Vec<TokenSpec>> {
    match v {
        None => Ok(Vec::new()),
        Some(Value::Array(a)) => a.iter().enumerate().map(|(i, t)| token(Some(t), &format!("{p}/{i}"))).collect(),
        Some(_) => Err(StructuralError::invalid(p, "must be an array of token ids or strings")),
    }
}
