//! The grammar IR: rules over terminals. GBNF parses into it, JSON Schema compiles into it,
//! and `stencil-mask` compiles it into token-level automata.
//!
//! ```
//! use stencil_grammar::{Expr, Grammar};
//! // root ::= "a" [0-9]+
//! let mut g = Grammar::new();
//! let root = g.add_rule("root", Expr::seq([Expr::literal("a"), Expr::plus(Expr::class([('0', '9')]))]));
//! g.root = root;
//! assert_eq!(g.rule(root).name, "root");
//! ```

/// Index of a rule in [`Grammar::rules`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

/// A context-free grammar whose terminals are bytes, characters, regular expressions and
/// whole vocabulary tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grammar {
    /// Rules, indexed by [`RuleId`]. Names are unique.
    pub rules: Vec<Rule>,
    /// The start rule.
    pub root: RuleId,
}

/// One named rule: `name ::= body`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub name: String,
    pub body: Expr,
    /// Keep this rule a rule of its own: the engine never expands it in place (it does
    /// so with small rules). A hint for generated grammars, where a small rule is called
    /// from many places; the language is the same either way, and GBNF cannot say it.
    pub no_inline: bool,
}

/// A set of Unicode code points, as inclusive ranges. `negated` is kept so that printing
/// gives back `[^...]`; [`CharClass::code_points`] resolves it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CharClass {
    pub ranges: Vec<(u32, u32)>,
    pub negated: bool,
}

/// A terminal that matches one whole vocabulary token, by id or by its exact text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TokenRef {
    pub token: TokenName,
    /// `!<...>`: any single token except this one.
    pub negated: bool,
}

/// How a grammar names a token.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TokenName {
    /// `<[123]>`
    Id(u32),
    /// `<think>`: the text must be exactly one token of the vocabulary.
    Text(String),
}

/// A right-hand side.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// The empty string.
    Empty,
    /// A byte string (UTF-8 for GBNF string literals).
    Literal(Vec<u8>),
    /// One code point from the class, UTF-8 encoded.
    Class(CharClass),
    /// `.`: any one code point.
    AnyChar,
    /// A regular expression (see [`Regex`]).
    Regex(Regex),
    /// A reference to another rule.
    Rule(RuleId),
    /// One whole vocabulary token.
    Token(TokenRef),
    Seq(Vec<Expr>),
    Alt(Vec<Expr>),
    /// `min` to `max` (unbounded when `None`) repetitions.
    Repeat {
        expr: Box<Expr>,
        min: u32,
        max: Option<u32>,
    },
}

/// A regular-expression terminal: its text in `regex-syntax` syntax, anchored at both ends,
/// over UTF-8 text, and, when it was built from a syntax tree, that tree, so that the
/// engine need not parse the text again (a JSON Schema `format` is a few kilobytes of
/// regex, used in many places). Equality, hashing and printing go by the text.
///
/// ```
/// use stencil_grammar::Regex;
/// let typed = Regex::new("a[0-9]+");
/// let built = Regex::from_hir(regex_syntax::parse("a[0-9]+").unwrap());
/// assert_eq!(typed.as_str(), "a[0-9]+");
/// assert!(typed.hir().is_none() && built.hir().is_some());
/// assert_eq!(&*built, built.hir().unwrap().to_string());
/// ```
#[derive(Clone)]
pub struct Regex {
    text: std::sync::Arc<str>,
    hir: Option<std::sync::Arc<regex_syntax::hir::Hir>>,
}

impl Regex {
    /// A regex from its text (parsed when the engine builds it).
    pub fn new(text: impl Into<std::sync::Arc<str>>) -> Regex {
        Regex { text: text.into(), hir: None }
    }

