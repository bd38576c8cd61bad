//! Every format, model-free: random walks of the compiled grammar through the engine's
//! masks give texts that captures read back into segments which re-serialize to the same
//! text, every prefix too; JSON contents validate against their schemas; a
//! `stop_after_first` never holds two tags.

use std::sync::Arc;

use serde_json::{json, Value};
use stencil_grammar::random::Xoshiro256;
use stencil_mask::walk::{Style, WalkOptions, Walker};
use stencil_mask::{CompiledGrammar, TokenKind, Vocabulary};
use stencil_structural::{compile_json, CompileOptions, CompiledTag, LeafKind, Segment, SegmentKind};

/// `<eos>`, five control tokens, printable ASCII, tab and newline, and a few longer pieces.
fn vocab() -> Arc<Vocabulary> {
    let mut tokens: Vec<(Vec<u8>, TokenKind)> = ["<eos>", "<think>", "</think>", "<|tool|>", "<|end|>", "<|x|>"]
        .iter()
        .map(|t| (t.as_bytes().to_vec(), TokenKind::Control))
        .collect();
    tokens.extend((0x20u8..0x7f).chain([b'\t', b'\n']).map(|b| (vec![b], TokenKind::Normal)));
    for piece in ["{\"", "\":", "é", "ab", "</think>", "}</tool_call>", "</a>", "</r>", "</i>", "<tool_call>"] {
        tokens.push((piece.as_bytes().to_vec(), TokenKind::Normal));
    }
    Arc::new(Vocabulary::new(tokens, vec![0]).unwrap())
}

fn weather() -> Value {
    json!({"type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
        "days": {"type": "integer", "minimum": 1, "maximum": 9}}, "required": ["city"], "additionalProperties": false})
}

fn tool(name: &str, schema: Value) -> Value {
    json!({"type": "tag", "begin": format!("<tool_call>{{\"name\": \"{name}\", \"arguments\": "),
           "content": {"type": "json_schema", "json_schema": schema}, "end": "}</tool_call>"})
}

