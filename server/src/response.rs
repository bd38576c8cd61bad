//! From the engine's events to OpenAI's answers: one JSON document when every completion
//! is done ([`whole`]), or server-sent events as the text is decoded ([`stream`]).
//!
//! Each finished completion is read back once ([`Finished`]): its finish reason, its
//! `logprobs`, and under a constraint its schema's `validation_errors` or, with tools,
//! its content, reasoning and calls. A reply with tools is read by its tool format's
//! captures ([`ToolDeltas`], over `stencil_tools::format::ToolStream`): streamed, its
//! reasoning, text and each call's name and arguments go out as deltas while it is
//! decoded; whole, it is the same deltas over the whole reply put together, so a streamed
//! reply and a whole one agree, cut or not.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;
use stencil_runtime::{Generation, Model, StopReason};
use stencil_tools::format::{CompiledFormat, ParsedReply, ToolEvent, ToolStream};
use stencil_tools::ToolSet;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

use crate::api::{
    ChatChoice, ChatCompletion, ChatCompletionChunk, ChoiceLogprobs, ChunkChoice, Completion, CompletionChoice,
    CompletionTokensDetails, Delta, FunctionCall, LegacyLogprobs, ResponseMessage, TokenLogprob, ToolCallDelta,
    ToolCallOut, Usage,
};
use crate::constraint::Constraint;
use crate::engine::{runtime_error, Event};
use crate::error::ApiError;
use crate::metrics::Metrics;

/// Which endpoint a completion request came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Chat,
    Completions,
}

/// What a started request needs to answer.
pub(crate) struct Answer {
    endpoint: Endpoint,
    id: String,
    created: u64,
    model: String,
    fingerprint: String,
    constraint: Option<Arc<Constraint>>,
    logprobs: bool,
    n: usize,
    arrived: Instant,
}

impl Answer {
    /// The answer to a request through `endpoint` for the model `model_id`, of `n`
    /// completions under `constraint`, that arrived at `arrived`: a new id, created now.
    pub(crate) fn new(
        endpoint: Endpoint,
        model_id: String,
        constraint: Option<Arc<Constraint>>,
        logprobs: bool,
        n: usize,
        arrived: Instant,
    ) -> Self {
        Answer {
            endpoint,
            id: new_id(if endpoint == Endpoint::Chat { "chatcmpl" } else { "cmpl" }),
            created: unix_now(),
            model: model_id,
            fingerprint: fingerprint(),
            constraint,
            logprobs,
            n,
            arrived,
        }
    }
}

/// One completion's result, as the answer needs it.
struct Finished {
    /// The text (for tool calls, the reply's text as decoded).
    text: String,
    /// The message's `content`: the text, or with tools the text beside the calls (null
    /// when there is none).
    content: Option<String>,
    /// With tools: the reasoning, apart.
    reasoning: Option<String>,
    /// The reply's calls, when it has calls.
    tool_calls: Option<Vec<ToolCallOut>>,
    finish_reason: &'static str,
    logprobs: Option<Vec<TokenInfo>>,
    validation_errors: Vec<String>,
}

/// One output token for `logprobs`: its text, bytes and log-probability, and the
/// alternatives at its position (as many as the request asked for; a forced token's only
/// alternative is itself).
struct TokenInfo {
    token: Described,
    alternatives: Vec<Described>,
}

/// A token's text (lossy UTF-8), bytes and log-probability.
struct Described {
    text: String,
    bytes: Vec<u8>,
    logprob: f32,
}

impl Described {
    fn new(vocab: &stencil_mask::Vocabulary, token: u32, logprob: f32) -> Self {
        let bytes = vocab.token_bytes(token).to_vec();
        Described { text: String::from_utf8_lossy(&bytes).into_owned(), bytes, logprob }
    }

    fn to_json(&self) -> Value {
        serde_json::json!({"token": self.text, "logprob": self.logprob, "bytes": self.bytes})
    }
}

