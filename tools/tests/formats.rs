//! The tool formats without a model: write → read round trips of OpenAI-shaped call sets,
//! random walks of each format's grammar under each tool choice read back into calls that
//! validate, one call at most without parallel calls, streaming that concatenates to the
//! whole reply, special tokens as single tokens of synthetic vocabularies, and the names a
//! format cannot carry.

use std::sync::Arc;

use serde_json::{json, Map, Value};
use stencil_grammar::random::SplitMix64;
use stencil_grammar::random::Xoshiro256;
use stencil_mask::walk::{Style, WalkOptions, Walker};
use stencil_mask::{CompiledGrammar, TokenKind, Vocabulary};
use stencil_tools::format::{CallSpec, FormatError, ReasoningMode, ReplyParts, ToolEvent, ToolFormat};
use stencil_tools::{ToolCall, ToolChoice, ToolSet};

/// Every format, the envelope with its default tags.
fn formats() -> Vec<ToolFormat> {
    stencil_tools::format::FORMAT_NAMES.iter().map(|n| n.parse().unwrap()).collect()
}

/// Tools with namespaced names, nested and optional arguments, and one without arguments.
/// Every name can be carried by every format.
fn tools() -> ToolSet {
    ToolSet::from_openai_json(
        r#"[
      {"type": "function", "function": {"name": "fs/read_file", "parameters": {"type": "object",
        "properties": {"path": {"type": "string"}, "lines": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
                       "options": {"type": "object", "properties": {"follow": {"type": "boolean"}, "encoding": {"enum": ["utf-8", "latin-1"]}},
                                   "additionalProperties": false}},
        "required": ["path"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "github.create_issue", "parameters": {"type": "object",
        "properties": {"title": {"type": "string"}, "count": {"type": "integer", "minimum": 0}},
        "required": ["title", "count"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "now"}}
    ]"#,
    )
    .unwrap()
}

/// Strings with every format's markers, quotes, backslashes, newlines and non-ASCII text.
const TRICKY: [&str; 14] = [
    "plain",
    "</tool_call>",
    "<tool_call>{\"name\": \"now\"}",
    "[TOOL_CALLS][ARGS]",
    "<|call|><|end|><|channel|>",
    "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    "a\"b\\c",
    "line\nbreak\t",
    "</think>",
    "{\"name\": \"",
    "; ",
    "é 天気 😀",
    "",
    "</function>",
];

/// Random arguments of `name` (valid against its schema).
fn arguments(name: &str, rng: &mut SplitMix64) -> Value {
    let s = |rng: &mut SplitMix64| Value::String(rng.pick(&TRICKY).to_string());
    match name {
        "fs/read_file" => {
            let mut m = Map::new();
            m.insert("path".into(), s(rng));
            if rng.chance(1, 2) {
                let n = rng.below(4) as usize;
                m.insert("lines".into(), (0..n).map(|_| json!(rng.below(100))).collect());
            }
            if rng.chance(1, 2) {
                let mut o = Map::new();
                if rng.chance(1, 2) {
                    o.insert("follow".into(), json!(rng.chance(1, 2)));
                }
                if rng.chance(1, 2) {
                    o.insert("encoding".into(), json!(rng.pick(&["utf-8", "latin-1"])));
                }
                m.insert("options".into(), Value::Object(o));
            }
            Value::Object(m)
        }
        "github.create_issue" => json!({"title": s(rng), "count": rng.below(1000)}),
        _ => json!({}),
    }
}

/// Whether `call` can be written in Qwen3-Coder's format (a raw string cannot hold
/// `</parameter>`; the tricky strings never do).
fn calls(n: usize, rng: &mut SplitMix64) -> Vec<ToolCall> {
    let names = ["fs/read_file", "github.create_issue", "now"];
    (0..n)
        .map(|_| {
            let name = *rng.pick(&names);
            ToolCall::new(name, arguments(name, rng))
        })
        .collect()
}

/// What a reply holds, as written: the content trimmed, `None` when empty.
fn trimmed(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

#[test]
fn every_format_reads_back_what_it_writes() {
    let tools = tools();
    let mut rng = SplitMix64::new(47);
    for format in formats() {
        for round in 0..40 {
            let parallel = round % 2 == 0;
            let n = if parallel { 1 + rng.below(3) as usize } else { 1 };
            let calls = calls(n, &mut rng);
            let reasoning = rng.chance(1, 2).then(|| rng.pick(&["I should call a tool.", "a < b, 2 > 1"]).to_string());
            let content = rng.chance(1, 2).then(|| "Let me check that.".to_string());
            let open = reasoning.is_some() && rng.chance(1, 3) && format != ToolFormat::Harmony;
            let parts = ReplyParts { reasoning: reasoning.clone(), reasoning_open: open, content: content.clone() };
            let mode = match (&reasoning, open) {
                (None, _) => ReasoningMode::Optional,
                (Some(_), true) => ReasoningMode::Open,
                // Optional reasoning that is there reads as reasoning, not as text.
                (Some(_), false) if rng.chance(1, 2) => ReasoningMode::Optional,
                (Some(_), false) => ReasoningMode::Required,
            };
            let spec = CallSpec { parallel, reasoning: mode, ..CallSpec::new(&tools, ToolChoice::Auto) };
            let compiled = format.compile(&spec).unwrap_or_else(|e| panic!("{format}: {e}"));
            let text = format.write(&tools, &parts, &calls).unwrap();
            let reply = compiled.read(text.as_bytes()).unwrap_or_else(|e| panic!("{format}: {e}\n{text}"));
            assert!(reply.complete, "{format}: {text}");
            assert_eq!(reply.tool_calls(), calls, "{format}: {text}");
            assert_eq!(reply.reasoning, reasoning, "{format}: {text}");
            assert_eq!(reply.content, content.as_deref().and_then(trimmed), "{format}: {text}");
            for (call, parsed) in calls.iter().zip(&reply.calls) {
                let args: Value = serde_json::from_str(&parsed.arguments_text).unwrap();
                assert_eq!(args, call.arguments, "{format}: the arguments' text is their JSON");
            }
        }
    }
}

#[test]
fn raw_strings_cannot_hold_the_closing_marker_of_qwen_xml() {
    let tools = tools();
    let call = ToolCall::new("fs/read_file", json!({"path": "a</parameter>b"}));
    let err = ToolFormat::QwenXml.write(&tools, &ReplyParts::default(), &[call]).unwrap_err();
    assert!(matches!(err, FormatError::Unwritable { .. }), "{err}");
    // And the grammar does not read it either.
    let compiled = ToolFormat::QwenXml.compile(&CallSpec::new(&tools, ToolChoice::Required)).unwrap();
    let text = "<tool_call>\n<function=fs/read_file>\n<parameter=path>\na</parameter>b\n</parameter>\n</function>\n</tool_call>";
    assert!(compiled.read(text.as_bytes()).is_err());
    // JSON values may (they are JSON strings inside).
    let call = ToolCall::new("github.create_issue", json!({"title": "</parameter>", "count": 1}));
    let t = ToolSet::from_openai_json(
        r#"[{"type": "function", "function": {"name": "github.create_issue", "parameters": {"type": "object",
        "properties": {"title": {"type": "string", "maxLength": 20}, "count": {"type": "integer"}}}}}]"#,
    )
    .unwrap();
    let text = ToolFormat::QwenXml.write(&t, &ReplyParts::default(), std::slice::from_ref(&call)).unwrap();
    assert!(text.contains("<parameter=title>\n\"</parameter>\"\n</parameter>"), "{text}");
    let compiled = ToolFormat::QwenXml.compile(&CallSpec::new(&t, ToolChoice::Required)).unwrap();
    assert_eq!(compiled.read(text.as_bytes()).unwrap().tool_calls(), [call]);
}