/// One case per format (and the flags that change a format's shape).
fn cases() -> Vec<(&'static str, Value)> {
    let think = json!({"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"});
    vec![
        ("const_string", json!({"type": "const_string", "value": "yes é"})),
        ("json_schema", json!({"type": "json_schema", "json_schema": weather()})),
        (
            "qwen_xml",
            json!({"type": "json_schema", "style": "qwen_xml", "json_schema": {"type": "object",
            "properties": {"city": {"type": "string", "pattern": "[A-Z][a-z]{0,3}"}, "n": {"type": "integer"},
                "unit": {"enum": ["c", "f"]}},
            "required": ["city"]}}),
        ),
        ("regex", json!({"type": "regex", "pattern": "[a-c]{1,3}-[0-9]+"})),
        ("grammar", json!({"type": "grammar", "grammar": "root ::= \"(\" [xy]* \")\""})),
        ("any_text", json!({"type": "any_text", "excludes": ["ab", "</"]})),
        (
            "any_text max_chars",
            json!({"type": "tag", "begin": "<r>", "content": {"type": "any_text", "max_chars": 5}, "end": "</r>"}),
        ),
        (
            "sequence",
            json!({"type": "sequence", "elements": [think, {"type": "const_string", "value": "Answer: "},
            {"type": "regex", "pattern": "[0-9]+"}]}),
        ),
        (
            "or",
            json!({"type": "or", "elements": [{"type": "const_string", "value": "no"},
            {"type": "json_schema", "json_schema": {"type": "boolean"}}]}),
        ),
        (
            "optional",
            json!({"type": "sequence", "elements": [{"type": "optional", "content": think},
            {"type": "const_string", "value": "ok"}]}),
        ),
        (
            "star",
            json!({"type": "star", "content": {"type": "tag", "begin": "[", "content": {"type": "regex", "pattern": "[a-z]*"}, "end": "]"}}),
        ),
        ("plus", json!({"type": "plus", "content": {"type": "const_string", "value": "ab"}})),
        (
            "repeat",
            json!({"type": "repeat", "min": 2, "max": 3, "content": {"type": "tag", "begin": "<i>",
            "content": {"type": "json_schema", "json_schema": {"type": "integer"}}, "end": "</i>"}}),
        ),
        ("tag ends", json!({"type": "tag", "begin": "<a>", "content": {"type": "any_text"}, "end": ["</a>", "</b>"]})),
        (
            "triggered_tags",
            json!({"type": "triggered_tags", "triggers": ["<tool_call>"],
            "tags": [tool("get_weather", weather()), tool("get_time", json!({"type": "object", "properties": {"tz": {"type": "string"}}}))]}),
        ),
        (
            "triggered_tags at_least_one",
            json!({"type": "triggered_tags", "triggers": ["<tool_call>"], "at_least_one": true,
            "tags": [tool("get_weather", weather())]}),
        ),
        (
            "triggered_tags stop_after_first",
            json!({"type": "triggered_tags", "triggers": ["<tool_call>"], "stop_after_first": true,
            "excludes": ["</"], "tags": [tool("get_weather", weather())]}),
        ),
        (
            "triggered_tags both",
            json!({"type": "triggered_tags", "triggers": ["<tool_call>"], "stop_after_first": true,
            "at_least_one": true, "tags": [tool("get_weather", weather()), tool("noop", json!({"type": "object", "properties": {}, "additionalProperties": false}))]}),
        ),
        (
            "reasoning then tools",
            json!({"type": "sequence", "elements": [
            {"type": "tag", "begin": "<think>", "content": {"type": "any_text", "max_tokens": 20}, "end": "</think>"},
            {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [tool("get_weather", weather())]}]}),
        ),
        (
            "tags_with_separator",
            json!({"type": "tags_with_separator", "separator": ",", "tags": [
            {"type": "tag", "begin": "<i>", "content": {"type": "json_schema", "json_schema": {"type": "integer"}}, "end": "</i>"}]}),
        ),
        (
            "tags_with_separator stop_after_first",
            json!({"type": "tags_with_separator", "separator": "\n", "stop_after_first": true,
            "at_least_one": true, "tags": [{"type": "tag", "begin": "<i>", "content": {"type": "const_string", "value": "1"}, "end": "</i>"}]}),
        ),
        (
            "token",
            json!({"type": "tag", "begin": {"type": "token", "token": "<think>"}, "content": {"type": "any_text"},
            "end": {"type": "token", "token": 2}}),
        ),
        (
            "exclude_token",
            json!({"type": "sequence", "elements": [{"type": "token", "token": "<|x|>"},
            {"type": "exclude_token", "exclude_tokens": ["<|end|>"]}]}),
        ),
        (
            "token_triggered_tags",
            json!({"type": "token_triggered_tags", "trigger_tokens": ["<|tool|>"], "tags": [
            {"type": "tag", "begin": {"type": "token", "token": "<|tool|>"},
             "content": {"type": "json_schema", "json_schema": weather()}, "end": {"type": "token", "token": "<|end|>"}}]}),
        ),
    ]
}

fn count_tags(segments: &[Segment]) -> usize {
    segments
        .iter()
        .map(|s| match &s.kind {
            SegmentKind::Tag { children, .. } => 1 + count_tags(children),
            _ => 0,
        })
        .sum()
}

/// JSON leaves parse and validate against the schema at their format's pointer.
fn check_json(tag: &CompiledTag, def: &Value, segments: &[Segment], text: &[u8], name: &str) {
    for s in segments {
        match &s.kind {
            SegmentKind::Tag { tag: t, children, .. } => {
                let p = &tag.tags[*t as usize].pointer;
                if let Some(schema) = def.pointer(&format!("{p}/content/json_schema")) {
                    for c in children.iter().filter(|c| c.kind == SegmentKind::Leaf(LeafKind::Json)) {
                        let v: Value = serde_json::from_slice(&text[c.range.clone()])
                            .unwrap_or_else(|e| panic!("{name}: content is not JSON: {e}"));
                        stencil_schema::validate(schema, &v, &Default::default())
                            .unwrap_or_else(|e| panic!("{name}: {v} does not validate: {e:?}"));
                    }
                }
                check_json(tag, def, children, text, name);
            }
            SegmentKind::Leaf(LeafKind::Json) => {
                if let Some(schema) = def.pointer("/format/json_schema") {
                    let v: Value = serde_json::from_slice(&text[s.range.clone()]).unwrap();
                    stencil_schema::validate(schema, &v, &Default::default()).unwrap();
                }
            }
            _ => {}
        }
    }
}

