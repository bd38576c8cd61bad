//! Structure-aware inputs: `arbitrary` types that decode into schemas and grammars, so
//! that the fuzzer mutates structure rather than bytes that mostly fail to parse.

use arbitrary::Arbitrary;
use serde_json::{json, Map, Value};
use stencil_grammar::{CharClass, Expr, Grammar, RuleId};

use crate::checks::{CaseOptions, MatcherCase, Op, SchemaCase, MATCHER_ALPHABET};

// ---------------------------------------------------------------------------------- schemas

/// Property names and `$defs` keys come from a small set, so that `required`, `$ref` and
/// `properties` meet.
const NAMES: &[&str] = &["a", "b", "c", "name", "x-y", "a/b", "~0", ""];

const PATTERNS: &[&str] = &[
    "^a",
    "b$",
    "^[a-c]+$",
    "^\\d{2,4}$",
    "^(ab|c)*$",
    "\\w",
    "^.$",
    "^[^a]*$",
    "x?",
    "^\\p{L}+$",
    "^\\S+@\\S+$",
    "(",
    "^[\\u0041-\\u005A]$",
    "a{2}",
    "^$",
];

const FORMATS: &[&str] =
    &["date", "time", "date-time", "email", "uuid", "ipv4", "ipv6", "uri", "hostname", "duration", "unknown-format"];

const REFS: &[&str] = &[
    "#",
    "#/$defs/a",
    "#/$defs/b",
    "#/$defs/name",
    "#/properties/a",
    "#/definitions/a",
    "#/$defs/missing",
    "#anchor",
    "other.json",
    "http://example.com/remote.json",
    "#/items",
    "#/$defs/a/properties/b",
];

#[derive(Arbitrary, Debug)]
pub enum Ty {
    Null,
    Boolean,
    Integer,
    Number,
    String,
    Array,
    Object,
    Bogus,
}

impl Ty {
    fn name(&self) -> &'static str {
        match self {
            Ty::Null => "null",
            Ty::Boolean => "boolean",
            Ty::Integer => "integer",
            Ty::Number => "number",
            Ty::String => "string",
            Ty::Array => "array",
            Ty::Object => "object",
            Ty::Bogus => "bogus",
        }
    }
}

/// A number for bounds: small integers mostly, and the awkward ones.
#[derive(Arbitrary, Debug)]
pub enum Num {
    Small(i8),
    Int(i64),
    Frac(i16, u8),
    Huge,
    Tiny,
    NegZero,
}

impl Num {
    fn value(&self) -> Value {
        match *self {
            Num::Small(n) => json!(n),
            Num::Int(n) => json!(n),
            Num::Frac(n, d) => json!(n as f64 / (1 + d as u32) as f64),
            Num::Huge => serde_json::from_str("1e308").unwrap(),
            Num::Tiny => serde_json::from_str("1e-300").unwrap(),
            Num::NegZero => serde_json::from_str("-0.0").unwrap(),
        }
    }
}

/// A JSON value for `enum` and `const`.
#[derive(Arbitrary, Debug)]
pub enum Lit {
    Null,
    Bool(bool),
    Num(Num),
    Str(u8),
    Text(String),
    Arr(Vec<Lit>),
    Obj(Vec<(u8, Lit)>),
}

impl Lit {
    fn value(&self, depth: usize) -> Value {
        match self {
            Lit::Null => Value::Null,
            Lit::Bool(b) => json!(b),
            Lit::Num(n) => n.value(),
            Lit::Str(i) => json!(NAMES[*i as usize % NAMES.len()]),
            Lit::Text(s) => json!(s.chars().take(12).collect::<String>()),
            Lit::Arr(v) if depth < 3 => Value::Array(v.iter().take(4).map(|l| l.value(depth + 1)).collect()),
            Lit::Obj(v) if depth < 3 => Value::Object(
                v.iter()
                    .take(4)
                    .map(|(k, l)| (NAMES[*k as usize % NAMES.len()].to_string(), l.value(depth + 1)))
                    .collect(),
            ),
            _ => Value::Null,
        }
    }
}

/// A schema: a boolean, or an object of keywords.
#[derive(Arbitrary, Debug)]
pub enum Schema {
    Bool(bool),
    Obj(Vec<Kw>),
}

