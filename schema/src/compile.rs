//! Schema → grammar. A value position is a set of schema locations that must all hold (a
//! conjunction). `$ref` and `allOf` add to the set, `anyOf`/`oneOf`/`if` branch it (into a
//! disjunction of conjunctions); each conjunction is merged into per-type constraints and
//! emitted as grammar. One rule per distinct conjunction, so recursion closes on itself.

use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeSet;
use std::time::Instant;

use regex_syntax::hir::{Hir, HirKind, Repetition};
use serde_json::{Map, Value};
use stencil_grammar::{Expr, Grammar, RuleId};

use crate::ecma::full_match_hir;
use crate::escape::{escape_hir, json_string, length_hir};
use crate::numbers::{decimal_range_regex, int_range_regex, Decimal};
use crate::resolve::{push_token, Loc, Resources};
use crate::{CompiledSchema, Draft, Mode, PropertyOrder, SchemaError, SchemaOptions, Unenforced, Whitespace};

/// Interned schema location.
type Sid = u32;
/// A member of a conjunction: a schema, or the negation of a simple one.
type Member = (Sid, bool);
type Conj = BTreeSet<Member>;

const T_NULL: u8 = 1;
const T_BOOL: u8 = 2;
const T_INT: u8 = 4;
const T_FRAC: u8 = 8;
const T_STR: u8 = 16;
const T_ARR: u8 = 32;
const T_OBJ: u8 = 64;
const T_ALL: u8 = 127;

fn type_bits(name: &str) -> Option<u8> {
    Some(match name {
        "null" => T_NULL,
        "boolean" => T_BOOL,
        "integer" => T_INT,
        "number" => T_INT | T_FRAC,
        "string" => T_STR,
        "array" => T_ARR,
        "object" => T_OBJ,
        _ => return None,
    })
}

fn value_type(v: &Value) -> u8 {
    match v {
        Value::Null => T_NULL,
        Value::Bool(_) => T_BOOL,
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                T_INT
            } else {
                T_FRAC
            }
        }
        Value::String(_) => T_STR,
        Value::Array(_) => T_ARR,
        Value::Object(_) => T_OBJ,
    }
}

/// JSON Schema equality (1 == 1.0).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (Decimal::from_number(x), Decimal::from_number(y)) {
            (Some(p), Some(q)) => p == q,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Keywords that constrain nothing (annotations, structure handled elsewhere).
const IGNORED: &[&str] = &[
    "$schema",
    "$id",
    "id",
    "$anchor",
    "$dynamicAnchor",
    "$recursiveAnchor",
    "$defs",
    "definitions",
    "$comment",
    "$vocabulary",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
    "allOf",
    "anyOf",
    "oneOf",
    "if",
    "then",
    "else",
];

#[derive(Default, Clone)]
struct StrCons {
    min_len: u64,
    max_len: Option<u64>,
    /// (pattern, pointer of its schema)
    patterns: Vec<(String, String)>,
    formats: Vec<(String, String)>,
}

/// A string schema's escaped contents (see [`Ctx::string_expr`]).
enum Contents {
    /// The whole string, quotes included, built another way (any string; any but some).
    Whole(Expr),
    /// The contents, exactly the schema's.
    Exact(Expr),
    /// The contents, with a keyword left unenforced (and said so, for this schema only).
    Loosened(Expr),
}

#[derive(Clone, Default)]
struct NumCons {
    min: Option<(Decimal, bool)>,
    max: Option<(Decimal, bool)>,
    multiple_of: Vec<(Decimal, String)>,
}

#[derive(Default)]
struct Node {
    types: u8,
    values: Option<Vec<Value>>,
    not_types: u8,
    not_values: Vec<Value>,
    str: StrCons,
    num: NumCons,
    members: Vec<Sid>,
    /// (keyword, pointer) pairs left unenforced, decided by the branch emitter.
    unsupported: Vec<(String, String, String)>,
    /// Negated `{required: names}` (from `not` or an exclusive `oneOf`): an object in which
    /// at least one of the names is absent. (names, keyword, pointer)
    not_required: Vec<(Vec<String>, String, String)>,
}

struct Style {
    ws: Option<Expr>,
    item_sep: String,
    key_sep: String,
    indent: Option<usize>,
}

pub(crate) struct Ctx<'o> {
    opts: &'o SchemaOptions,
    res: Resources<'o>,
    locs: Vec<Loc>,
    /// The value and draft at each location (looked up once: subschemas are read all the
    /// time).
    values: Vec<&'o Value>,
    drafts: Vec<Draft>,
    sid_of: HashMap<Loc, Sid>,
    g: Grammar,
    /// Hashes of the rule names taken (see [`name_hash`]).
    names: rustc_hash::FxHashSet<u64>,
    /// Per rule-name base, the next suffix to try (see `new_rule_name`).
    next_suffix: HashMap<String, u32>,
    /// Each conjunction's value rule (`None`: no value), per nesting depth (indented
    /// output writes a value differently at each depth; compact output has only depth 0).
    memo: Vec<HashMap<Conj, Option<RuleId>>>,
    warnings: Vec<Unenforced>,
    warned: std::collections::HashSet<(String, String)>,
    style: Style,
    start: Instant,
    validators: HashMap<Sid, Option<jsonschema::Validator>>,
    /// The documents, prepared once for `validators` (`None` until first needed; `Err` when
    /// the `jsonschema` crate cannot read them).
    validator_docs: Option<Result<crate::validate::PreparedDocs, String>>,
    /// Patterns translated once per compile (one recurs at every object sharing it, and
    /// each declared name is tested against each `patternProperties` pattern), with their
    /// matchers.
    patterns: HashMap<String, Result<std::rc::Rc<Hir>, String>>,
    /// Keys of a `patternProperties` pattern less the declared names it matches (see
    /// [`Ctx::key_minus_declared`]), by pattern and those names.
    pattern_keys: HashMap<(String, Vec<String>), Option<Expr>>,
    matchers: HashMap<String, Option<regex_automata::meta::Regex>>,
    any_string: Option<RuleId>,
    /// The shared ends of "any string but these" (see [`Ctx::string_not_in`]).
    string_rests: Option<crate::not_in::StringRests>,
    /// Escaped contents of strings of one pattern or format (is format, source, length
    /// bounds), built once per compile.
    string_contents: HashMap<(bool, String, u64, Option<u64>), Expr>,
    /// Value rules being compiled, nested (see `SchemaLimits::max_depth`).
    depth: usize,
    /// Each declared property name's quoted key, as one rule (see [`Ctx::key`]).
    keys: HashMap<String, RuleId>,
    /// Each set of declared names' "any other key", as one rule (see [`Ctx::string_not_in`]).
    keys_not_in: HashMap<Vec<String>, RuleId>,
    /// Where each subschema's reference keyword (`$ref`, …) leads, once resolved.
    ref_targets: HashMap<(Sid, &'static str), Sid>,
    /// Children found by [`Ctx::child`], by parent and hash of the path.
    children: HashMap<(Sid, u64), Sid>,
}

pub(crate) fn compile<'o>(schema: &'o Value, opts: &'o SchemaOptions) -> Result<CompiledSchema, SchemaError> {
    crate::escape::reset_class_cache();
    let res = Resources::new(schema, opts.default_draft);
    let mut ctx = Ctx {
        opts,
        res,
        locs: Vec::new(),
        values: Vec::new(),
        drafts: Vec::new(),
        sid_of: HashMap::default(),
        g: Grammar::new(),
        names: Default::default(),
        next_suffix: HashMap::default(),
        memo: Vec::new(),
        warnings: Vec::new(),
        warned: Default::default(),
        style: Style { ws: None, item_sep: String::new(), key_sep: String::new(), indent: None },
        start: Instant::now(),
        validators: HashMap::default(),
        validator_docs: None,
        patterns: HashMap::default(),
        pattern_keys: HashMap::default(),
        matchers: HashMap::default(),
        any_string: None,
        string_rests: None,
        string_contents: HashMap::default(),
        depth: 0,
        keys: HashMap::default(),
        keys_not_in: HashMap::default(),
        ref_targets: HashMap::default(),
        children: HashMap::default(),
    };
    ctx.setup_style();
    let root_sid = ctx.sid(&(0, String::new()));
    let root = ctx.value_rule(&[(root_sid, false)].into_iter().collect(), 0, Some("root"))?;
    match root {
        Some(Expr::Rule(id)) => ctx.g.root = id,
        Some(e) => ctx.g.root = ctx.g.add_rule("root", e),
        None => {
            return Err(SchemaError::Unsatisfiable {
                pointer: String::new(),
                reason: "no JSON value satisfies it".into(),
            })
        }
    }
    Ok(CompiledSchema { grammar: ctx.g, warnings: ctx.warnings })
}

/// A rough size of what an expression expands to in the engine.
fn expr_weight(e: &Expr) -> usize {
    match e {
        Expr::Seq(v) | Expr::Alt(v) => v.iter().map(expr_weight).sum::<usize>() + 1,
        Expr::Repeat { expr, min, max } => expr_weight(expr) * (*max).unwrap_or(*min).clamp(1, 1000) as usize,
        Expr::Literal(b) => b.len(),
        Expr::Regex(r) => r.len() * 4,
        _ => 1,
    }
}

static TRUE: Value = Value::Bool(true);

/// One member of an object's conjunction, as the object's grammar sees it.
struct MemberObj<'o> {
    sid: Sid,
    props: rustc_hash::FxHashSet<&'o str>,
    patterns: Vec<(String, Sid)>,
    additional: Option<Sid>,
    unevaluated: Option<Sid>,
    property_names: Option<Sid>,
}

pub(crate) fn lit(s: &str) -> Expr {
    Expr::literal(s)
}

pub(crate) fn seq(mut v: Vec<Expr>) -> Expr {
    v.retain(|e| !matches!(e, Expr::Empty));
    match v.len() {
        0 => Expr::Empty,
        1 => v.pop().expect("one item"),
        _ => Expr::Seq(v),
    }
}

pub(crate) fn alt(v: Vec<Expr>) -> Option<Expr> {
    match v.len() {
        0 => None,
        1 => v.into_iter().next(),
        _ => Some(Expr::Alt(v)),
    }
}

/// Strings with a length bound from this count up are rules of their own (see
/// `string_expr`): inlined, each property would carry its own copy of the count's states.
const OWN_RULE_LENGTH: u64 = 64;

/// A rule name's hash, for [`Ctx::new_rule_name`]'s set of names taken: two names with
/// one hash only make it skip a free name (names stay unique).
fn name_hash(name: &str) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(name)
}

/// A rule name from a JSON pointer: its ASCII letters and digits, every run of other
/// characters one `-`, at most its last 60 characters.
fn sanitize(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for c in p.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    if out.ends_with('-') {
        out.pop();
    }
    if out.len() > 60 {
        out = out[out.len() - 60..].trim_start_matches('-').to_string();
    }
    if out.is_empty() {
        "value".into()
    } else {
        out
    }
}

fn dec_of(v: &Value) -> Option<Decimal> {
    v.as_number().and_then(Decimal::from_number)
}

impl<'o> Ctx<'o> {
    fn setup_style(&mut self) {
        let o = self.opts;
        if let Some(n) = o.indent {
            self.style = Style {
                ws: None,
                item_sep: o.item_separator.trim_end().to_string(),
                key_sep: o.key_separator.clone(),
                indent: Some(n),
            };
            return;
        }
        match o.whitespace {
            Whitespace::Compact => {
                self.style = Style {
                    ws: None,
                    item_sep: o.item_separator.clone(),
                    key_sep: o.key_separator.clone(),
                    indent: None,
                }
            }
            Whitespace::Flexible { max_run } => {
                let ws = if max_run == 0 {
                    None
                } else {
                    let body =
                        Expr::repeat(Expr::class([(' ', ' '), ('\t', '\t'), ('\n', '\n')]), 0, Some(max_run as u32));
                    Some(Expr::Rule(self.g.add_rule("ws", body)))
                };
                self.names.insert(name_hash("ws"));
                self.style = Style { ws, item_sep: ",".into(), key_sep: ":".into(), indent: None };
            }
        }
    }

    fn ws(&self) -> Expr {
        self.style.ws.clone().unwrap_or(Expr::Empty)
    }

    /// Before the first member of a non-empty container at `depth`.
    fn first_prefix(&self, depth: usize) -> Expr {
        match self.style.indent {
            Some(n) => lit(&format!("\n{}", " ".repeat(n * (depth + 1)))),
            None => self.ws(),
        }
    }
    fn item_sep(&self, depth: usize) -> Expr {
        match self.style.indent {
            Some(n) => lit(&format!("{}\n{}", self.style.item_sep, " ".repeat(n * (depth + 1)))),
            None => seq(vec![self.ws(), lit(&self.style.item_sep), self.ws()]),
        }
    }
    fn key_sep(&self) -> Expr {
        seq(vec![self.ws(), lit(&self.style.key_sep), self.ws()])
    }
    /// Before the closing bracket of a non-empty container.
    fn close_prefix(&self, depth: usize) -> Expr {
        match self.style.indent {
            Some(n) => lit(&format!("\n{}", " ".repeat(n * depth))),
            None => self.ws(),
        }
    }
    fn empty_inside(&self) -> Expr {
        match self.style.indent {
            Some(_) => Expr::Empty,
            None => self.ws(),
        }
    }
    fn child_depth(&self, depth: usize) -> usize {
        if self.style.indent.is_some() {
            depth + 1
        } else {
            0
        }
    }

    fn sid(&mut self, loc: &Loc) -> Sid {
        match self.sid_of.get(loc) {
            Some(&s) => s,
            None => self.sid_with(loc.clone(), |c| c.res.value(loc)),
        }
    }

    /// [`Ctx::sid`], finding the value at `loc`, when the location is new, with `value`
    /// (`None`: nothing there).
    fn sid_with(&mut self, loc: Loc, value: impl FnOnce(&Self) -> Option<&'o Value>) -> Sid {
        if let Some(&s) = self.sid_of.get(&loc) {
            return s;
        }
        let s = self.locs.len() as Sid;
        let value = value(self).unwrap_or(&TRUE);
        self.drafts.push(self.res.info(&loc).1);
        self.locs.push(loc.clone());
        self.values.push(value);
        self.sid_of.insert(loc, s);
        s
    }

