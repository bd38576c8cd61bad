//! The chat answer as a Response: output items `reasoning`, `message` and
//! `function_call` (from the same reading of the reply as the chat route's
//! `reasoning_content`, `content` and `tool_calls`), whole ([`from_chat`]) or as the
//! Responses stream's events ([`Events`]), which the official client parses.

use serde_json::{json, Value};

use super::input::Echo;
use crate::api::{ChatCompletion, ChatCompletionChunk, Usage};
use crate::error::ApiError;

/// What every Response object of one request shares.
#[derive(Clone, Debug)]
pub struct Meta {
    /// `resp_…`.
    pub id: String,
    /// Unix seconds.
    pub created_at: u64,
    /// The model's id.
    pub model: String,
    /// The request's fields a Response repeats.
    pub echo: Echo,
}

impl Meta {
    /// The Response object with `status`, `output` and `usage`.
    fn response(&self, status: &str, output: Vec<Value>, usage: Option<&Usage>, extra: Option<(&str, Value)>) -> Value {
        let e = &self.echo;
        let mut r = json!({
            "id": self.id, "object": "response", "created_at": self.created_at, "status": status,
            "model": self.model, "output": output, "error": null,
            "incomplete_details": if status == "incomplete" { json!({"reason": "max_output_tokens"}) } else { Value::Null },
            "instructions": e.instructions, "tools": e.tools, "tool_choice": e.tool_choice,
            "parallel_tool_calls": e.parallel_tool_calls, "text": e.text, "max_output_tokens": e.max_output_tokens,
            "temperature": e.temperature, "top_p": e.top_p, "metadata": e.metadata, "reasoning": e.reasoning,
            "previous_response_id": null, "store": false,
            "usage": usage.map(|u| json!({
                "input_tokens": u.prompt_tokens, "output_tokens": u.completion_tokens, "total_tokens": u.total_tokens,
                "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0},
            })),
        });
        if let Some((k, v)) = extra {
            r[k] = v;
        }
        r
    }
}

fn status_of(finish_reason: Option<&str>) -> &'static str {
    if finish_reason == Some("length") {
        "incomplete"
    } else {
        "completed"
    }
}

fn reasoning_item(id: &str, text: &str, status: &str) -> Value {
    let content = if status == "completed" { json!([{"type": "reasoning_text", "text": text}]) } else { json!([]) };
    json!({"type": "reasoning", "id": id, "summary": [], "content": content, "status": status})
}

fn message_item(id: &str, text: &str, status: &str) -> Value {
    let content = if status == "completed" {
        json!([{"type": "output_text", "text": text, "annotations": []}])
    } else {
        json!([])
    };
    json!({"type": "message", "id": id, "role": "assistant", "status": status, "content": content})
}

fn call_item(id: &str, call_id: &str, name: &str, arguments: &str, status: &str) -> Value {
    json!({"type": "function_call", "id": id, "call_id": call_id, "name": name, "arguments": arguments,
           "status": status})
}

/// A whole chat completion (one choice) as a Response.
pub fn from_chat(meta: &Meta, chat: ChatCompletion, new_id: impl Fn(&str) -> String) -> Value {
    let Some(choice) = chat.choices.into_iter().next() else {
        return meta.response("completed", Vec::new(), Some(&chat.usage), None);
    };
    let m = choice.message;
    let mut output = Vec::new();
    if let Some(r) = m.reasoning_content.filter(|r| !r.is_empty()) {
        output.push(reasoning_item(&new_id("rs"), &r, "completed"));
    }
    if let Some(c) = m.content.filter(|c| !c.is_empty()) {
        output.push(message_item(&new_id("msg"), &c, "completed"));
    }
    for call in m.tool_calls.unwrap_or_default() {
        output.push(call_item(&new_id("fc"), &call.id, &call.function.name, &call.function.arguments, "completed"));
    }
    let errors = (!choice.validation_errors.is_empty()).then(|| ("validation_errors", json!(choice.validation_errors)));
    meta.response(status_of(Some(choice.finish_reason)), output, Some(&chat.usage), errors)
}

/// The item being written.
enum Open {
    Reasoning { id: String, text: String },
    Message { id: String, text: String },
    Call { id: String, call_id: String, name: String, arguments: String, index: usize },
}

/// The Responses stream's events from the chat stream's chunks: `response.created` and
/// `response.in_progress`, then per item `response.output_item.added`, its deltas
/// (`response.reasoning_text.delta`, `response.output_text.delta` after
/// `response.content_part.added`, `response.function_call_arguments.delta`) and its
/// `….done` events, then `response.completed` (or `response.incomplete` for a reply cut
/// by `max_output_tokens`) with the whole Response.
pub struct Events<F: Fn(&str) -> String> {
    meta: Meta,
    new_id: F,
    done: Vec<Value>,
    open: Option<Open>,
    sequence: u64,
    finish_reason: Option<&'static str>,
    usage: Option<Usage>,
}

impl<F: Fn(&str) -> String> Events<F> {
    /// A stream of the Response `meta`, ids made by `new_id(prefix)`.
    pub fn new(meta: Meta, new_id: F) -> Self {
        Events { meta, new_id, done: Vec::new(), open: None, sequence: 0, finish_reason: None, usage: None }
    }

    /// The first events: `response.created`, `response.in_progress`.
    pub fn start(&mut self) -> Vec<(String, Value)> {
        let r = self.meta.response("in_progress", Vec::new(), None, None);
        vec![
            self.event("response.created", json!({"response": r})),
            self.event("response.in_progress", json!({"response": r})),
        ]
    }