/// A reply with tools, read whole: the deltas a stream of the same bytes sends
/// ([`ToolDeltas`]), put together; the calls checked against their tools once the reply
/// ended by itself (`stop`).
struct ToolReply {
    content: Option<String>,
    reasoning: Option<String>,
    calls: Option<Vec<ToolCallOut>>,
    errors: Vec<String>,
}

impl ToolReply {
    fn read(format: &Arc<CompiledFormat>, tools: &ToolSet, bytes: &[u8], by_eos: bool, stopped: bool) -> Self {
        let mut reader = ToolDeltas::new(format);
        let mut deltas: Vec<Delta> = reader.push(bytes).into_iter().collect();
        let (last, parsed) = reader.finish(by_eos);
        deltas.extend(last);
        let (mut content, mut reasoning, mut calls) = (String::new(), String::new(), Vec::<ToolCallOut>::new());
        for d in deltas {
            content.push_str(d.content.as_deref().unwrap_or(""));
            reasoning.push_str(d.reasoning_content.as_deref().unwrap_or(""));
            for c in d.tool_calls.unwrap_or_default() {
                match (calls.get_mut(c.index), c.id) {
                    (Some(call), _) => call.function.arguments.push_str(&c.function.arguments),
                    (None, Some(id)) => calls.push(ToolCallOut {
                        id,
                        kind: "function",
                        function: FunctionCall {
                            name: c.function.name.unwrap_or_default(),
                            arguments: c.function.arguments,
                        },
                    }),
                    (None, None) => {}
                }
            }
        }
        let errors = match (&parsed, stopped) {
            (_, false) => Vec::new(),
            (Some(p), true) => p
                .calls
                .iter()
                .filter_map(|c| match c.complete {
                    true => tools.check(&c.call()).err().map(|e| e.to_string()),
                    false => Some(format!("the call of {} is unfinished", c.name)),
                })
                .collect(),
            (None, true) => vec![format!("the reply is not in the {} tool format", format.format().name())],
        };
        let text = |s: String| (!s.is_empty()).then_some(s);
        ToolReply {
            content: text(content),
            reasoning: text(reasoning),
            calls: (!calls.is_empty()).then_some(calls),
            errors,
        }
    }
}

fn finish_reason(stop: &StopReason) -> &'static str {
    match stop {
        StopReason::Length | StopReason::ContextFull | StopReason::Cancelled => "length",
        StopReason::Eos | StopReason::Stop(_) | StopReason::GrammarComplete => "stop",
    }
}

fn finished(g: &Generation, answer: &Answer, model: &Model) -> Finished {
    let finish_reason = finish_reason(&g.stop_reason);
    let logprobs = answer.logprobs.then(|| {
        let vocab = model.vocab();
        g.tokens
            .iter()
            .zip(&g.logprobs)
            .enumerate()
            .map(|(i, (&t, lp))| {
                let token = Described::new(vocab, t, lp.unwrap_or(0.0));
                let alternatives = match g.top_logprobs.get(i) {
                    Some(top) if top.is_empty() => vec![Described::new(vocab, t, 0.0)],
                    Some(top) => top.iter().map(|&(a, alp)| Described::new(vocab, a, alp)).collect(),
                    None => Vec::new(),
                };
                TokenInfo { token, alternatives }
            })
            .collect()
    });
    // A completion cut short is not JSON yet: `length` says so, validation would only repeat it.
    let stopped = finish_reason == "stop";
    let tools = answer.constraint.as_ref().and_then(|c| Some((c.format.as_ref()?, c.tools.as_deref()?)));
    let (content, reasoning, tool_calls, validation_errors) = match (&answer.constraint, tools) {
        (_, Some((format, caller))) => {
            // The text as streamed: under the format's tag it holds the control-token markers.
            let by_eos = g.stop_reason == StopReason::Eos;
            let r = ToolReply::read(format, caller.tools(), g.text.as_bytes(), by_eos, stopped);
            (r.content, r.reasoning, r.calls, r.errors)
        }
        (Some(c), None) if stopped => (Some(g.text.clone()), None, None, c.validation_errors(&g.text)),
        _ => (Some(g.text.clone()), None, None, Vec::new()),
    };
    if !validation_errors.is_empty() {
        tracing::warn!(id = %answer.id, errors = ?validation_errors, "output fails its schema");
    }
    let finish_reason = if tool_calls.is_some() && stopped { "tool_calls" } else { finish_reason };
    Finished { text: g.text.clone(), content, reasoning, tool_calls, finish_reason, logprobs, validation_errors }
}