    fn ptr(&self, sid: Sid) -> String {
        self.res.display(&self.locs[sid as usize])
    }

    /// The subschema that `sid`'s reference `keyword` (whose value is `reference`) leads
    /// to; resolved once per compile (a subschema is expanded wherever it is used).
    fn ref_target(&mut self, sid: Sid, keyword: &'static str, reference: &str) -> Result<Sid, SchemaError> {
        if let Some(&t) = self.ref_targets.get(&(sid, keyword)) {
            return Ok(t);
        }
        let (loc, p) = (self.locs[sid as usize].clone(), self.ptr(sid));
        let target = self.res.resolve(&loc, reference, &self.opts.registry, &p)?;
        let t = self.sid(&target);
        self.ref_targets.insert((sid, keyword), t);
        Ok(t)
    }

    /// The full-match language of the ECMA-262 `pattern`; an error names it at the
    /// pointer `at` gives (asked only then).
    fn pattern_hir(
        &mut self,
        pattern: &str,
        at: impl FnOnce(&Self) -> String,
    ) -> Result<std::rc::Rc<Hir>, SchemaError> {
        if !self.patterns.contains_key(pattern) {
            self.patterns.insert(pattern.to_string(), full_match_hir(pattern).map(std::rc::Rc::new).map_err(|e| e.0));
        }
        match &self.patterns[pattern] {
            Ok(h) => Ok(h.clone()),
            Err(reason) => {
                let reason = reason.clone();
                Err(SchemaError::BadPattern { pointer: at(self), pattern: pattern.to_string(), reason })
            }
        }
    }

    /// Whether `pattern` matches `name` (see [`Ctx::pattern_hir`] for `at`).
    fn pattern_matches(
        &mut self,
        pattern: &str,
        name: &str,
        at: impl FnOnce(&Self) -> String,
    ) -> Result<bool, SchemaError> {
        if !self.matchers.contains_key(pattern) {
            let hir = self.pattern_hir(pattern, at)?;
            self.matchers.insert(pattern.to_string(), hir_matcher(&hir));
        }
        Ok(self.matchers[pattern].as_ref().is_none_or(|re| re.is_match(name)))
    }

