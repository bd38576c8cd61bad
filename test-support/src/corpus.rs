//! The schema corpora the conformance tests read (where they are, the test suite's
//! registry, their files), and "does the mask accept this text".

use std::path::{Path, PathBuf};
use std::sync::Arc;

use stencil_mask::{vocab::Tokenizer, CompiledGrammar, Matcher};
use stencil_schema::Registry;

/// The vendored JSON-Schema-Test-Suite (`fixtures/json-schema-test-suite`, MIT; its
/// `SOURCE.md` names the commit).
pub fn suite_dir() -> PathBuf {
    crate::fixtures::dir().join("json-schema-test-suite")
}

/// The JSONSchemaBench split the conformance run reads: `$STENCIL_JSONSCHEMABENCH` (a
/// folder of subset folders; `scripts/conformance.sh --corpus DIR` sets it). Panics (never
/// skips) when it is missing: the data is third-party and not in the repository.
pub fn jsonschemabench_dir() -> PathBuf {
    let dir = std::env::var_os("STENCIL_JSONSCHEMABENCH")
        .map(PathBuf::from)
        .expect("STENCIL_JSONSCHEMABENCH is not set: run the conformance command, scripts/conformance.sh --corpus DIR");
    assert!(dir.is_dir(), "JSONSchemaBench is expected at {} (scripts/conformance.sh --corpus DIR)", dir.display());
    dir
}

/// `remotes/` of the JSON-Schema-Test-Suite as served at `http://localhost:1234/`.
pub fn suite_registry(suite: &Path) -> Registry {
    let mut reg = Registry::new();
    let root = suite.join("remotes");
    for rel in json_files(&root) {
        let p = root.join(&rel);
        let rel = rel.to_string_lossy().replace('\\', "/");
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        reg.insert(&format!("http://localhost:1234/{rel}"), v);
    }
    reg
}

/// All `*.json` files under `dir`, sorted, as paths relative to `dir`.
pub fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// Tokenizes `text` and feeds it through a fresh matcher: all tokens accepted and the
/// grammar can end.
pub fn mask_accepts(grammar: &Arc<CompiledGrammar>, tok: &Tokenizer, text: &str) -> bool {
    let Ok(tokens) = tok.encode(text) else { return false };
    let mut m = Matcher::new(grammar.clone());
    m.accept_tokens(&tokens).is_ok() && m.can_end()
}