    /// The events of one chat chunk.
    pub fn chunk(&mut self, chunk: ChatCompletionChunk) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        if let Some(u) = chunk.usage {
            self.usage = Some(u);
        }
        for choice in chunk.choices {
            let d = choice.delta;
            if let Some(r) = d.reasoning_content.filter(|r| !r.is_empty()) {
                self.reasoning(&r, &mut out);
            }
            if let Some(c) = d.content.filter(|c| !c.is_empty()) {
                self.text(&c, &mut out);
            }
            for call in d.tool_calls.unwrap_or_default() {
                match call.id {
                    Some(call_id) => {
                        self.close(&mut out);
                        let id = (self.new_id)("fc");
                        let name = call.function.name.unwrap_or_default();
                        let item = call_item(&id, &call_id, &name, "", "in_progress");
                        let index = self.done.len();
                        out.push(
                            self.event("response.output_item.added", json!({"output_index": index, "item": item})),
                        );
                        self.open = Some(Open::Call { id, call_id, name, arguments: String::new(), index: call.index });
                        self.arguments(call.index, &call.function.arguments, &mut out);
                    }
                    None => self.arguments(call.index, &call.function.arguments, &mut out),
                }
            }
            if let Some(f) = choice.finish_reason {
                self.finish_reason = Some(f);
            }
        }
        out
    }

    /// The last events: the open item closed, then `response.completed` (or
    /// `response.incomplete`) with the whole Response.
    pub fn finish(&mut self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        self.close(&mut out);
        let status = status_of(self.finish_reason);
        let r = self.meta.response(status, self.done.clone(), self.usage.as_ref(), None);
        let kind = if status == "incomplete" { "response.incomplete" } else { "response.completed" };
        out.push(self.event(kind, json!({"response": r})));
        out
    }

    /// An `error` event.
    pub fn error(&mut self, e: &ApiError) -> (String, Value) {
        self.event("error", json!({"code": e.code, "message": e.message, "param": e.param}))
    }

    fn event(&mut self, kind: &str, mut data: Value) -> (String, Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        (kind.to_string(), data)
    }

    fn reasoning(&mut self, piece: &str, out: &mut Vec<(String, Value)>) {
        if !matches!(self.open, Some(Open::Reasoning { .. })) {
            self.close(out);
            let id = (self.new_id)("rs");
            let item = reasoning_item(&id, "", "in_progress");
            let index = self.done.len();
            out.push(self.event("response.output_item.added", json!({"output_index": index, "item": item})));
            self.open = Some(Open::Reasoning { id, text: String::new() });
        }
        let index = self.done.len();
        if let Some(Open::Reasoning { id, text }) = &mut self.open {
            text.push_str(piece);
            let data = json!({"item_id": id, "output_index": index, "content_index": 0, "delta": piece});
            out.push(self.event("response.reasoning_text.delta", data));
        }
    }

    fn text(&mut self, piece: &str, out: &mut Vec<(String, Value)>) {
        let index = self.done.len();
        if !matches!(self.open, Some(Open::Message { .. })) {
            self.close(out);
            let id = (self.new_id)("msg");
            let item = message_item(&id, "", "in_progress");
            let index = self.done.len();
            out.push(self.event("response.output_item.added", json!({"output_index": index, "item": item})));
            let part = json!({"type": "output_text", "text": "", "annotations": []});
            let data = json!({"item_id": id, "output_index": index, "content_index": 0, "part": part});
            out.push(self.event("response.content_part.added", data));
            self.open = Some(Open::Message { id, text: String::new() });
        }
        if let Some(Open::Message { id, text }) = &mut self.open {
            text.push_str(piece);
            let data =
                json!({"item_id": id, "output_index": index, "content_index": 0, "delta": piece, "logprobs": []});
            out.push(self.event("response.output_text.delta", data));
        }
    }

    fn arguments(&mut self, call: usize, piece: &str, out: &mut Vec<(String, Value)>) {
        let output_index = self.done.len();
        match &mut self.open {
            Some(Open::Call { id, arguments, index, .. }) if *index == call => {
                if piece.is_empty() {
                    return;
                }
                arguments.push_str(piece);
                let data = json!({"item_id": id, "output_index": output_index, "delta": piece});
                out.push(self.event("response.function_call_arguments.delta", data));
            }
            _ if piece.is_empty() => {}
            _ => tracing::warn!(call, "arguments of a call that is not being written"),
        }
    }

    /// Closes the open item: its `….done` events, and it joins the output.
    fn close(&mut self, out: &mut Vec<(String, Value)>) {
        let index = self.done.len();
        let item = match self.open.take() {
            None => return,
            Some(Open::Reasoning { id, text }) => {
                let data = json!({"item_id": id, "output_index": index, "content_index": 0, "text": text});
                out.push(self.event("response.reasoning_text.done", data));
                reasoning_item(&id, &text, "completed")
            }
            Some(Open::Message { id, text }) => {
                let data =
                    json!({"item_id": id, "output_index": index, "content_index": 0, "text": text, "logprobs": []});
                out.push(self.event("response.output_text.done", data));
                let part = json!({"type": "output_text", "text": text, "annotations": []});
                let data = json!({"item_id": id, "output_index": index, "content_index": 0, "part": part});
                out.push(self.event("response.content_part.done", data));
                message_item(&id, &text, "completed")
            }
            Some(Open::Call { id, call_id, name, arguments, .. }) => {
                let data = json!({"item_id": id, "output_index": index, "arguments": arguments, "name": name});
                out.push(self.event("response.function_call_arguments.done", data));
                call_item(&id, &call_id, &name, &arguments, "completed")
            }
        };
        out.push(self.event("response.output_item.done", json!({"output_index": index, "item": item})));
        self.done.push(item);
    }
}
