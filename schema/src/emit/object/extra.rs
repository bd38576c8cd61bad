//! Extra properties of an object: the key language (from `patternProperties`,
//! `propertyNames`, or any string) less the declared names, and the value schema each key
//! gets (`additionalProperties`, `unevaluatedProperties`, the pattern's schema).
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
                match self.validator(pn) {
                    Some(val) => Ok(val.is_valid(&v)),
                    None => Ok(true),
                }
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
        for MemberObj { patterns, additional, unevaluated, property_names, .. } in members {
            let add = additional.or(*unevaluated);
            if patterns.is_empty() && add.is_some_and(|a| *self.loc.schema(a) == Value::Bool(false)) {
                return Ok(None);
            }
            if property_names.is_some_and(|pn| *self.loc.schema(pn) == Value::Bool(false)) {
                return Ok(None);
            }
        }
        for member in members {
            let MemberObj { sid, patterns, additional, unevaluated, property_names, .. } = member;
            let add = additional.or(*unevaluated);
            if !patterns.is_empty() {
                if pattern_member.is_some() {
                    // Two members with patternProperties: keep extras out (narrower, said).
                    let p = self.loc.ptr(*sid);
                    self.diag.unenforced(
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
                            self.diag.unenforced(
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
                        self.diag.unenforced(
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
                self.diag.unenforced(
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
                    self.diag.unenforced(
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
        // Objects repeat their patterns and names: the keys are built once.
        let memo = pattern.map(|p| (p.to_string(), hit.clone()));
        if let Some(keys) = memo.as_ref().and_then(|m| self.memo.pattern_keys.get(m)) {
            return Ok(keys.clone());
        }
        let escaped = |c: &Self, rest: &Hir| match escape_hir(rest) {
            Ok(e) => Ok(seq(vec![lit("\""), hir_expr(e), lit("\"")])),
            Err(reason) => Err(SchemaError::BadPattern { pointer: c.loc.ptr(sid), pattern: String::new(), reason }),
        };
        let keys = if hit.is_empty() {
            Some(escaped(self, h)?)
        } else {
            match crate::hirset::minus_words(h, &hit, 20_000) {
                Some(m) if m.properties().minimum_len().is_none() => None,
                Some(m) => Some(escaped(self, &m)?),
                None => {
                    let p = self.loc.ptr(sid);
                    self.diag.unenforced(
                        keyword,
                        &p,
                        "extra names that a pattern shares with declared properties are not generated",
                    )?;
                    return Ok(None);
                }
            }
        };
        if let Some(m) = memo {
            self.memo.pattern_keys.insert(m, keys.clone());
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
