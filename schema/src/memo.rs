//! Answers computed once per compile: each conjunction's value rule, translated patterns
//! and their matchers, string contents, the keys of `patternProperties` patterns, and the
//! `jsonschema` validators that check `enum` values against the other keywords.
//!
//! So patterns are translated once per compile (and their keys less the declared names
//! built once per set of names), and a string of one pattern or format with its length
//! bounds is escaped once (schemas repeat `format: date-time`). The `enum` validators are
//! built over the documents prepared once per compile; members that are only a `$ref`,
//! an `allOf` or an `anyOf` are not checked (their subschemas are members too).
//!
//! Invariant: a memo entry depends only on its key and the compile's options, so reading
//! it instead of recomputing never changes the grammar.

use std::rc::Rc;

use regex_syntax::hir::Hir;
use rustc_hash::FxHashMap as HashMap;
use stencil_grammar::{Expr, RuleId};

use crate::compile::Ctx;
use crate::dnf::{Conj, Member};
use crate::ecma::full_match_hir;
use crate::locate::Sid;
use crate::{Draft, SchemaError};

/// The memo tables of one compile.
#[derive(Default)]
pub(crate) struct Memo {
    /// Each conjunction's value rule (`None`: no value), per nesting depth (indented
    /// output writes a value differently at each depth; compact output has only depth 0).
    pub(crate) value_rules: Vec<HashMap<Conj, Option<RuleId>>>,
    /// The same rules per nesting depth by the conjunction's branches ([`Ctx::dnf`]), which
    /// conjunctions differing only in implied members share.
    pub(crate) branch_rules: Vec<HashMap<Vec<Member>, Option<RuleId>>>,
    /// What each member says about types, for [`Ctx::drop_implied`].
    pub(crate) type_facts: HashMap<Member, crate::dnf::TypeFacts>,
    validators: HashMap<Sid, Option<(jsonschema::Validator, usize)>>,
    /// How deep the validators' walks go from each subschema (see [`crate::depth`]).
    depths: crate::depth::Depths,
    /// The documents, prepared once for `validators` (`None` until first needed; `Err` when
    /// the `jsonschema` crate cannot read them).
    validator_docs: Option<Result<crate::validate::PreparedDocs, String>>,
    /// Patterns translated once per compile (one recurs at every object sharing it, and
    /// each declared name is tested against each `patternProperties` pattern), with their
    /// matchers.
    patterns: HashMap<String, Result<Rc<Hir>, String>>,
    /// Keys of a `patternProperties` pattern (or a key language) less the declared names
    /// it matches (see [`Ctx::key_minus_declared`]), by pattern or language and those names.
    pub(crate) pattern_keys: HashMap<(String, Vec<String>), Option<Expr>>,
    matchers: HashMap<String, Option<regex_automata::meta::Regex>>,
    /// Product automata of key languages (see [`Ctx::exact_extras`]), by the languages'
    /// sources (`None`: past a limit).
    pub(crate) key_products: HashMap<Vec<String>, Option<Rc<crate::keyset::Product>>>,
    /// Escaped contents of strings of one pattern or format (is format, source, length
    /// bounds), built once per compile.
    pub(crate) string_contents: HashMap<(bool, String, u64, Option<u64>), Expr>,
}

impl Memo {
    /// Forgets the entries keyed by a document's locations, before the next document's
    /// compile: a [`Sid`] names a location of one compile's documents only. What is left is
    /// keyed by content (patterns, string contents, key languages) or by no location at all
    /// (the value rule of the empty conjunction, any JSON value, where it has one: a value
    /// cut at `max_indent_depth` is cut again, with its note, by the next document).
    pub(crate) fn forget_document(&mut self) {
        self.value_rules.iter_mut().for_each(|t| t.retain(|conj, r| conj.is_empty() && r.is_some()));
        self.branch_rules
            .iter_mut()
            .for_each(|t| t.retain(|key, r| r.is_some() && key.iter().all(|m| m.0 == Sid::MAX)));
        self.type_facts.clear();
        self.validators.clear();
        self.depths = Default::default();
        self.validator_docs = None;
    }
}

/// The table of nesting depth `depth` among per-depth `tables` (made when first needed).
pub(crate) fn at_depth<K, V>(tables: &mut Vec<HashMap<K, V>>, depth: usize) -> &mut HashMap<K, V> {
    if tables.len() <= depth {
        tables.resize_with(depth + 1, HashMap::default);
    }
    &mut tables[depth]
}

