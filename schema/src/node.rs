//! The typed intermediate form of one branch of a value: a [`Node`] holds the types it
//! allows (a [`Types`] set), its `enum`/`const` values and exclusions, and the string and
//! number constraints ([`StrCons`], [`NumCons`]) merged from every member of the branch's
//! conjunction ([`Ctx::branch_node`]); array and object keywords stay in the members, which
//! their emitters read.
//!
//! Invariant: a node is the intersection of its members — merging only narrows (types are
//! intersected, bounds tightened, value lists filtered), and what it cannot express is
//! listed in `unsupported` for the emitter to report.

use serde_json::{Map, Value};

use crate::compile::Ctx;
use crate::dnf::Conj;
use crate::locate::{ref_overrides_siblings, Sid};
use crate::numbers::Decimal;
use crate::{Draft, SchemaError};

/// A JSON type as a schema's `type` names it, with `number` split into integers and the
/// rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JsonType {
    Null,
    Boolean,
    Integer,
    /// A number that is not an integer.
    Fraction,
    String,
    Array,
    Object,
}

/// A set of [`JsonType`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Types(u8);

impl Types {
    pub(crate) const NONE: Types = Types(0);
    pub(crate) const NULL: Types = Types::of(JsonType::Null);
    pub(crate) const BOOLEAN: Types = Types::of(JsonType::Boolean);
    pub(crate) const INTEGER: Types = Types::of(JsonType::Integer);
    pub(crate) const FRACTION: Types = Types::of(JsonType::Fraction);
    pub(crate) const STRING: Types = Types::of(JsonType::String);
    pub(crate) const ARRAY: Types = Types::of(JsonType::Array);
    pub(crate) const OBJECT: Types = Types::of(JsonType::Object);
    pub(crate) const ALL: Types = Types(127);

    /// Whether the two sets share a type.
    pub(crate) fn intersects(self, o: Types) -> bool {
        self.0 & o.0 != 0
    }

    /// The set of `t` alone.
    pub(crate) const fn of(t: JsonType) -> Types {
        Types(1 << t as u8)
    }
}

impl std::ops::BitAnd for Types {
    type Output = Types;
    fn bitand(self, o: Types) -> Types {
        Types(self.0 & o.0)
    }
}

impl std::ops::BitOr for Types {
    type Output = Types;
    fn bitor(self, o: Types) -> Types {
        Types(self.0 | o.0)
    }
}

/// The complement within [`Types::ALL`].
impl std::ops::Not for Types {
    type Output = Types;
    fn not(self) -> Types {
        Types(!self.0 & Types::ALL.0)
    }
}

impl std::ops::BitAndAssign for Types {
    fn bitand_assign(&mut self, o: Types) {
        self.0 &= o.0;
    }
}

impl std::ops::BitOrAssign for Types {
    fn bitor_assign(&mut self, o: Types) {
        self.0 |= o.0;
    }
}

/// The types a `type` keyword's value names; `None` when it is malformed (left to
/// [`Ctx::branch_node`] to report).
pub(crate) fn valid_types(t: &Value) -> Option<Types> {
    match t {
        Value::String(s) => type_bits(s),
        Value::Array(a) => a.iter().try_fold(Types::NONE, |acc, x| Some(acc | type_bits(x.as_str()?)?)),
        _ => None,
    }
}

fn type_bits(name: &str) -> Option<Types> {
    Some(match name {
        "null" => Types::NULL,
        "boolean" => Types::BOOLEAN,
        "integer" => Types::INTEGER,
        "number" => Types::INTEGER | Types::FRACTION,
        "string" => Types::STRING,
        "array" => Types::ARRAY,
        "object" => Types::OBJECT,
        _ => return None,
    })
}

pub(crate) fn value_type(v: &Value) -> Types {
    match v {
        Value::Null => Types::NULL,
        Value::Bool(_) => Types::BOOLEAN,
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                Types::INTEGER
            } else {
                Types::FRACTION
            }
        }
        Value::String(_) => Types::STRING,
        Value::Array(_) => Types::ARRAY,
        Value::Object(_) => Types::OBJECT,
    }
}