    /// A regex from its syntax tree, which must be one `regex-syntax` reads in UTF-8 mode
    /// (the text is the tree printed).
    pub fn from_hir(hir: impl Into<std::sync::Arc<regex_syntax::hir::Hir>>) -> Regex {
        let hir = hir.into();
        Regex { text: hir.to_string().into(), hir: Some(hir) }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The syntax tree it was built from, if any.
    pub fn hir(&self) -> Option<&std::sync::Arc<regex_syntax::hir::Hir>> {
        self.hir.as_ref()
    }
}

impl std::ops::Deref for Regex {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl PartialEq for Regex {
    fn eq(&self, other: &Regex) -> bool {
        self.text == other.text
    }
}

impl Eq for Regex {}

impl std::hash::Hash for Regex {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state)
    }
}

impl std::fmt::Debug for Regex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.text.fmt(f)
    }
}

impl std::fmt::Display for Regex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl From<&str> for Regex {
    fn from(text: &str) -> Regex {
        Regex::new(text)
    }
}

impl From<String> for Regex {
    fn from(text: String) -> Regex {
        Regex::new(text)
    }
}

/// The largest Unicode scalar value.
pub const MAX_CODE_POINT: u32 = 0x10FFFF;

impl CharClass {
    /// A class of the given ranges (not negated).
    pub fn new(ranges: impl IntoIterator<Item = (u32, u32)>) -> Self {
        CharClass { ranges: ranges.into_iter().collect(), negated: false }
    }

    /// The code points this class matches, as sorted, merged, inclusive ranges, with
    /// negation applied and surrogates (which UTF-8 cannot encode) removed.
    pub fn code_points(&self) -> Vec<(u32, u32)> {
        let mut r: Vec<(u32, u32)> =
            self.ranges.iter().filter(|(lo, hi)| lo <= hi).map(|&(lo, hi)| (lo, hi.min(MAX_CODE_POINT))).collect();
        r.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(r.len());
        for (lo, hi) in r {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        let set = if self.negated { complement(&merged) } else { merged };
        remove_surrogates(&set)
    }

    /// True when the class matches no code point at all.
    pub fn is_empty(&self) -> bool {
        self.code_points().is_empty()
    }
}

fn complement(ranges: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut next = 0u32;
    for &(lo, hi) in ranges {
        if lo > next {
            out.push((next, lo - 1));
        }
        next = hi.saturating_add(1);
    }
    if next <= MAX_CODE_POINT {
        out.push((next, MAX_CODE_POINT));
    }
    out
}

fn remove_surrogates(ranges: &[(u32, u32)]) -> Vec<(u32, u32)> {
    const LO: u32 = 0xD800;
    const HI: u32 = 0xDFFF;
    let mut out = Vec::with_capacity(ranges.len() + 1);
    for &(lo, hi) in ranges {
        if hi < LO || lo > HI {
            out.push((lo, hi));
            continue;
        }
        if lo < LO {
            out.push((lo, LO - 1));
        }
        if hi > HI {
            out.push((HI + 1, hi));
        }
    }
    out
}

impl Expr {
    /// A literal from text.
    pub fn literal(s: &str) -> Expr {
        Expr::Literal(s.as_bytes().to_vec())
    }
    /// A character class from `char` ranges.
    pub fn class(ranges: impl IntoIterator<Item = (char, char)>) -> Expr {
        Expr::Class(CharClass::new(ranges.into_iter().map(|(a, b)| (a as u32, b as u32))))
    }
    pub fn seq(items: impl IntoIterator<Item = Expr>) -> Expr {
        Expr::Seq(items.into_iter().collect())
    }
    pub fn alt(items: impl IntoIterator<Item = Expr>) -> Expr {
        Expr::Alt(items.into_iter().collect())
    }
    pub fn repeat(e: Expr, min: u32, max: Option<u32>) -> Expr {
        Expr::Repeat { expr: Box::new(e), min, max }
    }
    pub fn star(e: Expr) -> Expr {
        Expr::repeat(e, 0, None)
    }
    pub fn plus(e: Expr) -> Expr {
        Expr::repeat(e, 1, None)
    }
    pub fn optional(e: Expr) -> Expr {
        Expr::repeat(e, 0, Some(1))
    }