fn usage_of(generations: &[Generation]) -> Usage {
    let prompt_tokens = generations.first().map_or(0, |g| g.record.prompt_tokens);
    let completion_tokens = generations.iter().map(|g| g.record.generated_tokens).sum();
    let drafts: Vec<_> = generations.iter().filter_map(|g| g.record.speculation.as_ref()).collect();
    let completion_tokens_details = (!drafts.is_empty()).then(|| {
        let (drafted, accepted) = drafts.iter().fold((0, 0), |(d, a), s| (d + s.drafted, a + s.accepted));
        CompletionTokensDetails { accepted_prediction_tokens: accepted, rejected_prediction_tokens: drafted - accepted }
    });
    Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: prompt_tokens + completion_tokens,
        completion_tokens_details,
    }
}

fn log_done(answer: &Answer, ttft: Option<f64>, usage: &Usage, reasons: &[&str]) {
    tracing::info!(
        id = %answer.id,
        prompt_tokens = usage.prompt_tokens,
        completion_tokens = usage.completion_tokens,
        ttft_ms = ttft.map(|t| (t * 1e3) as u64),
        total_ms = answer.arrived.elapsed().as_millis() as u64,
        finish = ?reasons,
        "request done"
    );
}

/// Collects every completion and answers one JSON document.
pub(crate) async fn whole(
    answer: Answer,
    rx: mpsc::UnboundedReceiver<Event>,
    model: &Model,
    metrics: &Metrics,
) -> Response {
    match collect(answer, rx, model, metrics).await {
        Ok(Whole::Chat(c)) => Json(c).into_response(),
        Ok(Whole::Text(c)) => Json(c).into_response(),
        Err(failure) => failure,
    }
}

/// A whole answer, before its encoding.
pub(crate) enum Whole {
    /// A chat completion.
    Chat(ChatCompletion),
    /// A text completion.
    Text(Completion),
}

