//! The typed tag → one [`Grammar`], with a mark on the rules that captures read back (each
//! tag, its content, each leaf format, each free text) and the token budgets.
//!
//! Each format becomes one rule (a `sequence` the sequence of its elements' rules, a
//! `repeat` a counted repetition of its content's rule, …). A tag is `begin content end`;
//! inside a `triggered_tags` the trigger's characters are read by the free text's automaton
//! ([`TextDfa`]) and the tag's rule holds the rest of its begin (`TagRest`). A schema that
//! several tags share is compiled and embedded once.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde_json::Value;
use stencil_grammar::{Expr, Grammar, Regex, RuleId, TokenName, TokenRef};
use stencil_mask::Vocabulary;
use stencil_schema::{SchemaBatch, SchemaOptions, Unenforced, Whitespace};

use crate::ast::{AnyText, Delimiter, End, Format, JsonStyle, Node, Tag, TokenSpec, TriggeredTags};
use crate::error::{ErrorKind, StructuralError};
use crate::parse::field;
use crate::text::TextDfa;
use crate::{qwen, Budget, Close, CompileOptions, LeafKind, TagInfo};

/// What captures make of a rule's span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Mark {
    /// Tag `i` (its span is the whole tag).
    Tag(u32),
    /// Tag `i` after its first `skip` bytes (its trigger, read by the free text).
    TagRest { tag: u32, skip: u32 },
    /// A tag's content.
    Content,
    /// A leaf format.
    Leaf(LeafKind),
    /// Free text (`any_text`), with its budget's index.
    Text { budget: Option<u32> },
    /// A container whose bytes outside its marked children are free text
    /// (`triggered_tags`, `tags_with_separator`'s separators).
    Free,
}

/// The result of [`compile`]: the grammar and what captures and budgets need.
pub(crate) struct Output {
    pub grammar: Grammar,
    pub marks: Vec<Option<Mark>>,
    /// Text of the token terminals, by (token id or text): what a reply shows of them.
    pub token_text: FxHashMap<TokenName, Vec<u8>>,
    pub tags: Vec<TagInfo>,
    pub budgets: Vec<Budget>,
    pub warnings: Vec<(String, Unenforced)>,
}

type Result<T> = std::result::Result<T, StructuralError>;

/// The nearest enclosing tag's end, which unbounded text inside it may not contain.
#[derive(Clone, Default)]
struct Enclosing {
    texts: Vec<String>,
    token: Option<u32>,
    close: Option<Close>,
}

pub(crate) fn compile(root: &Node, opts: &CompileOptions) -> Result<Output> {
    let mut b = Builder {
        g: Grammar::new(),
        marks: Vec::new(),
        opts,
        vocab: opts.vocab.as_deref(),
        schemas: FxHashMap::default(),
        batches: FxHashMap::default(),
        token_text: FxHashMap::default(),
        tags: Vec::new(),
        budgets: Vec::new(),
        warnings: Vec::new(),
    };
    let top = b.g.add_rule("root", Expr::Empty);
    let r = b.node(root, &Enclosing::default())?;
    b.g.set_body(top, Expr::Rule(r));
    b.g.root = top;
    b.marks.resize(b.g.rules.len(), None);
    Ok(Output {
        grammar: b.g,
        marks: b.marks,
        token_text: b.token_text,
        tags: b.tags,
        budgets: b.budgets,
        warnings: b.warnings,
    })
}

pub(crate) struct Builder<'o> {
    pub(crate) g: Grammar,
    marks: Vec<Option<Mark>>,
    pub(crate) opts: &'o CompileOptions,
    vocab: Option<&'o Vocabulary>,
    /// Embedded schemas by their JSON text and style options.
    schemas: FxHashMap<String, RuleId>,
    /// The schemas' compiles, one batch per style options (what the tools' schemas share
    /// is written once: see [`SchemaBatch`]).
    batches: FxHashMap<String, SchemaBatch>,
    token_text: FxHashMap<TokenName, Vec<u8>>,
    tags: Vec<TagInfo>,
    budgets: Vec<Budget>,
    pub(crate) warnings: Vec<(String, Unenforced)>,
}