    /// The expression of a regex's syntax tree (`regex-syntax`, UTF-8 mode), or `None`
    /// when it has an assertion (the IR has none). A regex built as a syntax tree need not
    /// be printed and parsed again on its way to the engine.
    ///
    /// ```
    /// use stencil_grammar::Expr;
    /// let hir = regex_syntax::parse("a[0-9]*").unwrap();
    /// let e = Expr::from_hir(&hir).unwrap();
    /// assert_eq!(e, Expr::seq([Expr::literal("a"), Expr::star(Expr::class([('0', '9')]))]));
    /// assert_eq!(Expr::from_hir(&regex_syntax::parse("^a").unwrap()), None);
    /// ```
    pub fn from_hir(h: &regex_syntax::hir::Hir) -> Option<Expr> {
        use regex_syntax::hir::{Class, HirKind};
        Some(match h.kind() {
            HirKind::Empty => Expr::Empty,
            HirKind::Look(_) => return None,
            HirKind::Literal(l) => Expr::Literal(l.0.to_vec()),
            HirKind::Class(Class::Unicode(c)) => {
                Expr::Class(CharClass::new(c.ranges().iter().map(|r| (r.start() as u32, r.end() as u32))))
            }
            // UTF-8 mode: byte classes match ASCII only, so they are code point classes.
            HirKind::Class(Class::Bytes(c)) => Expr::Class(CharClass::new(
                c.ranges().iter().filter(|r| r.start() < 0x80).map(|r| (r.start() as u32, r.end().min(0x7F) as u32)),
            )),
            HirKind::Capture(c) => Expr::from_hir(&c.sub)?,
            HirKind::Concat(v) => Expr::Seq(v.iter().map(Expr::from_hir).collect::<Option<_>>()?),
            HirKind::Alternation(v) => Expr::Alt(v.iter().map(Expr::from_hir).collect::<Option<_>>()?),
            HirKind::Repetition(r) => Expr::Repeat { expr: Box::new(Expr::from_hir(&r.sub)?), min: r.min, max: r.max },
        })
    }

    /// Calls `f` on every rule this expression refers to.
    pub fn for_each_rule(&self, f: &mut impl FnMut(RuleId)) {
        match self {
            Expr::Rule(r) => f(*r),
            Expr::Seq(v) | Expr::Alt(v) => v.iter().for_each(|e| e.for_each_rule(f)),
            Expr::Repeat { expr, .. } => expr.for_each_rule(f),
            _ => {}
        }
    }
}

impl Grammar {
    /// An empty grammar; add rules, then set [`Grammar::root`].
    pub fn new() -> Self {
        Grammar { rules: Vec::new(), root: RuleId(0) }
    }

    /// Appends a rule and returns its id. Use [`Grammar::set_body`] to fill in a rule
    /// added early (for recursion).
    pub fn add_rule(&mut self, name: impl Into<String>, body: Expr) -> RuleId {
        self.rules.push(Rule { name: name.into(), body, no_inline: false });
        RuleId(self.rules.len() as u32 - 1)
    }

    /// Marks a rule to be kept a rule of its own (see [`Rule::no_inline`]).
    pub fn set_no_inline(&mut self, id: RuleId) {
        self.rules[id.0 as usize].no_inline = true;
    }

    pub fn set_body(&mut self, id: RuleId, body: Expr) {
        self.rules[id.0 as usize].body = body;
    }

    pub fn rule(&self, id: RuleId) -> &Rule {
        &self.rules[id.0 as usize]
    }

    /// The rule with this name, if any.
    pub fn rule_id(&self, name: &str) -> Option<RuleId> {
        self.rules.iter().position(|r| r.name == name).map(|i| RuleId(i as u32))
    }

