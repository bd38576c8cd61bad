//! The HTTP side: routes, the API key check, request counting, and each completion
//! request's way through the server: the body read and prepared ([`crate::request`]),
//! built off the async threads, queued for the [`engine`](crate::engine), then answered
//! as JSON or as server-sent events ([`crate::response`]).

use std::sync::atomic::Ordering;
use std::sync::mpsc::TrySendError;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use subtle::ConstantTimeEq;
use tokio::sync::mpsc;

use crate::api::{ModelCard, ModelList};
use crate::engine::{Event, Job};
use crate::error::ApiError;
use crate::request::{self, Prepared};
use crate::response::{self, Answer, Endpoint};
use crate::responses;
use crate::AppState;

/// The routes: `/v1/*` behind the API key (when one is set), `/health` and `/metrics`
/// open; a body limit on everything.
pub fn router(state: AppState) -> Router {
    let v1 = Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(completions))
        .route("/v1/responses", post(responses))
        .route("/v1/models", get(models))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_key));
    Router::new()
        .merge(v1)
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), count_requests))
        .layer(axum::extract::DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(state.config.max_body_bytes))
        .layer(middleware::map_response(openai_shape))
        .with_state(state)
}

/// The body limit's own 413 (a `Content-Length` over the limit, refused before the body is
/// read) in OpenAI's error shape, like every other error.
async fn openai_shape(response: Response) -> Response {
    let is_json =
        response.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE && !is_json {
        return too_large().into_response();
    }
    response
}

fn too_large() -> ApiError {
    let mut e = ApiError::invalid("the request body is larger than the server's limit", None);
    e.status = StatusCode::PAYLOAD_TOO_LARGE;
    e.with_code("request_too_large")
}

async fn not_found(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        crate::error::ErrorType::InvalidRequestError,
        format!("no route for {} {}", request.method(), request.uri().path()),
    )
    .with_code("unknown_url")
}

async fn method_not_allowed(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        crate::error::ErrorType::InvalidRequestError,
        format!("{} is not allowed on {}", request.method(), request.uri().path()),
    )
    .with_code("method_not_allowed")
}

/// 401 unless the request carries `Authorization: Bearer KEY` with the server's key,
/// compared in constant time.
async fn require_key(State(state): State<AppState>, headers: HeaderMap, request: Request, next: Next) -> Response {
    let Some(key) = &state.config.api_key else {
        return next.run(request).await;
    };
    let given = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let Some(given) = given else {
        return ApiError::unauthorized("missing API key: send `Authorization: Bearer KEY`").into_response();
    };
    let token = given.strip_prefix("Bearer ").unwrap_or("").trim();
    if bool::from(token.as_bytes().ct_eq(key.as_bytes())) {
        next.run(request).await
    } else {
        ApiError::unauthorized("incorrect API key").into_response()
    }
}

/// Counts every answer by route and status.
async fn count_requests(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map_or("other", |p| p.as_str()).to_string();
    let response = next.run(request).await;
    state.metrics.count_request(&route, response.status().as_u16());
    response
}

async fn health(State(state): State<AppState>) -> Response {
    if state.shutting_down() {
        return (StatusCode::SERVICE_UNAVAILABLE, Json(serde_json::json!({"status": "shutting down"}))).into_response();
    }
    match state.model.get() {
        Some(_) => Json(serde_json::json!({"status": "ok"})).into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, Json(serde_json::json!({"status": "loading"}))).into_response(),
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    let cache = (state.cache.hits(), state.cache.misses(), state.cache.len());
    let text = state.metrics.render(cache, state.model.get().is_some());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

async fn models(State(state): State<AppState>) -> Json<ModelList> {
    Json(ModelList {
        object: "list",
        data: vec![ModelCard {
            id: state.model_id.clone(),
            object: "model",
            created: state.created,
            owned_by: "stencil",
        }],
    })
}

async fn chat_completions(State(state): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    let prepared = body
        .map_err(body_error)
        .and_then(|b| request::parse_chat(&b))
        .and_then(|r| request::prepare_chat(r, &state.limits()));
    match prepared {
        Ok(p) => complete(state, p, Endpoint::Chat, None).await,
        Err(e) => e.into_response(),
    }
}

async fn responses(State(state): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    let prepared = body.map_err(body_error).and_then(|b| responses::prepare(&b, &state.limits(), &state.model_id));
    match prepared {
        Ok((p, meta)) => complete(state, p, Endpoint::Chat, Some(meta)).await,
        Err(e) => e.into_response(),
    }
}

async fn completions(State(state): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    let prepared = body
        .map_err(body_error)
        .and_then(|b| request::parse_completion(&b))
        .and_then(|r| request::prepare_completion(r, &state.limits()));
    match prepared {
        Ok(p) => complete(state, p, Endpoint::Completions, None).await,
        Err(e) => e.into_response(),
    }
}

fn body_error(e: BytesRejection) -> ApiError {
    let status = e.status();
    let mut err = ApiError::invalid(format!("cannot read the request body: {}", e.body_text()), None);
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        err = too_large();
    }
    err
}

/// Runs a prepared request: prompt and constraint checked and compiled off the async
/// threads, queued, then answered as JSON or as a stream (as a Response with `responses`).
async fn complete(state: AppState, p: Prepared, endpoint: Endpoint, responses: Option<responses::Meta>) -> Response {
    let arrived = Instant::now();
    if state.shutting_down() {
        return ApiError::unavailable("the server is shutting down").into_response();
    }
    let Some(model) = state.model.get().cloned() else {
        return ApiError::unavailable("the model is still loading; retry when GET /health answers 200")
            .with_code("model_loading")
            .into_response();
    };
    let build = {
        let (state, model, p) = (state.clone(), model.clone(), p.clone());
        tokio::task::spawn_blocking(move || request::build(&p, &model, &state.cache, &state.serving()))
    };
    let (request, constraint) = match build.await {
        Ok(Ok(built)) => built,
        Ok(Err(e)) => return e.into_response(),
        Err(e) => return ApiError::internal(format!("preparing the request failed: {e}")).into_response(),
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let job = Job { request, n: p.n, events: tx, queued_at: arrived };
    match state.jobs.try_send(job) {
        Ok(()) => {
            state.metrics.queue_depth.fetch_add(1, Ordering::Relaxed);
        }
        Err(TrySendError::Full(_)) => {
            return ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                crate::error::ErrorType::RateLimitError,
                format!("the server is busy: {} requests are already queued; retry later", state.config.queue_size),
            )
            .with_code("queue_full")
            .into_response()
        }
        Err(TrySendError::Disconnected(_)) => return ApiError::unavailable("the engine has stopped").into_response(),
    }
    // Wait for the sequences (or a refusal) before answering, so that a refusal is an
    // HTTP error even for a stream.
    match rx.recv().await {
        Some(Event::Started) => {}
        Some(Event::Failed(e)) => return e.into_response(),
        Some(_) | None => return ApiError::internal("the engine dropped the request").into_response(),
    }
    let answer = Answer::new(endpoint, state.model_id.clone(), constraint, p.logprobs, p.n, arrived);
    match (responses, p.stream) {
        (Some(meta), true) => responses::stream(meta, answer, rx, model, state.metrics.clone()),
        (Some(meta), false) => responses::whole(meta, answer, rx, &model, &state.metrics).await,
        (None, true) => response::stream(answer, rx, p.include_usage, model, state.metrics.clone()),
        (None, false) => response::whole(answer, rx, &model, &state.metrics).await,
    }
}
