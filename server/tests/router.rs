//! The HTTP side without a model: the state never gets one, so the server answers as it
//! does while loading. Checks the API key, the error shape, body limits, and that every
//! check that needs no model answers before the model is asked for.

use std::sync::mpsc::{sync_channel, Receiver};

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use serde_json::{json, Value};
use stencil_server::engine::Job;
use stencil_server::{router, AppState, ServerConfig};
use tower::ServiceExt;

fn state(key: Option<&str>) -> (AppState, Receiver<Job>) {
    let mut config = ServerConfig::new("/nonexistent/model.gguf");
    config.api_key = key.map(str::to_string);
    config.max_body_bytes = 1 << 16;
    let (tx, rx) = sync_channel(4);
    (AppState::new(config, tx), rx)
}

async fn call(state: &AppState, method: &str, path: &str, key: Option<&str>, body: Body) -> (StatusCode, Value) {
    let mut request = Request::builder().method(method).uri(path).header(header::CONTENT_TYPE, "application/json");
    if let Some(k) = key {
        request = request.header(header::AUTHORIZATION, format!("Bearer {k}"));
    }
    let response = router(state.clone()).oneshot(request.body(body).unwrap()).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    let value =
        serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, value)
}

fn chat(body: Value) -> Body {
    Body::from(body.to_string())
}

#[tokio::test]
async fn health_is_503_while_loading() {
    let (s, _rx) = state(None);
    let (status, body) = call(&s, "GET", "/health", None, Body::empty()).await;
    assert_eq!((status, body), (StatusCode::SERVICE_UNAVAILABLE, json!({"status": "loading"})));
    let body = chat(json!({"messages": [{"role": "user", "content": "hi"}]}));
    let (status, body) = call(&s, "POST", "/v1/chat/completions", None, body).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["error"]["code"], "model_loading");
    let (status, body) = call(&s, "GET", "/v1/models", None, Body::empty()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["data"][0]["id"], "model");
}

#[tokio::test]
async fn the_api_key_is_checked() {
    let (s, _rx) = state(Some("sesame"));
    for (key, message) in [(None, "missing API key"), (Some("wrong"), "incorrect API key"), (Some(""), "incorrect")] {
        let (status, body) = call(&s, "GET", "/v1/models", key, Body::empty()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{key:?}");
        assert_eq!(body["error"]["type"], "authentication_error");
        assert!(body["error"]["message"].as_str().unwrap().contains(message), "{body}");
    }
    let (status, _) = call(&s, "GET", "/v1/models", Some("sesame"), Body::empty()).await;
    assert_eq!(status, StatusCode::OK);
    // Health and metrics need no key.
    assert_eq!(call(&s, "GET", "/health", None, Body::empty()).await.0, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(call(&s, "GET", "/metrics", None, Body::empty()).await.0, StatusCode::OK);
}

#[tokio::test]
async fn bad_requests_are_400s_before_the_model_is_needed() {
    let (s, _rx) = state(None);
    let cases = [
        (Body::from("{"), None),
        (chat(json!({"messages": "hi"})), Some("messages")),
        (chat(json!({"messages": [{"role": "user", "content": "hi"}], "max_token": 1})), Some("max_token")),
        (chat(json!({"messages": [{"role": "user", "content": "hi"}], "n": 99})), Some("n")),
        (
            chat(json!({"messages": [{"role": "user", "content": "hi"}], "tool_choice": "required"})),
            Some("tool_choice"),
        ),
    ];
    for (body, param) in cases {
        let (status, body) = call(&s, "POST", "/v1/chat/completions", None, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["param"].as_str(), param, "{body}");
    }
    let (status, body) = call(&s, "POST", "/v1/completions", None, chat(json!({"prompt": ["a", "b"]}))).await;
    assert_eq!((status, body["error"]["param"].as_str()), (StatusCode::BAD_REQUEST, Some("prompt")));
}

#[tokio::test]
async fn limits_and_unknown_routes() {
    let (s, _rx) = state(None);
    let big = Body::from(vec![b' '; 1 << 17]);
    let (status, body) = call(&s, "POST", "/v1/chat/completions", None, big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["error"]["code"], "request_too_large");
    // Refused on its Content-Length alone, before the body is read.
    let request = Request::builder()
        .method("POST")
        .uri("/v1/chat/completions")
        .header(header::CONTENT_LENGTH, 1 << 20)
        .body(Body::from("{}"))
        .unwrap();
    let response = router(s.clone()).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body["error"]["code"], "request_too_large");
    let (status, body) = call(&s, "GET", "/v2/anything", None, Body::empty()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "unknown_url");
    let (status, body) = call(&s, "GET", "/v1/chat/completions", None, Body::empty()).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{body}");
    assert_eq!(body["error"]["code"], "method_not_allowed");
}

#[tokio::test]
async fn metrics_count_answers_by_route_and_status() {
    let (s, _rx) = state(None);
    call(&s, "GET", "/health", None, Body::empty()).await;
    call(&s, "POST", "/v1/chat/completions", None, Body::from("{")).await;
    let (status, text) = call(&s, "GET", "/metrics", None, Body::empty()).await;
    assert_eq!(status, StatusCode::OK);
    let text = text.as_str().unwrap().to_string();
    assert!(text.contains("stencil_requests_total{route=\"/health\",status=\"503\"} 1"), "{text}");
    assert!(text.contains("stencil_requests_total{route=\"/v1/chat/completions\",status=\"400\"} 1"), "{text}");
    assert!(text.contains("stencil_model_loaded 0"), "{text}");
}