/// Collects every completion: the answer, or the error response when the engine failed.
pub(crate) async fn collect(
    answer: Answer,
    mut rx: mpsc::UnboundedReceiver<Event>,
    model: &Model,
    metrics: &Metrics,
) -> Result<Whole, Response> {
    let mut results: Vec<Option<Generation>> = (0..answer.n).map(|_| None).collect();
    let mut ttft = None;
    let mut left = answer.n;
    while left > 0 {
        match rx.recv().await {
            Some(Event::Text { .. }) => {
                ttft.get_or_insert_with(|| answer.arrived.elapsed().as_secs_f64());
            }
            Some(Event::Done { index, result }) => {
                ttft.get_or_insert_with(|| answer.arrived.elapsed().as_secs_f64());
                match result {
                    Ok(g) => results[index] = Some(*g),
                    Err(e) => return Err(engine_failure(e)),
                }
                left -= 1;
            }
            Some(Event::Failed(e)) => return Err(e.into_response()),
            Some(Event::Started) => {}
            None => return Err(ApiError::internal("the engine dropped the request").into_response()),
        }
    }
    if let Some(t) = ttft {
        metrics.time_to_first_token.observe(t);
    }
    let generations: Vec<Generation> = results.into_iter().flatten().collect();
    let usage = usage_of(&generations);
    let done: Vec<Finished> = generations.iter().map(|g| finished(g, &answer, model)).collect();
    log_done(&answer, ttft, &usage, &done.iter().map(|f| f.finish_reason).collect::<Vec<_>>());
    match answer.endpoint {
        Endpoint::Chat => Ok(Whole::Chat(ChatCompletion {
            id: answer.id,
            object: "chat.completion",
            created: answer.created,
            model: answer.model,
            choices: done
                .into_iter()
                .enumerate()
                .map(|(index, f)| ChatChoice {
                    index,
                    message: ResponseMessage {
                        role: "assistant",
                        content: f.content,
                        reasoning_content: f.reasoning,
                        refusal: None,
                        tool_calls: f.tool_calls,
                    },
                    logprobs: f.logprobs.map(chat_logprobs),
                    finish_reason: f.finish_reason,
                    validation_errors: f.validation_errors,
                })
                .collect(),
            usage,
            system_fingerprint: answer.fingerprint,
        })),
        Endpoint::Completions => Ok(Whole::Text(Completion {
            id: answer.id,
            object: "text_completion",
            created: answer.created,
            model: answer.model,
            choices: done
                .into_iter()
                .enumerate()
                .map(|(index, f)| CompletionChoice {
                    text: f.text,
                    index,
                    logprobs: f.logprobs.map(legacy_logprobs),
                    finish_reason: Some(f.finish_reason),
                    validation_errors: f.validation_errors,
                })
                .collect(),
            usage: Some(usage),
            system_fingerprint: answer.fingerprint,
        })),
    }
}

fn engine_failure(e: stencil_runtime::RuntimeError) -> Response {
    tracing::error!(error = %e, "generation failed");
    runtime_error(e).into_response()
}

fn chat_logprobs(tokens: Vec<TokenInfo>) -> ChoiceLogprobs {
    ChoiceLogprobs {
        content: tokens
            .into_iter()
            .map(|TokenInfo { token, alternatives }| TokenLogprob {
                top_logprobs: alternatives.iter().map(Described::to_json).collect(),
                token: token.text,
                logprob: token.logprob,
                bytes: token.bytes,
            })
            .collect(),
    }
}

fn legacy_logprobs(tokens: Vec<TokenInfo>) -> LegacyLogprobs {
    let mut out = LegacyLogprobs::default();
    let mut offset = 0;
    for TokenInfo { token, alternatives } in tokens {
        out.text_offset.push(offset);
        offset += token.bytes.len();
        out.tokens.push(token.text);
        out.token_logprobs.push(token.logprob);
        // `{text: logprob}`, as OpenAI's legacy completions write the alternatives.
        let top: serde_json::Map<String, Value> =
            alternatives.into_iter().map(|a| (a.text, Value::from(a.logprob))).collect();
        out.top_logprobs.push((!top.is_empty()).then_some(Value::Object(top)));
    }
    out
}

/// Answers with server-sent events: per completion a role chunk (chat), content deltas, a
/// finish chunk; then the usage chunk when asked for, then `[DONE]`. The stream's task
/// ends when the client goes away, which closes the engine's channel and cancels the
/// request.
pub(crate) fn stream(
    answer: Answer,
    rx: mpsc::UnboundedReceiver<Event>,
    include_usage: bool,
    model: Arc<Model>,
    metrics: Arc<Metrics>,
) -> Response {
    let out = ReceiverStream::new(pieces(answer, rx, include_usage, model, metrics));
    Sse::new(out.map(|piece| Ok::<_, Infallible>(sse(piece)))).into_response()
}

/// A piece of a streamed answer, before its encoding on the wire.
pub(crate) enum Out {
    /// A chat chunk.
    Chat(ChatCompletionChunk),
    /// A text completion chunk.
    Text(Completion),
    /// The engine failed: the error, and the end.
    Error(ApiError),
    /// The end.
    Done,
}