impl Builder<'_> {
    pub(crate) fn rule(&mut self, name: &str, body: Expr, mark: Option<Mark>) -> RuleId {
        let id = self.g.add_rule(format!("{}-{}", name.replace('_', "-"), self.g.rules.len()), body);
        if let Some(m) = mark {
            self.marks.resize(self.g.rules.len(), None);
            self.marks[id.0 as usize] = Some(m);
        }
        id
    }

    fn node(&mut self, n: &Node, enc: &Enclosing) -> Result<RuleId> {
        let p = n.pointer.as_str();
        Ok(match &n.format {
            Format::ConstString(s) => self.rule("const", Expr::literal(s), Some(Mark::Leaf(LeafKind::Const))),
            Format::JsonSchema { schema, style, max_whitespace } => {
                let inner = match style {
                    JsonStyle::Json => self.schema(schema, *max_whitespace, p)?,
                    JsonStyle::QwenXml => qwen::compile(self, schema, *max_whitespace, p)?,
                };
                let kind = match style {
                    JsonStyle::Json => LeafKind::Json,
                    JsonStyle::QwenXml => LeafKind::QwenXml,
                };
                self.rule("json", Expr::Rule(inner), Some(Mark::Leaf(kind)))
            }
            Format::Regex(pattern) => {
                let e = regex(pattern).map_err(|reason| {
                    StructuralError::new(&field(p, "pattern"), ErrorKind::Regex { pattern: pattern.clone(), reason })
                })?;
                self.rule("regex", e, Some(Mark::Leaf(LeafKind::Regex)))
            }
            Format::Grammar(text) => {
                let sub = stencil_grammar::parse_gbnf(text)
                    .map_err(|e| StructuralError::new(&field(p, "grammar"), ErrorKind::Gbnf(e.to_string())))?;
                let prefix = format!("gbnf{}-", self.g.rules.len());
                let r = embed(&mut self.g, sub, &prefix);
                self.rule("grammar", Expr::Rule(r), Some(Mark::Leaf(LeafKind::Grammar)))
            }
            Format::AnyText(a) => self.any_text(a, enc, p)?,
            Format::Sequence(v) => {
                let parts = v.iter().map(|e| self.node(e, enc).map(Expr::Rule)).collect::<Result<Vec<_>>>()?;
                self.rule("sequence", Expr::Seq(parts), None)
            }
            Format::Or(v) => {
                let parts = v.iter().map(|e| self.node(e, enc).map(Expr::Rule)).collect::<Result<Vec<_>>>()?;
                self.rule("or", Expr::Alt(parts), None)
            }
            Format::Repeat { content, min, max } => {
                let c = self.node(content, enc)?;
                self.rule("repeat", Expr::repeat(Expr::Rule(c), *min, *max), None)
            }
            Format::Tag(t) => self.tag(t, 0)?,
            Format::TriggeredTags(tt) => self.triggered(tt, enc, p)?,
            Format::TagsWithSeparator { tags, separator, at_least_one, stop_after_first } => {
                let alts = tags.iter().map(|t| self.tag(t, 0).map(Expr::Rule)).collect::<Result<Vec<_>>>()?;
                let any = self.rule("tags", Expr::Alt(alts), None);
                let one = Expr::Rule(any);
                let body = if *stop_after_first {
                    if *at_least_one {
                        one
                    } else {
                        Expr::optional(one)
                    }
                } else {
                    let more = Expr::star(Expr::seq([Expr::literal(separator), one.clone()]));
                    let list = Expr::seq([one, more]);
                    if *at_least_one {
                        list
                    } else {
                        Expr::optional(list)
                    }
                };
                self.rule("tags_with_separator", body, Some(Mark::Free))
            }
            Format::Token(t) => {
                let e = self.token(t, false, &field(p, "token"))?;
                self.rule("token", e, Some(Mark::Leaf(LeafKind::Token)))
            }
            Format::ExcludeToken(list) => {
                let e = self.excluded(list, enc.token, &field(p, "exclude_tokens"))?;
                self.rule("exclude_token", e, Some(Mark::Leaf(LeafKind::Token)))
            }
            Format::TokenTriggeredTags { triggers, tags, excludes, at_least_one, stop_after_first } => {
                self.token_triggered(triggers, tags, excludes, *at_least_one, *stop_after_first, enc, p)?
            }
        })
    }

    /// A schema's grammar, embedded once per schema text and whitespace.
    pub(crate) fn schema(&mut self, schema: &Value, max_whitespace: Option<u32>, p: &str) -> Result<RuleId> {
        let whitespace = self.schema_whitespace(max_whitespace);
        let style = format!("{whitespace:?}");
        let key = format!("{style}|{schema}");
        if let Some(&r) = self.schemas.get(&key) {
            return Ok(r);
        }
        // The options (a registry of documents among them) are copied once per batch.
        let (opts, n) = (self.opts, self.batches.len());
        let batch = self
            .batches
            .entry(style)
            .or_insert_with(|| SchemaBatch::new(SchemaOptions { whitespace, ..opts.schema.clone() }, format!("s{n}-")));
        let (r, warnings) = batch
            .compile(schema, &mut self.g)
            .map_err(|e| StructuralError::new(&field(p, "json_schema"), ErrorKind::Schema(e)))?;
        self.warnings.extend(warnings.into_iter().map(|w| (field(p, "json_schema"), w)));
        self.schemas.insert(key, r);
        Ok(r)
    }

    /// The whitespace a schema's JSON is written with: the options', or with
    /// `max_whitespace` (and no indentation) runs of at most that many characters.
    pub(crate) fn schema_whitespace(&self, max_whitespace: Option<u32>) -> Whitespace {
        match (max_whitespace, self.opts.schema.indent) {
            (Some(n), None) => Whitespace::Flexible { max_run: n as usize },
            _ => self.opts.schema.whitespace.clone(),
        }
    }

    fn any_text(&mut self, a: &AnyText, enc: &Enclosing, p: &str) -> Result<RuleId> {
        let budget = match a.max_tokens {
            Some(max_tokens) if max_tokens > 0 => {
                self.budgets.push(Budget { pointer: p.to_string(), max_tokens, close: enc.close.clone() });
                Some(self.budgets.len() as u32 - 1)
            }
            _ => None,
        };
        let mark = Some(Mark::Text { budget });
        if a.max_tokens == Some(0) {
            return Ok(self.rule("any_text", Expr::Empty, mark));
        }
        let mut excludes: Vec<String> = a.excludes.iter().filter(|s| !s.is_empty()).cloned().collect();
        excludes.extend(enc.texts.iter().filter(|s| !s.is_empty()).cloned());
        let dfa = TextDfa::new(&excludes, &[]);
        let count = a.max_chars.map(|n| (n, self.opts.limits.max_text_rules));
        let name = format!("text{}", self.g.rules.len());
        let start = dfa.write(&mut self.g, &name, count, &mut |_, _| Expr::Empty).map_err(|need| {
            self.too_large(p, "`max_chars` times the states of the excluded strings' automaton", need)
        })?;
        Ok(self.rule("any_text", Expr::Rule(start), mark))
    }

    fn too_large(&self, p: &str, what: &str, value: u64) -> StructuralError {
        StructuralError::new(
            p,
            ErrorKind::TooLarge {
                what: format!("{what} ({value} rules)"),
                value,
                limit: self.opts.limits.max_text_rules as u64,
                name: "max_text_rules",
            },
        )
    }

    /// A tag's rule: `begin[skip..] content end`, marked as the whole tag (`skip == 0`) or
    /// the rest after a trigger.
    fn tag(&mut self, t: &Tag, skip: usize) -> Result<RuleId> {
        let index = self.tags.len() as u32;
        let begin_text = match &t.begin {
            Delimiter::Text(s) => s.clone(),
            Delimiter::Token(spec) => self.token_display(spec),
        };
        self.tags.push(TagInfo { pointer: t.pointer.clone(), begin: begin_text });
        let end_p = field(&t.pointer, "end");
        let (end, enc) = match &t.end {
            End::Texts(v) => {
                if v.iter().all(String::is_empty) && unlimited(&t.content.format) {
                    return Err(StructuralError::invalid(
                        &end_p,
                        "a tag whose content is unlimited needs a non-empty end",
                    ));
                }
                let close = v.first().map(|s| Close::Text(s.clone()));
                (
                    Expr::Alt(v.iter().map(|s| Expr::literal(s)).collect()),
                    Enclosing { texts: v.clone(), token: None, close },
                )
            }
            End::Token(spec) => {
                let e = self.token(spec, false, &end_p)?;
                let id = match &e {
                    Expr::Token(TokenRef { token: TokenName::Id(id), .. }) => Some(*id),
                    _ => None,
                };
                let close = Some(Close::Token(self.token_display(spec), id));
                (e, Enclosing { texts: Vec::new(), token: id, close })
            }
        };
        let content = self.node(&t.content, &enc)?;
        let content = self.rule("content", Expr::Rule(content), Some(Mark::Content));
        let begin = match (&t.begin, skip) {
            (Delimiter::Text(s), _) => Expr::Literal(s.as_bytes()[skip..].to_vec()),
            (Delimiter::Token(spec), 0) => self.token(spec, false, &field(&t.pointer, "begin"))?,
            (Delimiter::Token(_), _) => Expr::Empty,
        };
        let mark = if skip == 0 { Mark::Tag(index) } else { Mark::TagRest { tag: index, skip: skip as u32 } };
        Ok(self.rule("tag", Expr::seq([begin, Expr::Rule(content), end]), Some(mark)))
    }

    fn triggered(&mut self, tt: &TriggeredTags, enc: &Enclosing, p: &str) -> Result<RuleId> {
        let full = |b: &mut Self| -> Result<Expr> {
            let alts = tt.tags.iter().map(|t| b.tag(t, 0).map(Expr::Rule)).collect::<Result<Vec<_>>>()?;
            Ok(Expr::Rule(b.rule("tags", Expr::Alt(alts), None)))
        };
        if tt.at_least_one && tt.stop_after_first {
            let one = full(self)?;
            return Ok(self.rule("triggered_tags", one, Some(Mark::Free)));
        }
        // Per trigger, the rest of each of its tags.
        let mut groups: Vec<Vec<Expr>> = vec![Vec::new(); tt.triggers.len()];
        for t in &tt.tags {
            let Delimiter::Text(begin) = &t.begin else { unreachable!("checked by the parser") };
            let i = tt.triggers.iter().position(|tr| begin.starts_with(tr.as_str())).expect("checked by the parser");
            let r = self.tag(t, tt.triggers[i].len())?;
            groups[i].push(Expr::Rule(r));
        }
        let groups: Vec<RuleId> = groups.into_iter().map(|alts| self.rule("trigger", Expr::Alt(alts), None)).collect();
        let mut excludes = tt.excludes.clone();
        excludes.extend(enc.texts.iter().filter(|s| !s.is_empty()).cloned());
        let dfa = TextDfa::new(&excludes, &tt.triggers);
        let name = format!("free{}", self.g.rules.len());
        // The free text's start rule is the first the DFA adds.
        let start = RuleId(self.g.rules.len() as u32);
        let looping = !tt.stop_after_first;
        let free = dfa
            .write(&mut self.g, &name, None, &mut |i, _| {
                let g = Expr::Rule(groups[i as usize]);
                if looping {
                    Expr::seq([g, Expr::Rule(start)])
                } else {
                    g
                }
            })
            .map_err(|need| self.too_large(p, "the free text's automaton", need))?;
        debug_assert_eq!(free, start);
        let body = if tt.at_least_one { Expr::seq([full(self)?, Expr::Rule(free)]) } else { Expr::Rule(free) };
        Ok(self.rule("triggered_tags", body, Some(Mark::Free)))
    }

    #[allow(clippy::too_many_arguments)]
    fn token_triggered(
        &mut self,
        triggers: &[TokenSpec],
        tags: &[Tag],
        excludes: &[TokenSpec],
        at_least_one: bool,
        stop_after_first: bool,
        enc: &Enclosing,
        p: &str,
    ) -> Result<RuleId> {
        let tp = field(p, "trigger_tokens");
        let trig: Vec<Expr> = triggers
            .iter()
            .enumerate()
            .map(|(i, t)| self.token(t, false, &format!("{tp}/{i}")))
            .collect::<Result<_>>()?;
        let full = |b: &mut Self| -> Result<Expr> {
            let alts = tags.iter().map(|t| b.tag(t, 0).map(Expr::Rule)).collect::<Result<Vec<_>>>()?;
            Ok(Expr::Rule(b.rule("tags", Expr::Alt(alts), None)))
        };
        if at_least_one && stop_after_first {
            let one = full(self)?;
            return Ok(self.rule("token_triggered_tags", one, Some(Mark::Free)));
        }
        // Each tag under the trigger its begin names.
        let mut groups: Vec<Vec<Expr>> = vec![Vec::new(); triggers.len()];
        for t in tags {
            let Delimiter::Token(spec) = &t.begin else { unreachable!("checked by the parser") };
            let bp = field(&t.pointer, "begin");
            let begin = self.token(spec, false, &bp)?;
            let i = trig
                .iter()
                .position(|e| *e == begin)
                .ok_or_else(|| StructuralError::invalid(&bp, "the tag's begin token is none of the trigger tokens"))?;
            let skip = self.token_len(spec);
            let r = self.tag(t, skip.max(1))?;
            groups[i].push(Expr::Rule(r));
        }
        // Free tokens: any but the triggers and the excluded tokens.
        let mut banned: Vec<TokenSpec> = triggers.to_vec();
        banned.extend(excludes.iter().cloned());
        let free_token = self.excluded(&banned, enc.token, &field(p, "exclude_tokens"))?;
        let free = self.rule("free_tokens", Expr::Empty, None);
        let mut alts = vec![Expr::Empty, Expr::seq([free_token, Expr::Rule(free)])];
        for (i, alts_i) in groups.into_iter().enumerate() {
            let g = self.rule("trigger", Expr::Alt(alts_i), None);
            let after = if stop_after_first { Expr::Empty } else { Expr::Rule(free) };
            alts.push(Expr::seq([trig[i].clone(), Expr::Rule(g), after]));
        }
        self.g.set_body(free, Expr::Alt(alts));
        let body = if at_least_one { Expr::seq([full(self)?, Expr::Rule(free)]) } else { Expr::Rule(free) };
        Ok(self.rule("token_triggered_tags", body, Some(Mark::Free)))
    }

    /// One token terminal; with a vocabulary, texts are resolved (and must be one token).
    fn token(&mut self, t: &TokenSpec, negated: bool, p: &str) -> Result<Expr> {
        let name = match (t, self.vocab) {
            (TokenSpec::Id(id), Some(v)) if *id as usize >= v.len() => {
                return Err(StructuralError::new(
                    p,
                    ErrorKind::Token(format!("token id {id} is outside the vocabulary of {} tokens", v.len())),
                ))
            }
            (TokenSpec::Id(id), _) => TokenName::Id(*id),
            (TokenSpec::Text(s), Some(v)) => match v.find_token(s.as_bytes()) {
                Some(id) => TokenName::Id(id),
                None => {
                    return Err(StructuralError::new(
                        p,
                        ErrorKind::Token(format!("{s:?} is not one token of the vocabulary")),
                    ))
                }
            },
            (TokenSpec::Text(s), None) => TokenName::Text(s.clone()),
        };
        let text = match (&name, self.vocab) {
            (TokenName::Id(id), Some(v)) => Some(v.token_bytes(*id).to_vec()),
            (TokenName::Text(s), _) => Some(s.as_bytes().to_vec()),
            _ => None,
        };
        if let Some(text) = text {
            self.token_text.insert(name.clone(), text);
        }
        Ok(Expr::Token(TokenRef { token: name, negated }))
    }

    /// One token that is none of `list` (nor `end`, the enclosing tag's end token).
    fn excluded(&mut self, list: &[TokenSpec], end: Option<u32>, p: &str) -> Result<Expr> {
        let mut all: Vec<Expr> =
            list.iter().enumerate().map(|(i, t)| self.token(t, true, &format!("{p}/{i}"))).collect::<Result<_>>()?;
        if let Some(id) = end {
            all.push(Expr::Token(TokenRef { token: TokenName::Id(id), negated: true }));
        }
        all.dedup();
        match all.len() {
            1 => Ok(all.pop().expect("one")),
            0 => match self.vocab {
                Some(v) => Ok(Expr::Token(TokenRef { token: TokenName::Id(v.eos_ids()[0]), negated: true })),
                None => Err(StructuralError::new(
                    p,
                    ErrorKind::Token("any single token needs a vocabulary (to name its end-of-sequence token)".into()),
                )),
            },
            n => Err(StructuralError::unsupported(
                p,
                "exclude_tokens",
                &format!("one token that is none of {n} tokens (triggers, excluded tokens and the enclosing tag's end token together): the grammar excludes one token at a time"),
            )),
        }
    }

    fn token_display(&self, t: &TokenSpec) -> String {
        match (t, self.vocab) {
            (TokenSpec::Text(s), _) => s.clone(),
            (TokenSpec::Id(id), Some(v)) if (*id as usize) < v.len() => {
                String::from_utf8_lossy(v.token_bytes(*id)).into_owned()
            }
            (TokenSpec::Id(id), _) => format!("<[{id}]>"),
        }
    }

    fn token_len(&self, t: &TokenSpec) -> usize {
        match (t, self.vocab) {
            (TokenSpec::Text(s), _) => s.len(),
            (TokenSpec::Id(id), Some(v)) if (*id as usize) < v.len() => v.token_bytes(*id).len(),
            _ => 0,
        }
    }
}

