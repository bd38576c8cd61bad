//! Every example of STRUCTURAL_TAGS.md compiles, and accepts and rejects the texts (or
//! token sequences) listed under it; every "error at" example fails at that pointer.

use std::sync::Arc;

use serde_json::{json, Value};
use stencil_grammar::reference::Recognizer;
use stencil_mask::{CompiledGrammar, Matcher, TokenKind, Vocabulary};
use stencil_structural::{compile_json, CompileOptions};

/// Control tokens `<eos>`, `<think>`, `</think>`, `<tool>`, `</tool>`; then every printable
/// ASCII byte, newline, and a few words.
fn vocab() -> Arc<Vocabulary> {
    let mut tokens: Vec<(Vec<u8>, TokenKind)> = ["<eos>", "<think>", "</think>", "<tool>", "</tool>"]
        .iter()
        .map(|t| (t.as_bytes().to_vec(), TokenKind::Control))
        .collect();
    tokens.extend((0x20u8..0x7f).chain([b'\n']).map(|b| (vec![b], TokenKind::Normal)));
    for w in ["hm", "think", "ok"] {
        tokens.push((w.as_bytes().to_vec(), TokenKind::Normal));
    }
    Arc::new(Vocabulary::new(tokens, vec![0]).unwrap())
}

enum Check {
    Text(bool, String),
    Tokens(bool, Vec<String>),
    ErrorAt(String),
}

fn examples() -> Vec<(String, Vec<Check>)> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../STRUCTURAL_TAGS.md")).unwrap();
    let mut out: Vec<(String, Vec<Check>)> = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        if line == "```json" {
            let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
            out.push((body.join("\n"), Vec::new()));
        } else if let (Some(rest), Some(last)) = (line.strip_prefix("- "), out.last_mut()) {
            let (key, value) = rest.split_once(": ").unwrap_or(("", ""));
            let check = match key {
                "accepts" | "rejects" => Check::Text(key == "accepts", serde_json::from_str(value).unwrap()),
                "accepts tokens" | "rejects tokens" => {
                    Check::Tokens(key == "accepts tokens", serde_json::from_str(value).unwrap())
                }
                "error at" => Check::ErrorAt(serde_json::from_str(value).unwrap()),
                _ => continue,
            };
            last.1.push(check);
        }
    }
    out
}

#[test]
fn every_example_of_the_doc_holds() {
    let vocab = vocab();
    let options = CompileOptions { vocab: Some(vocab.clone()), ..Default::default() };
    let examples = examples();
    assert!(examples.len() >= 19, "only {} examples found", examples.len());
    for (body, checks) in examples {
        assert!(!checks.is_empty(), "an example without checks: {body}");
        let format: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{body}: {e}"));
        let def = json!({"type": "structural_tag", "format": format});
        let tag = match compile_json(&def, &options) {
            Ok(t) => Some(t),
            Err(e) => {
                for c in &checks {
                    match c {
                        Check::ErrorAt(p) => assert_eq!(&e.pointer, p, "{body}: {e}"),
                        _ => panic!("{body}: {e}"),
                    }
                }
                None
            }
        };
        let Some(tag) = tag else { continue };
        let compiled = CompiledGrammar::new(&tag.grammar, vocab.clone()).unwrap();
        for c in checks {
            match c {
                Check::Text(accept, text) => {
                    let r = Recognizer::new(&tag.grammar).unwrap();
                    assert_eq!(r.matches(text.as_bytes()), accept, "{body}: {text:?}");
                    // The engine agrees, one byte token at a time.
                    let mut m = Matcher::new(compiled.clone());
                    let ok = text.bytes().all(|b| {
                        let id = vocab.find_token(&[b]).unwrap_or_else(|| panic!("no token for byte {b}"));
                        m.accept_token(id).is_ok()
                    }) && m.can_end();
                    assert_eq!(ok, accept, "engine: {body}: {text:?}");
                    // Captures read an accepted text back.
                    if accept {
                        let reply = tag.read(text.as_bytes()).unwrap();
                        assert!(reply.complete, "{body}: {text:?}");
                    }
                }
                Check::Tokens(accept, tokens) => {
                    let mut m = Matcher::new(compiled.clone());
                    let ok = tokens.iter().all(|t| {
                        let id = vocab.find_token(t.as_bytes()).unwrap_or_else(|| panic!("no token {t:?}"));
                        m.accept_token(id).is_ok()
                    }) && m.can_end();
                    assert_eq!(ok, accept, "{body}: {tokens:?}");
                }
                Check::ErrorAt(p) => panic!("{body}: compiled, expected an error at {p}"),
            }
        }
    }
}