/// The pieces of a streamed answer ([`stream`] encodes them as server-sent events; the
/// Responses API as its own events): per completion a role chunk (chat), deltas, a
/// finish chunk; then the usage chunk when asked for, then [`Out::Done`]. The task ends
/// when the receiver is dropped (the client went away), which closes the engine's
/// channel and cancels the request.
pub(crate) fn pieces(
    answer: Answer,
    mut rx: mpsc::UnboundedReceiver<Event>,
    include_usage: bool,
    model: Arc<Model>,
    metrics: Arc<Metrics>,
) -> mpsc::Receiver<Out> {
    let endpoint = answer.endpoint;
    let (tx, out) = mpsc::channel::<Out>(64);
    tokio::spawn(async move {
        let chunk = |choices: Vec<ChunkChoice>, usage: Option<Usage>| ChatCompletionChunk {
            id: answer.id.clone(),
            object: "chat.completion.chunk",
            created: answer.created,
            model: answer.model.clone(),
            system_fingerprint: answer.fingerprint.clone(),
            choices,
            usage,
        };
        let text_chunk = |choices: Vec<CompletionChoice>, usage: Option<Usage>| Completion {
            id: answer.id.clone(),
            object: "text_completion",
            created: answer.created,
            model: answer.model.clone(),
            choices,
            usage,
            system_fingerprint: answer.fingerprint.clone(),
        };
        let delta = |index: usize, content: Option<String>, role: Option<&'static str>| ChunkChoice {
            index,
            delta: Delta { role, content, ..Delta::default() },
            logprobs: None,
            finish_reason: None,
        };
        // A reply with tools is read as it is decoded: its reasoning, its text, each call's
        // name and then its arguments go out as deltas.
        let format = answer.constraint.as_ref().and_then(|c| c.format.clone());
        let tools = format.is_some();
        let mut readers: Vec<Option<ToolDeltas>> =
            (0..answer.n).map(|_| format.as_ref().map(ToolDeltas::new)).collect();
        let tool_chunk = |index: usize, delta: Delta| {
            chunk(vec![ChunkChoice { index, delta, logprobs: None, finish_reason: None }], None)
        };
        if endpoint == Endpoint::Chat {
            for index in 0..answer.n {
                if !send(&tx, Out::Chat(chunk(vec![delta(index, Some(String::new()), Some("assistant"))], None))).await
                {
                    return;
                }
            }
        }
        let mut generations = Vec::new();
        let mut ttft = None;
        let mut reasons = Vec::new();
        let mut left = answer.n;
        while left > 0 {
            let Some(event) = rx.recv().await else { break };
            let sent = match event {
                Event::Text { index, text } if tools => {
                    ttft.get_or_insert_with(|| answer.arrived.elapsed().as_secs_f64());
                    match readers.get_mut(index).and_then(Option::as_mut).and_then(|r| r.push(text.as_bytes())) {
                        Some(delta) => send(&tx, Out::Chat(tool_chunk(index, delta))).await,
                        None => true,
                    }
                }
                Event::Text { index, text } => {
                    ttft.get_or_insert_with(|| answer.arrived.elapsed().as_secs_f64());
                    match endpoint {
                        Endpoint::Chat => send(&tx, Out::Chat(chunk(vec![delta(index, Some(text), None)], None))).await,
                        Endpoint::Completions => {
                            let choice = CompletionChoice {
                                text,
                                index,
                                logprobs: None,
                                finish_reason: None,
                                validation_errors: Vec::new(),
                            };
                            send(&tx, Out::Text(text_chunk(vec![choice], None))).await
                        }
                    }
                }
                Event::Done { index, result } => {
                    left -= 1;
                    ttft.get_or_insert_with(|| answer.arrived.elapsed().as_secs_f64());
                    match result {
                        Ok(g) => {
                            let f = finished(&g, &answer, &model);
                            let by_eos = g.stop_reason == StopReason::Eos;
                            reasons.push(f.finish_reason);
                            generations.push(*g);
                            match endpoint {
                                Endpoint::Chat => {
                                    if let Some(reader) = readers.get_mut(index).and_then(Option::as_mut) {
                                        // What the reader still held.
                                        if let (Some(delta), _) = reader.finish(by_eos) {
                                            if !send(&tx, Out::Chat(tool_chunk(index, delta))).await {
                                                return;
                                            }
                                        }
                                    }
                                    let choice = ChunkChoice {
                                        index,
                                        delta: Delta::default(),
                                        logprobs: f.logprobs.map(chat_logprobs),
                                        finish_reason: Some(f.finish_reason),
                                    };
                                    send(&tx, Out::Chat(chunk(vec![choice], None))).await
                                }
                                Endpoint::Completions => {
                                    let choice = CompletionChoice {
                                        text: String::new(),
                                        index,
                                        logprobs: f.logprobs.map(legacy_logprobs),
                                        finish_reason: Some(f.finish_reason),
                                        validation_errors: f.validation_errors,
                                    };
                                    send(&tx, Out::Text(text_chunk(vec![choice], None))).await
                                }
                            }
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "generation failed");
                            let e = runtime_error(e);
                            let _ = send(&tx, Out::Error(e)).await;
                            break;
                        }
                    }
                }
                Event::Failed(e) => {
                    let _ = send(&tx, Out::Error(e)).await;
                    break;
                }
                Event::Started => true,
            };
            if !sent {
                // The client is gone: dropping `rx` cancels the request.
                return;
            }
        }
        if let Some(t) = ttft {
            metrics.time_to_first_token.observe(t);
        }
        let usage = usage_of(&generations);
        log_done(&answer, ttft, &usage, &reasons);
        if include_usage {
            let sent = match endpoint {
                Endpoint::Chat => send(&tx, Out::Chat(chunk(Vec::new(), Some(usage)))).await,
                Endpoint::Completions => send(&tx, Out::Text(text_chunk(Vec::new(), Some(usage)))).await,
            };
            if !sent {
                return;
            }
        }
        let _ = tx.send(Out::Done).await;
    });
    out
}

