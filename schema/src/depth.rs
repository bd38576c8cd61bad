//! How deep the `jsonschema` crate's walk of a schema goes: the longest path of
//! subschemas from a start, each step a subschema of the one before (under an applicator,
//! `properties`, `items`...) or the target of its `$ref`, `$dynamicRef` or
//! `$recursiveRef`. The crate recurses once per step when it builds a validator and
//! again when it validates, so this depth bounds the stack it needs; and an instance that
//! fails every `anyOf` branch makes it walk every path, so their number bounds its time.
//! [`crate::Validator`] refuses a schema deeper than [`crate::SchemaLimits::max_depth`]
//! (the compiler's own bound) or with more than [`max_paths`] paths from a subschema, and
//! runs the crate on a stack sized for the depth ([`stack_for`]).
//!
//! Computed without recursion (an explicit stack), in time linear in the subschemas and
//! references reached. A path that comes back to a subschema already on it stops there:
//! the crate, too, compiles a reference cycle once and follows it only as far as the
//! instance does.

use rustc_hash::FxHashMap as HashMap;
use serde_json::Value;

use crate::resolve::{push_token, Loc, Resources, ARRAYS, SINGLE};
use crate::{Registry, SchemaError};

/// Keywords whose value is a map of subschemas the validator applies (`$defs` and
/// `definitions` are not applied: they are reached through references).
const MAPS: &[&str] = &["properties", "patternProperties", "dependentSchemas", "dependencies"];
/// Reference keywords.
const REFS: &[&str] = &["$ref", "$dynamicRef", "$recursiveRef"];

/// The stack the `jsonschema` crate needs for a schema of depth `depth` (measured: about
/// 200 bytes per step for a `$ref` chain, building and validating; four times that per
/// step and 1 MiB for the rest and the instance's own nesting, which serde_json bounds at
/// 128 levels when it parses text).
pub(crate) fn stack_for(depth: usize) -> usize {
    (1 << 20) + depth * 1024
}

/// One subschema on the walk: its number, the steps out of it, the next step to take,
/// the longest path and the number of paths found below it so far.
struct Frame {
    node: u32,
    loc: Loc,
    next: Vec<Loc>,
    at: usize,
    longest: usize,
    paths: u64,
}

/// What a walk from a subschema found: its depth, and how many paths start there (each
/// `anyOf` branch or property is a path; branches that share subschemas multiply them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Walk {
    pub depth: usize,
    pub paths: u64,
}

/// The walks found so far, kept between walks over the same documents (a compile asks
/// about many subschemas; each is walked once).
#[derive(Default)]
pub(crate) struct Depths {
    ids: HashMap<Loc, u32>,
    /// Per subschema: `None` while it is on the path, then what the walk from it found.
    done: Vec<Option<Walk>>,
}

