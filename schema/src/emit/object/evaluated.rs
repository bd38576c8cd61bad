//! What an `unevaluatedProperties` sees. The DNF merges every member of a branch into one
//! conjunction, but a member's `unevaluatedProperties` applies only to the keys that
//! neither it nor the subschemas it applies in place (`$ref`, `allOf`, `anyOf`, `oneOf`,
//! `if`/`then`/`else`, recursively) evaluate: a sibling `allOf` branch's properties do not
//! count, those of its own `allOf` do.
//!
//! ```json
//! {"allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": false}
//! ```
//! admits `{"a": 1}`: `a` is evaluated by the member's own `allOf`.

use rustc_hash::FxHashSet as HashSet;
use serde_json::Value;

use super::MemberObj;
use crate::compile::Ctx;
use crate::dnf::APPLICATORS;
use crate::locate::{ref_overrides_siblings, Sid};
use crate::{Draft, SchemaError};

/// The keywords by which a subschema evaluates object keys.
const EVALUATING: [&str; 4] = ["properties", "patternProperties", "additionalProperties", "unevaluatedProperties"];

impl<'o> Ctx<'o> {
    /// Sets each member's [`MemberObj::sees`]: the other members of the branch that its
    /// `unevaluatedProperties` applies in place. One that evaluates every key
    /// (`additionalProperties`, or a nested `unevaluatedProperties`) leaves nothing to it,
    /// so it is dropped. Keys evaluated at once by several valid `anyOf` branches are seen
    /// only through the branch the DNF chose: said as a narrowing.
    pub(super) fn resolve_unevaluated(&mut self, members: &mut [MemberObj]) -> Result<(), SchemaError> {
        for i in 0..members.len() {
            let Some(u) = members[i].unevaluated else { continue };
            let (applied, several) = self.applied_in_place(members[i].sid)?;
            let sees: Vec<usize> =
                (0..members.len()).filter(|&j| j != i && applied.contains(&members[j].sid)).collect();
            if sees.iter().any(|&j| members[j].additional.is_some() || members[j].unevaluated.is_some()) {
                members[i].unevaluated = None;
                continue;
            }
            if several && *self.loc.schema(u) != Value::Bool(true) {
                let p = self.loc.ptr(u);
                self.diag.narrowed(
                    "unevaluatedProperties",
                    &p,
                    "keys evaluated only by another anyOf branch that also holds are refused",
                )?;
            }
            members[i].sees = sees;
        }
        Ok(())
    }

    /// The subschemas `sid` applies in place, itself included, and whether one of them is
    /// an `anyOf` with several branches that evaluate object keys.
    fn applied_in_place(&mut self, sid: Sid) -> Result<(HashSet<Sid>, bool), SchemaError> {
        let mut seen: HashSet<Sid> = HashSet::default();
        let mut several = false;
        let mut stack = vec![sid];
        while let Some(s) = stack.pop() {
            if !seen.insert(s) {
                continue;
            }
            let Value::Object(m) = self.loc.schema(s) else { continue };
            let draft = self.loc.draft(s);
            for k in ["$ref", "$dynamicRef", "$recursiveRef"] {
                if let Some(Value::String(r)) = m.get(k) {
                    stack.push(self.loc.ref_target(s, k, r, &self.opts.registry)?);
                }
            }
            if ref_overrides_siblings(draft, m) {
                continue;
            }
            for k in ["allOf", "anyOf", "oneOf"] {
                let Some(Value::Array(arr)) = m.get(k) else { continue };
                let children: Vec<Sid> = (0..arr.len()).map(|i| self.loc.child(s, &[k, &i.to_string()])).collect();
                if k == "anyOf" && children.iter().filter(|&&c| self.evaluates_keys(c)).count() > 1 {
                    several = true;
                }
                stack.extend(children);
            }
            if draft >= Draft::Draft7 {
                for k in ["if", "then", "else"] {
                    if m.contains_key(k) {
                        stack.push(self.loc.child(s, &[k]));
                    }
                }
            }
        }
        Ok((seen, several))
    }

    /// Whether the schema at `sid` evaluates object keys itself or may through an
    /// applicator (a reference or a combination: not looked into).
    fn evaluates_keys(&self, sid: Sid) -> bool {
        let Value::Object(m) = self.loc.schema(sid) else { return false };
        EVALUATING.iter().chain(&APPLICATORS).any(|k| m.contains_key(*k))
    }
}

/// Whether `m`, a member that an `unevaluatedProperties` sees (so without
/// `additionalProperties`), evaluates the declared name `name`: by `properties`, or by a
/// `patternProperties` pattern (`pattern_matches`).
pub(super) fn evaluates_name(
    m: &MemberObj,
    name: &str,
    mut pattern_matches: impl FnMut(&str) -> Result<bool, SchemaError>,
) -> Result<bool, SchemaError> {
    if m.props.contains(name) {
        return Ok(true);
    }
    for (p, _) in &m.patterns {
        if pattern_matches(p)? {
            return Ok(true);
        }
    }
    Ok(false)
}