/// A reply with tools as deltas, piece by piece as it is decoded: its format's
/// [`ToolStream`] (reasoning, content, each call's id and name, then its arguments' text).
/// A reply that leaves the format (only possible without its grammar) stops the reading,
/// logged.
struct ToolDeltas {
    stream: Option<ToolStream>,
}

impl ToolDeltas {
    fn new(format: &Arc<CompiledFormat>) -> Self {
        let stream = format.stream().map_err(|e| tracing::warn!(error = %e, "a tool reply cannot be read")).ok();
        ToolDeltas { stream }
    }

    /// The delta of the next piece of the reply, if it adds anything.
    fn push(&mut self, bytes: &[u8]) -> Option<Delta> {
        match self.stream.as_mut()?.push(bytes) {
            Ok(events) => delta(events),
            Err(e) => {
                tracing::warn!(error = %e, "the reply left its tool format");
                self.stream = None;
                None
            }
        }
    }

    /// The delta of what the reader held at the end, and the whole reply read (`None`
    /// when the reply left the format).
    fn finish(&mut self, by_eos: bool) -> (Option<Delta>, Option<ParsedReply>) {
        match self.stream.as_mut().map(|s| s.finish(by_eos)) {
            Some(Ok((events, parsed))) => (delta(events), Some(parsed)),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "the reply left its tool format");
                (None, None)
            }
            None => (None, None),
        }
    }
}

/// `events` as one delta (`None` when there are none).
fn delta(events: Vec<ToolEvent>) -> Option<Delta> {
    if events.is_empty() {
        return None;
    }
    let mut d = Delta::default();
    let mut calls = Vec::new();
    for event in events {
        match event {
            ToolEvent::Content(t) => d.content.get_or_insert_with(String::new).push_str(&t),
            ToolEvent::Reasoning(t) => d.reasoning_content.get_or_insert_with(String::new).push_str(&t),
            ToolEvent::Call { index, id, name } => calls.push(ToolCallDelta::start(index, id, name)),
            ToolEvent::Arguments { index, text } => calls.push(ToolCallDelta::arguments(index, text)),
        }
    }
    d.tool_calls = (!calls.is_empty()).then_some(calls);
    Some(d)
}