#[test]
fn random_walks_read_back_to_their_text() {
    let vocab = vocab();
    let options = CompileOptions { vocab: Some(vocab.clone()), ..Default::default() };
    // The closers as text tokens (the search rarely spells them out in free text).
    let mut closers: Vec<u32> =
        (0..vocab.len() as u32).filter(|&t| vocab.is_text(t) && vocab.token_bytes(t).starts_with(b"</")).collect();
    closers.extend(vocab.find_token(b"}</tool_call>"));
    let mut walker = Walker::new(vocab.clone()).with_extra(closers);
    let walk_options = WalkOptions { max_tokens: 300, style: Style::Explore };
    let only = std::env::var("CASE").ok();
    for (name, format) in cases() {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let started = std::time::Instant::now();
        let def = json!({"type": "structural_tag", "format": format});
        let tag = compile_json(&def, &options).unwrap_or_else(|e| panic!("{name}: {e}"));
        let compiled = CompiledGrammar::new(&tag.grammar, vocab.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut complete = 0;
        let mut tags_seen = 0;
        for seed in 0..16u64 {
            let text = match walker.walk(&compiled, &mut Xoshiro256::new(seed * 7919 + 1), &walk_options) {
                Ok(w) if w.complete => w.text(&vocab),
                Ok(_) => continue,
                Err(e) => panic!("{name}: walk {seed}: {e:?}"),
            };
            complete += 1;
            if std::env::var("TRACE").is_ok() {
                eprintln!("{name}: walk {seed}: {:?}", String::from_utf8_lossy(&text));
            }
            let reply = tag.read(&text).unwrap_or_else(|e| panic!("{name}: {:?}: {e}", String::from_utf8_lossy(&text)));
            assert!(reply.complete, "{name}: {:?} read as unfinished", String::from_utf8_lossy(&text));
            let back: Vec<u8> = reply.pieces().into_iter().flat_map(|r| text[r].to_vec()).collect();
            assert_eq!(back, text, "{name}: {:?}", reply.segments);
            assert!(reply.segments.iter().all(|s| s.closed), "{name}");
            tags_seen += count_tags(&reply.segments);
            check_json(&tag, &def, &reply.segments, &text, name);
            if name.contains("stop_after_first") || name.contains("both") {
                assert!(count_tags(&reply.segments) <= 1, "{name}: two tags in {:?}", String::from_utf8_lossy(&text));
            }
            if name.contains("at_least_one") || name.contains("both") {
                assert!(count_tags(&reply.segments) >= 1, "{name}");
            }
            // Read as it streams: every prefix reads, and re-serializes to itself.
            let mut reader = tag.reader().unwrap();
            for (cut, b) in text.iter().enumerate() {
                reader.feed(&[*b]).unwrap_or_else(|e| panic!("{name}: byte {cut}: {e}"));
                if cut % 7 == 3 {
                    let part = &text[..=cut];
                    let r = reader.reply().unwrap();
                    let back: Vec<u8> = r.pieces().into_iter().flat_map(|x| part[x].to_vec()).collect();
                    assert_eq!(back, part, "{name}: prefix {:?}: {:?}", String::from_utf8_lossy(part), r.segments);
                }
            }
        }
        assert!(complete >= 4, "{name}: only {complete} complete walks");
        // Where a tag is mandatory, the walks write one.
        let d = def.to_string();
        let optional =
            (d.contains("triggered_tags") || d.contains("tags_with_separator")) && !d.contains("\"at_least_one\":true");
        if d.contains("\"begin\"") && !optional && !name.contains("optional") {
            assert!(tags_seen > 0, "{name}: no walk wrote a tag");
        }
        eprintln!("{name}: {complete} walks in {:.1?}", started.elapsed());
    }
}