/// One keyword with a value of the right shape (mostly).
#[derive(Arbitrary, Debug)]
pub enum Kw {
    Type(Ty),
    Types(Vec<Ty>),
    Enum(Vec<Lit>),
    Const(Lit),
    MinLength(u8),
    MaxLength(u8),
    Pattern(u8),
    RawPattern(String),
    Format(u8),
    Minimum(Num),
    Maximum(Num),
    ExclusiveMinimum(Num),
    ExclusiveMaximum(Num),
    MultipleOf(Num),
    MinItems(u8),
    MaxItems(u8),
    UniqueItems(bool),
    MinProperties(u8),
    MaxProperties(u8),
    Required(Vec<u8>),
    Ref(u8),
    Anchor,
    Properties(Vec<(u8, Schema)>),
    PatternProperties(Vec<(u8, Schema)>),
    AdditionalProperties(Box<Schema>),
    PropertyNames(Box<Schema>),
    DependentRequired(u8, Vec<u8>),
    Items(Box<Schema>),
    PrefixItems(Vec<Schema>),
    Contains(Box<Schema>),
    AnyOf(Vec<Schema>),
    OneOf(Vec<Schema>),
    AllOf(Vec<Schema>),
    Not(Box<Schema>),
    If(Box<Schema>),
    Then(Box<Schema>),
    Else(Box<Schema>),
    Defs(Vec<(u8, Schema)>),
    Definitions(Vec<(u8, Schema)>),
    Draft(u8),
    Unknown(u8),
}

const MAX_DEPTH: usize = 6;
const MAX_LIST: usize = 5;

fn name(i: u8) -> String {
    NAMES[i as usize % NAMES.len()].to_string()
}

impl Schema {
    pub fn value(&self, depth: usize) -> Value {
        match self {
            Schema::Bool(b) => json!(b),
            Schema::Obj(_) if depth > MAX_DEPTH => json!(true),
            Schema::Obj(kws) => {
                let mut o = Map::new();
                for kw in kws.iter().take(8) {
                    kw.insert(&mut o, depth);
                }
                Value::Object(o)
            }
        }
    }
}

fn schemas(v: &[Schema], depth: usize) -> Value {
    Value::Array(v.iter().take(MAX_LIST).map(|s| s.value(depth + 1)).collect())
}

fn schema_map(v: &[(u8, Schema)], depth: usize, key: fn(u8) -> String) -> Value {
    Value::Object(v.iter().take(MAX_LIST).map(|(k, s)| (key(*k), s.value(depth + 1))).collect())
}

fn pattern_key(i: u8) -> String {
    PATTERNS[i as usize % PATTERNS.len()].to_string()
}