/// Sends one piece of a streamed answer; false when the client is gone.
async fn send(tx: &mpsc::Sender<Out>, out: Out) -> bool {
    tx.send(out).await.is_ok()
}

/// One `data:` event of the chat and completions streams.
fn sse(out: Out) -> SseEvent {
    let data = match out {
        Out::Chat(chunk) => serde_json::to_string(&chunk),
        Out::Text(chunk) => serde_json::to_string(&chunk),
        Out::Error(e) => serde_json::to_string(&e.body()),
        Out::Done => return SseEvent::default().data("[DONE]"),
    };
    SseEvent::default().data(data.unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")))
}

/// Now, in Unix seconds.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A new id: `prefix`, a dash or underscore, and 14 hex digits.
pub(crate) fn new_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{prefix}-{nanos:08x}{n:06x}")
}

fn fingerprint() -> String {
    format!("stencil-{}", env!("CARGO_PKG_VERSION"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stencil_tools::format::{CallSpec, ToolFormat};
    use stencil_tools::ToolChoice;

    fn tools() -> ToolSet {
        ToolSet::from_openai_json(
            r#"[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
                "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]"#,
        )
        .unwrap()
    }

    fn hermes(tools: &ToolSet) -> Arc<CompiledFormat> {
        let spec = CallSpec { parallel: true, ..CallSpec::new(tools, ToolChoice::Auto) };
        Arc::new(ToolFormat::Hermes.compile(&spec).unwrap())
    }

    const REPLY: &str =
        "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";

    #[test]
    fn text_then_a_call_gives_both_content_and_calls() {
        let tools = tools();
        let r = ToolReply::read(&hermes(&tools), &tools, REPLY.as_bytes(), true, true);
        assert_eq!(r.content.as_deref(), Some("Let me check."));
        let calls = r.calls.unwrap();
        assert_eq!(
            (calls[0].function.name.as_str(), calls[0].function.arguments.as_str()),
            ("get_weather", r#"{"city": "Oslo"}"#)
        );
        assert!(r.errors.is_empty(), "{:?}", r.errors);
    }

    #[test]
    fn a_reply_streamed_in_pieces_puts_together_to_the_whole_cut_or_not() {
        let tools = tools();
        let format = hermes(&tools);
        for cut in [5, 16, 30, 60, REPLY.len()] {
            let bytes = &REPLY.as_bytes()[..cut];
            let whole = ToolReply::read(&format, &tools, bytes, false, false);
            let mut reader = ToolDeltas::new(&format);
            let mut deltas: Vec<Delta> = bytes.chunks(3).filter_map(|piece| reader.push(piece)).collect();
            deltas.extend(reader.finish(false).0);
            let content: String = deltas.iter().filter_map(|d| d.content.clone()).collect();
            let arguments: String = deltas
                .iter()
                .flat_map(|d| d.tool_calls.iter().flatten())
                .map(|c| c.function.arguments.clone())
                .collect();
            assert_eq!(Some(content).filter(|c| !c.is_empty()), whole.content, "cut at {cut}");
            let whole_arguments: String = whole.calls.iter().flatten().map(|c| c.function.arguments.clone()).collect();
            assert_eq!(arguments, whole_arguments, "cut at {cut}");
        }
    }

    #[test]
    fn an_unfinished_call_of_a_stopped_reply_is_an_error() {
        let tools = tools();
        let cut = &REPLY.as_bytes()[..REPLY.len() - 20];
        let r = ToolReply::read(&hermes(&tools), &tools, cut, false, true);
        assert!(r.errors.iter().any(|e| e.contains("unfinished")), "{:?}", r.errors);
    }
}