#[test]
fn names_a_format_cannot_carry_are_errors_at_request_time() {
    let set = |name: &str| {
        ToolSet::from_openai_json(&json!([{"type": "function", "function": {"name": name}}]).to_string()).unwrap()
    };
    for (format, name) in [
        (ToolFormat::QwenXml, "get weather"),
        (ToolFormat::QwenXml, "a>b"),
        (ToolFormat::MistralArgs, "a[1]"),
        (ToolFormat::MistralArgs, "get weather"),
        (ToolFormat::Harmony, "get weather"),
        (ToolFormat::Harmony, "a<b"),
        (ToolFormat::DeepSeekV31, "a<b"),
        (ToolFormat::DeepSeekV31, "a｜b"),
    ] {
        let tools = set(name);
        let err = format.compile(&CallSpec::new(&tools, ToolChoice::Auto)).unwrap_err();
        assert!(matches!(&err, FormatError::InvalidName { name: n, .. } if n == name), "{format} {name}: {err}");
        assert!(err.to_string().contains(&format!("{name:?}")), "{err}");
    }
    // JSON formats escape any name.
    for format in [ToolFormat::Hermes, ToolFormat::Llama3 { python_tag: false }, ToolFormat::MistralJson] {
        let tools = set("say \"hi\" \\ <now> [x]");
        let compiled = format.compile(&CallSpec::new(&tools, ToolChoice::Required)).unwrap();
        let call = ToolCall::new("say \"hi\" \\ <now> [x]", json!({}));
        let text = format.write(&tools, &ReplyParts::default(), std::slice::from_ref(&call)).unwrap();
        assert_eq!(compiled.read(text.as_bytes()).unwrap().tool_calls(), [call], "{format}");
    }
}

