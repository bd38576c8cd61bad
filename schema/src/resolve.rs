//! Documents, base URIs, `$id`/`id`, `$anchor` and `$ref` resolution (JSON pointers,
//! anchors, embedded resources, remote documents from the caller's registry, never
//! fetched).

use rustc_hash::FxHashMap as HashMap;

use serde_json::Value;
use url::Url;

use crate::{Draft, Registry, SchemaError};

/// The base URI of a document that has no `$id`.
pub(crate) const DEFAULT_BASE: &str = "json-schema:///root.json";

/// `uri` without its fragment, normalized by the URL parser when it parses.
pub(crate) fn normalize_uri(uri: &str) -> String {
    match Url::parse(uri) {
        Ok(mut u) => {
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => uri.trim_end_matches('#').to_string(),
    }
}

/// A schema location: document index and JSON pointer.
pub(crate) type Loc = (usize, String);

/// The documents, borrowed from the caller (the schema and its registry) for the
/// compile, and what is known about them.
pub(crate) struct Resources<'a> {
    pub docs: Vec<&'a Value>,
    pub doc_uris: Vec<String>,
    by_uri: HashMap<String, Loc>,
    anchors: HashMap<String, Loc>,
    /// Base URI and draft where they are set: each document's root, and wherever a
    /// subschema's `$id` or `$schema` changes them (a location takes its nearest
    /// ancestor's, see [`Resources::info`]); per document, by pointer.
    info: Vec<HashMap<String, (Url, Draft)>>,
    default_draft: Draft,
}

/// Keywords whose value is one subschema.
pub(crate) const SINGLE: &[&str] = &[
    "additionalProperties",
    "additionalItems",
    "items",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];
/// Keywords whose value is an array of subschemas.
pub(crate) const ARRAYS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Keywords whose value is a map of subschemas.
const MAPS: &[&str] = &["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"];

/// Appends `/` and token `t`, escaped (`~` as `~0`, `/` as `~1`), to pointer `ptr`.
pub(crate) fn push_token(ptr: &mut String, t: &str) {
    ptr.push('/');
    if !t.contains(['~', '/']) {
        ptr.push_str(t);
    } else {
        for c in t.chars() {
            match c {
                '~' => ptr.push_str("~0"),
                '/' => ptr.push_str("~1"),
                c => ptr.push(c),
            }
        }
    }
}

/// The value at JSON pointer `pointer` in `doc` (as `Value::pointer`, which allocates
/// two strings per token: subschemas are looked up all the time).
pub(crate) fn lookup<'a>(doc: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.is_empty() {
        return Some(doc);
    }
    let mut v = doc;
    for token in pointer.strip_prefix('/')?.split('/') {
        let token: std::borrow::Cow<str> =
            if token.contains('~') { token.replace("~1", "/").replace("~0", "~").into() } else { token.into() };
        v = child_value(v, &token)?;
    }
    Some(v)
}