/// JSON Schema equality (1 == 1.0).
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
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

/// A hash that values equal by [`json_eq`] share: numbers hash by their `f64` value
/// (equal numbers convert to the same one), object members in any order.
pub(crate) fn json_hash(v: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    match v {
        Value::Null => 0u8.hash(&mut h),
        Value::Bool(b) => (1u8, b).hash(&mut h),
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            (2u8, if f == 0.0 { 0 } else { f.to_bits() }).hash(&mut h)
        }
        Value::String(s) => (3u8, s).hash(&mut h),
        Value::Array(a) => {
            4u8.hash(&mut h);
            for x in a {
                json_hash(x).hash(&mut h);
            }
        }
        Value::Object(o) => {
            let members = o.iter().fold(0u64, |acc, (k, x)| {
                let mut m = rustc_hash::FxHasher::default();
                (k, json_hash(x)).hash(&mut m);
                acc.wrapping_add(m.finish())
            });
            (5u8, members).hash(&mut h)
        }
    }
    h.finish()
}

/// Keywords that constrain nothing (annotations, structure handled elsewhere).
pub(crate) const IGNORED: &[&str] = &[
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

/// Whether `keyword` can make a value invalid, in every draft: any other keyword is an
/// annotation (`title`, a vocabulary's own `ignoreCase`, `x-…`), which validators ignore.
/// A `match` rather than a list scan: it runs for every key of every enum's subschema.
pub(crate) fn asserting(keyword: &str) -> bool {
    matches!(
        keyword,
        "type"
            | "enum"
            | "const"
            | "multipleOf"
            | "maximum"
            | "exclusiveMaximum"
            | "minimum"
            | "exclusiveMinimum"
            | "maxLength"
            | "minLength"
            | "pattern"
            | "format"
            | "maxItems"
            | "minItems"
            | "uniqueItems"
            | "maxContains"
            | "minContains"
            | "contains"
            | "items"
            | "prefixItems"
            | "additionalItems"
            | "unevaluatedItems"
            | "maxProperties"
            | "minProperties"
            | "required"
            | "dependentRequired"
            | "dependentSchemas"
            | "dependencies"
            | "properties"
            | "patternProperties"
            | "additionalProperties"
            | "unevaluatedProperties"
            | "propertyNames"
            | "allOf"
            | "anyOf"
            | "oneOf"
            | "not"
            | "if"
            | "then"
            | "else"
            | "$ref"
            | "$dynamicRef"
            | "$recursiveRef"
    )
}

/// What a branch says about strings: length bounds in code points, patterns and formats
/// (each with the pointer of its schema), all of which must hold.
#[derive(Default, Clone)]
pub(crate) struct StrCons {
    pub(crate) min_len: u64,
    pub(crate) max_len: Option<u64>,
    /// (pattern, pointer of its schema)
    pub(crate) patterns: Vec<(String, String)>,
    pub(crate) formats: Vec<(String, String)>,
}

/// What a branch says about numbers: the tightest bounds (value, exclusive) and every
/// `multipleOf` (with its pointer).
#[derive(Clone, Default)]
pub(crate) struct NumCons {
    pub(crate) min: Option<(Decimal, bool)>,
    pub(crate) max: Option<(Decimal, bool)>,
    pub(crate) multiple_of: Vec<(Decimal, String)>,
}

/// One branch of a value, its members' keywords merged (see the module doc).
#[derive(Default)]
pub(crate) struct Node {
    pub(crate) types: Types,
    pub(crate) values: Option<Vec<Value>>,
    pub(crate) not_types: Types,
    pub(crate) not_values: Vec<Value>,
    pub(crate) str: StrCons,
    pub(crate) num: NumCons,
    /// The branch's object members, for the keywords read by the array and object emitters.
    pub(crate) members: Vec<Sid>,
    /// (keyword, pointer) pairs left unenforced, decided by the branch emitter.
    pub(crate) unsupported: Vec<(String, String, String)>,
    /// Negated `{required: names}` (from `not` or an exclusive `oneOf`): an object in which
    /// at least one of the names is absent. (names, keyword, pointer)
    pub(crate) not_required: Vec<(Vec<String>, String, String)>,
}

pub(crate) fn dec_of(v: &Value) -> Option<Decimal> {
    v.as_number().and_then(Decimal::from_number)
}

/// The names of a schema that only says `required` (annotations aside): its negation is
/// "an object missing one of them".
pub(crate) fn required_only(v: &Value) -> Option<Vec<String>> {
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

pub(crate) fn types_of(t: &Value) -> Types {
    match t {
        Value::String(s) => type_bits(s).unwrap_or(Types::NONE),
        Value::Array(a) => a.iter().filter_map(|x| x.as_str().and_then(type_bits)).fold(Types::NONE, |x, y| x | y),
        _ => Types::ALL,
    }
}

impl<'o> Ctx<'o> {
    /// The keywords of a branch's members merged into one node; `None` when a negated
    /// member leaves no value.
    pub(crate) fn branch_node(&mut self, b: &Conj) -> Result<Option<Node>, SchemaError> {
        let mut node = Node {
            types: Types::ALL,
            num: NumCons { min: None, max: None, multiple_of: vec![] },
            ..Default::default()
        };
        for &(sid, negated) in b {
            let v = self.loc.schema(sid);
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
                        node.types &= Types::OBJECT;
                        let p = self.loc.ptr(sid);
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
                                node.not_values.extend(vals.into_iter().filter(|x| {
                                    value_type(x).intersects(t)
                                        || (t.intersects(Types::INTEGER) && value_type(x) == Types::INTEGER)
                                }));
                            }
                        }
                    }
                    _ => {}
                }
                continue;
            }
            let Value::Object(m) = v else { continue };
            node.members.push(sid);
            let draft = self.loc.draft(sid);
            if ref_overrides_siblings(draft, m) {
                continue;
            }
            self.collect(&mut node, sid, m, draft)?;
        }
        Ok(Some(node))
    }

    /// Merges the keywords of member `sid` (its map `m`, in `draft`) into `node`.
    fn collect(&mut self, node: &mut Node, sid: Sid, m: &Map<String, Value>, draft: Draft) -> Result<(), SchemaError> {
        let ptr = self.loc.ptr(sid);
        for (k, v) in m {
            let k = k.as_str();
            match k {
                "type" => {
                    let t = match v {
                        Value::String(s) => type_bits(s).ok_or_else(|| self.invalid(sid, k, "unknown type"))?,
                        Value::Array(a) => {
                            let mut t = Types::NONE;
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
                    let nsid = self.loc.child(sid, &["not"]);
                    let nv = self.loc.schema(nsid);
                    if self.is_simple_negatable(nv) {
                        // Handled as a negated member: put the type/values into this node.
                        match nv {
                            Value::Bool(true) => node.types = Types::NONE,
                            Value::Bool(false) => {}
                            Value::Object(nm) => {
                                let t = nm.get("type").map(types_of);
                                let vals = nm
                                    .get("const")
                                    .map(|c| vec![c.clone()])
                                    .or_else(|| nm.get("enum").and_then(Value::as_array).cloned());
                                match (t, vals) {
                                    (None, None) => node.types = Types::NONE,
                                    (Some(t), None) => node.not_types |= t,
                                    (None, Some(vals)) => node.not_values.extend(vals),
                                    (Some(t), Some(vals)) => {
                                        node.not_values.extend(vals.into_iter().filter(|x| value_type(x).intersects(t)))
                                    }
                                }
                            }
                            _ => {}
                        }
                    } else if let Some(names) = required_only(nv) {
                        // not {required: names}: an object missing one of them (the object
                        // emitter tracks the names).
                        if names.is_empty() {
                            node.types = Types::NONE;
                        } else {
                            node.types &= Types::OBJECT;
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

    /// Tightens the node's lower (`lower`) or upper bound to `d`.
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
}
