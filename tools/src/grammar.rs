//! The grammars of tool calling: the stages of multi-stage decoding, and the single grammar
//! of a whole reply.

use stencil_grammar::{CharClass, Expr, Grammar};

use crate::envelope::{Envelope, CONNECTOR};
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

/// One of the tool names, then the closing quote (so that a name that is a prefix of
/// another is still decided by the next character).
fn names(names: &[&str]) -> Expr {
    Expr::alt(names.iter().map(|n| Expr::literal(&format!("{n}\""))))
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
        alternatives.push(Expr::seq([Expr::literal(&format!("{name}\"{CONNECTOR}")), Expr::Rule(args)]));
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
