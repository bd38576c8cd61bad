//! Reading a reply while it is decoded ([`ReplyStream`]): plain text as it comes, or calls
//! — each call's name once it is whole, then its arguments' JSON text piece by piece — for
//! streaming APIs (OpenAI's `tool_calls` deltas).
//!
//! The stream follows the text constrained decoding writes (see [`crate::envelope`]): after
//! leading whitespace, either the first call's head (`open{"name": "`) or plain text; a
//! call is its head, the escaped name and its quote, `, "arguments": `, the arguments (a
//! JSON object or array), `}` and the close tag; further calls follow the separator. Text
//! that departs from that form ends the stream's events: what was sent stays sent, and the
//! whole reply is read at the end with [`Envelope::parse`] as always.

use crate::envelope::{read_name, Envelope, CONNECTOR};

/// What a piece of the reply added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEvent {
    /// Plain text (the reply is not calls): leading and trailing whitespace of the whole
    /// reply left out, as [`Envelope::parse`] trims it.
    Text(String),
    /// A call starts.
    Call {
        /// Its position in the reply, from 0.
        index: usize,
        /// Its tool's name (unescaped).
        name: String,
    },
    /// More of a call's arguments.
    Arguments {
        /// The call's position in the reply.
        index: usize,
        /// The next piece: one call's pieces put together are its arguments' JSON text.
        text: String,
    },
}

/// Where the reader is in the reply.
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// Nothing decided yet: whitespace, and perhaps the start of the first call's head.
    Start,
    /// Plain text; the whitespace held back (it is sent when more text follows).
    Text { held: String },
    /// After a head: the name so far, up to its closing quote.
    Name,
    /// After the name: the connector so far.
    Connector,
    /// In the arguments: nesting depth (0 before the first bracket), inside a string,
    /// after a backslash.
    Arguments { depth: usize, in_string: bool, escaped: bool },
    /// After the arguments: the tail (`}close`) so far.
    Tail,
    /// After a call: the next call's head, or the end.
    Between,
    /// The text left the form: no more events.
    Off,
}

/// Turns the pieces of a decoded reply into [`StreamEvent`]s.
///
/// ```
/// use stencil_tools::{Envelope, ReplyStream, StreamEvent};
///
/// let mut stream = ReplyStream::new(Envelope::fallback());
/// let mut events = Vec::new();
/// for piece in ["<tool_", "call>{\"name\": \"get_", "weather\", \"argu", "ments\": {\"city\":", "\"Oslo\"}}</tool_call>"] {
///     events.extend(stream.push(piece));
/// }
/// assert_eq!(events[0], StreamEvent::Call { index: 0, name: "get_weather".into() });
/// let arguments: String = events[1..]
///     .iter()
///     .map(|e| match e {
///         StreamEvent::Arguments { text, .. } => text.as_str(),
///         _ => panic!("{e:?}"),
///     })
///     .collect();
/// assert_eq!(arguments, r#"{"city":"Oslo"}"#);
/// ```
#[derive(Clone, Debug)]
pub struct ReplyStream {
    envelope: Envelope,
    state: State,
    /// Text of the current part not yet decided (a head, a name, a connector, a tail).
    pending: String,
    /// Calls started.
    calls: usize,
}

impl ReplyStream {
    /// A reader for replies in `envelope`.
    pub fn new(envelope: Envelope) -> Self {
        ReplyStream { envelope, state: State::Start, pending: String::new(), calls: 0 }
    }

    /// Each call's arguments as `text`, a whole reply, writes them (the JSON text, not
    /// re-serialized); as many as the calls the stream reads.
    ///
    /// ```
    /// use stencil_tools::{Envelope, ReplyStream};
    /// let text = r#"<tool_call>{"name": "f", "arguments": { "x" : 1 }}</tool_call>"#;
    /// assert_eq!(ReplyStream::arguments_texts(&Envelope::fallback(), text), [r#"{ "x" : 1 }"#]);
    /// ```
    pub fn arguments_texts(envelope: &Envelope, text: &str) -> Vec<String> {
        let mut texts: Vec<String> = Vec::new();
        for event in ReplyStream::new(envelope.clone()).push(text) {
            match event {
                StreamEvent::Call { .. } => texts.push(String::new()),
                StreamEvent::Arguments { index, text } => texts[index].push_str(&text),
                StreamEvent::Text(_) => {}
            }
        }
        texts
    }

