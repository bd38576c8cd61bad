//! `POST /v1/responses`, OpenAI's Responses API, as a view of the chat route: the request
//! is read as the chat request it amounts to ([`to_chat`]) and runs the same way (prompt,
//! tool format, constraint, engine); its answer, whole or streamed, is written as a
//! Response ([`from_chat`], [`Events`]): output items `reasoning`, `message` and `function_call`, from
//! the same reading of the reply as the chat route's fields.
//!
//! ```text
//!  Responses body ──to_chat──▶ chat body ──parse_chat / prepare_chat──▶ Prepared ──▶ engine
//!  engine ──response::collect / response::pieces──▶ chat answer ──output──▶ Response / events
//! ```
//!
//! Taken: `input` (text, or items: messages with text parts, `function_call`,
//! `function_call_output`, `reasoning`), `instructions`, `text.format` (`text`,
//! `json_object`, `json_schema`), function `tools`, `tool_choice`, `parallel_tool_calls`,
//! `reasoning.effort` (`none`/`minimal`: no reasoning; `low`/`medium`/`high`: reasoning
//! first, in the tool format's markers, for replies with tools), `max_output_tokens`,
//! `temperature`, `top_p`, `stream`, and the chat route's Stencil extensions. This server
//! keeps no responses: `store: true` and `previous_response_id` are 400s.

mod input;
mod output;

use std::sync::Arc;

use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use stencil_runtime::Model;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

pub use input::{input_param, to_chat, Echo};
pub use output::{from_chat, Events, Meta};

use crate::engine::Event;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::request::{self, Limits, Prepared};
use crate::response::{self, new_id, unix_now, Answer, Out, Whole};

/// Reads and prepares a Responses body for the model `model_id`: the chat request it
/// amounts to (usage always counted: a Response carries it), and the Response's
/// identity and echoed fields.
///
/// # Errors
///
/// As [`to_chat`], then as the chat route, with the Responses field names.
pub fn prepare(body: &[u8], limits: &Limits, model_id: &str) -> Result<(Prepared, Meta), ApiError> {
    let (chat, echo) = to_chat(body)?;
    let rename = |mut e: ApiError| {
        e.param = e.param.map(|p| input_param(&p));
        e
    };
    let request = request::parse_chat(chat.to_string().as_bytes()).map_err(rename)?;
    let mut prepared = request::prepare_chat(request, limits).map_err(rename)?;
    prepared.include_usage = true;
    let meta = Meta { id: item_id("resp"), created_at: unix_now(), model: model_id.to_string(), echo };
    Ok((prepared, meta))
}

/// The whole answer as a Response.
pub(crate) async fn whole(
    meta: Meta,
    answer: Answer,
    rx: mpsc::UnboundedReceiver<Event>,
    model: &Model,
    metrics: &Metrics,
) -> Response {
    match response::collect(answer, rx, model, metrics).await {
        Ok(Whole::Chat(chat)) => Json(from_chat(&meta, chat, item_id)).into_response(),
        Ok(Whole::Text(_)) => ApiError::internal("a Responses request answered as a text completion").into_response(),
        Err(failure) => failure,
    }
}

/// The answer as the Responses stream's server-sent events (`event:` the type, `data:`
/// the event).
pub(crate) fn stream(
    meta: Meta,
    answer: Answer,
    rx: mpsc::UnboundedReceiver<Event>,
    model: Arc<Model>,
    metrics: Arc<Metrics>,
) -> Response {
    let mut pieces = response::pieces(answer, rx, true, model, metrics);
    let (tx, out) = mpsc::channel::<Result<SseEvent, std::convert::Infallible>>(64);
    tokio::spawn(async move {
        let mut events = Events::new(meta, item_id);
        let send = |batch: Vec<(String, serde_json::Value)>| {
            let tx = tx.clone();
            async move {
                for (kind, data) in batch {
                    if tx.send(Ok(SseEvent::default().event(kind).data(data.to_string()))).await.is_err() {
                        return false;
                    }
                }
                true
            }
        };
        if !send(events.start()).await {
            return;
        }
        while let Some(piece) = pieces.recv().await {
            let batch = match piece {
                Out::Chat(chunk) => events.chunk(chunk),
                Out::Text(_) => Vec::new(),
                Out::Error(e) => {
                    let _ = send(vec![events.error(&e)]).await;
                    return;
                }
                Out::Done => events.finish(),
            };
            if !send(batch).await {
                return;
            }
        }
    });
    Sse::new(ReceiverStream::new(out)).into_response()
}

/// An id as OpenAI writes them: `resp_…`, `msg_…`, `rs_…`, `fc_…`.
fn item_id(prefix: &str) -> String {
    new_id(prefix).replacen('-', "_", 1)
}