/// Every format's markers, Harmony's header words and the tools' names, as text tokens (as
/// Qwen's vocabulary has `<tool_call>`): random walks that pick tokens reach the end of free
/// text (`</think>`, `</parameter>`) and whole calls, which byte by byte they seldom spell
/// out.
const MARKERS: [&str; 31] = [
    "<think>",
    "</think>",
    "[THINK]",
    "[/THINK]",
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "</function>",
    "<parameter=",
    "</parameter>",
    "<|python_tag|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "<|channel|>",
    "<|message|>",
    "<|end|>",
    "<|start|>",
    "<|constrain|>",
    "<|call|>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "assistant",
    "analysis",
    "commentary",
    "final",
    " to=functions.",
    "fs/read_file",
    "github.create_issue",
];

/// A vocabulary of every byte (printable ASCII and the bytes of UTF-8), with `specials` as
/// control tokens (token 0 is EOS), the other [`MARKERS`] and a few JSON pieces as text
/// tokens.
fn vocab(specials: &[&str]) -> Arc<Vocabulary> {
    let mut tokens = vec![(b"<eos>".to_vec(), TokenKind::Control)];
    tokens.extend(specials.iter().map(|s| (s.as_bytes().to_vec(), TokenKind::Control)));
    tokens.extend((0u8..=255).filter(|&b| b >= 0x20 || b == b'\n' || b == b'\t').map(|b| (vec![b], TokenKind::Byte)));
    let pieces = ["{\"", "\": ", "\", ", "name", "arguments", "parameters", "</", "tool_call", "true", "false"];
    for piece in pieces.into_iter().chain(MARKERS.into_iter().filter(|m| !specials.contains(m))) {
        tokens.push((piece.as_bytes().to_vec(), TokenKind::Normal));
    }
    Arc::new(Vocabulary::new(tokens, vec![0]).unwrap())
}

/// The markers of `format` that its model's vocabulary has as special tokens.
fn specials(format: &ToolFormat) -> Vec<&'static str> {
    match format {
        ToolFormat::Hermes | ToolFormat::QwenXml | ToolFormat::Envelope(_) => vec!["<think>", "</think>"],
        ToolFormat::Llama3 { .. } => vec!["<|python_tag|>", "<|eot_id|>"],
        ToolFormat::MistralJson | ToolFormat::MistralArgs => {
            vec!["[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]"]
        }
        ToolFormat::Harmony => {
            vec!["<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|constrain|>", "<|call|>", "<|return|>"]
        }
        ToolFormat::DeepSeekV31 => vec![
            "<｜tool▁calls▁begin｜>",
            "<｜tool▁calls▁end｜>",
            "<｜tool▁call▁begin｜>",
            "<｜tool▁sep｜>",
            "<｜tool▁call▁end｜>",
            "<think>",
            "</think>",
        ],
    }
}