    /// Calls started so far.
    pub fn calls(&self) -> usize {
        self.calls
    }

    /// After the last piece: a reply that never left its start (blank, or a proper prefix
    /// of a call's head) is plain text.
    pub fn finish(&mut self) -> Vec<StreamEvent> {
        let text = std::mem::take(&mut self.pending);
        match self.state {
            State::Start if !text.trim().is_empty() => {
                self.state = State::Off;
                vec![StreamEvent::Text(text.trim_end().to_string())]
            }
            _ => Vec::new(),
        }
    }

    /// Reads the next piece of the reply.
    pub fn push(&mut self, piece: &str) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        for c in piece.chars() {
            self.step(c, &mut events);
        }
        // Arguments go out per piece, not per character.
        let mut merged: Vec<StreamEvent> = Vec::with_capacity(events.len());
        for e in events {
            match (merged.last_mut(), e) {
                (Some(StreamEvent::Arguments { index: i, text }), StreamEvent::Arguments { index, text: more })
                    if *i == index =>
                {
                    text.push_str(&more)
                }
                (Some(StreamEvent::Text(text)), StreamEvent::Text(more)) => text.push_str(&more),
                (_, e) => merged.push(e),
            }
        }
        merged
    }

    fn step(&mut self, c: char, events: &mut Vec<StreamEvent>) {
        match &mut self.state {
            State::Off => {}
            State::Start => {
                if self.pending.is_empty() && c.is_whitespace() {
                    return;
                }
                self.pending.push(c);
                let head = self.envelope.head(true);
                if self.pending == head {
                    self.pending.clear();
                    self.state = State::Name;
                } else if !head.starts_with(&self.pending) {
                    let text = std::mem::take(&mut self.pending);
                    self.state = State::Text { held: String::new() };
                    text.chars().for_each(|c| self.step(c, events));
                }
            }
            State::Text { held } => {
                if c.is_whitespace() {
                    held.push(c);
                } else {
                    let mut text = std::mem::take(held);
                    text.push(c);
                    events.push(StreamEvent::Text(text));
                }
            }
            State::Name => {
                self.pending.push(c);
                // The name ends at its first unescaped quote.
                let escaped = self.pending.chars().rev().skip(1).take_while(|&b| b == '\\').count() % 2 == 1;
                if c == '"' && !escaped {
                    match read_name(&self.pending) {
                        Some(name) => {
                            events.push(StreamEvent::Call { index: self.calls, name });
                            self.calls += 1;
                            self.pending.clear();
                            self.state = State::Connector;
                        }
                        None => self.state = State::Off,
                    }
                }
            }
            State::Connector => {
                self.expect(c, CONNECTOR, State::Arguments { depth: 0, in_string: false, escaped: false })
            }
            State::Arguments { depth, in_string, escaped } => {
                let index = self.calls - 1;
                if *depth == 0 && !matches!(c, '{' | '[') {
                    self.state = State::Off;
                    return;
                }
                events.push(StreamEvent::Arguments { index, text: c.to_string() });
                if *in_string {
                    match (c, *escaped) {
                        (_, true) => *escaped = false,
                        ('\\', false) => *escaped = true,
                        ('"', false) => *in_string = false,
                        _ => {}
                    }
                    return;
                }
                match c {
                    '"' => *in_string = true,
                    '{' | '[' => *depth += 1,
                    '}' | ']' => {
                        *depth -= 1;
                        if *depth == 0 {
                            self.state = State::Tail;
                        }
                    }
                    _ => {}
                }
            }
            State::Tail => self.expect(c, &self.envelope.tail(), State::Between),
            State::Between => self.expect(c, &self.envelope.head(false), State::Name),
        }
    }

    /// Reads `c` as the next character of `literal`: the whole of it moves on to `next`,
    /// anything else leaves the form.
    fn expect(&mut self, c: char, literal: &str, next: State) {
        self.pending.push(c);
        if self.pending == literal {
            self.pending.clear();
            self.state = next;
        } else if !literal.starts_with(&self.pending) {
            self.state = State::Off;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{Reply, ToolCall};

    /// The events of `text` cut into pieces of `size` characters.
    fn events(envelope: &Envelope, text: &str, size: usize) -> Vec<StreamEvent> {
        let mut stream = ReplyStream::new(envelope.clone());
        let chars: Vec<char> = text.chars().collect();
        let mut events: Vec<StreamEvent> =
            chars.chunks(size.max(1)).flat_map(|piece| stream.push(&piece.iter().collect::<String>())).collect();
        events.extend(stream.finish());
        events
    }

    /// What the events say, put together: the text, or each call's name and arguments.
    fn assemble(events: &[StreamEvent]) -> (String, Vec<(String, String)>) {
        let (mut text, mut calls) = (String::new(), Vec::<(String, String)>::new());
        for e in events {
            match e {
                StreamEvent::Text(t) => text.push_str(t),
                StreamEvent::Call { index, name } => {
                    assert_eq!(*index, calls.len());
                    calls.push((name.clone(), String::new()));
                }
                StreamEvent::Arguments { index, text } => calls[*index].1.push_str(text),
            }
        }
        (text, calls)
    }

    #[test]
    fn pieces_of_any_size_give_what_parse_reads() {
        let calls = [
            ToolCall::new("get_weather", json!({"city": "Oslo", "unit": "celsius"})),
            ToolCall::new("say \"hi\"\\now", json!({"text": "a } ] \" \\ {", "n": [1, {"x": []}]})),
            ToolCall::new("fs/read_file", json!([])),
        ];
        for envelope in [Envelope::fallback(), Envelope::hermes()] {
            let text = format!("  {}\n", envelope.write(&calls));
            let Ok(Reply::Calls(read)) = envelope.parse(&text) else { panic!("{text}") };
            for size in [1, 2, 3, 7, 1000] {
                let (plain, streamed) = assemble(&events(&envelope, &text, size));
                assert!(plain.is_empty());
                let streamed: Vec<ToolCall> = streamed
                    .into_iter()
                    .map(|(name, args)| ToolCall::new(name, serde_json::from_str(&args).unwrap()))
                    .collect();
                assert_eq!(streamed, read, "pieces of {size}");
            }
        }
    }

    #[test]
    fn plain_text_is_trimmed_as_parse_trims_it() {
        let envelope = Envelope::fallback();
        for text in ["  It is sunny.\n\n", "<tool> is not a call", "<tool_calls", "x", " <tool_call "] {
            let Ok(Reply::Text(expected)) = envelope.parse(text) else { panic!("{text}") };
            for size in [1, 3, 100] {
                let (plain, calls) = assemble(&events(&envelope, text, size));
                assert_eq!(plain, expected, "{text:?} in pieces of {size}");
                assert!(calls.is_empty());
            }
        }
    }

    #[test]
    fn text_off_the_form_stops_the_events() {
        let envelope = Envelope::fallback();
        // Arguments that are not an object or array, and a call without its tail.
        let (_, calls) = assemble(&events(&envelope, "<tool_call>{\"name\": \"a\", \"arguments\": 3}</tool_call>", 4));
        assert_eq!(calls, [("a".to_string(), String::new())]);
        let cut = "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}}</tool_call> and text";
        let (plain, calls) = assemble(&events(&envelope, cut, 5));
        assert!(plain.is_empty());
        assert_eq!(calls, [("a".to_string(), "{\"x\": 1}".to_string())]);
        // A reply cut short (`length`) streams what it had.
        let (_, calls) = assemble(&events(&envelope, "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": ", 2));
        assert_eq!(calls, [("a".to_string(), "{\"x\": ".to_string())]);
    }
}
