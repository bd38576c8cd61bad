//! From the engine's events to OpenAI's answers: one JSON document when every completion
//! is done ([`whole`]), or server-sent events as the text is decoded ([`stream`]).
//!
//! Each finished completion is read back once ([`Finished`]): its finish reason, its
//! `logprobs`, and under a constraint its schema's `validation_errors` or, with tools,
//! its calls (a reply cut short reads as a stream of the same text sends it, so a streamed
//! reply and a whole one agree). A streamed reply with tools sends its text, or each
//! call's name and then its arguments, as deltas while it is decoded ([`ToolDeltas`]).

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use stencil_runtime::{Generation, Model, StopReason};
use stencil_tools::{Reply, ReplyStream, StreamEvent};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::api::{
    ChatChoice, ChatCompletion, ChatCompletionChunk, ChoiceLogprobs, ChunkChoice, Completion, CompletionChoice,
    CompletionTokensDetails, Delta, FunctionCall, FunctionDelta, LegacyLogprobs, ResponseMessage, TokenLogprob,
    ToolCallDelta, ToolCallOut, Usage,
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
    /// The reply's calls, when it is calls.
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

impl Finished {
    /// The message's `content`: null for calls.
    fn content(&self) -> Option<String> {
        match self.tool_calls {
            Some(_) => None,
            None => Some(self.text.clone()),
        }
    }
}

/// A tool reply read back: its calls (checked against the tools' schemas), or its text.
fn read_calls(caller: &stencil_tools::ToolCaller, text: &str) -> (Option<Vec<ToolCallOut>>, String, Vec<String>) {
    match caller.envelope().parse(text) {
        Ok(Reply::Calls(calls)) => {
            let errors = calls.iter().filter_map(|c| caller.tools().check(c).err()).map(|e| e.to_string()).collect();
            // The arguments as the model wrote them (as a stream sends them), when read.
            let mut written = ReplyStream::arguments_texts(caller.envelope(), text).into_iter();
            let calls = calls
                .into_iter()
                .map(|c| {
                    let text =
                        written.next().filter(|t| serde_json::from_str::<Value>(t).ok().as_ref() == Some(&c.arguments));
                    ToolCallOut {
                        id: new_id("call").replacen('-', "_", 1),
                        kind: "function",
                        function: FunctionCall {
                            name: c.name,
                            arguments: text.unwrap_or_else(|| c.arguments.to_string()),
                        },
                    }
                })
                .collect();
            (Some(calls), text.to_string(), errors)
        }
        Ok(Reply::Text(t)) => (None, t, Vec::new()),
        Err(e) => (None, text.to_string(), vec![e.to_string()]),
    }
}

/// A tool reply cut short (`max_tokens`, the context): exactly what a stream of the same
/// text sends ([`ReplyStream`]) — its text, its whole calls, and the call it was writing
/// with its name and the arguments written so far (its JSON unfinished; `finish_reason`
/// says `length`). So a streamed reply and a whole one agree, cut or not.
fn read_cut_calls(caller: &stencil_tools::ToolCaller, text: &str) -> (Option<Vec<ToolCallOut>>, String, Vec<String>) {
    // (Plain text too reads as the stream sends it: the reply's leading and trailing blanks left out.)
    let mut stream = ReplyStream::new(caller.envelope().clone());
    let mut events = stream.push(text);
    events.extend(stream.finish());
    let (mut content, mut calls) = (String::new(), Vec::<ToolCallOut>::new());
    for event in events {
        match event {
            StreamEvent::Text(t) => content.push_str(&t),
            StreamEvent::Call { name, .. } => calls.push(ToolCallOut {
                id: new_id("call").replacen('-', "_", 1),
                kind: "function",
                function: FunctionCall { name, arguments: String::new() },
            }),
            StreamEvent::Arguments { index, text } => {
                if let Some(call) = calls.get_mut(index) {
                    call.function.arguments.push_str(&text);
                }
            }
        }
    }
    ((!calls.is_empty()).then_some(calls), content, Vec::new())
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
    let tools = answer.constraint.as_ref().and_then(|c| c.tools.as_deref());
    let (tool_calls, text, validation_errors) = match (&answer.constraint, tools) {
        (Some(_), Some(caller)) if finish_reason == "stop" => read_calls(caller, &g.text),
        (Some(_), Some(caller)) => read_cut_calls(caller, &g.text),
        (Some(c), None) if finish_reason == "stop" => (None, g.text.clone(), c.validation_errors(&g.text)),
        _ => (None, g.text.clone(), Vec::new()),
    };
    if !validation_errors.is_empty() {
        tracing::warn!(id = %answer.id, errors = ?validation_errors, "output fails its schema");
    }
    let finish_reason = if tool_calls.is_some() && finish_reason == "stop" { "tool_calls" } else { finish_reason };
    Finished { text, tool_calls, finish_reason, logprobs, validation_errors }
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
    mut rx: mpsc::UnboundedReceiver<Event>,
    model: &Model,
    metrics: &Metrics,
) -> Response {
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
                    Err(e) => return engine_failure(e),
                }
                left -= 1;
            }
            Some(Event::Failed(e)) => return e.into_response(),
            Some(Event::Started) => {}
            None => return ApiError::internal("the engine dropped the request").into_response(),
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
        Endpoint::Chat => Json(ChatCompletion {
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
                        content: f.content(),
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
        })
        .into_response(),
        Endpoint::Completions => Json(Completion {
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
        })
        .into_response(),
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
    mut rx: mpsc::UnboundedReceiver<Event>,
    include_usage: bool,
    model: Arc<Model>,
    metrics: Arc<Metrics>,
) -> Response {
    let endpoint = answer.endpoint;
    let (tx, out) = mpsc::channel::<Result<SseEvent, Infallible>>(64);
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
            delta: Delta { role, content, tool_calls: None },
            logprobs: None,
            finish_reason: None,
        };
        // A reply with tools is read as it is decoded: its text, or each call's name and then
        // its arguments, go out as deltas.
        let envelope = answer.constraint.as_ref().and_then(|c| c.tools.as_ref()).map(|t| t.envelope().clone());
        let tools = envelope.is_some();
        let mut readers: Vec<Option<ToolDeltas>> =
            (0..answer.n).map(|_| envelope.clone().map(ToolDeltas::new)).collect();
        let tool_chunk = |index: usize, delta: Delta| {
            chunk(vec![ChunkChoice { index, delta, logprobs: None, finish_reason: None }], None)
        };
        if endpoint == Endpoint::Chat {
            for index in 0..answer.n {
                if !send(&tx, &chunk(vec![delta(index, Some(String::new()), Some("assistant"))], None)).await {
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
                    match readers.get_mut(index).and_then(Option::as_mut).and_then(|r| r.push(&text)) {
                        Some(delta) => send(&tx, &tool_chunk(index, delta)).await,
                        None => true,
                    }
                }
                Event::Text { index, text } => {
                    ttft.get_or_insert_with(|| answer.arrived.elapsed().as_secs_f64());
                    match endpoint {
                        Endpoint::Chat => send(&tx, &chunk(vec![delta(index, Some(text), None)], None)).await,
                        Endpoint::Completions => {
                            let choice = CompletionChoice {
                                text,
                                index,
                                logprobs: None,
                                finish_reason: None,
                                validation_errors: Vec::new(),
                            };
                            send(&tx, &text_chunk(vec![choice], None)).await
                        }
                    }
                }
                Event::Done { index, result } => {
                    left -= 1;
                    ttft.get_or_insert_with(|| answer.arrived.elapsed().as_secs_f64());
                    match result {
                        Ok(g) => {
                            let f = finished(&g, &answer, &model);
                            reasons.push(f.finish_reason);
                            generations.push(*g);
                            match endpoint {
                                Endpoint::Chat => {
                                    if let Some(reader) = readers.get_mut(index).and_then(Option::as_mut) {
                                        // What the reader still held, or (when the reply left the
                                        // form before anything was sent) the reply read whole.
                                        let last = reader.finish().or_else(|| (!reader.sent).then(|| whole_reply(&f)));
                                        if let Some(delta) =
                                            last.filter(|d| d.content.is_some() || d.tool_calls.is_some())
                                        {
                                            if !send(&tx, &tool_chunk(index, delta)).await {
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
                                    send(&tx, &chunk(vec![choice], None)).await
                                }
                                Endpoint::Completions => {
                                    let choice = CompletionChoice {
                                        text: String::new(),
                                        index,
                                        logprobs: f.logprobs.map(legacy_logprobs),
                                        finish_reason: Some(f.finish_reason),
                                        validation_errors: f.validation_errors,
                                    };
                                    send(&tx, &text_chunk(vec![choice], None)).await
                                }
                            }
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "generation failed");
                            let e = runtime_error(e);
                            let _ = send(&tx, &e.body()).await;
                            break;
                        }
                    }
                }
                Event::Failed(e) => {
                    let _ = send(&tx, &e.body()).await;
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
                Endpoint::Chat => send(&tx, &chunk(Vec::new(), Some(usage))).await,
                Endpoint::Completions => send(&tx, &text_chunk(Vec::new(), Some(usage))).await,
            };
            if !sent {
                return;
            }
        }
        let _ = tx.send(Ok(SseEvent::default().data("[DONE]"))).await;
    });
    Sse::new(ReceiverStream::new(out)).into_response()
}

