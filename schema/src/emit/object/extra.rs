//! Extra properties of an object: the key language (from `patternProperties`,
//! `propertyNames`, or any string) less the declared names, and the value schema each key
//! gets (`additionalProperties`, `unevaluatedProperties`, the pattern's schema). Keys of
//! several patterns, of patterns in several subschemas, matching no pattern, or under
//! patterns and `propertyNames` together are built exactly from the patterns' product
//! automaton ([`crate::keyset`]: one key language per conjunction of value schemas); the
//! direct forms are for one language, and the fallback past the product's limits.
//!
//! Invariant: an extra key never equals a declared name (the chain writes those), and a
//! key language that cannot be built exactly is left out with a warning, never widened.

use regex_syntax::hir::Hir;
use serde_json::Value;
use stencil_grammar::Expr;

use super::MemberObj;
use crate::compile::Ctx;
use crate::dnf::Conj;
use crate::emit::string::{length_hir_chars, with_length};
use crate::emit::{alt, hir_expr, lit, seq};
use crate::escape::escape_hir;
use crate::locate::Sid;
use crate::memo::hir_matcher;
use crate::node::IGNORED;
use crate::{Draft, SchemaError};

impl<'o> Ctx<'o> {
    /// Whether `name` satisfies the `propertyNames` schema at `pn` (`true` when it cannot
    /// be checked).
    pub(super) fn name_ok(&mut self, pn: Sid, name: &str) -> Result<bool, SchemaError> {
        match *self.loc.schema(pn) {
            Value::Bool(b) => Ok(b),
            _ => {
                let v = Value::String(name.to_string());
                Ok(self.valid(pn, &v).unwrap_or(true))
            }
        }
    }