    /// Copies every rule of `other` into this grammar and returns the id of `other`'s
    /// start rule here, to be referenced with [`Expr::Rule`]: how several grammars (for
    /// example the grammars of several JSON Schemas) become parts of one.
    ///
    /// Each copied rule is named `{prefix}{name}`, with `-2`, `-3`, ... appended when that
    /// name is already taken, so names stay unique; rule references inside the copies are
    /// renumbered. `self.root` is left as it is.
    ///
    /// ```
    /// use stencil_grammar::{parse_gbnf, reference::Recognizer, Expr, Grammar};
    /// let yes_no = parse_gbnf(r#"root ::= "yes" | "no""#)?;
    /// let digits = parse_gbnf(r#"root ::= [0-9]+"#)?;
    /// let mut g = Grammar::new();
    /// let root = g.add_rule("root", Expr::Empty);
    /// let a = g.embed(&yes_no, "answer-");
    /// let n = g.embed(&digits, "count-");
    /// g.set_body(root, Expr::seq([Expr::Rule(a), Expr::literal(" "), Expr::Rule(n)]));
    /// g.root = root;
    /// assert_eq!(g.rule(a).name, "answer-root");
    /// assert!(Recognizer::new(&g)?.matches(b"yes 42"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn embed(&mut self, other: &Grammar, prefix: &str) -> RuleId {
        let offset = self.rules.len() as u32;
        let mut taken: std::collections::HashSet<String> = self.rules.iter().map(|r| r.name.clone()).collect();
        for rule in &other.rules {
            let base = format!("{prefix}{}", rule.name);
            let mut name = base.clone();
            let mut n = 2;
            while taken.contains(&name) {
                name = format!("{base}-{n}");
                n += 1;
            }
            taken.insert(name.clone());
            let mut body = rule.body.clone();
            body.shift_rules(offset);
            self.rules.push(Rule { name, body, no_inline: rule.no_inline });
        }
        RuleId(other.root.0 + offset)
    }
}

impl Expr {
    /// Adds `offset` to every rule reference (in place).
    fn shift_rules(&mut self, offset: u32) {
        match self {
            Expr::Rule(r) => r.0 += offset,
            Expr::Seq(v) | Expr::Alt(v) => v.iter_mut().for_each(|e| e.shift_rules(offset)),
            Expr::Repeat { expr, .. } => expr.shift_rules(offset),
            _ => {}
        }
    }
}

impl Default for Grammar {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embed_renumbers_references_and_keeps_names_unique() {
        // other: root ::= item ("," item)* ; item ::= "x"
        let mut other = Grammar::new();
        let o_root = other.add_rule("root", Expr::Empty);
        let item = other.add_rule("item", Expr::literal("x"));
        other.set_body(
            o_root,
            Expr::seq([Expr::Rule(item), Expr::star(Expr::seq([Expr::literal(","), Expr::Rule(item)]))]),
        );
        other.root = o_root;

        let mut g = Grammar::new();
        let root = g.add_rule("root", Expr::Empty);
        g.add_rule("t-item", Expr::literal("taken"));
        let first = g.embed(&other, "t-");
        let second = g.embed(&other, "t-");
        g.set_body(root, Expr::alt([Expr::Rule(first), Expr::Rule(second)]));
        g.root = root;

        let names: Vec<&str> = g.rules.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["root", "t-item", "t-root", "t-item-2", "t-root-2", "t-item-3"]);
        assert_eq!(first, RuleId(2));
        assert_eq!(second, RuleId(4));
        // The copies refer to their own `item`, not to the rule at the old index.
        let mut refs = Vec::new();
        g.rule(second).body.for_each_rule(&mut |r| refs.push(r));
        assert_eq!(refs, [RuleId(5), RuleId(5)]);
        let recognizer = crate::reference::Recognizer::new(&g).unwrap();
        assert!(recognizer.matches(b"x,x"));
        assert!(!recognizer.matches(b"taken"));
    }
}