/// A tool reply's deltas as it is decoded ([`ReplyStream`]): text as content, a call's id
/// and name once its name is whole, then its arguments piece by piece.
struct ToolDeltas {
    stream: ReplyStream,
    /// Something was sent.
    sent: bool,
}

impl ToolDeltas {
    fn new(envelope: stencil_tools::Envelope) -> Self {
        ToolDeltas { stream: ReplyStream::new(envelope), sent: false }
    }

    /// The delta of the next piece of text, if it adds anything.
    fn push(&mut self, text: &str) -> Option<Delta> {
        let events = self.stream.push(text);
        self.delta(events)
    }

    /// The delta of what the reader held at the end, if anything.
    fn finish(&mut self) -> Option<Delta> {
        let events = self.stream.finish();
        self.delta(events)
    }

    fn delta(&mut self, events: Vec<StreamEvent>) -> Option<Delta> {
        if events.is_empty() {
            return None;
        }
        self.sent = true;
        let (mut content, mut calls) = (None::<String>, Vec::new());
        for event in events {
            match event {
                StreamEvent::Text(t) => content.get_or_insert_with(String::new).push_str(&t),
                StreamEvent::Call { index, name } => {
                    calls.push(ToolCallDelta::start(index, new_id("call").replacen('-', "_", 1), name))
                }
                StreamEvent::Arguments { index, text } => calls.push(ToolCallDelta::arguments(index, text)),
            }
        }
        Some(Delta { role: None, content, tool_calls: (!calls.is_empty()).then_some(calls) })
    }
}

/// A finished tool reply as one delta: its text, or its calls whole.
fn whole_reply(f: &Finished) -> Delta {
    let tool_calls = f.tool_calls.clone().map(|calls| {
        calls
            .into_iter()
            .enumerate()
            .map(|(index, c)| ToolCallDelta {
                index,
                id: Some(c.id),
                kind: Some(c.kind),
                function: FunctionDelta { name: Some(c.function.name), arguments: c.function.arguments },
            })
            .collect()
    });
    Delta { role: None, content: f.content().filter(|c| !c.is_empty()), tool_calls }
}

/// Sends one `data:` event; false when the client is gone.
async fn send<T: Serialize>(tx: &mpsc::Sender<Result<SseEvent, Infallible>>, value: &T) -> bool {
    let data = serde_json::to_string(value).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    tx.send(Ok(SseEvent::default().data(data))).await.is_ok()
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn new_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{prefix}-{nanos:08x}{n:06x}")
}

fn fingerprint() -> String {
    format!("stencil-{}", env!("CARGO_PKG_VERSION"))
}