/// The value one (unescaped) pointer token below `v`: a member of an object, or an item
/// of an array by a canonical index (no leading zero or sign).
pub(crate) fn child_value<'a>(v: &'a Value, token: &str) -> Option<&'a Value> {
    match v {
        Value::Object(m) => m.get(token),
        Value::Array(a) => {
            if token.len() > 1 && token.starts_with('0') || token.starts_with('+') {
                return None;
            }
            a.get(token.parse::<usize>().ok()?)
        }
        _ => None,
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            // Bytes, not `&s[..]`: a `%` before a multi-byte character must not split it.
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl<'a> Resources<'a> {
    pub fn new(root: &'a Value, default_draft: Draft) -> Resources<'a> {
        let mut r = Resources {
            docs: Vec::new(),
            doc_uris: Vec::new(),
            by_uri: HashMap::default(),
            anchors: HashMap::default(),
            info: Vec::new(),
            default_draft,
        };
        r.add_doc(DEFAULT_BASE, root);
        r
    }

    fn add_doc(&mut self, uri: &str, doc: &'a Value) -> usize {
        let idx = self.docs.len();
        let base = Url::parse(uri).unwrap_or_else(|_| Url::parse(DEFAULT_BASE).unwrap());
        self.by_uri.insert(normalize_uri(base.as_str()), (idx, String::new()));
        self.doc_uris.push(normalize_uri(base.as_str()));
        self.docs.push(doc);
        let draft = self.default_draft;
        self.info.push(HashMap::default());
        self.info[idx].insert(String::new(), (base.clone(), draft));
        self.index(idx, &mut String::new(), doc, &base, draft);
        idx
    }

    /// Indexes the subschema `v` at `ptr` (restored on return) of document `doc`, whose
    /// parent's base URI and draft are `parent_base` and `parent_draft`.
    fn index(&mut self, doc: usize, ptr: &mut String, v: &Value, parent_base: &Url, parent_draft: Draft) {
        let Value::Object(m) = v else {
            return;
        };
        let (mut base, mut draft) = (std::borrow::Cow::Borrowed(parent_base), parent_draft);
        if let Some(d) = m.get("$schema").and_then(Value::as_str).and_then(Draft::from_uri) {
            draft = d;
        }
        let ref_only = draft <= Draft::Draft7 && m.contains_key("$ref");
        let id_key = if draft == Draft::Draft4 { "id" } else { "$id" };
        if !ref_only {
            if let Some(id) = m.get(id_key).and_then(Value::as_str) {
                if let Some(name) = id.strip_prefix('#') {
                    if !name.is_empty() && draft <= Draft::Draft7 {
                        self.anchors.insert(format!("{}#{}", normalize_uri(base.as_str()), name), (doc, ptr.clone()));
                    }
                } else if let Ok(nb) = base.join(id) {
                    base = std::borrow::Cow::Owned(nb);
                    self.by_uri.entry(normalize_uri(base.as_str())).or_insert((doc, ptr.clone()));
                    if let Some(f) = base.fragment() {
                        if !f.is_empty() && draft <= Draft::Draft7 {
                            self.anchors.insert(format!("{}#{}", normalize_uri(base.as_str()), f), (doc, ptr.clone()));
                        }
                    }
                }
            }
            for k in ["$anchor", "$dynamicAnchor"] {
                if draft >= Draft::Draft201909 {
                    if let Some(a) = m.get(k).and_then(Value::as_str) {
                        self.anchors
                            .entry(format!("{}#{}", normalize_uri(base.as_str()), a))
                            .or_insert((doc, ptr.clone()));
                    }
                }
            }
        }
        if draft != parent_draft || matches!(base, std::borrow::Cow::Owned(_)) {
            self.info[doc].insert(ptr.clone(), (base.as_ref().clone(), draft));
        }
        let here = ptr.len();
        for (k, sub) in m {
            let (single, array, map) =
                (SINGLE.contains(&k.as_str()), ARRAYS.contains(&k.as_str()), MAPS.contains(&k.as_str()));
            if !(single || array || map) {
                continue;
            }
            push_token(ptr, k);
            let kp = ptr.len();
            if single && sub.is_object() {
                crate::compile::grow(|| self.index(doc, ptr, sub, &base, draft));
            }
            if let (true, Value::Array(a)) = (array, sub) {
                for (i, s) in a.iter().enumerate() {
                    use std::fmt::Write;
                    let _ = write!(ptr, "/{i}");
                    crate::compile::grow(|| self.index(doc, ptr, s, &base, draft));
                    ptr.truncate(kp);
                }
            }
            if let (true, Value::Object(mm)) = (map, sub) {
                for (name, s) in mm.iter().filter(|(_, s)| s.is_object()) {
                    push_token(ptr, name);
                    crate::compile::grow(|| self.index(doc, ptr, s, &base, draft));
                    ptr.truncate(kp);
                }
            }
            ptr.truncate(here);
        }
    }

    /// The schema value at a location.
    pub fn value(&self, loc: &Loc) -> Option<&'a Value> {
        lookup(self.docs[loc.0], &loc.1)
    }

    /// Base URI and draft in force at a location: those of its nearest ancestor (or
    /// itself) that sets them.
    pub fn info(&self, loc: &Loc) -> &(Url, Draft) {
        let (set, mut pointer) = (&self.info[loc.0], loc.1.as_str());
        while !pointer.is_empty() {
            if let Some(i) = set.get(pointer) {
                return i;
            }
            pointer = &pointer[..pointer.rfind('/').unwrap_or(0)];
        }
        &set[""] // every document's root is there (`add_doc`)
    }

    /// Resolves `reference` found at `from`.
    pub fn resolve(
        &mut self,
        from: &Loc,
        reference: &str,
        registry: &'a Registry,
        pointer: &str,
    ) -> Result<Loc, SchemaError> {
        let fail = |reason: &str| SchemaError::UnresolvableRef {
            pointer: pointer.to_string(),
            reference: reference.to_string(),
            reason: reason.to_string(),
        };
        let base = self.info(from).0.clone();
        let target = base.join(reference).map_err(|e| fail(&e.to_string()))?;
        let fragment = target.fragment().map(percent_decode).unwrap_or_default();
        let mut doc_uri = target.clone();
        doc_uri.set_fragment(None);
        let key = normalize_uri(doc_uri.as_str());
        let root = match self.by_uri.get(&key) {
            Some(l) => l.clone(),
            None => match registry.get(&key) {
                Some(doc) => {
                    let idx = self.add_doc(&key, doc);
                    (idx, String::new())
                }
                None => return Err(fail(&format!("no document {key} in the registry"))),
            },
        };
        if fragment.is_empty() {
            return Ok(root);
        }
        if fragment.starts_with('/') {
            let loc = (root.0, format!("{}{}", root.1, fragment));
            if self.value(&loc).is_none() {
                return Err(fail("the JSON pointer names nothing"));
            }
            return Ok(loc);
        }
        match self.anchors.get(&format!("{key}#{fragment}")) {
            Some(l) => Ok(l.clone()),
            None => Err(fail("no such anchor")),
        }
    }

    /// A printable pointer for a location: the JSON pointer, with the document's URI in
    /// front when it is not the root document.
    pub fn display(&self, loc: &Loc) -> String {
        if loc.0 == 0 {
            loc.1.clone()
        } else {
            format!("{}#{}", self.doc_uris[loc.0], loc.1)
        }
    }
}