/// A conjunction's branches as one key for [`Memo::branch_rules`]: their members in
/// order, each branch closed by a member no schema has.
pub(crate) fn branches_key(branches: &[Conj]) -> Vec<Member> {
    let mut key = Vec::with_capacity(branches.iter().map(|b| b.len() + 1).sum());
    for b in branches {
        key.extend(b.iter().copied());
        key.push((Sid::MAX, true));
    }
    key
}

impl<'o> Ctx<'o> {
    /// The full-match language of the ECMA-262 `pattern`; an error names it at the
    /// pointer `at` gives (asked only then).
    pub(crate) fn pattern_hir(
        &mut self,
        pattern: &str,
        at: impl FnOnce(&Self) -> String,
    ) -> Result<Rc<Hir>, SchemaError> {
        if !self.memo.patterns.contains_key(pattern) {
            self.memo.patterns.insert(pattern.to_string(), full_match_hir(pattern).map(Rc::new).map_err(|e| e.0));
        }
        match &self.memo.patterns[pattern] {
            Ok(h) => Ok(h.clone()),
            Err(reason) => {
                let reason = reason.clone();
                Err(SchemaError::BadPattern { pointer: at(self), pattern: pattern.to_string(), reason })
            }
        }
    }

    /// Whether `pattern` matches `name` (see [`Ctx::pattern_hir`] for `at`).
    pub(crate) fn pattern_matches(
        &mut self,
        pattern: &str,
        name: &str,
        at: impl FnOnce(&Self) -> String,
    ) -> Result<bool, SchemaError> {
        if !self.memo.matchers.contains_key(pattern) {
            let hir = self.pattern_hir(pattern, at)?;
            self.memo.matchers.insert(pattern.to_string(), hir_matcher(&hir));
        }
        Ok(self.memo.matchers[pattern].as_ref().is_none_or(|re| re.is_match(name)))
    }

    /// Whether `v` is valid against the subschema at `sid` by the `jsonschema` crate
    /// (`None` when its validator cannot be built).
    pub(crate) fn valid(&mut self, sid: Sid, v: &serde_json::Value) -> Option<bool> {
        let (validator, stack) = self.validator(sid)?;
        Some(crate::validate::on_stack(*stack, || validator.is_valid(v)))
    }

    /// The `jsonschema` validator of the subschema at `sid` and the stack it needs (`None`
    /// when it cannot be built).
    fn validator(&mut self, sid: Sid) -> Option<&(jsonschema::Validator, usize)> {
        if !self.memo.validators.contains_key(&sid) {
            let loc = self.loc.loc(sid).clone();
            let uri = format!("{}#{}", self.loc.res.doc_uris[loc.0], loc.1);
            let draft = self.loc.draft(sid);
            let wrapper = serde_json::json!({"$schema": draft_uri(draft), "$ref": uri});
            let (res, registry) = (&self.loc.res, &self.opts.registry);
            self.memo.validator_docs.get_or_insert_with(|| {
                let docs = res.doc_uris.iter().cloned().zip(res.docs.iter().map(|&d| std::sync::Arc::new(d.clone())));
                crate::validate::PreparedDocs::new(docs, registry)
            });
            // The crate recurses once per level below the subschema, and may walk each path:
            // none past `max_depth` or `max_branches`² paths.
            let depth = self.memo.depths.walk(&mut self.loc.res, &self.opts.registry, loc, &self.opts.limits);
            let docs = self.memo.validator_docs.as_ref().expect("prepared above");
            let val = match depth {
                Ok(w) => {
                    let stack = crate::depth::stack_for(w.depth + 1);
                    docs.as_ref().ok().and_then(|docs| docs.validator(&wrapper, stack).ok()).map(|v| (v, stack))
                }
                Err(_) => None,
            };
            self.memo.validators.insert(sid, val);
        }
        self.memo.validators.get(&sid).and_then(|v| v.as_ref())
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

/// A whole-string matcher for `h` (cheap to build: no full DFA); `None` when it cannot be
/// built, which callers read as "may match".
pub(crate) fn hir_matcher(h: &Hir) -> Option<regex_automata::meta::Regex> {
    let anchored = Hir::concat(vec![
        Hir::look(regex_syntax::hir::Look::Start),
        h.clone(),
        Hir::look(regex_syntax::hir::Look::End),
    ]);
    let config = regex_automata::meta::Regex::config().dfa(false);
    regex_automata::meta::Regex::builder().configure(config).build_from_hir(&anchored).ok()
}
