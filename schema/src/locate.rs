//! Locating subschemas: every schema location the compile reads is interned once as a
//! [`Sid`], with its value and draft looked up once; children and `$ref` targets are found
//! once per parent. [`ref_overrides_siblings`] is the one place that says the Draft ≤ 7
//! rule "a `$ref` overrides its siblings".
//!
//! Invariant: a [`Sid`] indexes `locs`, `values` and `drafts` alike, and two locations
//! with the same document and pointer have the same [`Sid`].

use rustc_hash::FxHashMap as HashMap;
use serde_json::{Map, Value};

use crate::resolve::{push_token, Loc, Resources};
use crate::{Draft, Registry, SchemaError};

/// Interned schema location.
pub(crate) type Sid = u32;

static TRUE: Value = Value::Bool(true);

/// Draft ≤ 7: a `$ref` overrides its siblings, which then constrain nothing.
pub(crate) fn ref_overrides_siblings(draft: Draft, m: &Map<String, Value>) -> bool {
    draft <= Draft::Draft7 && m.contains_key("$ref")
}

/// The schema locations of one compile.
pub(crate) struct Locations<'o> {
    pub(crate) res: Resources<'o>,
    locs: Vec<Loc>,
    /// The value and draft at each location (looked up once: subschemas are read all the
    /// time).
    values: Vec<&'o Value>,
    drafts: Vec<Draft>,
    sid_of: HashMap<Loc, Sid>,
    /// Where each subschema's reference keyword (`$ref`, …) leads, once resolved.
    ref_targets: HashMap<(Sid, &'static str), Sid>,
    /// Children found by [`Locations::child`], by parent and hash of the path.
    children: HashMap<(Sid, u64), Sid>,
}

impl<'o> Locations<'o> {
    pub(crate) fn new(res: Resources<'o>) -> Self {
        Locations {
            res,
            locs: Vec::new(),
            values: Vec::new(),
            drafts: Vec::new(),
            sid_of: HashMap::default(),
            ref_targets: HashMap::default(),
            children: HashMap::default(),
        }
    }

    /// How many locations are interned.
    pub(crate) fn len(&self) -> usize {
        self.locs.len()
    }

    /// The location of `sid`.
    pub(crate) fn loc(&self, sid: Sid) -> &Loc {
        &self.locs[sid as usize]
    }

    /// The members among `sids` whose own keywords apply (objects, less those whose `$ref`
    /// overrides their siblings), with their keywords and drafts.
    pub(crate) fn keyword_members(&self, sids: &[Sid]) -> Vec<(Sid, &'o Map<String, Value>, Draft)> {
        let mut out = Vec::with_capacity(sids.len());
        for &sid in sids {
            let Value::Object(m) = self.schema(sid) else { continue };
            let draft = self.draft(sid);
            if !ref_overrides_siblings(draft, m) {
                out.push((sid, m, draft));
            }
        }
        out
    }

    /// The [`Sid`] of `loc`, interned on first sight.
    pub(crate) fn sid(&mut self, loc: &Loc) -> Sid {
        match self.sid_of.get(loc) {
            Some(&s) => s,
            None => self.sid_with(loc.clone(), |c| c.res.value(loc)),
        }
    }

    /// [`Locations::sid`], finding the value at `loc`, when the location is new, with `value`
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

    /// The pointer of `sid` as errors and warnings show it.
    pub(crate) fn ptr(&self, sid: Sid) -> String {
        self.res.display(&self.locs[sid as usize])
    }

    /// The subschema that `sid`'s reference `keyword` (whose value is `reference`) leads
    /// to; resolved once per compile (a subschema is expanded wherever it is used).
    pub(crate) fn ref_target(
        &mut self,
        sid: Sid,
        keyword: &'static str,
        reference: &str,
        registry: &'o Registry,
    ) -> Result<Sid, SchemaError> {
        if let Some(&t) = self.ref_targets.get(&(sid, keyword)) {
            return Ok(t);
        }
        let (loc, p) = (self.locs[sid as usize].clone(), self.ptr(sid));
        let target = self.res.resolve(&loc, reference, registry, &p)?;
        let t = self.sid(&target);
        self.ref_targets.insert((sid, keyword), t);
        Ok(t)
    }

    /// The schema at `sid` (`true` where its pointer finds nothing), borrowed from its
    /// document. (A copy per use was quadratic: a 500-branch `anyOf` copied the whole root
    /// for every branch.)
    pub(crate) fn schema(&self, sid: Sid) -> &'o Value {
        self.values[sid as usize]
    }

    /// The draft in force at `sid`.
    pub(crate) fn draft(&self, sid: Sid) -> Draft {
        self.drafts[sid as usize]
    }

    /// The subschema at `path` below `sid` (found again without building its pointer:
    /// the same children are asked for at every use of their parent).
    pub(crate) fn child(&mut self, sid: Sid, path: &[&str]) -> Sid {
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
}