impl Depths {
    /// The walk from `start` in `res` (the documents; remote ones come from `registry`):
    /// depth 1 and one path for a schema without subschemas. A reference that does not
    /// resolve is no step (the validator reports it).
    ///
    /// # Errors
    /// [`SchemaError::TooLarge`]: `max_depth` at the first subschema deeper than
    /// `limits.max_depth`, `max_branches` at the first from which more than
    /// [`max_paths`] paths start.
    pub(crate) fn walk<'a>(
        &mut self,
        res: &mut Resources<'a>,
        registry: &'a Registry,
        start: Loc,
        limits: &crate::SchemaLimits,
    ) -> Result<Walk, SchemaError> {
        let (limit, max) = (limits.max_depth, max_paths(limits));
        let mut path: Vec<Frame> = Vec::new();
        let mut result = Walk { depth: 0, paths: 0 };
        let mut pending = Some(start);
        loop {
            if let Some(loc) = pending.take() {
                match self.ids.get(&loc).map(|&id| self.done[id as usize]) {
                    // On the path (a cycle): no deeper.
                    Some(None) => {
                        if let Some(f) = path.last_mut() {
                            f.paths = f.paths.saturating_add(1);
                        }
                    }
                    Some(Some(w)) => {
                        if path.len().saturating_add(w.depth) > limit || w.paths > max {
                            return Err(self.too_big(&path, res.display(&loc), limits, w.paths > max));
                        }
                        match path.last_mut() {
                            Some(f) => {
                                f.longest = f.longest.max(w.depth);
                                f.paths = f.paths.saturating_add(w.paths);
                            }
                            None => result = w,
                        }
                    }
                    None => {
                        if path.len() >= limit {
                            return Err(self.too_big(&path, res.display(&loc), limits, false));
                        }
                        let id = self.done.len() as u32;
                        self.ids.insert(loc.clone(), id);
                        self.done.push(None);
                        let next = steps(res, registry, &loc);
                        path.push(Frame { node: id, loc, next, at: 0, longest: 0, paths: 1 });
                    }
                }
            }
            let Some(top) = path.last_mut() else { break };
            if top.at < top.next.len() {
                top.at += 1;
                pending = Some(std::mem::take(&mut top.next[top.at - 1]));
                continue;
            }
            let f = path.pop().expect("a frame");
            let w = Walk { depth: f.longest.saturating_add(1), paths: f.paths };
            // Known from here on (too many paths from it is its own property).
            self.done[f.node as usize] = Some(w);
            if w.paths > max {
                return Err(self.too_big(&path, res.display(&f.loc), limits, true));
            }
            match path.last_mut() {
                Some(parent) => {
                    parent.longest = parent.longest.max(w.depth);
                    parent.paths = parent.paths.saturating_add(w.paths);
                }
                None => result = w,
            }
        }
        Ok(result)
    }

    /// The error at `pointer`; the subschemas on `path`, left unfinished, are forgotten (a
    /// later walk from one of them starts afresh).
    fn too_big(&mut self, path: &[Frame], pointer: String, limits: &crate::SchemaLimits, paths: bool) -> SchemaError {
        for f in path {
            self.ids.remove(&f.loc);
        }
        let (limit, value, reason) = if paths {
            let max = max_paths(limits);
            let reason = format!(
                "more than {max} paths through its subschemas and references, which validating may walk each \
                 (with limit max_branches)"
            );
            (crate::SchemaLimit::Branches, limits.max_branches as u64, reason)
        } else {
            let max = limits.max_depth;
            let reason =
                format!("subschemas and the references between them nest deeper than {max} levels (limit max_depth)");
            (crate::SchemaLimit::Depth, max as u64, reason)
        };
        crate::compile::too_large(limit, value, pointer, reason)
    }
}

/// The most paths from one subschema that a validator may walk: [`crate::SchemaLimits::max_branches`]
/// squared (1,048,576 by default; a 500-tool `anyOf` of object schemas has a few thousand).
pub(crate) fn max_paths(limits: &crate::SchemaLimits) -> u64 {
    (limits.max_branches as u64).saturating_mul(limits.max_branches as u64)
}

