//! The limits of LIMITS.md's structural-tag table: each a typed, located error.

use serde_json::json;
use stencil_structural::{compile_json, CaptureError, CompileOptions, ErrorKind, Limits};

#[test]
fn nesting_past_max_nesting_is_located() {
    let mut f = json!({"type": "const_string", "value": "x"});
    for _ in 0..70 {
        f = json!({"type": "optional", "content": f});
    }
    let err = compile_json(&json!({"format": f}), &CompileOptions::default()).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::TooLarge { name: "MAX_NESTING", .. }), "{err}");
    assert!(err.pointer.starts_with("/format/content/content"), "{}", err.pointer);
    assert!(err.to_string().contains("(limit MAX_NESTING)"), "{err}");
}

#[test]
fn max_chars_past_max_text_rules_is_located() {
    let tag = json!({"format": {"type": "tag", "begin": "<t>", "content": {"type": "any_text", "max_chars": 100000}, "end": "</t>"}});
    let err = compile_json(&tag, &CompileOptions::default()).unwrap_err();
    assert_eq!(err.pointer, "/format/content");
    assert!(matches!(err.kind, ErrorKind::TooLarge { name: "max_text_rules", .. }), "{err}");
    assert!(err.to_string().contains("(limit max_text_rules)"), "{err}");
}

#[test]
fn reading_past_max_capture_work_stops() {
    let options =
        CompileOptions { limits: Limits { max_capture_work: 1_000, ..Limits::default() }, ..Default::default() };
    let tag = compile_json(&json!({"format": {"type": "any_text"}}), &options).unwrap();
    let text = "x".repeat(10_000);
    assert_eq!(tag.read(text.as_bytes()), Err(CaptureError::TooMuchWork { limit: 1_000 }));
    assert!(tag.read(b"short").is_ok());
}
