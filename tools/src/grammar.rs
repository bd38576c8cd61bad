//! The grammars of tool calling: the stages of multi-stage decoding, and the single grammar
//! of a whole reply.

use stencil_grammar::{CharClass, Expr, Grammar};

use crate::envelope::{name_and_quote, Envelope, CONNECTOR};
use crate::set::ToolSet;

/// What the first stage of a reply allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Opening {
    /// A call or plain text (`auto`).
    CallOrText,
    /// A call (`required`, a named tool).
    Call,
    /// Plain text only (`none`).
    Text,
    /// After a call: the end of the reply, or another call.
    NextCallOrEnd,
}

/// Plain text that is not a call: optional whitespace, then anything that does not start
/// with the open tag (without its surrounding whitespace), including nothing.
pub(crate) fn not_a_call(open: &str) -> Expr {
    let ws = Expr::star(Expr::Class(CharClass::new([
        (' ' as u32, ' ' as u32),
        ('\t' as u32, '\n' as u32),
        ('\r' as u32, '\r' as u32),
    ])));
    let anything = Expr::star(Expr::AnyChar);
    let open: Vec<char> = open.trim().chars().collect();
    let mut branches = vec![Expr::Empty];
    for (i, &c) in open.iter().enumerate() {
        let prefix: String = open[..i].iter().collect();
        let mut excluded = vec![(c as u32, c as u32)];
        if i == 0 {
            // The first character after the whitespace is not whitespace.
            excluded.extend([(' ' as u32, ' ' as u32), ('\t' as u32, '\n' as u32), ('\r' as u32, '\r' as u32)]);
        }
        let other = Expr::Class(CharClass { ranges: excluded, negated: true });
        // `prefix` then a different character, or the reply ends inside the prefix.
        let after = Expr::seq([other, anything.clone()]);
        branches
            .push(Expr::seq([Expr::literal(&prefix), if i == 0 { after } else { Expr::alt([Expr::Empty, after]) }]));
    }
    Expr::seq([ws, Expr::alt(branches)])
}

/// One of the tool names, JSON-escaped, then the closing quote (so that a name that is a
/// prefix of another is still decided by the next character; see [`name_and_quote`]).
fn names(names: &[&str]) -> Expr {
    Expr::alt(names.iter().map(|n| Expr::literal(&name_and_quote(n))))
}

/// Stage 1 of multi-stage decoding: what the reply (or the next call) opens with, up to and
/// including the tool name and its closing quote.
pub(crate) fn opening(envelope: &Envelope, tools: &[&str], opening: Opening) -> Grammar {
    let call = |first: bool| Expr::seq([Expr::literal(&envelope.head(first)), names(tools)]);
    let body = match opening {
        Opening::CallOrText => Expr::alt([call(true), not_a_call(&envelope.open)]),
        Opening::Call => call(true),
        Opening::Text => not_a_call(&envelope.open),
        Opening::NextCallOrEnd => Expr::alt([Expr::Empty, call(false)]),
    };
    let mut g = Grammar::new();
    g.root = g.add_rule("root", body);
    g
}