impl Kw {
    fn insert(&self, o: &mut Map<String, Value>, d: usize) {
        let (k, v): (&str, Value) = match self {
            Kw::Type(t) => ("type", json!(t.name())),
            Kw::Types(ts) => ("type", Value::Array(ts.iter().take(4).map(|t| json!(t.name())).collect())),
            Kw::Enum(v) => ("enum", Value::Array(v.iter().take(8).map(|l| l.value(0)).collect())),
            Kw::Const(l) => ("const", l.value(0)),
            Kw::MinLength(n) => ("minLength", json!(n % 40)),
            Kw::MaxLength(n) => ("maxLength", json!(n % 40)),
            Kw::Pattern(i) => ("pattern", json!(pattern_key(*i))),
            Kw::RawPattern(s) => ("pattern", json!(s.chars().take(24).collect::<String>())),
            Kw::Format(i) => ("format", json!(FORMATS[*i as usize % FORMATS.len()])),
            Kw::Minimum(n) => ("minimum", n.value()),
            Kw::Maximum(n) => ("maximum", n.value()),
            Kw::ExclusiveMinimum(n) => ("exclusiveMinimum", n.value()),
            Kw::ExclusiveMaximum(n) => ("exclusiveMaximum", n.value()),
            Kw::MultipleOf(n) => ("multipleOf", n.value()),
            Kw::MinItems(n) => ("minItems", json!(n % 8)),
            Kw::MaxItems(n) => ("maxItems", json!(n % 8)),
            Kw::UniqueItems(b) => ("uniqueItems", json!(b)),
            Kw::MinProperties(n) => ("minProperties", json!(n % 6)),
            Kw::MaxProperties(n) => ("maxProperties", json!(n % 6)),
            Kw::Required(v) => ("required", Value::Array(v.iter().take(4).map(|i| json!(name(*i))).collect())),
            Kw::Ref(i) => ("$ref", json!(REFS[*i as usize % REFS.len()])),
            Kw::Anchor => ("$anchor", json!("anchor")),
            Kw::Properties(v) => ("properties", schema_map(v, d, name)),
            Kw::PatternProperties(v) => ("patternProperties", schema_map(v, d, pattern_key)),
            Kw::AdditionalProperties(s) => ("additionalProperties", s.value(d + 1)),
            Kw::PropertyNames(s) => ("propertyNames", s.value(d + 1)),
            Kw::DependentRequired(k, v) => {
                ("dependentRequired", json!({ name(*k): v.iter().take(3).map(|i| name(*i)).collect::<Vec<_>>() }))
            }
            Kw::Items(s) => ("items", s.value(d + 1)),
            Kw::PrefixItems(v) => ("prefixItems", schemas(v, d)),
            Kw::Contains(s) => ("contains", s.value(d + 1)),
            Kw::AnyOf(v) => ("anyOf", schemas(v, d)),
            Kw::OneOf(v) => ("oneOf", schemas(v, d)),
            Kw::AllOf(v) => ("allOf", schemas(v, d)),
            Kw::Not(s) => ("not", s.value(d + 1)),
            Kw::If(s) => ("if", s.value(d + 1)),
            Kw::Then(s) => ("then", s.value(d + 1)),
            Kw::Else(s) => ("else", s.value(d + 1)),
            Kw::Defs(v) => ("$defs", schema_map(v, d, name)),
            Kw::Definitions(v) => ("definitions", schema_map(v, d, name)),
            Kw::Draft(i) => (
                "$schema",
                json!(
                    [
                        "https://json-schema.org/draft/2020-12/schema",
                        "https://json-schema.org/draft/2019-09/schema",
                        "http://json-schema.org/draft-07/schema#",
                        "http://json-schema.org/draft-06/schema#",
                        "http://json-schema.org/draft-04/schema#",
                        "http://example.com/unknown-meta",
                    ][*i as usize % 6]
                ),
            ),
            Kw::Unknown(i) => ("x-unknown", json!(i)),
        };
        o.insert(k.to_string(), v);
    }
}

/// A schema case: a schema and compile options.
#[derive(Arbitrary, Debug)]
pub struct SchemaInput {
    pub schema: Schema,
    pub compact: bool,
    pub max_run: u8,
    pub indent: Option<u8>,
    pub lenient: bool,
}

impl SchemaInput {
    pub fn case(&self) -> SchemaCase {
        SchemaCase {
            schema: self.schema.value(0),
            options: CaseOptions {
                compact: self.compact,
                max_run: self.max_run as usize % 4,
                indent: self.indent.map(|n| n as usize % 5),
                lenient: self.lenient,
            },
        }
    }
}

// --------------------------------------------------------------------------------- grammars

/// Regexes over the matcher alphabet (in `regex-syntax` syntax).
const REGEXES: &[&str] =
    &["a+", "[ab]*", "(ab|b)?", "[^a]", "\"[^\"]*\"", "0{1,3}", "é|ω", ".", "(a|ab)(c|bcd)?", "b*a"];

/// An expression of a small grammar over [`MATCHER_ALPHABET`] (plus a few multi-byte
/// characters); rule references are taken modulo the number of rules, so recursion of
/// every kind (left, right, mutual, through nullable rules) appears.
#[derive(Arbitrary, Debug)]
pub enum GExpr {
    Empty,
    Lit(Vec<u8>),
    Class { lo: u8, hi: u8, negated: bool },
    Unicode(u8),
    Any,
    Regex(u8),
    Rule(u8),
    Seq(Vec<GExpr>),
    Alt(Vec<GExpr>),
    Repeat { expr: Box<GExpr>, min: u8, max: Option<u8> },
}

const UNICODE: &[(char, char)] = &[('é', 'é'), ('α', 'ω'), ('😀', '😎'), ('à', 'ÿ')];