/// Moves `other`'s rules into `g` under `prefix` (unique in `g`, so names stay unique
/// without the name checks of [`Grammar::embed`], which cost a pass over every rule of
/// `g` per call: quadratic over hundreds of tools) and returns its root's id there.
fn embed(g: &mut Grammar, other: Grammar, prefix: &str) -> RuleId {
    fn shift(e: &mut Expr, by: u32) {
        match e {
            Expr::Rule(r) => r.0 += by,
            Expr::Seq(v) | Expr::Alt(v) => v.iter_mut().for_each(|x| shift(x, by)),
            Expr::Repeat { expr, .. } => shift(expr, by),
            _ => {}
        }
    }
    let by = g.rules.len() as u32;
    g.rules.reserve(other.rules.len());
    for mut r in other.rules {
        shift(&mut r.body, by);
        r.name.insert_str(0, prefix);
        g.rules.push(r);
    }
    RuleId(other.root.0 + by)
}

/// Formats whose text has no bound of its own (XGrammar's notion, for its end check).
fn unlimited(f: &Format) -> bool {
    match f {
        Format::AnyText(a) => a.excludes.is_empty() && a.max_chars.is_none(),
        Format::TriggeredTags(t) => t.excludes.is_empty(),
        _ => false,
    }
}

/// A regex format's pattern (ECMA-262) as a whole-text regex terminal.
pub(crate) fn regex(pattern: &str) -> std::result::Result<Expr, String> {
    // The match is whole: anchors at the ends add nothing.
    let mut p = pattern.strip_prefix('^').unwrap_or(pattern);
    if p.ends_with('$') && !p.ends_with("\\$") {
        p = &p[..p.len() - 1];
    }
    let translated = stencil_schema::translate_pattern(p).map_err(|e| e.to_string())?;
    let hir = regex_syntax::ParserBuilder::new().utf8(true).build().parse(&translated).map_err(|e| e.to_string())?;
    if hir.properties().look_set().iter().next().is_some() {
        return Err("anchors and word boundaries are only allowed at the ends".into());
    }
    Ok(Expr::Regex(Regex::from_hir(Arc::new(hir))))
}