    /// The grammar of one extra `key: value` member, if extras are allowed.
    pub(super) fn extra_properties(
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
        for m @ MemberObj { patterns, additional, unevaluated, property_names, .. } in members {
            // An unevaluatedProperties leaves the keys of the patterns it sees alone.
            let add = additional.or(unevaluated.filter(|_| !sees_patterns(m, members)));
            if patterns.is_empty() && add.is_some_and(|a| *self.loc.schema(a) == Value::Bool(false)) {
                return Ok(None);
            }
            if property_names.is_some_and(|pn| *self.loc.schema(pn) == Value::Bool(false)) {
                return Ok(None);
            }
        }
        // Where the forms below would narrow or widen (keys of several patterns or under
        // several subschemas, keys matching no pattern, patterns and propertyNames
        // together), the exact form, when its languages can be built.
        if self.exact_needed(members)? {
            if let Some(extras) = self.exact_extras(members, declared, cd)? {
                return Ok(extras);
            }
        }
        if let Some(m) = members.iter().find(|m| m.unevaluated.is_some() && sees_patterns(m, members)) {
            let p = self.loc.ptr(m.sid);
            self.diag.narrowed(
                "unevaluatedProperties",
                &p,
                "applied also to the keys of the patternProperties it sees (their key languages are past the limits)",
            )?;
        }
        for member in members {
            let MemberObj { sid, patterns, additional, unevaluated, property_names, .. } = member;
            let add = additional.or(*unevaluated);
            if !patterns.is_empty() {
                if pattern_member.is_some() {
                    // Two members with patternProperties: keep extras out (narrower, said).
                    let p = self.loc.ptr(*sid);
                    self.diag.narrowed(
                        "patternProperties",
                        &p,
                        "extra properties under patternProperties of several subschemas are not generated",
                    )?;
                    return Ok(None);
                }
                let add_false = add.is_some_and(|a| *self.loc.schema(a) == Value::Bool(false));
                pattern_member = Some((member, add_false));
            } else if let Some(a) = add {
                if *self.loc.schema(a) == Value::Bool(false) {
                    return Ok(None);
                }
                value_conj.insert((a, false));
            }
            if let Some(pn) = property_names {
                match self.simple_string_lang(*pn)? {
                    Some(h) => {
                        if key_lang.is_some() {
                            let p = self.loc.ptr(*pn);
                            self.diag.narrowed(
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
                        let p = self.loc.ptr(*pn);
                        self.diag.narrowed(
                            "propertyNames",
                            &p,
                            "extra properties under this propertyNames are not generated",
                        )?;
                        return Ok(None);
                    }
                }
            }
        }
        let sep = self.style.key_sep();
        if let Some((MemberObj { sid, patterns, .. }, add_false)) = pattern_member {
            let sid = *sid;
            // Keys from each pattern (minus the declared names), value = its schema and the
            // others' additionalProperties. Keys matching no pattern are left out: said
            // unless additionalProperties is false or a pattern matches every name.
            if key_lang.is_some() {
                let p = self.loc.ptr(sid);
                self.diag.narrowed(
                    "patternProperties",
                    &p,
                    "extra properties under both patternProperties and propertyNames are not generated",
                )?;
                return Ok(None);
            }
            if !add_false {
                let mut universal = false;
                for (p, _) in patterns {
                    let hir = self.pattern_hir(p, |c| c.loc.ptr(sid))?;
                    universal |= crate::hirset::surely_universal(&hir);
                }
                if !universal {
                    let p = self.loc.ptr(sid);
                    self.diag.narrowed(
                        "additionalProperties",
                        &p,
                        "extra properties matching no patternProperties pattern are not generated",
                    )?;
                }
            }
            if patterns.len() > 1 {
                let p = self.loc.ptr(sid);
                self.diag.unenforced(
                    "patternProperties",
                    &p,
                    "a key matching several patterns is checked against one",
                )?;
            }
            let mut alts = Vec::new();
            for (p, psid) in patterns {
                let hir = self.pattern_hir(p, |c| c.loc.ptr(sid))?;
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
            return Ok(alt(alts).map(|kv| Expr::Rule(self.out.add_rule("extra-property", kv))));
        }
        let Some(v) = self.value_rule(&value_conj, cd, None)? else { return Ok(None) };
        let key = match key_lang {
            Some(k) => k,
            None => self.out.string_not_in(declared),
        };
        let kv = seq(vec![key, sep, v]);
        Ok(Some(Expr::Rule(self.out.add_rule("extra-property", kv))))
    }

    /// Whether [`Self::extra_properties`]'s direct forms would not be exact: they are for
    /// one `propertyNames` language, or one `patternProperties` pattern with
    /// `additionalProperties: false` (or a pattern matching every key).
    fn exact_needed(&mut self, members: &[MemberObj]) -> Result<bool, SchemaError> {
        if members.iter().any(|m| m.unevaluated.is_some() && sees_patterns(m, members)) {
            return Ok(true);
        }
        let with_patterns: Vec<&MemberObj> = members.iter().filter(|m| !m.patterns.is_empty()).collect();
        let names = members.iter().filter(|m| m.property_names.is_some()).count();
        Ok(match with_patterns.as_slice() {
            [] => names > 1,
            [m] => {
                if names > 0 || m.patterns.len() > 1 {
                    return Ok(true);
                }
                let add_false =
                    m.additional.or(m.unevaluated).is_some_and(|a| *self.loc.schema(a) == Value::Bool(false));
                let hir = self.pattern_hir(&m.patterns[0].0, |c| c.loc.ptr(m.sid))?;
                !add_false && !crate::hirset::surely_universal(&hir)
            }
            _ => true,
        })
    }

    /// Extra members by key language, exactly: the product automaton of every member's
    /// `patternProperties` patterns and `propertyNames` languages ([`crate::keyset`]); each
    /// key gets the conjunction of what applies to it in each member (the schemas of the
    /// patterns it matches, else `additionalProperties`), keys outside a `propertyNames`
    /// language none, and the keys sharing a conjunction are one language (complements,
    /// intersections and differences of the patterns), less the declared names, written
    /// as its DFA ([`Self::dfa_key`]). `None` when a language is past the key languages'
    /// limits or not of simple form (the caller's narrower forms then, with their
    /// warnings).
    fn exact_extras(
        &mut self,
        members: &[MemberObj],
        declared: &[String],
        cd: usize,
    ) -> Result<Option<Option<Expr>>, SchemaError> {
        // The languages, each with its member and, for a pattern, its schema.
        let mut langs: Vec<std::rc::Rc<Hir>> = Vec::new();
        let mut owners: Vec<(usize, Option<Sid>)> = Vec::new();
        let mut sources: Vec<String> = Vec::new();
        for (mi, m) in members.iter().enumerate() {
            for (p, psid) in &m.patterns {
                langs.push(self.pattern_hir(p, |c| c.loc.ptr(m.sid))?);
                owners.push((mi, Some(*psid)));
                sources.push(format!("pattern {p}"));
            }
            if let Some(pn) = m.property_names {
                let Some(h) = self.simple_string_lang(pn)? else { return Ok(None) };
                sources.push(format!("names {h:?}"));
                langs.push(std::rc::Rc::new(h));
                owners.push((mi, None));
            }
        }
        let product = match self.memo.key_products.get(&sources) {
            Some(p) => p.clone(),
            None => {
                let refs: Vec<&Hir> = langs.iter().map(|h| &**h).collect();
                let p = crate::keyset::Product::new(&refs, crate::keyset::KeyLimits::default()).map(std::rc::Rc::new);
                self.memo.key_products.insert(sources.clone(), p.clone());
                p
            }
        };
        let Some(product) = product else { return Ok(None) };
        // The states by the conjunction their keys' values must satisfy.
        let mut groups: Vec<(Conj, Vec<bool>)> = Vec::new();
        let mut group_of: rustc_hash::FxHashMap<Conj, usize> = Default::default();
        for s in 0..product.len() {
            let v = product.member(s);
            if owners.iter().zip(v).any(|((_, psid), &inside)| psid.is_none() && !inside) {
                continue;
            }
            let mut c = Conj::new();
            for (mi, m) in members.iter().enumerate() {
                let mut matched = false;
                for ((o, psid), &inside) in owners.iter().zip(v) {
                    if let (true, true, Some(psid)) = (*o == mi, inside, psid) {
                        c.insert((*psid, false));
                        matched = true;
                    }
                }
                // unevaluatedProperties: unless a pattern it sees matched.
                let seen =
                    || owners.iter().zip(v).any(|((o, psid), &inside)| inside && psid.is_some() && m.sees.contains(o));
                if !matched {
                    if let Some(a) = m.additional.or(m.unevaluated.filter(|_| !seen())) {
                        c.insert((a, false));
                    }
                }
            }
            let g = *group_of.entry(c.clone()).or_insert_with(|| {
                groups.push((c, vec![false; product.len()]));
                groups.len() - 1
            });
            groups[g].1[s] = true;
        }
        // Each group's keys first (all or nothing), then their values.
        // The languages not built before (`None`: in the memo), all of them before any rule
        // is written.
        let mut languages = Vec::with_capacity(groups.len());
        for (c, accept) in groups {
            let hit: Vec<String> = declared.iter().filter(|d| product.ends_in(&accept, d)).cloned().collect();
            let states: String = accept.iter().map(|&a| if a { '1' } else { '0' }).collect();
            let memo = (format!("product {sources:?} {states}"), hit);
            let todo = if self.memo.pattern_keys.contains_key(&memo) {
                None
            } else {
                let Some(w) = product.without_words(&accept, &memo.1, crate::keyset::MAX_COMBINED_STATES) else {
                    return Ok(None);
                };
                Some(w)
            };
            languages.push((c, memo, todo));
        }
        let mut keyed: Vec<(Conj, Expr)> = Vec::new();
        for (c, memo, todo) in languages {
            let key = match todo {
                None => self.memo.pattern_keys[&memo].clone(),
                Some(w) => {
                    let key = self.dfa_key(&w);
                    self.memo.pattern_keys.insert(memo, key.clone());
                    key
                }
            };
            keyed.extend(key.map(|key| (c, key)));
        }
        let sep = self.style.key_sep();
        let mut alts = Vec::new();
        for (c, key) in keyed {
            let Some(v) = self.value_rule(&c, cd, None)? else { continue };
            alts.push(seq(vec![key, sep.clone(), v]));
        }
        Ok(Some(alt(alts).map(|kv| Expr::Rule(self.out.add_rule("extra-property", kv)))))
    }

    /// The keys (JSON strings, quotes included) of a key language without the declared
    /// names (extra properties never repeat one); `None` when nothing is left, or (with a
    /// warning) when the difference is too large. Any key at all is "any string but
    /// these", built as such; other languages less the names they hold are the names'
    /// trie on the language's DFA ([`crate::keyset::Product::without_words`]), or past its
    /// limits the language's derivatives along that trie ([`crate::hirset::minus_words`],
    /// which copy the language at every node). `pattern`: the `patternProperties` pattern
    /// `h` comes from, if it does.
    fn key_minus_declared(
        &mut self,
        h: &Hir,
        pattern: Option<&str>,
        declared: &[String],
        sid: Sid,
        keyword: &str,
    ) -> Result<Option<Expr>, SchemaError> {
        if crate::hirset::surely_universal(h) {
            return Ok(Some(self.out.string_not_in(declared)));
        }
        let hit: Vec<String> = match pattern {
            // Objects repeat their patterns: the pattern's matcher is built once.
            Some(p) => {
                let mut hit = Vec::new();
                for d in declared {
                    if self.pattern_matches(p, d, |c| c.loc.ptr(sid))? {
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
        // Objects repeat their patterns (and key languages) and names: the keys are built
        // once.
        let source = pattern.map_or_else(|| format!("language {h}"), |p| format!("pattern {p}"));
        let memo = (source, hit.clone());
        if let Some(keys) = self.memo.pattern_keys.get(&memo) {
            return Ok(keys.clone());
        }
        let escaped = |c: &Self, rest: &Hir| match escape_hir(rest) {
            Ok(e) => Ok(seq(vec![lit("\""), hir_expr(e), lit("\"")])),
            Err(reason) => Err(SchemaError::BadPattern { pointer: c.loc.ptr(sid), pattern: String::new(), reason }),
        };
        let keys = if hit.is_empty() {
            Some(escaped(self, h)?)
        } else if let Some(w) = without_words(h, &hit) {
            self.dfa_key(&w)
        } else {
            match crate::hirset::minus_words(h, &hit, 20_000) {
                Some(m) if m.properties().minimum_len().is_none() => None,
                Some(m) => Some(escaped(self, &m)?),
                None => {
                    let p = self.loc.ptr(sid);
                    self.diag.narrowed(
                        keyword,
                        &p,
                        "extra names that a pattern shares with declared properties are not generated",
                    )?;
                    return Ok(None);
                }
            }
        };
        self.memo.pattern_keys.insert(memo, keys.clone());
        Ok(keys)
    }

    /// The keys (JSON strings, quotes included) of a key language less some words, from
    /// its trie on the language's DFA: one rule per DFA state, tail calls all, so that the
    /// engine builds them into the key's automaton (the key is a rule of its own for
    /// that); `None` when no key is left.
    fn dfa_key(&mut self, w: &crate::keyset::WithoutWords) -> Option<Expr> {
        let ids: Vec<_> = w.states.iter().map(|_| self.out.add_rule("key-state", Expr::Alt(vec![]))).collect();
        let states: Vec<Expr> = ids.iter().map(|&id| Expr::Rule(id)).collect();
        let mut shared: rustc_hash::FxHashMap<(Vec<(char, char)>, usize), Expr> = Default::default();
        let mut other = |class: &regex_syntax::hir::ClassUnicode, k: usize| {
            let ranges = class.ranges().iter().map(|r| (r.start(), r.end())).collect();
            let body = crate::not_in::char_then(class, states[k].clone());
            let out = &mut self.out;
            shared.entry((ranges, k)).or_insert_with(|| Expr::Rule(out.add_rule("key-state-other", body))).clone()
        };
        let bodies: Vec<Expr> = w
            .states
            .iter()
            .map(|st| crate::not_in::ways(st, &states, &mut other).expect("a live state has a way on"))
            .collect();
        let key = crate::not_in::language_not_in(w, &states, &mut other);
        for (id, body) in ids.into_iter().zip(bodies) {
            self.out.g.set_body(id, body);
        }
        key.map(|key| Expr::Rule(self.out.add_kept_rule("key", key)))
    }

    /// The key language of a `propertyNames` schema of simple string form: `true`, or
    /// `type: string` with `pattern`, `minLength`/`maxLength`, `enum`/`const` of strings, or
    /// a `$ref` alone to such a schema. `None` for anything else (the caller says so).
    fn simple_string_lang(&mut self, sid: Sid) -> Result<Option<Hir>, SchemaError> {
        self.simple_string_lang_at(sid, 0)
    }

    fn simple_string_lang_at(&mut self, sid: Sid, hops: usize) -> Result<Option<Hir>, SchemaError> {
        const APPLICATORS: &[&str] = &["$dynamicRef", "$recursiveRef", "allOf", "anyOf", "oneOf", "if", "then", "else"];
        match self.loc.schema(sid) {
            Value::Bool(true) => Ok(Some(length_hir_chars(0, None))),
            Value::Bool(false) => Ok(None),
            Value::Object(m) => {
                if let Some(r) = m.get("$ref") {
                    // Draft 7 and before ignore the siblings of `$ref`; later drafts apply
                    // them too, which only annotations may be here.
                    let alone = self.loc.draft(sid) <= Draft::Draft7
                        || m.keys().all(|k| {
                            k == "$ref" || (IGNORED.contains(&k.as_str()) && !APPLICATORS.contains(&k.as_str()))
                        });
                    let Some(r) = r.as_str().filter(|_| alone && hops < 64) else { return Ok(None) };
                    let t = self.loc.ref_target(sid, "$ref", r, &self.opts.registry)?;
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
                            let h = self.pattern_hir(p, |c| c.loc.ptr(sid))?;
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
}

/// Whether `m`'s `unevaluatedProperties` sees a member with `patternProperties` (whose
/// keys it then does not apply to).
fn sees_patterns(m: &MemberObj, members: &[MemberObj]) -> bool {
    m.sees.iter().any(|&j| !members[j].patterns.is_empty())
}

/// The full-match language `h` less `words`, along the words' trie
/// ([`crate::keyset::Product::without_words`]); `None` past the key languages' limits.
fn without_words(h: &Hir, words: &[String]) -> Option<crate::keyset::WithoutWords> {
    let limits = crate::keyset::KeyLimits::default();
    let product = crate::keyset::Product::new(&[h], limits)?;
    let accept: Vec<bool> = (0..product.len()).map(|s| product.member(s)[0]).collect();
    product.without_words(&accept, words, crate::keyset::MAX_KEY_STATES)
}