/// The whole reply as one grammar: up to `max_calls` calls, each `head name CONNECTOR
/// arguments tail` with the tool's argument grammar embedded, or plain text (`Opening::Text`
/// and `Opening::CallOrText`). `tools` are the names allowed; all must be in `set`.
pub(crate) fn whole_reply(
    set: &ToolSet,
    envelope: &Envelope,
    tools: &[&str],
    opening: Opening,
    max_calls: usize,
) -> Grammar {
    let mut g = Grammar::new();
    let root = g.add_rule("root", Expr::Empty);
    let call = g.add_rule("call", Expr::Empty);
    let mut alternatives = Vec::new();
    for (i, entry) in set.entries().iter().enumerate() {
        let name = entry.definition.name.as_str();
        if !tools.contains(&name) {
            continue;
        }
        let args = g.embed(&entry.grammar, &format!("tool{i}-"));
        alternatives
            .push(Expr::seq([Expr::literal(&format!("{}{CONNECTOR}", name_and_quote(name))), Expr::Rule(args)]));
    }
    let head = |first: bool| Expr::literal(&envelope.head(first));
    g.set_body(call, Expr::seq([Expr::alt(alternatives), Expr::literal(&envelope.tail())]));
    let calls = Expr::seq([
        head(true),
        Expr::Rule(call),
        Expr::repeat(Expr::seq([head(false), Expr::Rule(call)]), 0, Some(max_calls.max(1) as u32 - 1)),
    ]);
    let body = match opening {
        Opening::CallOrText => Expr::alt([calls, not_a_call(&envelope.open)]),
        Opening::Call | Opening::NextCallOrEnd => calls,
        Opening::Text => not_a_call(&envelope.open),
    };
    g.set_body(root, body);
    g.root = root;
    g
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use stencil_grammar::reference::Recognizer;

    fn set() -> ToolSet {
        ToolSet::from_openai_value(&json!([
            {"type": "function", "function": {"name": "search", "parameters":
                {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"], "additionalProperties": false}}},
            {"type": "function", "function": {"name": "search_web", "parameters":
                {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false}}},
        ]))
        .unwrap()
    }

    #[test]
    fn text_excludes_exactly_the_replies_that_open_a_call() {
        let g = {
            let mut g = Grammar::new();
            g.root = g.add_rule("root", not_a_call("<tool_call>"));
            g
        };
        let r = Recognizer::new(&g).unwrap();
        for ok in ["", "Hello", "<", "<tool", "<tool_cal", "<tool_calx>", " \n It is <tool_call>", "<b>bold</b>"] {
            assert!(r.matches(ok.as_bytes()), "{ok:?} should be text");
        }
        for call in ["<tool_call>", " <tool_call>{", "\n<tool_call>x"] {
            assert!(!r.matches(call.as_bytes()), "{call:?} opens a call");
        }
    }

    #[test]
    fn opening_stops_after_the_name_and_its_quote() {
        let env = Envelope::fallback();
        let g = opening(&env, &["search", "search_web"], Opening::Call);
        let r = Recognizer::new(&g).unwrap();
        assert!(r.matches(br#"<tool_call>{"name": "search""#));
        assert!(r.matches(br#"<tool_call>{"name": "search_web""#));
        assert!(!r.matches(br#"<tool_call>{"name": "sear""#));
        assert!(!r.matches(b"hello"));
        let next = opening(&env, &["search"], Opening::NextCallOrEnd);
        let next = Recognizer::new(&next).unwrap();
        assert!(next.matches(b""));
        assert!(next.matches(b"\n<tool_call>{\"name\": \"search\""));
        let auto = opening(&env, &["search"], Opening::CallOrText);
        let auto = Recognizer::new(&auto).unwrap();
        assert!(auto.matches(b"Hi there"));
        assert!(auto.matches(b"<tool_call>{\"name\": \"search\""));
    }

    #[test]
    fn whole_reply_embeds_each_tools_arguments() {
        let env = Envelope::fallback();
        let set = set();
        let g = whole_reply(&set, &env, &["search", "search_web"], Opening::Call, 2);
        let r = Recognizer::new(&g).unwrap();
        let one = r#"<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>"#;
        let two = format!("{one}\n<tool_call>{{\"name\": \"search_web\", \"arguments\": {{\"n\": 3}}}}</tool_call>");
        assert!(r.matches(one.as_bytes()));
        assert!(r.matches(two.as_bytes()));
        assert!(!r.matches(format!("{two}\n{one}").as_bytes()), "at most 2 calls");
        // Each name takes only its own arguments.
        assert!(!r.matches(br#"<tool_call>{"name": "search", "arguments": {"n": 3}}</tool_call>"#));
        let only_web = whole_reply(&set, &env, &["search_web"], Opening::Call, 1);
        let only_web = Recognizer::new(&only_web).unwrap();
        assert!(!only_web.matches(one.as_bytes()));
        let auto = whole_reply(&set, &env, &["search"], Opening::CallOrText, 1);
        let auto = Recognizer::new(&auto).unwrap();
        assert!(auto.matches(b"No tool needed."));
        assert!(auto.matches(one.as_bytes()));
    }
}

#[cfg(test)]
mod name_tests {
    use super::*;
    use crate::call::ToolCall;
    use crate::envelope::read_name;
    use serde_json::json;
    use stencil_grammar::reference::Recognizer;

    /// Namespaced names, names that are prefixes of others (also once escaped), and names
    /// with the two characters JSON escapes.
    const NAMES: [&str; 10] = [
        "github.create_issue",
        "fs/read",
        "fs/read_file",
        "mcp:weather.get",
        "a",
        "a\"",
        "a\\",
        "say \"hi\"",
        "say",
        "C:\\tools\\",
    ];

    fn set() -> ToolSet {
        let mut set = ToolSet::new();
        for (i, name) in NAMES.iter().enumerate() {
            // Each tool its own argument, so that a call is tied to its name.
            let schema = json!({"type": "object", "properties": {format!("p{i}"): {"type": "integer"}},
                "required": [format!("p{i}")], "additionalProperties": false});
            set.add(crate::ToolDefinition::new(*name, "", schema)).unwrap();
        }
        set
    }

    fn head(name_text: &str) -> String {
        format!("<tool_call>{{\"name\": \"{name_text}")
    }

    #[test]
    fn the_opening_takes_each_name_escaped_and_nothing_else() {
        let env = Envelope::fallback();
        let g = opening(&env, &NAMES, Opening::Call);
        let r = Recognizer::new(&g).unwrap();
        for name in NAMES {
            let text = format!("{}{}", env.head(true), name_and_quote(name));
            assert!(r.matches(text.as_bytes()), "{text}");
            // What multi-stage decoding reads back is the name itself.
            assert_eq!(read_name(&text[env.head(true).len()..]).as_deref(), Some(name));
        }
        for (bad, why) in [
            (head(r#"fs/read_file"#), "no closing quote"),
            (head(r#"fs\/read""#), "not the canonical escape"),
            (head(r#"fs/rea""#), "a prefix of a name"),
            (head(r#"fs/read_""#), "between two names"),
            (head(r#"say "hi"""#), "a quote unescaped"),
            (head(r#"a"""#), "a quote unescaped"),
            (head(r#"a\""#), "`a\"` without its closing quote"),
            (head(r#"a\\\""#), "an escaped quote after `a\\`"),
            (head(r#"C:\tools\""#), "backslashes unescaped"),
            (head(r#"mcp:weather""#), "a prefix"),
            (head(r#"github.create_issue"x"#), "text after the quote"),
            (head(r#"Github.create_issue""#), "compared exactly"),
        ] {
            assert!(!r.matches(bad.as_bytes()), "{bad:?} matched ({why})");
        }
        // A name chosen by name: only it.
        let only = opening(&env, &["a"], Opening::Call);
        let only = Recognizer::new(&only).unwrap();
        assert!(only.matches(head("a\"").as_bytes()));
        assert!(!only.matches(head("a\\\"\"").as_bytes()), "`a\"` is another tool");
        assert!(!only.matches(head("a\\\\\"").as_bytes()), "`a\\` is another tool");
    }

    #[test]
    fn the_whole_reply_ties_each_escaped_name_to_its_arguments() {
        let set = set();
        for env in [Envelope::fallback(), Envelope::hermes()] {
            let g = whole_reply(&set, &env, &NAMES, Opening::Call, 2);
            let r = Recognizer::new(&g).unwrap();
            for (i, name) in NAMES.iter().enumerate() {
                // What Envelope::write writes is in the language, and reads back as the call.
                let call = ToolCall::new(*name, json!({format!("p{i}"): 7}));
                let text = env.write(std::slice::from_ref(&call));
                assert!(r.matches(text.as_bytes()), "{text}");
                assert_eq!(env.parse(&text).unwrap(), crate::Reply::Calls(vec![call.clone()]));
                // Another tool's arguments are not.
                let other = (i + 1) % NAMES.len();
                let wrong = env.write(&[ToolCall::new(*name, json!({format!("p{other}"): 7}))]);
                assert!(!r.matches(wrong.as_bytes()), "{wrong}");
                // Two calls.
                let two = env.write(&[call.clone(), ToolCall::new(NAMES[other], json!({format!("p{other}"): 1}))]);
                assert!(r.matches(two.as_bytes()), "{two}");
            }
            // The name unescaped, or a name that is only a prefix: not in the language.
            for (bad, args) in
                [(r#"say "hi""#, r#"{"p7": 1}"#), (r"C:\tools\", r#"{"p9": 1}"#), ("fs/rea", r#"{"p1": 1}"#)]
            {
                let good = env.write(&[ToolCall::new(bad, serde_json::from_str(args).unwrap())]);
                let text = format!("{}{bad}\"{CONNECTOR}{args}{}", env.head(true), env.tail());
                assert_eq!(r.matches(good.as_bytes()), bad != "fs/rea", "{good}");
                assert!(!r.matches(text.as_bytes()), "{text}");
            }
            let only = whole_reply(&set, &env, &["fs/read"], Opening::Call, 1);
            let only = Recognizer::new(&only).unwrap();
            assert!(only.matches(env.write(&[ToolCall::new("fs/read", json!({"p1": 0}))]).as_bytes()));
            assert!(!only.matches(env.write(&[ToolCall::new("fs/read_file", json!({"p2": 0}))]).as_bytes()));
        }
    }
}