fn alpha(b: u8) -> u8 {
    MATCHER_ALPHABET[b as usize % MATCHER_ALPHABET.len()]
}

impl GExpr {
    fn expr(&self, n_rules: usize, depth: usize) -> Expr {
        if depth > 5 {
            return Expr::Empty;
        }
        match self {
            GExpr::Empty => Expr::Empty,
            GExpr::Lit(bytes) => {
                let mut out = Vec::new();
                for &b in bytes.iter().take(4) {
                    if b >= 250 {
                        let c = UNICODE[b as usize % UNICODE.len()].0;
                        out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                    } else {
                        out.push(alpha(b));
                    }
                }
                Expr::Literal(out)
            }
            GExpr::Class { lo, hi, negated } => {
                let (lo, hi) = (alpha(*lo) as u32, alpha(*hi) as u32);
                Expr::Class(CharClass { ranges: vec![(lo.min(hi), lo.max(hi))], negated: *negated })
            }
            GExpr::Unicode(i) => {
                let (lo, hi) = UNICODE[*i as usize % UNICODE.len()];
                Expr::Class(CharClass::new([(lo as u32, hi as u32)]))
            }
            GExpr::Any => Expr::AnyChar,
            GExpr::Regex(i) => Expr::Regex(REGEXES[*i as usize % REGEXES.len()].into()),
            GExpr::Rule(i) => Expr::Rule(RuleId((*i as usize % n_rules) as u32)),
            GExpr::Seq(v) => Expr::Seq(v.iter().take(4).map(|e| e.expr(n_rules, depth + 1)).collect()),
            GExpr::Alt(v) => Expr::Alt(v.iter().take(4).map(|e| e.expr(n_rules, depth + 1)).collect()),
            GExpr::Repeat { expr, min, max } => {
                let min = *min as u32 % 3;
                let max = max.map(|m| min + m as u32 % 3);
                Expr::repeat(expr.expr(n_rules, depth + 1), min, max)
            }
        }
    }
}

/// One matcher step, decoded.
#[derive(Arbitrary, Debug)]
pub enum GOp {
    Accept(u16),
    Reject(u16),
    Rollback(u8),
    Fork,
    Forced(u8),
}

/// A matcher case: up to four rules (the first is the root), a vocabulary seed, and steps.
#[derive(Arbitrary, Debug)]
pub struct MatcherInput {
    pub rules: Vec<GExpr>,
    pub vocab_seed: u64,
    pub ops: Vec<GOp>,
}

impl MatcherInput {
    pub fn case(&self) -> Option<MatcherCase> {
        let rules: Vec<&GExpr> = self.rules.iter().take(4).collect();
        if rules.is_empty() {
            return None;
        }
        let mut g = Grammar::new();
        for (i, r) in rules.iter().enumerate() {
            g.add_rule(format!("r{i}"), r.expr(rules.len(), 0));
        }
        g.root = RuleId(0);
        let ops = self
            .ops
            .iter()
            .take(24)
            .map(|op| match *op {
                GOp::Accept(n) => Op::Accept(n),
                GOp::Reject(n) => Op::Reject(n),
                GOp::Rollback(n) => Op::Rollback(n),
                GOp::Fork => Op::Fork,
                GOp::Forced(n) => Op::Forced(n),
            })
            .collect();
        Some(MatcherCase { grammar: g, vocab_seed: self.vocab_seed, ops })
    }
}

// ------------------------------------------------------------------------- hostile inputs

/// A hostile input of [`stencil_test_support::hostile`] (issue #44): a schema or grammar
/// class, at a size up to three times the one that first crashed or slowed Stencil.
#[derive(Arbitrary, Debug)]
pub struct HostileInput {
    pub class: u8,
    pub size: u16,
    pub grammar: bool,
    pub lenient: bool,
}

impl HostileInput {
    /// The class's name and its text at the chosen size.
    pub fn text(&self) -> (&'static str, String) {
        use stencil_test_support::hostile::{GRAMMARS, SCHEMAS};
        let classes = if self.grammar { GRAMMARS } else { SCHEMAS };
        let c = &classes[self.class as usize % classes.len()];
        let n = 1 + self.size as usize % (3 * c.first_bad);
        (c.name, (c.build)(n))
    }
}
