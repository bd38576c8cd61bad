//! The server's errors: [`ApiError`], what a client gets back in OpenAI's error shape, and
//! [`ServerError`], why the server itself could not start or run.

use std::path::PathBuf;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use thiserror::Error;

/// The `type` of an OpenAI error object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorType {
    /// The request is wrong (400, 404, 413): the client must change it.
    InvalidRequestError,
    /// No or a wrong API key (401).
    AuthenticationError,
    /// The queue is full (429) or the server is busy.
    RateLimitError,
    /// The server is loading or shutting down (503).
    ServiceUnavailable,
    /// The server failed (500): a bug or a llama.cpp failure.
    ServerError,
}

/// An error answered to a client: an HTTP status and OpenAI's error object,
/// `{"error": {"message", "type", "param", "code"}}`.
///
/// ```
/// use stencil_server::ApiError;
/// let e = ApiError::invalid("`n` must be at least 1", Some("n"));
/// assert_eq!(e.status.as_u16(), 400);
/// let body = serde_json::to_value(e.body()).unwrap();
/// assert_eq!(body["error"]["param"], "n");
/// assert_eq!(body["error"]["type"], "invalid_request_error");
/// ```
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The `type` field.
    pub kind: ErrorType,
    /// What went wrong, for people.
    pub message: String,
    /// The request field at fault (`response_format.json_schema.schema`, `messages[1].role`).
    pub param: Option<String>,
    /// A machine-readable code (`invalid_schema`, `context_length_exceeded`, ...).
    pub code: Option<String>,
}

/// The serialized form, `{"error": {...}}`.
#[derive(Debug, Serialize)]
pub struct ErrorBody<'a> {
    /// The error object.
    pub error: ErrorObject<'a>,
}

/// OpenAI's error object.
#[derive(Debug, Serialize)]
pub struct ErrorObject<'a> {
    /// What went wrong.
    pub message: &'a str,
    /// The error's type.
    #[serde(rename = "type")]
    pub kind: ErrorType,
    /// The field at fault.
    pub param: Option<&'a str>,
    /// A machine-readable code.
    pub code: Option<&'a str>,
}

impl ApiError {
    /// An error with every field given.
    pub fn new(status: StatusCode, kind: ErrorType, message: impl Into<String>) -> Self {
        ApiError { status, kind, message: message.into(), param: None, code: None }
    }

    /// A 400 `invalid_request_error` about `param`.
    pub fn invalid(message: impl Into<String>, param: Option<&str>) -> Self {
        ApiError {
            param: param.map(str::to_string),
            ..Self::new(StatusCode::BAD_REQUEST, ErrorType::InvalidRequestError, message)
        }
    }

    /// The same error with a `code`.
    pub fn with_code(mut self, code: &str) -> Self {
        self.code = Some(code.to_string());
        self
    }

    /// A 401: no or a wrong API key.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, ErrorType::AuthenticationError, message).with_code("invalid_api_key")
    }

    /// A 503: the model is still loading, or the server is shutting down.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, ErrorType::ServiceUnavailable, message)
    }

    /// A 500.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorType::ServerError, message)
    }

    /// The body to serialize.
    pub fn body(&self) -> ErrorBody<'_> {
        ErrorBody {
            error: ErrorObject {
                message: &self.message,
                kind: self.kind,
                param: self.param.as_deref(),
                code: self.code.as_deref(),
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The API key file could not be read, or is empty.
    #[error("API key file {path}: {reason}")]
    ApiKeyFile {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A setting is out of range.
    #[error("{0}")]
    Config(String),
    /// The model did not load, or its session could not be created.
    #[error(transparent)]
    Runtime(#[from] stencil_runtime::RuntimeError),
    /// The async runtime or the HTTP server failed.
    #[error("server: {0}")]
    Io(#[from] std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_shape_is_openai_s() {
        let e = ApiError::invalid("bad", Some("messages[0].role")).with_code("invalid_message");
        let v = serde_json::to_value(e.body()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"error": {"message": "bad", "type": "invalid_request_error",
                "param": "messages[0].role", "code": "invalid_message"}})
        );
        let v = serde_json::to_value(ApiError::unauthorized("no key").body()).unwrap();
        assert_eq!(v["error"]["type"], "authentication_error");
        assert_eq!(v["error"]["param"], serde_json::Value::Null);
    }
}