    /// The schema at `sid` (`true` where its pointer finds nothing), borrowed from its
    /// document. (A copy per use was quadratic: a 500-branch `anyOf` copied the whole root
    /// for every branch.)
    fn schema(&self, sid: Sid) -> &'o Value {
        self.values[sid as usize]
    }

    fn draft(&self, sid: Sid) -> Draft {
        self.drafts[sid as usize]
    }

    /// The subschema at `path` below `sid` (found again without building its pointer:
    /// the same children are asked for at every use of their parent).
    fn child(&mut self, sid: Sid, path: &[&str]) -> Sid {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        path.hash(&mut h);
        let key = (sid, h.finish());
        if let Some(&c) = self.children.get(&key) {
            if self.is_child(c, sid, path) {
                return c;
            }
        }
        let (doc, mut p) = self.locs[sid as usize].clone();
        for t in path {
            push_token(&mut p, t);
        }
        // The value from the parent's (a JSON pointer walk from the root is as deep as the
        // pointer).
        let value = |c: &Self| path.iter().try_fold(c.schema(sid), |v, t| crate::resolve::child_value(v, t));
        let c = self.sid_with((doc, p), value);
        self.children.insert(key, c);
        c
    }

    /// Whether `c`'s location is `path` below `sid`'s.
    fn is_child(&self, c: Sid, sid: Sid, path: &[&str]) -> bool {
        let ((doc, parent), (child_doc, child)) = (&self.locs[sid as usize], &self.locs[c as usize]);
        let Some(mut rest) = child.strip_prefix(parent.as_str()).filter(|_| doc == child_doc) else { return false };
        for t in path {
            let mut escaped = String::new();
            let token = if t.contains(['~', '/']) {
                push_token(&mut escaped, t);
                &escaped[1..]
            } else {
                t
            };
            match rest.strip_prefix('/').and_then(|r| r.strip_prefix(token)) {
                Some(r) => rest = r,
                None => return false,
            }
        }
        rest.is_empty()
    }

    /// A keyword the grammar does not enforce: error in strict mode, warning in lenient.
    fn unenforced(&mut self, keyword: &str, pointer: &str, reason: &str) -> Result<(), SchemaError> {
        match self.opts.mode {
            Mode::Strict => Err(SchemaError::UnsupportedKeyword {
                keyword: keyword.into(),
                pointer: pointer.into(),
                reason: reason.into(),
            }),
            Mode::Lenient => {
                if self.warned.insert((keyword.to_string(), pointer.to_string())) {
                    self.warnings.push(Unenforced {
                        keyword: keyword.into(),
                        pointer: pointer.into(),
                        reason: reason.into(),
                    });
                }
                Ok(())
            }
        }
    }

    fn check_budget(&self, ptr: &str) -> Result<(), SchemaError> {
        let limits = &self.opts.limits;
        if self.g.rules.len() > limits.max_rules {
            return Err(SchemaError::TooLarge {
                pointer: ptr.into(),
                reason: format!("more than {} grammar rules (limit max_rules)", limits.max_rules),
            });
        }
        if self.start.elapsed() > limits.max_compile_time {
            return Err(SchemaError::TooLarge {
                pointer: ptr.into(),
                reason: format!(
                    "compilation took longer than {} ms (limit max_compile_time)",
                    limits.max_compile_time.as_millis()
                ),
            });
        }
        if self.depth > limits.max_depth {
            return Err(SchemaError::TooLarge {
                pointer: ptr.into(),
                reason: format!("subschemas nest deeper than {} levels (limit max_depth)", limits.max_depth),
            });
        }
        Ok(())
    }

    /// `base`, or `base-2`, `base-3`... whichever is free first. Each base remembers
    /// where its search stopped (names are never freed): thousands of rules share a base
    /// in big schemas, and probing from 1 each time was quadratic.
    fn new_rule_name(&mut self, base: &str) -> String {
        if !self.next_suffix.contains_key(base) {
            self.next_suffix.insert(base.to_string(), 1);
        }
        let next = self.next_suffix.get_mut(base).expect("inserted above");
        loop {
            let name = if *next == 1 { base.to_string() } else { format!("{base}-{next}") };
            *next += 1;
            if self.names.insert(name_hash(&name)) {
                return name;
            }
        }
    }

    /// A declared property's quoted name, as a rule shared by every object that declares
    /// it.
    fn key(&mut self, name: &str) -> Expr {
        if let Some(&r) = self.keys.get(name) {
            return Expr::Rule(r);
        }
        let r = self.add_kept_rule(&format!("key-{}", sanitize(name)), lit(&json_string(name)));
        self.keys.insert(name.to_string(), r);
        Expr::Rule(r)
    }

    /// A rule the engine keeps a rule of its own (see `Rule::no_inline`; it inlines small
    /// rules): a whole object expanded into its parent makes one huge automaton per
    /// document, and a key or the rest of a string expanded at every use multiplies states.
    fn add_kept_rule(&mut self, base: &str, body: Expr) -> RuleId {
        let id = self.add_rule(base, body);
        self.g.set_no_inline(id);
        id
    }

    fn add_rule(&mut self, base: &str, body: Expr) -> RuleId {
        let name = self.new_rule_name(base);
        self.g.add_rule(name, body)
    }

    /// The grammar of a value satisfying every member of `conj`, as a rule reference; None
    /// when no value can.
    fn value_rule(&mut self, conj: &Conj, depth: usize, name: Option<&str>) -> Result<Option<Expr>, SchemaError> {
        if let Some(r) = self.memo.get(depth).and_then(|m| m.get(conj)) {
            return Ok(r.map(Expr::Rule));
        }
        let ptr = conj.iter().next().map(|m| self.ptr(m.0)).unwrap_or_default();
        self.check_budget(&ptr)?;
        if self.style.indent.is_some() && depth > self.opts.max_indent_depth {
            self.remember(conj, depth, None);
            return Ok(None);
        }
        let base = match name {
            Some(n) => n.to_string(),
            None if conj.is_empty() => "any".to_string(),
            None => sanitize(&ptr),
        };
        let base = if depth > 0 { format!("{base}-d{depth}") } else { base };
        let id = self.add_rule(&base, Expr::Alt(vec![]));
        self.remember(conj, depth, Some(id));
        self.depth += 1;
        let body = self.check_budget(&ptr).and_then(|()| self.value_body(conj, depth));
        self.depth -= 1;
        let body = body?;
        match body {
            Some(b) => {
                // Big bodies stay rules of their own: inlined into every caller they would
                // multiply the engine's automaton states.
                if expr_weight(&b) > 256 {
                    self.g.set_no_inline(id);
                }
                self.g.set_body(id, b);
                Ok(Some(Expr::Rule(id)))
            }
            None => {
                self.remember(conj, depth, None);
                Ok(None)
            }
        }
    }

    /// Remembers `conj`'s value rule at `depth` (see `Ctx::memo`).
    fn remember(&mut self, conj: &Conj, depth: usize, rule: Option<RuleId>) {
        if self.memo.len() <= depth {
            self.memo.resize_with(depth + 1, HashMap::default);
        }
        match self.memo[depth].get_mut(conj) {
            Some(known) => *known = rule,
            None => {
                self.memo[depth].insert(conj.clone(), rule);
            }
        }
    }

    fn value_body(&mut self, conj: &Conj, depth: usize) -> Result<Option<Expr>, SchemaError> {
        let branches = self.dnf(conj)?;
        let mut nodes = Vec::new();
        for b in branches {
            if let Some(node) = self.branch_node(&b)? {
                nodes.push(node);
            }
        }
        self.merge_pattern_branches(&mut nodes)?;
        let mut alts = Vec::new();
        for node in nodes {
            if let Some(e) = self.node_expr(node, depth)? {
                alts.push(e);
            }
        }
        Ok(alt(alts))
    }

    /// Branches that are strings with one `pattern` each and nothing else become one
    /// branch whose pattern is their alternation: the same language, but unanchored
    /// patterns in separate branches (`.*A.*|.*B.*`) make the subset construction track
    /// every pattern's progress after another has matched (Github_hard/o12278, seven
    /// status words: 8,450 DFA states for 76 minimal ones), where `.*(A|B).*` does not.
    fn merge_pattern_branches(&mut self, nodes: &mut Vec<Node>) -> Result<(), SchemaError> {
        let mergeable = |n: &Node| {
            n.types & !n.not_types == T_STR
                && n.values.is_none()
                && n.not_values.is_empty()
                && n.unsupported.is_empty()
                && n.not_required.is_empty()
                && n.str.min_len == 0
                && n.str.max_len.is_none()
                && n.str.formats.is_empty()
                && n.str.patterns.len() == 1
                && !joins_unsafely(&n.str.patterns[0].0)
        };
        let picked: Vec<usize> = (0..nodes.len()).filter(|&i| mergeable(&nodes[i])).collect();
        if picked.len() < 2 {
            return Ok(());
        }
        // Each pattern on its own first, so a bad one is reported where it is.
        for &i in &picked {
            let (p, at) = nodes[i].str.patterns[0].clone();
            self.pattern_hir(&p, |_| at)?;
        }
        let mut seen = std::collections::HashSet::new();
        let joined: Vec<String> = picked
            .iter()
            .map(|&i| &nodes[i].str.patterns[0].0)
            .filter(|p| seen.insert(p.as_str()))
            .map(|p| format!("(?:{p})"))
            .collect();
        let joined = joined.join("|");
        nodes[picked[0]].str.patterns[0].0 = joined;
        for &i in picked[1..].iter().rev() {
            nodes.remove(i);
        }
        Ok(())
    }

    // ---------------------------------------------------------------- disjunctive normal form

    fn dnf(&mut self, conj: &Conj) -> Result<Vec<Conj>, SchemaError> {
        let mut branches: Vec<Conj> = vec![Conj::new()];
        for &m in conj {
            branches = self.add_member(branches, m)?;
            if branches.is_empty() {
                break;
            }
        }
        Ok(branches)
    }

    fn add_member(&mut self, branches: Vec<Conj>, m: Member) -> Result<Vec<Conj>, SchemaError> {
        let (sid, negated) = m;
        let mut out = Vec::new();
        for b in branches {
            if b.contains(&m) {
                out.push(b);
                continue;
            }
            let mut b = b;
            b.insert(m);
            out.extend(self.expand(b, sid, negated)?);
            if out.len() > self.opts.limits.max_branches {
                let p = self.ptr(sid);
                return Err(SchemaError::TooLarge {
                    pointer: p,
                    reason: format!(
                        "more than {} combinations of anyOf/oneOf branches (limit max_branches)",
                        self.opts.limits.max_branches
                    ),
                });
            }
        }
        Ok(out)
    }

    /// Expands the applicators of a member just added to branch `b`.
    fn expand(&mut self, b: Conj, sid: Sid, negated: bool) -> Result<Vec<Conj>, SchemaError> {
        let v = self.schema(sid);
        if negated {
            return Ok(vec![b]);
        }
        let m = match v {
            Value::Bool(true) => return Ok(vec![b]),
            Value::Bool(false) => return Ok(vec![]),
            Value::Object(m) => m,
            _ => {
                let p = self.ptr(sid);
                return Err(SchemaError::InvalidKeyword {
                    keyword: "schema".into(),
                    pointer: p,
                    reason: "a schema must be an object or a boolean".into(),
                });
            }
        };
        // Most subschemas have no applicator: one pass over the keys instead of a lookup
        // (a SipHash of the key) per applicator.
        const APPLICATORS: [&str; 7] = ["$ref", "$dynamicRef", "$recursiveRef", "allOf", "anyOf", "oneOf", "if"];
        if !m.keys().any(|k| APPLICATORS.contains(&k.as_str())) {
            return Ok(vec![b]);
        }
        let draft = self.draft(sid);
        let mut branches = vec![b];
        let refs: [(&'static str, bool); 3] = [("$ref", false), ("$dynamicRef", true), ("$recursiveRef", true)];
        for (k, dynamic) in refs {
            if let Some(r) = m.get(k) {
                let Some(r) = r.as_str() else {
                    let p = self.ptr(sid);
                    return Err(SchemaError::InvalidKeyword {
                        keyword: k.into(),
                        pointer: p,
                        reason: "not a string".into(),
                    });
                };
                let t = self.ref_target(sid, k, r)?;
                if dynamic {
                    let p = self.ptr(sid);
                    self.unenforced(k, &p, "resolved statically, like $ref")?;
                }
                branches = self.add_each(branches, (t, false))?;
            }
        }
        if draft <= Draft::Draft7 && m.contains_key("$ref") {
            return Ok(branches);
        }
        if let Some(Value::Array(all)) = m.get("allOf") {
            for i in 0..all.len() {
                let c = self.child(sid, &["allOf", &i.to_string()]);
                branches = self.add_each(branches, (c, false))?;
            }
        }
        for k in ["anyOf", "oneOf"] {
            if let Some(Value::Array(arr)) = m.get(k) {
                let alts: Vec<Sid> = (0..arr.len()).map(|i| self.child(sid, &[k, &i.to_string()])).collect();
                // oneOf of `{required: [...]}` branches: each branch also negates the others
                // (an object missing one of their names), which is exact.
                let exclusive =
                    k == "oneOf" && alts.len() > 1 && alts.iter().all(|&a| required_only(self.schema(a)).is_some());
                if exclusive {
                    let mut next = Vec::new();
                    for br in branches {
                        for &a in &alts {
                            let mut bs = self.add_member(vec![br.clone()], (a, false))?;
                            for &o in alts.iter().filter(|&&o| o != a) {
                                bs = self.add_each(bs, (o, true))?;
                            }
                            next.extend(bs);
                            if next.len() > self.opts.limits.max_branches {
                                let p = self.ptr(sid);
                                let reason = format!(
                                    "more than {} combinations of {k} branches (limit max_branches)",
                                    self.opts.limits.max_branches
                                );
                                return Err(SchemaError::TooLarge { pointer: p, reason });
                            }
                        }
                    }
                    branches = next;
                    continue;
                }
                if k == "oneOf" && alts.len() > 1 && !self.disjoint(&alts)? {
                    let p = self.ptr(sid);
                    self.unenforced("oneOf", &p, "branches that may overlap are treated as anyOf")?;
                }
                let mut next = Vec::new();
                for br in branches {
                    for &a in &alts {
                        next.extend(self.add_member(vec![br.clone()], (a, false))?);
                        if next.len() > self.opts.limits.max_branches {
                            let p = self.ptr(sid);
                            let reason = format!(
                                "more than {} combinations of {k} branches (limit max_branches)",
                                self.opts.limits.max_branches
                            );
                            return Err(SchemaError::TooLarge { pointer: p, reason });
                        }
                    }
                }
                branches = next;
            }
        }
        if draft >= Draft::Draft7 {
            if let Some(cond) = m.get("if") {
                let if_sid = self.child(sid, &["if"]);
                let then_sid = m.contains_key("then").then(|| self.child(sid, &["then"]));
                let else_sid = m.contains_key("else").then(|| self.child(sid, &["else"]));
                if then_sid.is_some() || else_sid.is_some() {
                    if self.is_simple_negatable(cond) {
                        let mut next = Vec::new();
                        for br in branches {
                            let mut yes = self.add_member(vec![br.clone()], (if_sid, false))?;
                            if let Some(t) = then_sid {
                                yes = self.add_each(yes, (t, false))?;
                            }
                            let mut no = self.add_member(vec![br], (if_sid, true))?;
                            if let Some(e) = else_sid {
                                no = self.add_each(no, (e, false))?;
                            }
                            next.extend(yes);
                            next.extend(no);
                        }
                        branches = next;
                    } else {
                        let p = self.ptr(sid);
                        self.unenforced("if", &p, "only `if` schemas that test type, const or enum are enforced")?;
                    }
                }
            }
        }
        Ok(branches)
    }

    fn add_each(&mut self, branches: Vec<Conj>, m: Member) -> Result<Vec<Conj>, SchemaError> {
        self.add_member(branches, m)
    }

    /// A schema whose negation the merger understands: only `type`, `const`, `enum` and
    /// annotations, no references.
    fn is_simple_negatable(&self, v: &Value) -> bool {
        match v {
            Value::Bool(_) => true,
            Value::Object(m) => m.keys().all(|k| {
                matches!(
                    k.as_str(),
                    "type" | "const" | "enum" | "title" | "description" | "$comment" | "default" | "examples"
                )
            }),
            _ => false,
        }
    }

    /// Whether oneOf branches are pairwise disjoint by type, const/enum, or a required
    /// property's const/enum (discriminated unions).
    fn disjoint(&mut self, alts: &[Sid]) -> Result<bool, SchemaError> {
        let sigs: Vec<Sig> = alts.iter().map(|&a| self.signature(a, 0)).collect();
        for i in 0..sigs.len() {
            for j in i + 1..sigs.len() {
                if !sigs[i].disjoint(&sigs[j]) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    fn signature(&mut self, sid: Sid, depth: usize) -> Sig {
        let mut sig = Sig { types: T_ALL, values: None, props: HashMap::default() };
        if depth > 8 {
            return sig;
        }
        let v = self.schema(sid);
        let Value::Object(m) = v else {
            if *v == Value::Bool(false) {
                sig.types = 0;
            }
            return sig;
        };
        if let Some(r) = m.get("$ref").and_then(Value::as_str) {
            if let Ok(t) = self.ref_target(sid, "$ref", r) {
                let s = self.signature(t, depth + 1);
                sig.meet(s);
            }
        }
        if let Some(Value::Array(all)) = m.get("allOf") {
            for i in 0..all.len() {
                let c = self.child(sid, &["allOf", &i.to_string()]);
                let s = self.signature(c, depth + 1);
                sig.meet(s);
            }
        }
        if let Some(t) = m.get("type") {
            sig.types &= types_of(t);
        }
        if let Some(c) = m.get("const") {
            sig.values = Some(vec![c.clone()]);
        } else if let Some(Value::Array(e)) = m.get("enum") {
            sig.values = Some(e.clone());
        }
        if let (Some(Value::Object(props)), Some(Value::Array(req))) = (m.get("properties"), m.get("required")) {
            for r in req.iter().filter_map(Value::as_str) {
                if let Some(ps) = props.get(r) {
                    let vals = match ps {
                        Value::Object(pm) => pm
                            .get("const")
                            .map(|c| vec![c.clone()])
                            .or_else(|| pm.get("enum").and_then(Value::as_array).cloned()),
                        _ => None,
                    };
                    if let Some(vals) = vals {
                        sig.props.insert(r.to_string(), vals);
                    }
                }
            }
        }
        sig
    }

    // ------------------------------------------------------------------------- merging

    /// The keywords of a branch's members merged into one node; `None` when a negated
    /// member leaves no value.
    fn branch_node(&mut self, b: &Conj) -> Result<Option<Node>, SchemaError> {
        let mut node =
            Node { types: T_ALL, num: NumCons { min: None, max: None, multiple_of: vec![] }, ..Default::default() };
        for &(sid, negated) in b {
            let v = self.schema(sid);
            if negated {
                match v {
                    Value::Bool(true) => return Ok(None),
                    Value::Bool(false) => {}
                    Value::Object(_) if required_only(v).is_some() => {
                        let names = required_only(v).unwrap_or_default();
                        if names.is_empty() {
                            return Ok(None);
                        }
                        // `required` holds for every non-object: its negation is an object.
                        node.types &= T_OBJ;
                        let p = self.ptr(sid);
                        node.not_required.push((names, "oneOf".into(), p));
                    }
                    Value::Object(m) => {
                        // not (type ∧ values) = not type ∨ not values: only the single-keyword
                        // forms are exact; others are rejected by is_simple_negatable callers.
                        let t = m.get("type").map(types_of);
                        let vals = m
                            .get("const")
                            .map(|c| vec![c.clone()])
                            .or_else(|| m.get("enum").and_then(Value::as_array).cloned());
                        match (t, vals) {
                            (None, None) => return Ok(None),
                            (Some(t), None) => node.not_types |= t,
                            (None, Some(vals)) => node.not_values.extend(vals),
                            (Some(t), Some(vals)) => {
                                // not(type T and in V): exclude the values of V whose type is T.
                                node.not_values.extend(
                                    vals.into_iter().filter(|x| {
                                        value_type(x) & t != 0 || (t & T_INT != 0 && value_type(x) == T_INT)
                                    }),
                                );
                            }
                        }
                    }
                    _ => {}
                }
                continue;
            }
            let Value::Object(m) = v else { continue };
            node.members.push(sid);
            let draft = self.draft(sid);
            if draft <= Draft::Draft7 && m.contains_key("$ref") {
                continue;
            }
            self.collect(&mut node, sid, m, draft)?;
        }
        Ok(Some(node))
    }

    /// The grammar of the values a branch's node allows.
    fn node_expr(&mut self, mut node: Node, depth: usize) -> Result<Option<Expr>, SchemaError> {
        let mut types = node.types & !node.not_types;
        if let Some(vals) = node.values.take() {
            let mut keep: Vec<Value> = Vec::new();
            // Strings deduplicated by hashing (a linear scan per value is quadratic in the
            // size of an enum), other values by JSON equality (1 == 1.0).
            let mut strings = std::collections::HashSet::new();
            for v in vals {
                if value_type(&v) & types == 0 && !(value_type(&v) == T_INT && types & T_INT != 0) {
                    continue;
                }
                if node.not_values.iter().any(|n| json_eq(n, &v)) {
                    continue;
                }
                if !self.value_satisfies(&v, &node.members)? {
                    continue;
                }
                if let Value::Object(o) = &v {
                    if node.not_required.iter().any(|(names, _, _)| names.iter().all(|n| o.contains_key(n))) {
                        continue;
                    }
                }
                let fresh = match &v {
                    Value::String(text) => strings.insert(text.clone()),
                    _ => !keep.iter().any(|k| json_eq(k, &v)),
                };
                if fresh {
                    keep.push(v);
                }
            }
            let alts: Vec<Expr> = keep.iter().map(|v| self.literal_value(v, depth)).collect();
            return Ok(alt(alts));
        }
        // Excluded values: strings via the string grammar, others unenforced.
        let not_values = std::mem::take(&mut node.not_values);
        let mut excluded_strings = Vec::new();
        for v in &not_values {
            match v {
                Value::String(s) => excluded_strings.push(s.clone()),
                Value::Null => types &= !T_NULL,
                Value::Bool(_) => {}
                _ => {
                    let p = node.members.first().map(|&s| self.ptr(s)).unwrap_or_default();
                    self.unenforced("not", &p, "excluding a number, array or object value")?;
                }
            }
        }
        let mut alts = Vec::new();
        if types & T_NULL != 0 {
            alts.push(lit("null"));
        }
        if types & T_BOOL != 0 {
            for (s, b) in [("true", true), ("false", false)] {
                if !not_values.iter().any(|v| v == &Value::Bool(b)) {
                    alts.push(lit(s));
                }
            }
        }
        if types & (T_INT | T_FRAC) != 0 {
            if let Some(e) = self.number_expr(&node, types)? {
                alts.push(e);
            }
        }
        if types & T_STR != 0 {
            if let Some(e) = self.string_expr(&node, &excluded_strings)? {
                alts.push(e);
            }
        }
        if types & T_ARR != 0 {
            if let Some(e) = self.array_expr(&node, depth)? {
                alts.push(e);
            }
        }
        if types & T_OBJ != 0 {
            if let Some(e) = self.object_expr(&node, depth)? {
                alts.push(e);
            }
        }
        for (k, p, r) in std::mem::take(&mut node.unsupported) {
            self.unenforced(&k, &p, &r)?;
        }
        Ok(alt(alts))
    }

    /// Whether a count keyword (`maxLength`, `minItems`...) is within
    /// `SchemaLimits::max_repetition`. Above it: an error in strict mode, a warning (and the
    /// keyword left to post-hoc validation) in lenient mode.
    fn countable(&mut self, sid: Sid, keyword: &str, n: u64) -> Result<bool, SchemaError> {
        let max = self.opts.limits.max_repetition;
        if n <= max {
            return Ok(true);
        }
        let pointer = self.ptr(sid);
        match self.opts.mode {
            Mode::Strict => Err(SchemaError::TooLarge {
                pointer,
                reason: format!("`{keyword}` {n} is above {max} (limit max_repetition)"),
            }),
            Mode::Lenient => {
                self.unenforced(keyword, &pointer, &format!("counts above {max} (limit max_repetition)"))?;
                Ok(false)
            }
        }
    }

    fn invalid(&self, sid: Sid, keyword: &str, reason: &str) -> SchemaError {
        SchemaError::InvalidKeyword { keyword: keyword.into(), pointer: self.ptr(sid), reason: reason.into() }
    }

    fn collect(&mut self, node: &mut Node, sid: Sid, m: &Map<String, Value>, draft: Draft) -> Result<(), SchemaError> {
        let ptr = self.ptr(sid);
        for (k, v) in m {
            let k = k.as_str();
            match k {
                "type" => {
                    let t = match v {
                        Value::String(s) => type_bits(s).ok_or_else(|| self.invalid(sid, k, "unknown type"))?,
                        Value::Array(a) => {
                            let mut t = 0;
                            for x in a {
                                t |= x
                                    .as_str()
                                    .and_then(type_bits)
                                    .ok_or_else(|| self.invalid(sid, k, "unknown type"))?;
                            }
                            t
                        }
                        _ => return Err(self.invalid(sid, k, "must be a string or an array")),
                    };
                    node.types &= t;
                }
                "enum" | "const" => {
                    if k == "const" && draft < Draft::Draft6 {
                        continue;
                    }
                    let vals = match (k, v) {
                        ("const", v) => vec![v.clone()],
                        (_, Value::Array(a)) => a.clone(),
                        _ => return Err(self.invalid(sid, k, "must be an array")),
                    };
                    node.values = Some(match node.values.take() {
                        None => vals,
                        Some(prev) => prev.into_iter().filter(|p| vals.iter().any(|x| json_eq(p, x))).collect(),
                    });
                }
                "minLength" | "maxLength" => {
                    let n = v
                        .as_f64()
                        .filter(|f| *f >= 0.0)
                        .ok_or_else(|| self.invalid(sid, k, "must be a non-negative integer"))?;
                    let n = n.ceil().min(u32::MAX as f64) as u64;
                    if !self.countable(sid, k, n)? {
                        continue;
                    }
                    if k == "minLength" {
                        node.str.min_len = node.str.min_len.max(n);
                    } else {
                        node.str.max_len = Some(node.str.max_len.map_or(n, |x| x.min(n)));
                    }
                }
                "pattern" => {
                    let p = v.as_str().ok_or_else(|| self.invalid(sid, k, "must be a string"))?;
                    node.str.patterns.push((p.to_string(), ptr.clone()));
                }
                "format" => {
                    if let Some(f) = v.as_str() {
                        if self.opts.assert_formats {
                            if crate::formats::format_hir(f).is_some() {
                                node.str.formats.push((f.to_string(), ptr.clone()));
                            } else if !matches!(
                                f,
                                "regex"
                                    | "iri"
                                    | "iri-reference"
                                    | "idn-hostname"
                                    | "idn-email"
                                    | "uri-template"
                                    | "unknown"
                            ) {
                                // Unknown formats are annotations.
                            } else {
                                node.unsupported.push((
                                    "format".into(),
                                    ptr.clone(),
                                    format!("format {f:?} has no grammar"),
                                ));
                            }
                        }
                    }
                }
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                    if let Value::Bool(excl) = v {
                        // Draft 4: modifies minimum/maximum.
                        if *excl && draft == Draft::Draft4 {
                            let base = if k == "exclusiveMinimum" { "minimum" } else { "maximum" };
                            if let Some(d) = m.get(base).and_then(dec_of) {
                                self.bound(node, base == "minimum", d, true);
                            }
                        }
                        continue;
                    }
                    let d = dec_of(v).ok_or_else(|| self.invalid(sid, k, "must be a number"))?;
                    let exclusive = k.starts_with("exclusive");
                    if exclusive && draft == Draft::Draft4 {
                        continue;
                    }
                    self.bound(node, k.ends_with("inimum"), d, exclusive);
                }
                "multipleOf" => {
                    let d = dec_of(v).filter(|d| !d.negative && d.int != "0" || !d.frac.is_empty());
                    let d = d.ok_or_else(|| self.invalid(sid, k, "must be a positive number"))?;
                    node.num.multiple_of.push((d, ptr.clone()));
                }
                "contentMediaType" | "contentEncoding" if draft <= Draft::Draft7 => {
                    node.unsupported.push((k.into(), ptr.clone(), "content assertions are not enforced".into()));
                }
                "not" => {
                    let nsid = self.child(sid, &["not"]);
                    let nv = self.schema(nsid);
                    if self.is_simple_negatable(nv) {
                        // Handled as a negated member: put the type/values into this node.
                        match nv {
                            Value::Bool(true) => node.types = 0,
                            Value::Bool(false) => {}
                            Value::Object(nm) => {
                                let t = nm.get("type").map(types_of);
                                let vals = nm
                                    .get("const")
                                    .map(|c| vec![c.clone()])
                                    .or_else(|| nm.get("enum").and_then(Value::as_array).cloned());
                                match (t, vals) {
                                    (None, None) => node.types = 0,
                                    (Some(t), None) => node.not_types |= t,
                                    (None, Some(vals)) => node.not_values.extend(vals),
                                    (Some(t), Some(vals)) => {
                                        node.not_values.extend(vals.into_iter().filter(|x| value_type(x) & t != 0))
                                    }
                                }
                            }
                            _ => {}
                        }
                    } else if let Some(names) = required_only(nv) {
                        // not {required: names}: an object missing one of them (the object
                        // emitter tracks the names).
                        if names.is_empty() {
                            node.types = 0;
                        } else {
                            node.types &= T_OBJ;
                            node.not_required.push((names, "not".into(), ptr.clone()));
                        }
                    } else {
                        node.unsupported.push((
                            "not".into(),
                            ptr.clone(),
                            "only `not` of type/const/enum is enforced".into(),
                        ));
                    }
                }
                _ => {}
            }
        }
        // Unknown or object/array keywords are read by their emitters from `members`;
        // keywords outside every known vocabulary are annotations.
        let _ = IGNORED;
        Ok(())
    }

    fn bound(&self, node: &mut Node, lower: bool, d: Decimal, exclusive: bool) {
        let slot = if lower { &mut node.num.min } else { &mut node.num.max };
        let replace = match slot {
            None => true,
            Some((cur, cur_excl)) => {
                if lower {
                    d > *cur || (d == *cur && exclusive && !*cur_excl)
                } else {
                    d < *cur || (d == *cur && exclusive && !*cur_excl)
                }
            }
        };
        if replace {
            *slot = Some((d, exclusive));
        }
    }

    /// Does `v` satisfy every member? Simple members are checked here, others by the
    /// `jsonschema` validator of the member's location.
    fn value_satisfies(&mut self, v: &Value, members: &[Sid]) -> Result<bool, SchemaError> {
        for &m in members {
            let Value::Object(map) = self.schema(m) else { continue };
            let annotation = |k: &str| {
                matches!(
                    k,
                    "title"
                        | "description"
                        | "$comment"
                        | "default"
                        | "examples"
                        | "$id"
                        | "$schema"
                        | "$anchor"
                        | "$defs"
                        | "definitions"
                )
            };
            let simple = map.keys().all(|k| matches!(k.as_str(), "type" | "enum" | "const") || annotation(k));
            if simple {
                continue; // type/enum/const are applied by the caller
            }
            // A reference and an `allOf` add their subschemas to the members: checked there.
            // (Up to draft 7, a `$ref`'s siblings do not apply at all.)
            let implied = (self.draft(m) <= Draft::Draft7 && map.contains_key("$ref"))
                || map.keys().all(|k| matches!(k.as_str(), "$ref" | "allOf") || annotation(k));
            if implied {
                continue;
            }
            match self.validator(m) {
                Some(val) => {
                    if !val.is_valid(v) {
                        return Ok(false);
                    }
                }
                None => {
                    let p = self.ptr(m);
                    self.unenforced(
                        "enum",
                        &p,
                        "the other keywords of this schema could not be checked against the enum values",
                    )?;
                }
            }
        }
        Ok(true)
    }

    fn validator(&mut self, sid: Sid) -> Option<&jsonschema::Validator> {
        if !self.validators.contains_key(&sid) {
            let loc = self.locs[sid as usize].clone();
            let uri = format!("{}#{}", self.res.doc_uris[loc.0], loc.1);
            let draft = self.draft(sid);
            let wrapper = serde_json::json!({"$schema": draft_uri(draft), "$ref": uri});
            let (res, registry) = (&self.res, &self.opts.registry);
            let docs = self.validator_docs.get_or_insert_with(|| {
                let docs = res.doc_uris.iter().cloned().zip(res.docs.iter().map(|&d| std::sync::Arc::new(d.clone())));
                crate::validate::PreparedDocs::new(docs, registry)
            });
            let val = docs.as_ref().ok().and_then(|d| d.validator(&wrapper).ok());
            self.validators.insert(sid, val);
        }
        self.validators.get(&sid).and_then(|v| v.as_ref())
    }

    // -------------------------------------------------------------------------- literals

    fn literal_value(&mut self, v: &Value, depth: usize) -> Expr {
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

    // --------------------------------------------------------------------------- numbers

    fn number_expr(&mut self, node: &Node, types: u8) -> Result<Option<Expr>, SchemaError> {
        // (bound, inclusive)
        let min = node.num.min.as_ref().map(|(d, e)| (d, !*e));
        let max = node.num.max.as_ref().map(|(d, e)| (d, !*e));
        let int_only = types & T_FRAC == 0;
        // An integer value may be written with a zero fraction (`6000.0`, serde_json's form
        // of a whole f64): a number, and an integer from draft 6 on (draft 4 says it is not).
        let draft = node.members.first().map_or(self.opts.default_draft, |&s| self.draft(s));
        let zero_frac = !int_only || draft >= Draft::Draft6;
        let int_tail = |e: Expr| -> Expr {
            if zero_frac {
                seq(vec![e, Expr::Regex(r"(?:\.0+)?".into())])
            } else {
                e
            }
        };
        let int_regex = |r: String| regex_expr(r).map(int_tail);
        let mut mult: Vec<(Decimal, String)> = node.num.multiple_of.clone();
        // multipleOf 1 says nothing more about an integer.
        mult.retain(|(d, _)| !(int_only && d.int == "1" && d.frac.is_empty() && d.is_integer()));
        let int_bounds = || {
            let lo = min.map(|(d, incl)| if !incl && d.is_integer() { d.succ() } else { d.clone() });
            let hi = max.map(|(d, incl)| if !incl && d.is_integer() { d.pred() } else { d.clone() });
            (lo, hi)
        };
        if mult.is_empty() {
            if int_only {
                let (lo, hi) = int_bounds();
                let r = int_range_regex(lo.as_ref(), hi.as_ref());
                return Ok(int_regex(r));
            }
            if min.is_none() && max.is_none() {
                let frac = if types & T_INT == 0 {
                    r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]*[1-9][0-9]*(?:[eE][+-]?[0-9]+)?|[eE]-[0-9]+)"
                } else {
                    r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
                };
                if types & T_INT == 0 {
                    let p = node.members.first().map(|&s| self.ptr(s)).unwrap_or_default();
                    let _ = p;
                }
                return Ok(regex_expr(frac.to_string()));
            }
            return Ok(match decimal_range_regex(min, max) {
                Some(r) => regex_expr(r),
                None => {
                    // Only integers within the bounds (sound, narrower).
                    let (lo, hi) = int_bounds();
                    int_regex(int_range_regex(lo.as_ref(), hi.as_ref()))
                }
            });
        }
        // multipleOf: integers (k ≥ 1 integer) or fixed decimal places (10^-j).
        let ptr = mult[0].1.clone();
        let int_mults: Vec<&Decimal> = mult.iter().map(|(d, _)| d).filter(|d| d.is_integer()).collect();
        if !int_mults.is_empty() {
            let k: u128 = int_mults.iter().map(|d| d.int.parse::<u128>().unwrap_or(0)).fold(1, lcm);
            if k == 0 || int_mults.len() != mult.len() {
                self.unenforced("multipleOf", &ptr, "a multiple too large or mixing integer and fractional multiples")?;
            }
            let (lo, hi) = int_bounds();
            let lo = lo.map(|d| d.ceil());
            let hi = hi.map(|d| d.floor());
            // Small ranges: enumerate.
            if let (Some(l), Some(h)) = (&lo, &hi) {
                if let (Ok(l), Ok(h)) = (l.to_string().parse::<i128>(), h.to_string().parse::<i128>()) {
                    if k > 0 && h >= l && (h - l) / (k as i128) <= 2000 {
                        let first = l.rem_euclid(k as i128);
                        let start = if first == 0 { l } else { l + (k as i128 - first) };
                        let mut lits = Vec::new();
                        let mut x = start;
                        while x <= h {
                            lits.push(lit(&x.to_string()));
                            x += k as i128;
                        }
                        return Ok(alt(lits).map(int_tail));
                    }
                    if h < l {
                        return Ok(None);
                    }
                }
            }
            if k <= 1 {
                return Ok(int_regex(int_range_regex(lo.as_ref(), hi.as_ref())));
            }
            if k > 1000 {
                self.unenforced("multipleOf", &ptr, "multiples above 1000 with wide bounds")?;
                return Ok(int_regex(int_range_regex(lo.as_ref(), hi.as_ref())));
            }
            // Sign from the bounds; other bounds are not combined with the digit automaton.
            let zero = Decimal::parse("0").unwrap();
            let nonneg = lo.as_ref().is_some_and(|l| *l >= zero);
            let nonpos = hi.as_ref().is_some_and(|h| *h <= zero);
            let exact_bounds = lo.as_ref().is_none_or(|l| *l == zero || l.negative && !nonneg)
                && hi.as_ref().is_none_or(|h| *h == zero || !h.negative && !nonpos);
            let exact_bounds =
                exact_bounds && lo.as_ref().is_none_or(|l| *l == zero) && hi.as_ref().is_none_or(|h| *h == zero);
            if !exact_bounds {
                self.unenforced("minimum", &ptr, "bounds combined with multipleOf over a wide range")?;
            }
            let digits = self.mod_automaton(k as u32);
            let mut alts = vec![lit("0")];
            if !nonpos {
                alts.push(digits.clone());
            }
            if !nonneg {
                alts.push(seq(vec![lit("-"), digits]));
            }
            return Ok(alt(alts).map(int_tail));
        }
        // Fractional multiples: 10^-j gives at most j decimal places.
        let d = &mult[0].0;
        let pow10 = d.int == "0" && d.frac.ends_with('1') && d.frac[..d.frac.len() - 1].bytes().all(|b| b == b'0');
        if mult.len() == 1 && pow10 && min.is_none() && max.is_none() {
            let j = d.frac.len();
            // Trailing zeros beyond the j places keep the value a multiple (`1.50`).
            if int_only {
                return Ok(int_regex(r"-?(?:0|[1-9][0-9]*)".to_string()));
            }
            return Ok(regex_expr(format!(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]{{1,{j}}}0*)?")));
        }
        self.unenforced("multipleOf", &ptr, "fractional multiples other than a power of ten without bounds")?;
        if int_only {
            let (lo, hi) = int_bounds();
            return Ok(int_regex(int_range_regex(lo.as_ref(), hi.as_ref())));
        }
        Ok(match decimal_range_regex(min, max) {
            Some(r) => regex_expr(r),
            None => {
                let (lo, hi) = int_bounds();
                int_regex(int_range_regex(lo.as_ref(), hi.as_ref()))
            }
        })
    }

    /// Positive integers (no leading zero) divisible by k, by a digit automaton.
    fn mod_automaton(&mut self, k: u32) -> Expr {
        let name = format!("multiple-of-{k}");
        if let Some(id) = self.g.rule_id(&name) {
            return Expr::Rule(id);
        }
        let ids: Vec<RuleId> = (0..k).map(|r| self.add_rule(&format!("mod{k}-r{r}"), Expr::Empty)).collect();
        for r in 0..k {
            let mut alts = Vec::new();
            if r == 0 {
                alts.push(Expr::Empty);
            }
            for d in 0..10u32 {
                let next = (r * 10 + d) % k;
                alts.push(seq(vec![Expr::Literal(vec![b'0' + d as u8]), Expr::Rule(ids[next as usize])]));
            }
            self.g.set_body(ids[r as usize], Expr::Alt(alts));
        }
        let mut first = Vec::new();
        for d in 1..10u32 {
            first.push(seq(vec![Expr::Literal(vec![b'0' + d as u8]), Expr::Rule(ids[(d % k) as usize])]));
        }
        let id = self.add_rule(&name, Expr::Alt(first));
        Expr::Rule(id)
    }

    // --------------------------------------------------------------------------- strings

    fn string_expr(&mut self, node: &Node, excluded: &[String]) -> Result<Option<Expr>, SchemaError> {
        let s = &node.str;
        let ptr = node.members.first().map(|&m| self.ptr(m)).unwrap_or_default();
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
        let known = key.as_ref().and_then(|k| self.string_contents.get(k)).cloned();
        let contents = match known {
            Some(contents) => contents,
            None => match self.string_contents_of(node, excluded, &ptr)? {
                Contents::Whole(string) => return Ok(Some(string)),
                Contents::Exact(contents) => {
                    if let Some(k) = key {
                        self.string_contents.insert(k, contents.clone());
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
            return Ok(Some(Expr::Rule(self.add_rule(&name, string))));
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
                    self.unenforced("not", ptr, "excluding strings together with a length bound")?;
                    exact = false;
                } else {
                    return Ok(Contents::Whole(self.string_not_in(excluded)));
                }
            }
            if !has_len {
                return Ok(Contents::Whole(self.any_string()));
            }
            length_hir(s.min_len.min(u32::MAX as u64) as u32, s.max_len.map(|m| m.min(u32::MAX as u64) as u32))
        } else {
            if !excluded.is_empty() {
                self.unenforced("not", ptr, "excluding strings together with a pattern or format")?;
                exact = false;
            }
            let (first, _, _) = parts.remove(0);
            let mut h = std::borrow::Cow::Borrowed(first);
            if has_len {
                match with_length(&h, s.min_len, s.max_len) {
                    Some(x) => h = std::borrow::Cow::Owned(x),
                    None => {
                        let kw = if s.max_len.is_some() { "maxLength" } else { "minLength" };
                        self.unenforced(kw, ptr, "a length bound combined with a pattern or format of this shape")?;
                        exact = false;
                    }
                }
            }
            for (_, kw, p) in parts {
                self.unenforced(kw, p, "a second pattern/format on the same string")?;
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

    /// A JSON string that is none of `excluded` (see [`crate::not_in`]); the first call
    /// adds the shared rules it ends in.
    fn string_not_in(&mut self, excluded: &[String]) -> Expr {
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
    fn any_string(&mut self) -> Expr {
        if let Some(id) = self.any_string {
            return Expr::Rule(id);
        }
        let body = seq(vec![lit("\""), hir_expr(length_hir(0, None)), lit("\"")]);
        let id = self.add_rule("string", body);
        self.any_string = Some(id);
        Expr::Rule(id)
    }

    // ---------------------------------------------------------------------------- arrays

    fn array_expr(&mut self, node: &Node, depth: usize) -> Result<Option<Expr>, SchemaError> {
        let mut prefix: Vec<Conj> = Vec::new();
        let mut rest: Conj = Conj::new();
        let mut rest_false = false;
        let mut min_items: u64 = 0;
        let mut max_items: Option<u64> = None;
        let mut contains: Vec<Sid> = Vec::new();
        let mut unique = false;
        let mut unique_ptr = String::new();
        // Per member: its prefix and rest.
        let mut per_member: Vec<(Vec<Sid>, Option<Sid>)> = Vec::new();
        for &sid in &node.members {
            let schema = self.schema(sid);
            let Value::Object(m) = schema else { continue };
            let draft = self.draft(sid);
            if draft <= Draft::Draft7 && m.contains_key("$ref") {
                continue;
            }
            let ptr = self.ptr(sid);
            let mut pre = Vec::new();
            let mut r = None;
            if draft >= Draft::Draft202012 {
                if let Some(Value::Array(a)) = m.get("prefixItems") {
                    pre = (0..a.len()).map(|i| self.child(sid, &["prefixItems", &i.to_string()])).collect();
                }
                if m.contains_key("items") {
                    r = Some(self.child(sid, &["items"]));
                }
            } else {
                match m.get("items") {
                    Some(Value::Array(a)) => {
                        pre = (0..a.len()).map(|i| self.child(sid, &["items", &i.to_string()])).collect();
                        if m.contains_key("additionalItems") {
                            r = Some(self.child(sid, &["additionalItems"]));
                        }
                    }
                    Some(_) => r = Some(self.child(sid, &["items"])),
                    None => {}
                }
            }
            // Items evaluated by nothing else must satisfy unevaluatedItems; requiring it of
            // every rest item is narrower (items matched by `contains` included), so sound.
            if r.is_none() && m.contains_key("unevaluatedItems") {
                r = Some(self.child(sid, &["unevaluatedItems"]));
            }
            for (k, slot_min) in [("minItems", true), ("maxItems", false)] {
                if let Some(v) = m.get(k) {
                    let n = v
                        .as_f64()
                        .filter(|f| *f >= 0.0)
                        .ok_or_else(|| self.invalid(sid, k, "must be a non-negative integer"))?;
                    let n = n.ceil() as u64;
                    if !self.countable(sid, k, n)? {
                        continue;
                    }
                    if slot_min {
                        min_items = min_items.max(n);
                    } else {
                        max_items = Some(max_items.map_or(n, |x| x.min(n)));
                    }
                }
            }
            if m.contains_key("contains") && draft >= Draft::Draft6 {
                let min_c = m
                    .get("minContains")
                    .and_then(Value::as_f64)
                    .map(|f| f.ceil() as u64)
                    .filter(|_| draft >= Draft::Draft201909);
                if min_c == Some(0) {
                    // contains with minContains 0 constrains nothing (maxContains aside).
                } else {
                    if min_c.is_some_and(|c| c > 1) {
                        node_push_unsupported(self, "minContains", &ptr)?;
                    }
                    contains.push(self.child(sid, &["contains"]));
                }
                if m.contains_key("maxContains") && draft >= Draft::Draft201909 {
                    node_push_unsupported(self, "maxContains", &ptr)?;
                }
            }
            if m.get("uniqueItems") == Some(&Value::Bool(true)) {
                unique = true;
                unique_ptr = ptr.clone();
            }
            per_member.push((pre, r));
        }
        let k = per_member.iter().map(|(p, _)| p.len()).max().unwrap_or(0);
        for i in 0..k {
            let mut c = Conj::new();
            let mut impossible = false;
            for (pre, r) in &per_member {
                if i < pre.len() {
                    c.insert((pre[i], false));
                } else if let Some(r) = r {
                    c.insert((*r, false));
                }
                let _ = &mut impossible;
            }
            prefix.push(c);
        }
        for (_, r) in &per_member {
            if let Some(r) = r {
                rest.insert((*r, false));
                if *self.schema(*r) == Value::Bool(false) {
                    rest_false = true;
                }
            }
        }
        if let Some(m) = max_items {
            if min_items > m {
                return Ok(None);
            }
        }
        let cd = self.child_depth(depth);
        let mut prefix_exprs: Vec<Option<Expr>> = Vec::new();
        for c in &prefix {
            prefix_exprs.push(self.value_rule(c, cd, None)?);
        }
        // A position whose schema admits nothing caps the length.
        if let Some(i) = prefix_exprs.iter().position(|e| e.is_none()) {
            max_items = Some(max_items.map_or(i as u64, |m| m.min(i as u64)));
            prefix_exprs.truncate(i);
            rest_false = true;
        }
        let rest_expr = if rest_false { None } else { self.value_rule(&rest, cd, None)? };
        if let Some(m) = max_items {
            if min_items > m {
                return Ok(None);
            }
        }
        let open = lit("[");
        let close = lit("]");
        // uniqueItems over enum-like items.
        if unique {
            if let Some(e) = self.unique_array(&prefix, &rest, rest_false, min_items, max_items, depth, &contains)? {
                return Ok(e);
            }
            self.unenforced("uniqueItems", &unique_ptr, "only arrays of a few enum-like items are made unique")?;
        }
        if !contains.is_empty() {
            if contains.len() > 1 || !prefix_exprs.is_empty() || min_items > 1 || max_items.is_some() || rest_false {
                let p = self.ptr(contains[0]);
                self.unenforced(
                    "contains",
                    &p,
                    "contains together with prefix items, several contains, or item counts",
                )?;
            } else {
                let mut c = rest.clone();
                c.insert((contains[0], false));
                let Some(ce) = self.value_rule(&c, cd, None)? else { return Ok(None) };
                let item = rest_expr.clone().expect("rest not false");
                let sep = self.item_sep(depth);
                let body = seq(vec![
                    self.first_prefix(depth),
                    Expr::star(seq(vec![item.clone(), sep.clone()])),
                    ce,
                    Expr::star(seq(vec![sep, item])),
                    self.close_prefix(depth),
                ]);
                return Ok(Some(seq(vec![open, body, close])));
            }
        }
        // Items from position i on, given i already emitted.
        let min = min_items;
        let max = max_items;
        let mut tail: Option<Expr> = None; // grammar after all prefix items (position k')
        let kp = prefix_exprs.len() as u64;
        let sep = self.item_sep(depth);
        // Rest part after kp items (kp ≥ 1 here means a separator precedes each).
        let rest_part = |first: bool, need: u64, cap: Option<u64>| -> Option<Expr> {
            let Some(r) = rest_expr.clone() else {
                return if need == 0 { Some(Expr::Empty) } else { None };
            };
            if cap == Some(0) {
                return if need == 0 { Some(Expr::Empty) } else { None };
            }
            let more = Expr::repeat(
                seq(vec![sep.clone(), r.clone()]),
                need.saturating_sub(1).min(u32::MAX as u64) as u32,
                cap.map(|c| (c - 1).min(u32::MAX as u64) as u32),
            );
            let one_or_more = seq(vec![if first { Expr::Empty } else { sep.clone() }, r, more]);
            if need == 0 {
                Some(Expr::optional(one_or_more))
            } else {
                Some(one_or_more)
            }
        };
        // Build from the end of the prefix backwards.
        let after_prefix = rest_part(kp == 0, min.saturating_sub(kp), max.map(|m| m.saturating_sub(kp)));
        if max.is_some_and(|m| m < kp) {
            // Fewer items than the prefix: truncate.
        }
        tail = after_prefix.or(tail);
        let mut cur: Option<Expr> = tail;
        for i in (0..kp).rev() {
            let item = prefix_exprs[i as usize].clone().unwrap();
            let emitted = cur.map(|t| seq(vec![if i == 0 { Expr::Empty } else { sep.clone() }, item, t]));
            let allowed_here = max.is_none_or(|m| i < m);
            let emitted = if allowed_here { emitted } else { None };
            cur = if i >= min {
                // May stop before item i.
                match emitted {
                    Some(e) => Some(Expr::optional(e)),
                    None => Some(Expr::Empty),
                }
            } else {
                emitted
            };
        }
        let Some(inner) = cur else { return Ok(None) };
        // inner may be empty (no items): container shape.
        let nonempty_possible = inner != Expr::Empty;
        let can_be_empty = min == 0;
        let mut alts = Vec::new();
        if nonempty_possible {
            let ne = self.strip_empty(inner, can_be_empty);
            if let Some(ne) = ne {
                alts.push(seq(vec![
                    open.clone(),
                    self.first_prefix(depth),
                    ne,
                    self.close_prefix(depth),
                    close.clone(),
                ]));
            }
        }
        if can_be_empty {
            alts.push(seq(vec![open, self.empty_inside(), close]));
        }
        Ok(alt(alts).map(|e| {
            let name = format!("{}-array", sanitize(&self.ptr(node.members.first().copied().unwrap_or(0))));
            Expr::Rule(self.add_kept_rule(&name, e))
        }))
    }

    /// `inner` is `X?` or `X` where X is non-empty; return X (the non-empty form) when the
    /// empty case is emitted separately.
    fn strip_empty(&self, inner: Expr, can_be_empty: bool) -> Option<Expr> {
        if !can_be_empty {
            return Some(inner);
        }
        match inner {
            Expr::Repeat { expr, min: 0, max: Some(1) } => Some(*expr),
            Expr::Empty => None,
            other => Some(other),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn unique_array(
        &mut self,
        prefix: &[Conj],
        rest: &Conj,
        rest_false: bool,
        min: u64,
        max: Option<u64>,
        depth: usize,
        contains: &[Sid],
    ) -> Result<Option<Option<Expr>>, SchemaError> {
        if !prefix.is_empty() || rest_false || !contains.is_empty() {
            return Ok(None);
        }
        // The finite set of item values, if the rest schema is enum-like.
        let Some(values) = self.finite_values(rest)? else { return Ok(None) };
        if values.len() > 8 {
            return Ok(None);
        }
        let n = values.len();
        let cd = self.child_depth(depth);
        let lits: Vec<Expr> = values.iter().map(|v| self.literal_value(v, cd)).collect();
        let max = max.map_or(n as u64, |m| m.min(n as u64));
        if min > max {
            return Ok(Some(None));
        }
        // State: used-set mask. U(mask) = end | sep v_i U(mask | i).
        let mut ids: HashMap<u32, RuleId> = HashMap::default();
        for mask in 0..(1u32 << n) {
            ids.insert(mask, self.add_rule("unique-items", Expr::Empty));
        }
        let sep = self.item_sep(depth);
        for mask in 0..(1u32 << n) {
            let count = mask.count_ones() as u64;
            let mut alts = Vec::new();
            if count >= min.max(1) {
                alts.push(seq(vec![self.close_prefix(depth), lit("]")]));
            }
            if count < max {
                for i in 0..n {
                    if mask & (1 << i) == 0 {
                        let pre = if mask == 0 { self.first_prefix(depth) } else { sep.clone() };
                        alts.push(seq(vec![pre, lits[i].clone(), Expr::Rule(ids[&(mask | 1 << i)])]));
                    }
                }
            }
            let body = if alts.is_empty() { Expr::Alt(vec![]) } else { Expr::Alt(alts) };
            self.g.set_body(ids[&mask], body);
        }
        let mut alts = vec![seq(vec![lit("["), Expr::Rule(ids[&0])])];
        if min == 0 {
            alts.push(seq(vec![lit("["), self.empty_inside(), lit("]")]));
        }
        Ok(Some(alt(alts)))
    }

    /// The values of a conjunction when it is a small finite set (enum/const/boolean/null).
    fn finite_values(&mut self, c: &Conj) -> Result<Option<Vec<Value>>, SchemaError> {
        let branches = self.dnf(c)?;
        let mut out: Vec<Value> = Vec::new();
        for b in branches {
            let mut types = T_ALL;
            let mut values: Option<Vec<Value>> = None;
            for &(sid, neg) in &b {
                if neg {
                    return Ok(None);
                }
                let schema = self.schema(sid);
                let Value::Object(m) = schema else { continue };
                for (k, v) in m {
                    match k.as_str() {
                        "type" => types &= types_of(v),
                        "enum" => values = Some(v.as_array().cloned().unwrap_or_default()),
                        "const" => values = Some(vec![v.clone()]),
                        kk if IGNORED.contains(&kk) => {}
                        _ => return Ok(None),
                    }
                }
            }
            let vals = match values {
                Some(v) => v.into_iter().filter(|x| value_type(x) & types != 0).collect(),
                None => {
                    let mut v = Vec::new();
                    if types & !(T_NULL | T_BOOL) != 0 {
                        return Ok(None);
                    }
                    if types & T_NULL != 0 {
                        v.push(Value::Null);
                    }
                    if types & T_BOOL != 0 {
                        v.push(Value::Bool(true));
                        v.push(Value::Bool(false));
                    }
                    v
                }
            };
            for v in vals {
                if !out.iter().any(|o| json_eq(o, &v)) {
                    out.push(v);
                }
            }
        }
        Ok(Some(out))
    }

    // --------------------------------------------------------------------------- objects

    fn object_expr(&mut self, node: &Node, depth: usize) -> Result<Option<Expr>, SchemaError> {
        let mut members: Vec<MemberObj> = Vec::new();
        let mut order: Vec<String> = Vec::new();
        // `order`'s names, for membership tests (a linear scan is quadratic in a schema of
        // 100,000 properties).
        let mut in_order: rustc_hash::FxHashSet<&str> = Default::default();
        let mut required: BTreeSet<String> = BTreeSet::new();
        // `required` names in document order (the set above is for membership tests).
        let mut required_order: Vec<String> = Vec::new();
        let mut min_props: u64 = 0;
        let mut max_props: Option<u64> = None;
        let mut deps: Vec<(String, Vec<String>)> = Vec::new();
        for &sid in &node.members {
            let schema = self.schema(sid);
            let Value::Object(m) = schema else { continue };
            let draft = self.draft(sid);
            if draft <= Draft::Draft7 && m.contains_key("$ref") {
                continue;
            }
            let ptr = self.ptr(sid);
            let mut mo = MemberObj {
                sid,
                props: Default::default(),
                patterns: vec![],
                additional: None,
                unevaluated: None,
                property_names: None,
            };
            if let Some(Value::Object(p)) = m.get("properties") {
                for k in p.keys() {
                    mo.props.insert(k);
                    if in_order.insert(k) {
                        order.push(k.clone());
                    }
                }
            }
            if let Some(Value::Object(p)) = m.get("patternProperties") {
                for k in p.keys() {
                    let c = self.child(sid, &["patternProperties", k]);
                    mo.patterns.push((k.clone(), c));
                }
            }
            if m.contains_key("additionalProperties") {
                mo.additional = Some(self.child(sid, &["additionalProperties"]));
            }
            if m.contains_key("unevaluatedProperties") {
                mo.unevaluated = Some(self.child(sid, &["unevaluatedProperties"]));
            }
            if m.contains_key("propertyNames") && draft >= Draft::Draft6 {
                mo.property_names = Some(self.child(sid, &["propertyNames"]));
            }
            if let Some(Value::Array(r)) = m.get("required") {
                for x in r.iter().filter_map(Value::as_str) {
                    if required.insert(x.to_string()) {
                        required_order.push(x.to_string());
                    }
                }
            }
            for (k, slot_min) in [("minProperties", true), ("maxProperties", false)] {
                if let Some(v) = m.get(k) {
                    let n = v
                        .as_f64()
                        .filter(|f| *f >= 0.0)
                        .ok_or_else(|| self.invalid(sid, k, "must be a non-negative integer"))?;
                    let n = n.ceil() as u64;
                    if slot_min {
                        min_props = min_props.max(n);
                    } else {
                        max_props = Some(max_props.map_or(n, |x| x.min(n)));
                    }
                }
            }
            // `dependencies` (up to draft 7) is honoured in every draft, as validators do.
            let dep_kw: Vec<&str> = if draft >= Draft::Draft201909 {
                vec!["dependentRequired", "dependentSchemas", "dependencies"]
            } else {
                vec!["dependencies"]
            };
            for kw in dep_kw {
                if let Some(Value::Object(d)) = m.get(kw) {
                    for (a, v) in d {
                        match v {
                            Value::Array(names) => {
                                let names: Vec<String> =
                                    names.iter().filter_map(|x| x.as_str().map(String::from)).collect();
                                if !names.is_empty() {
                                    deps.push((a.clone(), names));
                                }
                            }
                            Value::Bool(true) => {}
                            Value::Object(o) if o.is_empty() => {}
                            Value::Bool(false) => deps.push((a.clone(), vec![])), // a must be absent
                            _ => self.unenforced(kw, &ptr, "dependent schemas are not enforced")?,
                        }
                    }
                }
            }
            members.push(mo);
        }
        // Declared names: properties in order, then required, then dependency names.
        for r in &required_order {
            if in_order.insert(r) {
                order.push(r.clone());
            }
        }
        for (a, bs) in &deps {
            for n in std::iter::once(a).chain(bs.iter()) {
                if !order.contains(n) && members.iter().any(|m| m.additional.is_some() || !m.patterns.is_empty()) {
                    order.push(n.clone());
                }
            }
        }
        for (a, bs) in &deps {
            for n in std::iter::once(a).chain(bs.iter()) {
                if !order.contains(n) {
                    order.push(n.clone());
                }
            }
        }
        // Negated `required`: the names not already required, of which one must be absent
        // (none left: no object qualifies). They become declared names, so that no extra
        // property can carry them.
        let mut absent_groups: Vec<(Vec<String>, String, String)> = Vec::new();
        for (names, kw, p) in &node.not_required {
            let rest: Vec<&String> = names.iter().filter(|n| !required.contains(*n)).collect();
            if rest.is_empty() {
                return Ok(None);
            }
            for &n in &rest {
                if in_order.insert(n) {
                    order.push(n.clone());
                }
            }
            absent_groups.push((rest.into_iter().cloned().collect(), kw.clone(), p.clone()));
        }
        let cd = self.child_depth(depth);
        // Value grammar of each declared name.
        let mut declared: Vec<(String, Option<Expr>)> = Vec::new();
        for name in &order {
            let mut c = Conj::new();
            let mut forbidden = false;
            for mo in &members {
                let mut matched = false;
                if mo.props.contains(name.as_str()) {
                    c.insert((self.child(mo.sid, &["properties", name]), false));
                    matched = true;
                }
                for (p, psid) in &mo.patterns {
                    if self.pattern_matches(p, name, |c| c.ptr(mo.sid))? {
                        c.insert((*psid, false));
                        matched = true;
                    }
                }
                if !matched {
                    if let Some(a) = mo.additional {
                        c.insert((a, false));
                    } else if let Some(u) = mo.unevaluated {
                        c.insert((u, false));
                    }
                }
                if let Some(pn) = mo.property_names {
                    if !self.name_ok(pn, name)? {
                        forbidden = true;
                    }
                }
            }
            let e = if forbidden { None } else { self.value_rule(&c, cd, None)? };
            if e.is_none() && required.contains(name) {
                return Ok(None);
            }
            declared.push((name.clone(), e));
        }
        // A group of one name: that name is forbidden.
        for (g, _, _) in &absent_groups {
            if let [single] = g.as_slice() {
                if let Some(d) = declared.iter_mut().find(|(n, _)| n == single) {
                    d.1 = None;
                }
            }
        }
        let absent_groups: Vec<(Vec<String>, String, String)> =
            absent_groups.into_iter().filter(|(g, _, _)| g.len() > 1).collect();
        // Extra properties.
        let extras = self.extra_properties(&members, &order, cd)?;
        // The chain.
        let names: Vec<String> = declared.iter().map(|(n, _)| n.clone()).collect();
        let any_order = self.any_order(node, declared.len(), extras.is_some(), min_props, max_props)?;
        let index_of = |n: &String| names.iter().position(|x| x == n);
        let absent: Vec<Vec<usize>> =
            absent_groups.iter().map(|(g, _, _)| g.iter().filter_map(index_of).collect()).collect();
        let relevant: Vec<usize> = {
            let mut r: Vec<usize> = Vec::new();
            for i in absent.iter().flatten() {
                if !r.contains(i) {
                    r.push(*i);
                }
            }
            for (a, bs) in &deps {
                for n in std::iter::once(a).chain(bs.iter()) {
                    if let Some(i) = names.iter().position(|x| x == n) {
                        if !r.contains(&i) {
                            r.push(i);
                        }
                    }
                }
            }
            r
        };
        // The chain tracks at most 12 names (any order tracks them all).
        if !any_order && relevant.len() > 12 {
            for ((g, kw, p), idx) in absent_groups.iter().zip(&absent) {
                if idx.iter().any(|i| relevant.iter().position(|r| r == i).is_none_or(|b| b >= 12)) {
                    let reason = format!("more than 12 properties to track: objects with the tracked names of {g:?} are refused even when an untracked one is absent");
                    self.unenforced(kw, p, &reason)?;
                }
            }
            if !deps.is_empty() {
                let p = self.ptr(node.members[0]);
                self.unenforced("dependentRequired", &p, "more than 12 properties involved")?;
            }
        }
        let relevant: Vec<usize> = relevant.into_iter().take(12).collect();
        let cap = if max_props.is_some() || min_props > 0 { max_props.unwrap_or(0).max(min_props) + 1 } else { 0 };
        if !any_order && cap > 64 && declared.len() > 64 {
            let p = self.ptr(node.members[0]);
            self.unenforced("maxProperties", &p, "counts above 64 with many properties")?;
        }
        let chain = Chain {
            declared,
            required: required.clone(),
            deps: deps
                .iter()
                .filter_map(|(a, bs)| {
                    let ai = names.iter().position(|x| x == a)?;
                    let bis: Vec<usize> = bs.iter().filter_map(|b| names.iter().position(|x| x == b)).collect();
                    Some((ai, bis, bs.is_empty()))
                })
                .collect(),
            absent,
            relevant,
            cap,
            min_props,
            max_props,
            extras,
            depth,
            base: sanitize(&self.ptr(node.members.first().copied().unwrap_or(0))),
            pointer: self.ptr(node.members.first().copied().unwrap_or(0)),
        };
        let body = if any_order { self.any_order_rule(&chain)? } else { self.chain_rule(&chain)? };
        Ok(body.map(|b| {
            let name = format!("{}-object", chain.base);
            Expr::Rule(self.add_kept_rule(&name, seq(vec![lit("{"), b])))
        }))
    }

    /// Whether this object's members may come in any order ([`PropertyOrder::Any`]): only
    /// up to `SchemaLimits::max_any_order_properties` declared names and 16 counted extra
    /// members. Above: an error (strict) or schema order with a warning (lenient).
    fn any_order(
        &mut self,
        node: &Node,
        n: usize,
        extras: bool,
        min_props: u64,
        max_props: Option<u64>,
    ) -> Result<bool, SchemaError> {
        if self.opts.property_order != PropertyOrder::Any {
            return Ok(false);
        }
        let limit = self.opts.limits.max_any_order_properties;
        let counted = if extras { any_order_extra_cap(min_props, max_props) } else { 0 };
        let why = if n > limit {
            format!("{n} declared properties, more than {limit} (limit max_any_order_properties)")
        } else if counted > ANY_ORDER_MAX_COUNTED {
            format!(
                "extra properties counted up to {counted} by minProperties/maxProperties, more than {ANY_ORDER_MAX_COUNTED} (with limit max_any_order_properties)"
            )
        } else {
            return Ok(true);
        };
        let pointer = node.members.first().map(|&s| self.ptr(s)).unwrap_or_default();
        match self.opts.mode {
            Mode::Strict => Err(SchemaError::TooLarge { pointer, reason: format!("property order Any: {why}") }),
            Mode::Lenient => {
                let reason =
                    format!("property order Any is not applied ({why}): key order is fixed to schema order here");
                self.unenforced("properties", &pointer, &reason)?;
                Ok(false)
            }
        }
    }

    /// The members of an object in any order ([`PropertyOrder::Any`]): one rule per
    /// reachable `(set of declared names written, extra members written)`, the extras
    /// counted up to what `minProperties`/`maxProperties` need (else only "some or none").
    /// Extra keys never spell a declared name, so each declared name appears at most once.
    fn any_order_rule(&mut self, ch: &Chain) -> Result<Option<Expr>, SchemaError> {
        let n = ch.declared.len();
        let has_extras = ch.extras.is_some();
        let emax: u64 = if has_extras { any_order_extra_cap(ch.min_props, ch.max_props) } else { 0 };
        let width = emax as usize + 1;
        let states = (1usize << n) * width;
        let idx = |set: usize, e: u64| set * width + e as usize;
        let required: Vec<usize> = (0..n).filter(|&i| ch.required.contains(&ch.declared[i].0)).collect();
        let count = |set: usize, e: u64| set.count_ones() as u64 + e;
        let room = |set: usize, e: u64| ch.max_props.is_none_or(|m| count(set, e) < m);
        let next_e = |e: u64| (e + 1).min(emax);
        let can_close = |set: usize, e: u64| {
            let has = |j: usize| set & (1 << j) != 0;
            required.iter().all(|&j| has(j))
                && ch.deps.iter().all(|(a, bs, absent)| !has(*a) || (!*absent && bs.iter().all(|&b| has(b))))
                && !ch.absent.iter().any(|g| g.iter().all(|&j| has(j)))
                && count(set, e) >= ch.min_props
                && ch.max_props.is_none_or(|m| count(set, e) <= m)
        };
        // Which states can finish: successors have a larger set, or the same set and more
        // extras (or the same state, which adds nothing).
        let mut viable = vec![false; states];
        for set in (0..1usize << n).rev() {
            for e in (0..=emax).rev() {
                let mut v = can_close(set, e);
                if !v && room(set, e) {
                    v = (has_extras && next_e(e) != e && viable[idx(set, next_e(e))])
                        || (0..n).any(|i| {
                            set & (1 << i) == 0 && ch.declared[i].1.is_some() && viable[idx(set | (1 << i), e)]
                        });
                }
                viable[idx(set, e)] = v;
            }
        }
        if !viable[idx(0, 0)] {
            return Ok(None);
        }
        // Rules for the viable states reachable from the start.
        let mut rule: Vec<Option<RuleId>> = vec![None; states];
        let mut stack = vec![(0usize, 0u64)];
        let mut order = Vec::new();
        while let Some((set, e)) = stack.pop() {
            let k = idx(set, e);
            if rule[k].is_some() {
                continue;
            }
            let name = format!("{}-any-{set}-{e}", ch.base);
            rule[k] = Some(self.add_rule(&name, Expr::Alt(vec![])));
            order.push((set, e));
            if room(set, e) {
                if has_extras && viable[idx(set, next_e(e))] {
                    stack.push((set, next_e(e)));
                }
                for i in 0..n {
                    if set & (1 << i) == 0 && ch.declared[i].1.is_some() && viable[idx(set | (1 << i), e)] {
                        stack.push((set | (1 << i), e));
                    }
                }
            }
            if order.len() % 1024 == 0 {
                self.check_budget(&ch.pointer)?;
            }
        }
        let d = ch.depth;
        for (set, e) in order {
            let any = set != 0 || e > 0;
            let pre = if any { self.item_sep(d) } else { self.first_prefix(d) };
            let mut alts = Vec::new();
            if room(set, e) {
                for i in 0..n {
                    let (name, value) = &ch.declared[i];
                    let (Some(v), false) = (value, set & (1 << i) != 0) else { continue };
                    if let Some(r) = rule[idx(set | (1 << i), e)] {
                        alts.push(seq(vec![pre.clone(), self.key(name), self.key_sep(), v.clone(), Expr::Rule(r)]));
                    }
                }
                if let (Some(kv), Some(r)) = (&ch.extras, rule[idx(set, next_e(e))]) {
                    alts.push(seq(vec![pre.clone(), kv.clone(), Expr::Rule(r)]));
                }
            }
            if can_close(set, e) {
                alts.push(if any {
                    seq(vec![self.close_prefix(d), lit("}")])
                } else {
                    seq(vec![self.empty_inside(), lit("}")])
                });
            }
            let id = rule[idx(set, e)].expect("made above");
            self.g.set_body(id, Expr::Alt(alts));
            self.g.set_no_inline(id);
        }
        Ok(rule[idx(0, 0)].map(Expr::Rule))
    }

    fn name_ok(&mut self, pn: Sid, name: &str) -> Result<bool, SchemaError> {
        match *self.schema(pn) {
            Value::Bool(b) => Ok(b),
            _ => {
                let v = Value::String(name.to_string());
                match self.validator(pn) {
                    Some(val) => Ok(val.is_valid(&v)),
                    None => Ok(true),
                }
            }
        }
    }

    /// The grammar of one extra `key: value` member, if extras are allowed.
    fn extra_properties(
        &mut self,
        members: &[MemberObj],
        declared: &[String],
        cd: usize,
    ) -> Result<Option<Expr>, SchemaError> {
        let mut value_conj = Conj::new();
        // The member with patternProperties: its patterns, and whether it forbids the rest.
        let mut pattern_member: Option<(&MemberObj, bool)> = None;
        let mut key_lang: Option<Expr> = None;
        // No extras at all: nothing to say about the keywords below.
        for MemberObj { patterns, additional, unevaluated, property_names, .. } in members {
            let add = additional.or(*unevaluated);
            if patterns.is_empty() && add.is_some_and(|a| *self.schema(a) == Value::Bool(false)) {
                return Ok(None);
            }
            if property_names.is_some_and(|pn| *self.schema(pn) == Value::Bool(false)) {
                return Ok(None);
            }
        }
        for member in members {
            let MemberObj { sid, patterns, additional, unevaluated, property_names, .. } = member;
            let add = additional.or(*unevaluated);
            if !patterns.is_empty() {
                if pattern_member.is_some() {
                    // Two members with patternProperties: keep extras out (narrower, said).
                    let p = self.ptr(*sid);
                    self.unenforced(
                        "patternProperties",
                        &p,
                        "extra properties under patternProperties of several subschemas are not generated",
                    )?;
                    return Ok(None);
                }
                let add_false = add.is_some_and(|a| *self.schema(a) == Value::Bool(false));
                pattern_member = Some((member, add_false));
            } else if let Some(a) = add {
                if *self.schema(a) == Value::Bool(false) {
                    return Ok(None);
                }
                value_conj.insert((a, false));
            }
            if let Some(pn) = property_names {
                match self.simple_string_lang(*pn)? {
                    Some(h) => {
                        if key_lang.is_some() {
                            let p = self.ptr(*pn);
                            self.unenforced(
                                "propertyNames",
                                &p,
                                "extra properties under several propertyNames are not generated",
                            )?;
                            return Ok(None);
                        }
                        // The extra names must avoid the declared ones.
                        let Some(key) = self.key_minus_declared(&h, None, declared, *pn, "propertyNames")? else {
                            return Ok(None);
                        };
                        key_lang = Some(key);
                    }
                    None => {
                        let p = self.ptr(*pn);
                        self.unenforced(
                            "propertyNames",
                            &p,
                            "extra properties under this propertyNames are not generated",
                        )?;
                        return Ok(None);
                    }
                }
            }
        }
        let sep = self.key_sep();
        if let Some((MemberObj { sid, patterns, .. }, add_false)) = pattern_member {
            let sid = *sid;
            // Keys from each pattern (minus the declared names), value = its schema and the
            // others' additionalProperties. Keys matching no pattern are left out: said
            // unless additionalProperties is false or a pattern matches every name.
            if key_lang.is_some() {
                let p = self.ptr(sid);
                self.unenforced(
                    "patternProperties",
                    &p,
                    "extra properties under both patternProperties and propertyNames are not generated",
                )?;
                return Ok(None);
            }
            if !add_false {
                let mut universal = false;
                for (p, _) in patterns {
                    let hir = self.pattern_hir(p, |c| c.ptr(sid))?;
                    universal |= crate::hirset::surely_universal(&hir);
                }
                if !universal {
                    let p = self.ptr(sid);
                    self.unenforced(
                        "additionalProperties",
                        &p,
                        "extra properties matching no patternProperties pattern are not generated",
                    )?;
                }
            }
            if patterns.len() > 1 {
                let p = self.ptr(sid);
                self.unenforced("patternProperties", &p, "a key matching several patterns is checked against one")?;
            }
            let mut alts = Vec::new();
            for (p, psid) in patterns {
                let hir = self.pattern_hir(p, |c| c.ptr(sid))?;
                let Some(key) = self.key_minus_declared(&hir, Some(p), declared, sid, "patternProperties")? else {
                    continue;
                };
                let mut c = value_conj.clone();
                c.insert((*psid, false));
                let Some(v) = self.value_rule(&c, cd, None)? else { continue };
                alts.push(seq(vec![key, sep.clone(), v]));
            }
            // A rule, as below: the chain writes extras at many places, and every copy of
            // the patterns (often long: a language tag after each key's prefix) would be
            // built again in the object's automaton.
            return Ok(alt(alts).map(|kv| Expr::Rule(self.add_rule("extra-property", kv))));
        }
        let Some(v) = self.value_rule(&value_conj, cd, None)? else { return Ok(None) };
        let key = match key_lang {
            Some(k) => k,
            None => self.string_not_in(declared),
        };
        let kv = seq(vec![key, sep, v]);
        Ok(Some(Expr::Rule(self.add_rule("extra-property", kv))))
    }

    /// The keys (JSON strings, quotes included) of a key language without the declared
    /// names (extra properties never repeat one); `None` when nothing is left, or (with a
    /// warning) when the difference is too large. Any key at all is "any string but
    /// these", built as such: the derivatives of `.*` by each declared key grow with every
    /// character. `pattern`: the `patternProperties` pattern `h` comes from, if it does.
    fn key_minus_declared(
        &mut self,
        h: &Hir,
        pattern: Option<&str>,
        declared: &[String],
        sid: Sid,
        keyword: &str,
    ) -> Result<Option<Expr>, SchemaError> {
        if crate::hirset::surely_universal(h) {
            return Ok(Some(self.string_not_in(declared)));
        }
        let hit: Vec<String> = match pattern {
            // Objects repeat their patterns: the pattern's matcher is built once.
            Some(p) => {
                let mut hit = Vec::new();
                for d in declared {
                    if self.pattern_matches(p, d, |c| c.ptr(sid))? {
                        hit.push(d.clone());
                    }
                }
                hit
            }
            None => {
                let re = hir_matcher(h);
                declared.iter().filter(|d| re.as_ref().is_none_or(|re| re.is_match(d))).cloned().collect()
            }
        };
        // Objects repeat their patterns and names: the keys are built once.
        let memo = pattern.map(|p| (p.to_string(), hit.clone()));
        if let Some(keys) = memo.as_ref().and_then(|m| self.pattern_keys.get(m)) {
            return Ok(keys.clone());
        }
        let escaped = |c: &Self, rest: &Hir| match escape_hir(rest) {
            Ok(e) => Ok(seq(vec![lit("\""), hir_expr(e), lit("\"")])),
            Err(reason) => Err(SchemaError::BadPattern { pointer: c.ptr(sid), pattern: String::new(), reason }),
        };
        let keys = if hit.is_empty() {
            Some(escaped(self, h)?)
        } else {
            match crate::hirset::minus_words(h, &hit, 20_000) {
                Some(m) if m.properties().minimum_len().is_none() => None,
                Some(m) => Some(escaped(self, &m)?),
                None => {
                    let p = self.ptr(sid);
                    self.unenforced(
                        keyword,
                        &p,
                        "extra names that a pattern shares with declared properties are not generated",
                    )?;
                    return Ok(None);
                }
            }
        };
        if let Some(m) = memo {
            self.pattern_keys.insert(m, keys.clone());
        }
        Ok(keys)
    }

    /// The key language of a `propertyNames` schema of simple string form: `true`, or
    /// `type: string` with `pattern`, `minLength`/`maxLength`, `enum`/`const` of strings, or
    /// a `$ref` alone to such a schema. `None` for anything else (the caller says so).
    fn simple_string_lang(&mut self, sid: Sid) -> Result<Option<Hir>, SchemaError> {
        self.simple_string_lang_at(sid, 0)
    }

    fn simple_string_lang_at(&mut self, sid: Sid, hops: usize) -> Result<Option<Hir>, SchemaError> {
        const APPLICATORS: &[&str] = &["$dynamicRef", "$recursiveRef", "allOf", "anyOf", "oneOf", "if", "then", "else"];
        match self.schema(sid) {
            Value::Bool(true) => Ok(Some(length_hir_chars(0, None))),
            Value::Bool(false) => Ok(None),
            Value::Object(m) => {
                if let Some(r) = m.get("$ref") {
                    // Draft 7 and before ignore the siblings of `$ref`; later drafts apply
                    // them too, which only annotations may be here.
                    let alone = self.draft(sid) <= Draft::Draft7
                        || m.keys().all(|k| {
                            k == "$ref" || (IGNORED.contains(&k.as_str()) && !APPLICATORS.contains(&k.as_str()))
                        });
                    let Some(r) = r.as_str().filter(|_| alone && hops < 64) else { return Ok(None) };
                    let t = self.ref_target(sid, "$ref", r)?;
                    return self.simple_string_lang_at(t, hops + 1);
                }
                let mut pat: Option<Hir> = None;
                let mut min = 0u64;
                let mut max = None;
                // The names `enum` and `const` allow, when they are given.
                let mut names: Option<Vec<String>> = None;
                for (k, v) in m {
                    match k.as_str() {
                        "type" if v == "string" => {}
                        "pattern" => {
                            let p = v.as_str().unwrap_or("");
                            let h = self.pattern_hir(p, |c| c.ptr(sid))?;
                            pat = Some(Hir::clone(&h));
                        }
                        "maxLength" => max = v.as_u64(),
                        "minLength" => min = v.as_u64().unwrap_or(0),
                        "enum" | "const" => {
                            let listed: Vec<&Value> = if k == "enum" {
                                v.as_array().map(|a| a.iter().collect()).unwrap_or_default()
                            } else {
                                vec![v]
                            };
                            let Some(strings) =
                                listed.iter().map(|x| x.as_str().map(String::from)).collect::<Option<Vec<String>>>()
                            else {
                                return Ok(None);
                            };
                            names = Some(match names {
                                Some(prev) => prev.into_iter().filter(|n| strings.contains(n)).collect(),
                                None => strings,
                            });
                        }
                        kk if IGNORED.contains(&kk) && !APPLICATORS.contains(&kk) => {}
                        _ => return Ok(None),
                    }
                }
                if let Some(names) = names {
                    let re = match &pat {
                        Some(h) => match hir_matcher(h) {
                            Some(re) => Some(re),
                            None => return Ok(None),
                        },
                        None => None,
                    };
                    let fits = |n: &String| {
                        let len = n.chars().count() as u64;
                        len >= min && max.is_none_or(|m| len <= m) && re.as_ref().is_none_or(|re| re.is_match(n))
                    };
                    let kept: Vec<Hir> = names.iter().filter(|n| fits(n)).map(|n| Hir::literal(n.as_bytes())).collect();
                    return Ok(Some(if kept.is_empty() { Hir::fail() } else { Hir::alternation(kept) }));
                }
                let h = match pat {
                    Some(h) => {
                        if min > 0 || max.is_some() {
                            match with_length(&h, min, max) {
                                Some(h) => h,
                                None => return Ok(None),
                            }
                        } else {
                            h
                        }
                    }
                    None => length_hir_chars(min as u32, max.map(|m| m as u32)),
                };
                Ok(Some(h))
            }
            _ => Ok(None),
        }
    }

    /// Members from declared index `i` on. `count` is capped at `chain.cap`, `mask` holds
    /// the emitted names among `chain.relevant`, `any` says whether a member was emitted.
    /// The grammar of an object's members from declared name `i` on, for each reachable
    /// `(i, count, mask, any)`: `count` members so far (capped), `mask` the relevant names
    /// present, `any` whether a member was emitted. One rule per key, made in the order of
    /// a depth-first walk (emit name `i`, then skip it) — with an explicit stack, since an
    /// object may declare 100,000 names.
    fn chain_rule(&mut self, ch: &Chain) -> Result<Option<Expr>, SchemaError> {
        type Key = (usize, u64, u32, bool);
        let mut memo: HashMap<Key, Option<Expr>> = HashMap::default();
        let n = ch.declared.len();
        // The children of a key below the end: (emit, skip), each when allowed.
        let children = |(i, count, mask, any): Key| -> (Option<Key>, Option<Key>) {
            let (name, value) = &ch.declared[i];
            let emit = (value.is_some() && ch.max_props.is_none_or(|m| count < m)).then(|| {
                let ncount = if ch.cap > 0 { (count + 1).min(ch.cap) } else { 0 };
                let nmask = match ch.relevant.iter().position(|&r| r == i) {
                    Some(b) => mask | (1 << b),
                    None => mask,
                };
                (i + 1, ncount, nmask, true)
            });
            let skip = (!ch.required.contains(name)).then_some((i + 1, count, mask, any));
            (emit, skip)
        };
        let root: Key = (0, 0, 0, false);
        let mut stack: Vec<(Key, u8)> = vec![(root, 0)];
        while let Some(&(key, stage)) = stack.last() {
            if stage == 0 && memo.contains_key(&key) {
                stack.pop();
                continue;
            }
            let (i, count, mask, any) = key;
            if i == n {
                let r = self.chain_end(ch, count, mask, any);
                memo.insert(key, r);
                stack.pop();
                continue;
            }
            let (emit, skip) = children(key);
            let top = stack.len() - 1;
            match stage {
                0 | 1 => {
                    stack[top].1 = stage + 1;
                    let child = if stage == 0 { emit } else { skip };
                    if let Some(c) = child.filter(|c| !memo.contains_key(c)) {
                        stack.push((c, 0));
                    }
                }
                _ => {
                    stack.pop();
                    let d = ch.depth;
                    let (name, value) = &ch.declared[i];
                    let mut alts = Vec::new();
                    if let (Some(v), Some(Some(rest))) = (value, emit.map(|c| memo[&c].clone())) {
                        let pre = if any { self.item_sep(d) } else { self.first_prefix(d) };
                        alts.push(seq(vec![pre, self.key(name), self.key_sep(), v.clone(), rest]));
                    }
                    if let Some(Some(rest)) = skip.map(|c| memo[&c].clone()) {
                        alts.push(rest);
                    }
                    let result = match alt(alts) {
                        None => None,
                        Some(e) => {
                            let name = format!("{}-obj-{i}", ch.base);
                            Some(Expr::Rule(self.add_kept_rule(&name, e)))
                        }
                    };
                    memo.insert(key, result);
                    if memo.len().is_multiple_of(1024) {
                        self.check_budget(&ch.pointer)?;
                    }
                }
            }
        }
        Ok(memo.remove(&root).flatten())
    }

    /// The end of an object's members, after every declared name: extra members, the
    /// counts and the dependencies.
    fn chain_end(&mut self, ch: &Chain, count: u64, mask: u32, any: bool) -> Option<Expr> {
        let d = ch.depth;
        // Dependencies satisfied?
        let present = |j: usize| ch.relevant.iter().position(|&r| r == j).is_some_and(|b| mask & (1 << b) != 0);
        let deps_ok = ch.deps.iter().all(|(a, bs, absent)| {
            if !ch.relevant.contains(a) {
                return true;
            }
            !present(*a) || (!*absent && bs.iter().all(|&b| !ch.relevant.contains(&b) || present(b)))
        });
        if !deps_ok {
            return None;
        }
        // Negated `required`: one name of each group absent (names beyond the 12 tracked
        // count as present: narrower, said at compile time).
        let all_present = |g: &Vec<usize>| g.iter().all(|&j| !ch.relevant.contains(&j) || present(j));
        if ch.absent.iter().any(all_present) {
            return None;
        }
        let need = ch.min_props.saturating_sub(count);
        let cap = ch.max_props.map(|m| m.saturating_sub(count));
        if ch.max_props.is_some_and(|m| count > m) {
            return None;
        }
        let close = seq(vec![self.close_prefix(d), lit("}")]);
        let none = if any { close.clone() } else { seq(vec![self.empty_inside(), lit("}")]) };
        let cap_u = cap.map(|c| c.min(u32::MAX as u64) as u32);
        let kv = match &ch.extras {
            Some(kv) if cap_u != Some(0) => kv,
            // No (more) extra properties: close here, unless more are needed.
            _ => return (need == 0).then_some(none),
        };
        let sep = self.item_sep(d);
        let first = if any { sep.clone() } else { self.first_prefix(d) };
        let more = Expr::repeat(
            seq(vec![sep, kv.clone()]),
            need.saturating_sub(1).min(u32::MAX as u64) as u32,
            cap_u.map(|c| c - 1),
        );
        let some = seq(vec![first, kv.clone(), more, close]);
        if need > 0 {
            Some(some)
        } else {
            Some(Expr::Alt(vec![some, none]))
        }
    }
}

struct Chain {
    declared: Vec<(String, Option<Expr>)>,
    required: BTreeSet<String>,
    /// (name index, required name indices, "name must be absent")
    deps: Vec<(usize, Vec<usize>, bool)>,
    /// Groups of name indices of which one at least must be absent (negated `required`).
    absent: Vec<Vec<usize>>,
    relevant: Vec<usize>,
    cap: u64,
    min_props: u64,
    max_props: Option<u64>,
    extras: Option<Expr>,
    depth: usize,
    base: String,
    /// Of the object's first subschema, for errors.
    pointer: String,
}

fn node_push_unsupported(ctx: &mut Ctx, kw: &str, ptr: &str) -> Result<(), SchemaError> {
    ctx.unenforced(kw, ptr, "counted contains is not enforced")
}

struct Sig {
    types: u8,
    values: Option<Vec<Value>>,
    props: HashMap<String, Vec<Value>>,
}

impl Sig {
    fn meet(&mut self, o: Sig) {
        self.types &= o.types;
        if o.values.is_some() {
            self.values = o.values;
        }
        self.props.extend(o.props);
    }
    fn effective_types(&self) -> u8 {
        match &self.values {
            Some(v) => {
                v.iter().fold(0, |t, x| t | value_type(x) | if value_type(x) == T_INT { T_INT } else { 0 })
                    & (self.types | if self.types & T_FRAC != 0 { T_INT } else { 0 })
            }
            None => self.types,
        }
    }
    fn disjoint(&self, o: &Sig) -> bool {
        if self.effective_types() & o.effective_types() == 0 {
            return true;
        }
        if let (Some(a), Some(b)) = (&self.values, &o.values) {
            if !a.iter().any(|x| b.iter().any(|y| json_eq(x, y))) {
                return true;
            }
        }
        // Both objects with a required property of disjoint constant values. The types of
        // both must be object-only for this to decide.
        if self.types == T_OBJ && o.types == T_OBJ {
            for (k, a) in &self.props {
                if let Some(b) = o.props.get(k) {
                    if !a.iter().any(|x| b.iter().any(|y| json_eq(x, y))) {
                        return true;
                    }
                }
            }
        }
        false
    }
}

/// With [`PropertyOrder::Any`], the most extra members an object's grammar counts.
const ANY_ORDER_MAX_COUNTED: u64 = 16;

/// How far [`PropertyOrder::Any`] counts extra members: up to `maxProperties` (none may
/// follow), else up to `minProperties` (more are free), and at least 1 ("any written yet").
fn any_order_extra_cap(min_props: u64, max_props: Option<u64>) -> u64 {
    max_props.unwrap_or(min_props).max(1)
}

/// The names of a schema that only says `required` (annotations aside): its negation is
/// "an object missing one of them".
/// Whether a pattern means something else inside an alternation of patterns: group
/// names must be unique and backreferences count groups from the left.
fn joins_unsafely(pattern: &str) -> bool {
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        let mut ahead = chars.clone();
        let unsafe_here = match c {
            '\\' => matches!(chars.next(), Some('1'..='9' | 'k')),
            // A named group `(?<name>`, not a lookbehind `(?<=`, `(?<!`.
            '(' => ahead.next() == Some('?') && ahead.next() == Some('<') && !matches!(ahead.next(), Some('=' | '!')),
            _ => false,
        };
        if unsafe_here {
            return true;
        }
    }
    false
}

fn required_only(v: &Value) -> Option<Vec<String>> {
    let Value::Object(m) = v else { return None };
    let ok = m.keys().all(|k| {
        matches!(
            k.as_str(),
            "required"
                | "title"
                | "description"
                | "$comment"
                | "default"
                | "examples"
                | "deprecated"
                | "readOnly"
                | "writeOnly"
        )
    });
    if !ok {
        return None;
    }
    let names = m.get("required")?.as_array()?;
    let mut out: Vec<String> = Vec::new();
    for n in names {
        let n = n.as_str()?;
        if !out.iter().any(|x| x == n) {
            out.push(n.to_string());
        }
    }
    Some(out)
}

fn types_of(t: &Value) -> u8 {
    match t {
        Value::String(s) => type_bits(s).unwrap_or(0),
        Value::Array(a) => a.iter().filter_map(|x| x.as_str().and_then(type_bits)).fold(0, |x, y| x | y),
        _ => T_ALL,
    }
}

fn lcm(a: u128, b: u128) -> u128 {
    if a == 0 || b == 0 {
        return 0;
    }
    fn gcd(a: u128, b: u128) -> u128 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let g = gcd(a, b);
    (a / g).checked_mul(b).unwrap_or(0)
}

/// A regex syntax tree built here, as IR when small (no printing and parsing on its way
/// to the engine). A big one stays a regex terminal: the IR is cloned, hashed and walked
/// wherever the expression goes, a pattern's text is one string (and the terminal carries
/// its tree, so the engine does not parse it). One with an assertion too, for the engine
/// to refuse.
pub(crate) fn hir_expr(h: Hir) -> Expr {
    /// Syntax tree nodes up to which a regex becomes IR.
    const MAX_NODES: usize = 48;
    fn nodes(h: &Hir, budget: &mut usize) {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        match h.kind() {
            HirKind::Capture(c) => nodes(&c.sub, budget),
            HirKind::Repetition(r) => nodes(&r.sub, budget),
            HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().for_each(|x| nodes(x, budget)),
            _ => {}
        }
    }
    let mut budget = MAX_NODES + 1;
    nodes(&h, &mut budget);
    // Bigger ones stay one regex terminal, which carries its tree to the engine.
    match (budget > 0).then(|| Expr::from_hir(&h)).flatten() {
        Some(e) => e,
        None => Expr::Regex(stencil_grammar::Regex::from_hir(h)),
    }
}

fn regex_expr(r: String) -> Option<Expr> {
    if r == "[a&&b]" {
        None
    } else {
        Some(Expr::Regex(r.into()))
    }
}

fn draft_uri(d: Draft) -> &'static str {
    match d {
        Draft::Draft4 => "http://json-schema.org/draft-04/schema#",
        Draft::Draft6 => "http://json-schema.org/draft-06/schema#",
        Draft::Draft7 => "http://json-schema.org/draft-07/schema#",
        Draft::Draft201909 => "https://json-schema.org/draft/2019-09/schema",
        Draft::Draft202012 => "https://json-schema.org/draft/2020-12/schema",
    }
}

/// Does the full-match character language `h` contain `s`?
/// A whole-string matcher for `h` (cheap to build: no full DFA); `None` when it cannot be
/// built, which callers read as "may match".
fn hir_matcher(h: &Hir) -> Option<regex_automata::meta::Regex> {
    let anchored = Hir::concat(vec![
        Hir::look(regex_syntax::hir::Look::Start),
        h.clone(),
        Hir::look(regex_syntax::hir::Look::End),
    ]);
    let config = regex_automata::meta::Regex::config().dfa(false);
    regex_automata::meta::Regex::builder().configure(config).build_from_hir(&anchored).ok()
}

fn length_hir_chars(min: u32, max: Option<u32>) -> Hir {
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
fn with_length(h: &Hir, min: u64, max: Option<u64>) -> Option<Hir> {
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