/// The steps out of the subschema at `loc`: its applied subschemas and its references'
/// targets.
fn steps<'a>(res: &mut Resources<'a>, registry: &'a Registry, loc: &Loc) -> Vec<Loc> {
    let Some(Value::Object(m)) = res.value(loc) else { return Vec::new() };
    let mut out = Vec::new();
    for (k, sub) in m {
        let k = k.as_str();
        let child = |path: &[&str]| {
            let mut p = loc.1.clone();
            for t in path {
                push_token(&mut p, t);
            }
            (loc.0, p)
        };
        if SINGLE.contains(&k) && sub.is_object() {
            out.push(child(&[k]));
        }
        if let (true, Value::Array(a)) = (ARRAYS.contains(&k), sub) {
            out.extend((0..a.len()).filter(|&i| a[i].is_object()).map(|i| child(&[k, &i.to_string()])));
        }
        if let (true, Value::Object(mm)) = (MAPS.contains(&k), sub) {
            out.extend(mm.iter().filter(|(_, s)| s.is_object()).map(|(name, _)| child(&[k, name])));
        }
    }
    for k in REFS {
        if let Some(r) = m.get(*k).and_then(Value::as_str) {
            let at = res.display(loc);
            if let Ok(target) = res.resolve(loc, r, registry, &at) {
                out.push(target);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn depth_of(schema: &Value, limit: usize) -> Result<usize, SchemaError> {
        let registry = Registry::new();
        let mut res = Resources::new(schema, crate::Draft::default());
        let limits = crate::SchemaLimits { max_depth: limit, ..Default::default() };
        Depths::default().walk(&mut res, &registry, (0, String::new()), &limits).map(|w| w.depth)
    }

    #[test]
    fn depth_counts_subschemas_and_references() {
        assert_eq!(depth_of(&json!(true), 10).unwrap(), 1);
        assert_eq!(depth_of(&json!({"type": "string"}), 10).unwrap(), 1);
        assert_eq!(depth_of(&json!({"properties": {"a": {"items": {"type": "string"}}}}), 10).unwrap(), 3);
        let chain =
            json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/c"}, "c": {}}, "$ref": "#/$defs/a"});
        assert_eq!(depth_of(&chain, 10).unwrap(), 4);
        // A cycle stops where it comes back.
        let cycle = json!({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"});
        assert_eq!(depth_of(&cycle, 10).unwrap(), 3);
        // Unresolvable references are no step.
        assert_eq!(depth_of(&json!({"$ref": "#/nowhere"}), 10).unwrap(), 1);
    }

    #[test]
    fn branches_that_share_subschemas_multiply_the_paths() {
        // dI ::= anyOf [dI+1, dI+2]: Fibonacci many paths.
        let mut defs = serde_json::Map::new();
        for i in 0..60 {
            let any = json!([{"$ref": format!("#/$defs/d{}", i + 1)}, {"$ref": format!("#/$defs/d{}", i + 2)}]);
            defs.insert(format!("d{i}"), json!({ "anyOf": any }));
        }
        defs.insert("d60".into(), json!({"type": "string"}));
        defs.insert("d61".into(), json!({"type": "string"}));
        let schema = json!({"$defs": defs, "$ref": "#/$defs/d0"});
        let mut res = Resources::new(&schema, crate::Draft::default());
        let registry = Registry::new();
        match Depths::default().walk(&mut res, &registry, (0, String::new()), &crate::SchemaLimits::default()) {
            Err(SchemaError::TooLarge { pointer, limit, reason, .. }) => {
                assert_eq!(limit, crate::SchemaLimit::Branches);
                assert!(pointer.starts_with("/$defs/d"), "{pointer}");
                assert!(reason.starts_with("more than 1048576 paths"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        // A shallow, wide schema has one path per subschema.
        let props: serde_json::Map<String, Value> =
            (0..5000).map(|i| (format!("p{i}"), json!({"type": "string"}))).collect();
        let wide = json!({"type": "object", "properties": props});
        let mut res = Resources::new(&wide, crate::Draft::default());
        let w =
            Depths::default().walk(&mut res, &registry, (0, String::new()), &crate::SchemaLimits::default()).unwrap();
        assert_eq!(w, Walk { depth: 2, paths: 5001 });
    }

    #[test]
    fn depth_past_the_limit_is_located() {
        let chain =
            json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/c"}, "c": {}}, "$ref": "#/$defs/a"});
        match depth_of(&chain, 3) {
            Err(SchemaError::TooLarge { pointer, limit, .. }) => {
                assert_eq!(pointer, "/$defs/c");
                assert_eq!(limit, crate::SchemaLimit::Depth);
            }
            other => panic!("{other:?}"),
        }
        // The walk that failed leaves nothing behind: from `b`, the chain fits.
        let registry = Registry::new();
        let mut res = Resources::new(&chain, crate::Draft::default());
        let limits = crate::SchemaLimits { max_depth: 3, ..Default::default() };
        let mut depths = Depths::default();
        assert!(depths.walk(&mut res, &registry, (0, String::new()), &limits).is_err());
        let from_b = depths.walk(&mut res, &registry, (0, "/$defs/b".into()), &limits).unwrap();
        assert_eq!(from_b.depth, 2);
    }
}