/// Random walks of the format's grammar, with its markers as text and as special tokens,
/// under every tool choice, with and without parallel calls: every complete walk reads back
/// (complete) into calls that validate, as many as the choice allows, and its stream
/// concatenates to the reply read whole.
#[test]
fn random_walks_of_every_format_read_back_into_valid_calls() {
    let tools = tools();
    let choices =
        [ToolChoice::Auto, ToolChoice::Required, ToolChoice::Named("github.create_issue".into()), ToolChoice::None];
    let mut stats = Vec::new();
    for format in formats() {
        for tokens in [false, true] {
            let v = if tokens { vocab(&specials(&format)) } else { vocab(&[]) };
            for choice in &choices {
                for parallel in [false, true] {
                    let reasoning = if parallel { ReasoningMode::Optional } else { ReasoningMode::Off };
                    let spec = CallSpec {
                        parallel,
                        reasoning,
                        vocab: Some(v.clone()),
                        ..CallSpec::new(&tools, choice.clone())
                    };
                    let what = format!("{format} tokens={tokens} {choice} parallel={parallel}");
                    let compiled = Arc::new(format.compile(&spec).unwrap_or_else(|e| panic!("{what}: {e}")));
                    let (mut complete, mut with_calls) = (0, 0);
                    // Up to 12 complete walks, of at most 64.
                    for text in complete_walks(&compiled, &v, 7, (160, 12, 64), &what) {
                        complete += 1;
                        let shown = String::from_utf8_lossy(&text);
                        let reply = compiled.read(&text).unwrap_or_else(|e| panic!("{what}: {e}\n{shown:?}"));
                        assert!(reply.complete, "{what}: {shown:?}");
                        let calls = reply.tool_calls();
                        assert_eq!(calls.len(), reply.calls.len(), "{what}: every call finished: {shown:?}");
                        with_calls += usize::from(!calls.is_empty());
                        for call in &calls {
                            tools.check(call).unwrap_or_else(|e| panic!("{what}: {e}\n{shown:?}"));
                        }
                        match choice {
                            ToolChoice::None => assert!(calls.is_empty(), "{what}: {shown:?}"),
                            ToolChoice::Required => assert!(!calls.is_empty(), "{what}: {shown:?}"),
                            ToolChoice::Named(n) => {
                                assert!(!calls.is_empty() && calls.iter().all(|c| &c.name == n), "{what}: {shown:?}")
                            }
                            ToolChoice::Auto => {}
                        }
                        if !parallel {
                            assert!(calls.len() <= 1, "{what}: two calls without parallel calls: {shown:?}");
                        }
                        check_stream(&compiled, &text, &mut SplitMix64::new(text.len() as u64), &what);
                    }
                    assert!(complete > 0, "{what}: no walk completed");
                    stats.push((what, complete, with_calls));
                }
            }
        }
    }
    // The walks reach calls wherever calls are allowed (not only text).
    for format in formats() {
        let name = format.name();
        let reached = stats.iter().filter(|(w, _, c)| w.starts_with(&format!("{name} ")) && *c > 0).count();
        assert!(reached > 0, "{name}: no walk made a call");
    }
}

/// Streams `text` in random pieces (and, cut, a prefix of it): the events concatenate to
/// the reply read whole.
/// The texts of up to `want` complete random walks of `compiled`'s grammar over `v`, of
/// `tries` walks of at most `max_tokens` (`(max_tokens, want, tries)`), from `seed`. Each walks
/// to a random length, then to an end. (The exploring walk's search for an end cannot get
/// from free text — the reasoning, a Harmony preamble, a raw Qwen3-Coder string — through a
/// whole call within its budget; its stuck walks take tens of seconds each.)
fn complete_walks(
    compiled: &stencil_tools::CompiledFormat,
    v: &Arc<Vocabulary>,
    seed: u64,
    (max_tokens, want, tries): (usize, usize, usize),
    what: &str,
) -> Vec<Vec<u8>> {
    let g = CompiledGrammar::new(&compiled.compiled_tag().grammar, v.clone()).unwrap();
    let mut walker = Walker::new(v.clone());
    let mut rng = Xoshiro256::new(seed);
    let options = WalkOptions { max_tokens, style: Style::TargetLength };
    let mut texts = Vec::new();
    for _ in 0..tries {
        if texts.len() == want {
            break;
        }
        match walker.walk(&g, &mut rng, &options) {
            Ok(w) if w.complete => texts.push(w.text(v)),
            Ok(_) => {}
            Err(e) => panic!("{what}: {e:?}"),
        }
    }
    texts
}

