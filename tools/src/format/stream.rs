//! Streaming a reply as it is decoded ([`ToolStream`]): reasoning, content, each call's name
//! and its arguments' text, from the same captures that read the whole reply.

use std::sync::Arc;

use stencil_structural::Reader;

use super::{CompiledFormat, FormatError, ParsedCall, ParsedReply, ToolFormat};

/// What a piece of a reply added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolEvent {
    /// More reasoning text.
    Reasoning(String),
    /// More content text.
    Content(String),
    /// A call starts: its id (given here: see [`ToolFormat::new_call_id`]) and its tool.
    Call {
        /// Its position among the reply's calls, from 0.
        index: usize,
        /// Its id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// More of a call's arguments' JSON text.
    Arguments {
        /// The call's position.
        index: usize,
        /// The next piece.
        text: String,
    },
}

/// Reads a reply as it streams in and says what each piece added. The events of a reply,
/// concatenated per kind (and per call), are the whole reply's [`ParsedReply`] fields
/// (content and reasoning trimmed, each call's `arguments_text`), whether the reply is cut
/// or not: text that may still become a marker (the start of a trigger, of the
/// reasoning's end), a character cut between pieces, whitespace at the end of the content
/// or reasoning, and a separator after a call are held back until what follows decides.
///
/// ```
/// use std::sync::Arc;
/// use stencil_tools::format::{CallSpec, ToolEvent, ToolFormat};
/// use stencil_tools::{ToolChoice, ToolSet};
/// let tools = ToolSet::from_openai_json(r#"[{"type": "function", "function": {"name": "f",
///     "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}]"#)?;
/// let format = Arc::new(ToolFormat::Hermes.compile(&CallSpec::new(&tools, ToolChoice::Auto))?);
/// let mut stream = format.stream()?;
/// let mut events = Vec::new();
/// for piece in ["Sure.", " <tool_", "call>\n{\"name\": \"f\", \"arguments\": {\"x\"", ": 1}}\n</tool_call>"] {
///     events.extend(stream.push(piece.as_bytes())?);
/// }
/// let (rest, reply) = stream.finish(false)?;
/// events.extend(rest);
/// assert_eq!(events[0], ToolEvent::Content("Sure.".into()));
/// assert!(matches!(&events[1], ToolEvent::Call { index: 0, name, .. } if name == "f"));
/// let args: String = events.iter().filter_map(|e| match e { ToolEvent::Arguments { text, .. } => Some(text.as_str()), _ => None }).collect();
/// assert_eq!(args, reply.calls[0].arguments_text);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ToolStream {
    format: Arc<CompiledFormat>,
    reader: Reader<'static>,
    content: String,
    reasoning: String,
    /// Per call: its id, and how much of its arguments' text was sent.
    calls: Vec<(String, usize)>,
}

impl CompiledFormat {
    /// A [`ToolStream`] of a reply in this format.
    ///
    /// # Errors
    /// [`FormatError::Reply`] when the captures' parser cannot be built.
    pub fn stream(self: &Arc<Self>) -> Result<ToolStream, FormatError> {
        let reader = self
            .compiled
            .shared_reader()
            .map_err(|source| FormatError::Reply { format: self.format.name(), source })?;
        Ok(ToolStream {
            format: self.clone(),
            reader,
            content: String::new(),
            reasoning: String::new(),
            calls: Vec::new(),
        })
    }
}

impl ToolStream {
    /// Reads more of the reply (any bytes: a token's, several tokens').
    ///
    /// # Errors
    /// [`FormatError::Reply`] when the reply departs from the format (what was read before
    /// stays read).
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<ToolEvent>, FormatError> {
        let name = self.format.format.name();
        self.reader.feed(bytes).map_err(|source| FormatError::Reply { format: name, source })?;
        let reply = self.reader.reply().map_err(|source| FormatError::Reply { format: name, source })?;
        let raw = self.format.raw(&reply, self.reader.text(), true);
        let content: String = raw.content.iter().map(|(t, _)| t.as_str()).collect();
        let mut events = Vec::new();
        if let Some(r) = &raw.reasoning {
            push_text(&mut self.reasoning, r.trim_start().trim_end(), &mut events, ToolEvent::Reasoning);
        }
        push_text(&mut self.content, content.trim_start().trim_end(), &mut events, ToolEvent::Content);
        self.push_calls(&raw.calls, &mut events);
        Ok(events)
    }

    /// The end of the reply (`by_eos`: the model ended it with an end-of-generation token,
    /// see [`CompiledFormat::read_ended`]): what was held back, and the whole reply read.
    ///
    /// # Errors
    /// As [`CompiledFormat::read`].
    pub fn finish(&mut self, by_eos: bool) -> Result<(Vec<ToolEvent>, ParsedReply), FormatError> {
        let parsed = self.format.read_ended(self.reader.text(), by_eos)?;
        let mut events = Vec::new();
        if let Some(r) = &parsed.reasoning {
            push_text(&mut self.reasoning, r, &mut events, ToolEvent::Reasoning);
        }
        push_text(&mut self.content, parsed.content.as_deref().unwrap_or(""), &mut events, ToolEvent::Content);
        self.push_calls(&parsed.calls, &mut events);
        Ok((events, parsed))
    }

    /// The ids given to the calls so far, in order.
    pub fn call_ids(&self) -> Vec<String> {
        self.calls.iter().map(|(id, _)| id.clone()).collect()
    }

    /// The bytes read so far.
    pub fn text(&self) -> &[u8] {
        self.reader.text()
    }

    fn push_calls(&mut self, calls: &[ParsedCall], events: &mut Vec<ToolEvent>) {
        for (index, call) in calls.iter().enumerate() {
            if index == self.calls.len() {
                let id = ToolFormat::new_call_id();
                events.push(ToolEvent::Call { index, id: id.clone(), name: call.name.clone() });
                self.calls.push((id, 0));
            }
            let sent = &mut self.calls[index].1;
            match call.arguments_text.get(*sent..) {
                Some(more) if !more.is_empty() => {
                    events.push(ToolEvent::Arguments { index, text: more.to_string() });
                    *sent = call.arguments_text.len();
                }
                Some(_) => {}
                None => tracing::debug!(index, "a call's arguments text changed while streaming"),
            }
        }
    }
}

/// Sends what `now` adds to `sent`, when it extends it.
fn push_text(sent: &mut String, now: &str, events: &mut Vec<ToolEvent>, event: fn(String) -> ToolEvent) {
    if now.len() > sent.len() && now.starts_with(sent.as_str()) {
        events.push(event(now[sent.len()..].to_string()));
        *sent = now.to_string();
    } else if !now.starts_with(sent.as_str()) {
        tracing::debug!("streamed text changed: {sent:?} → {now:?}");
    }
}