fn check_stream(compiled: &Arc<stencil_tools::CompiledFormat>, text: &[u8], rng: &mut SplitMix64, what: &str) {
    let cut = if text.is_empty() { 0 } else { rng.below(text.len() as u64 + 1) as usize };
    for end in [text.len(), cut] {
        let text = &text[..end];
        let mut stream = compiled.stream().unwrap();
        let mut events = Vec::new();
        let mut at = 0;
        while at < text.len() {
            let n = (1 + rng.below(6) as usize).min(text.len() - at);
            events.extend(stream.push(&text[at..at + n]).unwrap());
            at += n;
        }
        let (rest, reply) = stream.finish(false).unwrap();
        events.extend(rest);
        let shown = String::from_utf8_lossy(text);
        let mut content = String::new();
        let mut reasoning = String::new();
        let mut calls: Vec<(String, String)> = Vec::new();
        for e in events {
            match e {
                ToolEvent::Content(t) => content.push_str(&t),
                ToolEvent::Reasoning(t) => reasoning.push_str(&t),
                ToolEvent::Call { index, name, id } => {
                    assert_eq!(index, calls.len(), "{what}");
                    assert_eq!(id.len(), 9, "{what}");
                    calls.push((name, String::new()));
                }
                ToolEvent::Arguments { index, text } => calls[index].1.push_str(&text),
            }
        }
        assert_eq!(Some(content).filter(|c| !c.is_empty()), reply.content, "{what}: content of {shown:?}");
        assert_eq!(reasoning, reply.reasoning.clone().unwrap_or_default(), "{what}: reasoning of {shown:?}");
        let whole: Vec<(String, String)> =
            reply.calls.iter().map(|c| (c.name.clone(), c.arguments_text.clone())).collect();
        assert_eq!(calls, whole, "{what}: calls of {shown:?}");
    }
}

#[test]
fn markers_are_single_tokens_where_the_vocabulary_has_them() {
    let tools = tools();
    for format in formats() {
        let specials = specials(&format);
        if specials.is_empty() {
            continue;
        }
        let v = vocab(&specials);
        let spec = CallSpec {
            vocab: Some(v.clone()),
            reasoning: ReasoningMode::Optional,
            parallel: true,
            ..CallSpec::new(&tools, ToolChoice::Required)
        };
        let compiled = format.compile(&spec).unwrap();
        let tag = compiled.tag.to_string();
        let as_tokens: Vec<&str> = specials
            .iter()
            .copied()
            .filter(|s| tag.contains(&json!({"type": "token", "token": s}).to_string()))
            .collect();
        let g = CompiledGrammar::new(&compiled.compiled_tag().grammar, v.clone()).unwrap();
        let call = ToolCall::new("now", json!({}));
        // A reply with reasoning (its markers are the vocabulary's tokens in most families).
        let parts = ReplyParts { reasoning: Some("Hm.".into()), ..Default::default() };
        let mut text = format.write(&tools, &parts, &[call]).unwrap();
        if format == (ToolFormat::Llama3 { python_tag: false }) {
            // Bare JSON calls and `<think>` (not a token of Llama's vocabulary): no marker of
            // this format is a token, and `<|python_tag|>`, which is, is not in it.
            assert!(as_tokens.is_empty(), "{format}: {tag}");
            let tagged = text.replace(r#"{"name""#, r#"<|python_tag|>{"name""#);
            let mut m = stencil_mask::Matcher::new(g);
            let refused = tokenize(&v, &tagged, &specials).iter().any(|&t| m.accept_token(t).is_err());
            assert!(refused, "{format}: {tagged:?}");
            continue;
        }
        assert!(!as_tokens.is_empty(), "{format}: no marker is a token: {tag}");
        if format == (ToolFormat::Llama3 { python_tag: true }) {
            // The writer leaves the optional `<|python_tag|>` out.
            text = text.replace(r#"{"name""#, r#"<|python_tag|>{"name""#);
        }
        assert!(as_tokens.iter().any(|s| text.contains(s)), "{format}: no token marker in {text:?}");
        // A marker spelled out in text tokens is not the marker: the grammar refuses it.
        let tokens = tokenize(&v, &text, &specials);
        let mut m = stencil_mask::Matcher::new(g.clone());
        for &t in &tokens {
            m.accept_token(t).unwrap_or_else(|e| panic!("{format}: {e} in {text:?}"));
        }
        assert!(m.can_end(), "{format}: {text:?}");
        let spelled = tokenize(&v, &text, &[]);
        let mut m = stencil_mask::Matcher::new(g);
        let refused = spelled.iter().any(|&t| m.accept_token(t).is_err()) || !m.can_end();
        assert!(refused, "{format}: markers spelled as text are accepted: {text:?}");
    }
}

/// `text` as tokens of `v`: each of `specials` as its token, everything else byte by byte.
fn tokenize(v: &Vocabulary, text: &str, specials: &[&str]) -> Vec<u32> {
    let mut out = Vec::new();
    let mut rest = text.as_bytes();
    'outer: while !rest.is_empty() {
        for s in specials {
            if rest.starts_with(s.as_bytes()) {
                out.push(v.find_token(s.as_bytes()).unwrap());
                rest = &rest[s.len()..];
                continue 'outer;
            }
        }
        let id =
            (0..v.len() as u32).find(|&id| v.kind(id) == TokenKind::Byte && v.token_bytes(id) == &rest[..1]).unwrap();
        out.push(id);
        rest = &rest[1..];
    }
    out
}

#[test]
fn auto_allows_text_before_between_and_after_calls_and_none_allows_no_call() {
    let tools = tools();
    let compiled =
        ToolFormat::Hermes.compile(&CallSpec { parallel: true, ..CallSpec::new(&tools, ToolChoice::Auto) }).unwrap();
    let call = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
    let text = format!("First. {call} Then. {call} Done.");
    let reply = compiled.read(text.as_bytes()).unwrap();
    assert_eq!(reply.calls.len(), 2);
    assert_eq!(reply.content.as_deref(), Some("First.  Then.  Done."));
    // Without parallel calls nothing follows the call.
    let single = ToolFormat::Hermes.compile(&CallSpec::new(&tools, ToolChoice::Auto)).unwrap();
    assert!(single.read(format!("First. {call}").as_bytes()).unwrap().complete);
    assert!(single.read(format!("First. {call} Then.").as_bytes()).is_err());
    // `required` starts with the call.
    let required = ToolFormat::Hermes.compile(&CallSpec::new(&tools, ToolChoice::Required)).unwrap();
    assert!(required.read(format!("First. {call}").as_bytes()).is_err());
    // `none`: the trigger is text like any other.
    let none = ToolFormat::Hermes.compile(&CallSpec::new(&tools, ToolChoice::None)).unwrap();
    let reply = none.read(call.as_bytes()).unwrap();
    assert!(reply.calls.is_empty() && reply.content.is_some());
    // The reasoning cannot hold a call's trigger.
    let spec = CallSpec { reasoning: ReasoningMode::Required, ..CallSpec::new(&tools, ToolChoice::Auto) };
    let thinking = ToolFormat::Hermes.compile(&spec).unwrap();
    assert!(thinking.read(format!("<think>{call}</think>").as_bytes()).is_err());
    assert!(thinking.read(format!("<think>hm</think>{call}").as_bytes()).unwrap().complete);
}

#[test]
fn llama_calls_are_triggered_by_bare_json_and_separated_by_semicolons() {
    let tools = tools();
    let spec = CallSpec { parallel: true, ..CallSpec::new(&tools, ToolChoice::Auto) };
    let compiled = ToolFormat::Llama3 { python_tag: true }.compile(&spec).unwrap();
    let text = r#"Sure: <|python_tag|>{"name": "now", "parameters": {}}; {"name": "github.create_issue", "parameters": {"title": "x", "count": 2}}"#;
    let reply = compiled.read(text.as_bytes()).unwrap();
    assert_eq!(reply.content.as_deref(), Some("Sure:"));
    assert_eq!(reply.calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["now", "github.create_issue"]);
    // Text may not contain the trigger without starting a call.
    assert!(compiled.read(br#"Use {"name": "x"} like this."#).is_err());
}

#[test]
fn harmony_reads_calls_in_either_header_order_and_ends_on_call() {
    let tools = tools();
    let spec = CallSpec { reasoning: ReasoningMode::Optional, ..CallSpec::new(&tools, ToolChoice::Auto) };
    let compiled = ToolFormat::Harmony.compile(&spec).unwrap();
    for text in [
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary to=functions.now <|constrain|>json<|message|>{}<|call|>",
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant to=functions.now<|channel|>commentary json<|message|>{}<|call|>",
    ] {
        let reply = compiled.read(text.as_bytes()).unwrap();
        assert!(reply.complete, "{text}");
        assert_eq!(reply.reasoning.as_deref(), Some("Think."));
        assert_eq!(reply.tool_calls(), [ToolCall::new("now", json!({}))]);
        // The model ends the call with `<|call|>`, its end-of-generation token: not in the
        // text it returns.
        let cut = &text[..text.len() - "<|call|>".len()];
        assert!(!compiled.read(cut.as_bytes()).unwrap().complete);
        let ended = compiled.read_ended(cut.as_bytes(), true).unwrap();
        assert!(ended.complete && ended.calls[0].complete, "{cut}");
    }
    let reply = compiled.read(b"<|channel|>final<|message|>It is noon.").unwrap();
    assert_eq!((reply.content.as_deref(), reply.calls.len()), (Some("It is noon."), 0));
}

#[test]
fn the_structural_tag_is_json_a_client_could_send() {
    let tools = tools();
    for format in formats() {
        let compiled = format.compile(&CallSpec::new(&tools, ToolChoice::Required)).unwrap();
        // The JSON compiles on its own into the same grammar.
        let again = stencil_structural::compile_json(&compiled.tag, &Default::default()).unwrap();
        assert_eq!(again.grammar.rules.len(), compiled.compiled_tag().grammar.rules.len(), "{format}");
    }
}

#[test]
fn formats_are_recognized_by_name_and_call_ids_have_nine_characters() {
    for name in stencil_tools::format::FORMAT_NAMES {
        assert_eq!(name.parse::<ToolFormat>().unwrap().name(), name);
    }
    assert!(matches!("gpt-4".parse::<ToolFormat>(), Err(FormatError::UnknownFormat(_))));
    let ids: Vec<String> = (0..1000).map(|_| ToolFormat::new_call_id()).collect();
    assert!(ids.iter().all(|id| id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric())));
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len());
}

/// Streams `text` byte by byte: the reasoning, content and calls' arguments the events add.
fn stream_bytes(compiled: &Arc<stencil_tools::CompiledFormat>, text: &[u8]) -> (String, String, Vec<String>) {
    let mut stream = compiled.stream().unwrap();
    let mut events = Vec::new();
    for b in text {
        events.extend(stream.push(std::slice::from_ref(b)).unwrap());
    }
    events.extend(stream.finish(false).unwrap().0);
    let (mut reasoning, mut content, mut args) = (String::new(), String::new(), Vec::new());
    for e in events {
        match e {
            ToolEvent::Reasoning(t) => reasoning.push_str(&t),
            ToolEvent::Content(t) => content.push_str(&t),
            ToolEvent::Call { .. } => args.push(String::new()),
            ToolEvent::Arguments { index, text } => args[index].push_str(&text),
        }
    }
    (reasoning, content, args)
}

#[test]
fn streams_split_characters_and_markers_that_are_tokens_as_the_whole_reply() {
    let tools = tools();
    // A character cut between two pieces is sent once whole (not as U+FFFD).
    let spec = CallSpec { parallel: true, ..CallSpec::new(&tools, ToolChoice::Auto) };
    let compiled = Arc::new(ToolFormat::Hermes.compile(&spec).unwrap());
    let text = "é 天気 😀 <tool_call>\n{\"name\": \"github.create_issue\", \"arguments\": {\"title\": \"天気\", \"count\": 1}}\n</tool_call>";
    let (_, content, args) = stream_bytes(&compiled, text.as_bytes());
    assert_eq!(content, "é 天気 😀");
    assert_eq!(args, [r#"{"title": "天気", "count": 1}"#]);
    // Where the reasoning's end is a token, the reasoning cannot spell it out: the reply
    // reads one way as it streams (else, at `[/THINK][`, the reasoning would read as still
    // open and holding the spelled `[/THINK]`).
    let v = vocab(&specials(&ToolFormat::MistralArgs));
    let spec = CallSpec {
        vocab: Some(v),
        reasoning: ReasoningMode::Optional,
        parallel: true,
        ..CallSpec::new(&tools, ToolChoice::Required)
    };
    let compiled = Arc::new(ToolFormat::MistralArgs.compile(&spec).unwrap());
    let text = "[THINK]a [x][/THINK][TOOL_CALLS]now[ARGS]{}";
    assert_eq!(stream_bytes(&compiled, text.as_bytes()), ("a [x]".into(), String::new(), vec!["{}".into()]));
    let whole = compiled.read(text.as_bytes()).unwrap();
    assert_eq!((whole.reasoning.as_deref(), whole.tool_calls().len()), (Some("a [x]"), 1));
}

#[test]
fn qwen_xml_values_may_touch_their_markers() {
    let tools = tools();
    let compiled = ToolFormat::QwenXml.compile(&CallSpec::new(&tools, ToolChoice::Required)).unwrap();
    // No newline around the values: a number right before `</parameter>` is read.
    let text = "<tool_call>\n<function=github.create_issue>\n<parameter=title>a</parameter><parameter=count>5</parameter></function>\n</tool_call>";
    let reply = compiled.read(text.as_bytes()).unwrap();
    assert!(reply.complete);
    assert_eq!(reply.tool_calls(), [ToolCall::new("github.create_issue", json!({"title": "a", "count": 5}))]);
}

/// With `tool_choice: none` and an answer format (a `response_format` after the
/// reasoning), every format's random walks read back into reasoning and content, and the
/// content is JSON that validates against the answer's schema; streamed, the pieces
/// concatenate to the whole reply.
#[test]
fn an_answer_under_a_schema_follows_the_reasoning_in_every_format() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "y"]}},
                        "required": ["a", "b"], "additionalProperties": false});
    let answer = json!({"type": "json_schema", "json_schema": schema.clone()});
    let tools = tools();
    for format in formats() {
        for tokens in [false, true] {
            let v = if tokens { vocab(&specials(&format)) } else { vocab(&[]) };
            let spec = CallSpec {
                reasoning: ReasoningMode::Required,
                vocab: Some(v.clone()),
                answer: Some(answer.clone()),
                ..CallSpec::new(&tools, ToolChoice::None)
            };
            let what = format!("{format} tokens={tokens}");
            let compiled = Arc::new(format.compile(&spec).unwrap_or_else(|e| panic!("{what}: {e}")));
            let mut complete = 0;
            for text in complete_walks(&compiled, &v, 11, (120, 6, 48), &what) {
                complete += 1;
                let shown = String::from_utf8_lossy(&text);
                let reply = compiled.read(&text).unwrap_or_else(|e| panic!("{what}: {e}\n{shown:?}"));
                assert!(reply.complete && reply.calls.is_empty(), "{what}: {shown:?}");
                assert!(reply.reasoning.is_some(), "{what}: no reasoning in {shown:?}");
                let content = reply.content.as_deref().unwrap_or_else(|| panic!("{what}: no content in {shown:?}"));
                let value: Value = serde_json::from_str(content).unwrap_or_else(|e| panic!("{what}: {e}: {content:?}"));
                let valid = value.as_object().is_some_and(|o| o.len() == 2)
                    && value["a"].as_f64().is_some_and(|a| a.fract() == 0.0)
                    && (value["b"] == "x" || value["b"] == "y");
                assert!(valid, "{what}: {content}");
                check_stream(&compiled, &text, &mut SplitMix64::new(text.len() as u64), &what);
            }
            assert!(complete > 0, "{what}: no walk completed");
        }
    }
}
