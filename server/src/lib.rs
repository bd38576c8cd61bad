//! # stencil-server
//!
//! `stencil serve`: an HTTP server that speaks OpenAI's chat and completions API and
//! enforces JSON Schemas, GBNF grammars and regular expressions with Stencil's engine, for
//! several clients at once from one model.
//!
//! ```text
//!  client ─HTTP─▶ axum handler ── parse, check (400s) ── render + tokenize prompt,
//!                     ▲                                  compile constraint (cached)
//!                     │ events (text, done)                    │ Job
//!                     │                                        ▼
//!                     └───────────── engine thread: Decoder, one llama.cpp batch per
//!                                    step for every admitted request
//! ```
//!
//! - [`serve`] runs the whole server until SIGINT or SIGTERM ([`ServerConfig`] holds the
//!   command's flags).
//! - [`router`] is the HTTP side alone, over an [`AppState`] (tests drive it without a
//!   model: it answers 503 until one is loaded).
//! - A completion request goes one way: the routes (HTTP only) → [`request`] (parse,
//!   check, then build the engine's request and its constraint) → [`engine`] (the decode
//!   loop's thread); its events come back through the routes to the private `response`
//!   module (JSON or server-sent events). [`api`] holds the wire types, [`constraint`]
//!   compiles and caches `response_format` / `grammar` / `regex` and the grammar of a
//!   reply with tools, [`metrics`] is what `/metrics` reports.
//!
//! ## Routes
//!
//! | route | what |
//! |---|---|
//! | `POST /v1/chat/completions` | chat, JSON or server-sent events (`stream: true`) |
//! | `POST /v1/completions` | text completion, JSON or events |
//! | `POST /v1/responses` | the Responses API ([`responses`]), JSON or events |
//! | `GET /v1/models` | the one model served |
//! | `GET /health` | 200 `{"status": "ok"}`, 503 while loading or shutting down |
//! | `GET /metrics` | Prometheus text: requests by route and status, tokens, speculative drafts, queue depth, time to first token, mask time |
//!
//! Structured output: `response_format` `text`, `json_object`, `json_schema` (`strict: true`
//! refuses a schema with a keyword the mask cannot enforce, naming keyword and JSON
//! pointer; `strict: false`, OpenAI's default, compiles leniently and reports
//! `validation_errors` on a choice whose output fails the schema), and the extension fields
//! `grammar` (GBNF) and `regex`.
//!
//! Tools: `tools`, `tool_choice` (`auto`, `none`, `required`, a named function) and
//! `parallel_tool_calls`, through `stencil-tools`, in a model family's tool format (the
//! extension field `tool_format`, else `--tool-format`, else the format recognized from
//! the chat template, else the envelope: `stencil_tools::format`). The prompt lists the
//! tools (the chat template's own tool support or the fallback block), earlier calls (with
//! their ids) and `tool` results are rendered into the conversation, and the reply is
//! decoded under the format's one grammar (reasoning first where the format and the
//! `reasoning` field or the template ask for it, within `reasoning_budget` tokens; text
//! with calls after the format's trigger under `auto`; names from the closed set, each
//! call's arguments under its tool's schema), then read back by that grammar's captures
//! into `content`, `reasoning_content` and `tool_calls` (`finish_reason: "tool_calls"`).
//! Streamed, the same reading sends reasoning, text, each call's id and name, then its
//! arguments, as they are decoded. `chat_template_kwargs` reaches the chat template. A
//! request without tools to a model whose template thinks (or that asks for `reasoning`)
//! is a reply without calls in the same format: its reasoning comes apart, and its
//! `response_format` applies after it.
//!
//! Speculative decoding: the extension field `speculation` (`"prompt-lookup"`,
//! `"draft-model"` when the server has a draft model, or `"none"`) overrides the server's
//! default (`stencil serve --speculate prompt-lookup` or `--draft-model D.gguf`, with
//! `--draft-tokens K`). Each sequence of the batch drafts and verifies on its own; the
//! output is what it would be without speculation (greedy: the same tokens). `usage`
//! then reports the drafts in `completion_tokens_details` (`accepted_prediction_tokens`,
//! `rejected_prediction_tokens`, the fields of OpenAI's predicted outputs), and
//! `/metrics` counts them.
//!
//! ## Concurrency and the context
//!
//! One llama.cpp context of `ctx_size` tokens with `parallel` sequences (a unified KV
//! cache): a request is admitted when it gets `n` free sequences and its prompt plus
//! `n × max_tokens` fits in what the running requests have not reserved; until then it
//! waits, first in line, then in the queue of `queue_size` (a full queue is a 429). A request that could never fit (prompt plus
//! `n × max_tokens` over `ctx_size`) is a 400 before any token. Without `max_tokens`, a
//! completion may use its sequence's share of the context (`ctx_size / parallel`, less the
//! prompt), at most `max_tokens_limit`.

#![deny(missing_docs)]

pub mod api;
pub mod constraint;
pub mod engine;
mod error;
pub mod metrics;
pub mod request;
mod response;
pub mod responses;
mod routes;

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use error::{ApiError, ErrorBody, ErrorObject, ErrorType, ServerError};
pub use routes::router;
use stencil_runtime::{FlashAttention, Model, SessionOptions, Speculation};

use crate::constraint::GrammarCache;
use crate::engine::Job;
use crate::metrics::Metrics;

/// The server's settings (the flags of `stencil serve`).
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The GGUF model.
    pub model: PathBuf,
    /// Address to bind (default `127.0.0.1`: loopback only).
    pub host: String,
    /// Port (default 8080; 0 lets the system choose, and the log says which).
    pub port: u16,
    /// Sequences decoded together (llama.cpp's `n_seq_max`), default 4; also the largest `n`.
    pub parallel: usize,
    /// The context in tokens, shared by all sequences. Default `4096 × parallel`.
    pub ctx_size: u32,
    /// llama.cpp threads.
    pub threads: u32,
    /// The key clients must send (`Authorization: Bearer KEY`), if any.
    pub api_key: Option<String>,
    /// Requests that may wait for a sequence before new ones get a 429. Default 64.
    pub queue_size: usize,
    /// The largest request body, in bytes (a larger one is a 413). Default 8 MiB.
    pub max_body_bytes: usize,
    /// The largest `max_tokens` a request may ask for. Default 4096.
    pub max_tokens_limit: u32,
    /// How long in-flight requests may run after SIGINT/SIGTERM before they are cancelled.
    /// Default 10 s.
    pub shutdown_timeout: Duration,
    /// Speculative decoding for requests whose `speculation` field does not choose
    /// (default none).
    pub speculation: Option<Speculation>,
    /// A GGUF with the model's vocabulary that drafts for [`Speculation::DraftModel`]
    /// (loaded next to the model; default none).
    pub draft_model: Option<PathBuf>,
    /// llama.cpp's flash attention (default auto; see [`FlashAttention`]).
    pub flash_attention: FlashAttention,
    /// The tool-call format of requests without `tool_format` (a name of
    /// `stencil_tools::format::FORMAT_NAMES`); default: the one recognized from the chat
    /// template, else the envelope.
    pub tool_format: Option<String>,
    /// The most tokens a reply's reasoning may take, for requests without
    /// `reasoning_budget` (default none).
    pub reasoning_budget: Option<u32>,
    /// A Jinja chat template that replaces the model's (`--chat-template-file`).
    pub chat_template: Option<String>,
}

impl ServerConfig {
    /// The defaults for `model`.
    pub fn new(model: impl Into<PathBuf>) -> Self {
        let parallel = 4;
        ServerConfig {
            model: model.into(),
            host: "127.0.0.1".into(),
            port: 8080,
            parallel,
            ctx_size: 4096 * parallel as u32,
            threads: SessionOptions::default().n_threads,
            api_key: None,
            queue_size: 64,
            max_body_bytes: 8 << 20,
            max_tokens_limit: 4096,
            shutdown_timeout: Duration::from_secs(10),
            speculation: None,
            draft_model: None,
            flash_attention: FlashAttention::Auto,
            tool_format: None,
            reasoning_budget: None,
            chat_template: None,
        }
    }

    /// Reads the API key from `path` (its first line, trimmed).
    ///
    /// # Errors
    ///
    /// [`ServerError::ApiKeyFile`] when the file cannot be read or holds no key.
    pub fn read_api_key(path: &Path) -> Result<String, ServerError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ServerError::ApiKeyFile { path: path.to_path_buf(), reason: e.to_string() })?;
        let key = text.lines().next().unwrap_or("").trim().to_string();
        if key.is_empty() {
            return Err(ServerError::ApiKeyFile { path: path.to_path_buf(), reason: "it holds no key".into() });
        }
        Ok(key)
    }

    fn check(&self) -> Result<(), ServerError> {
        if self.parallel == 0 || self.parallel > 256 {
            return Err(ServerError::Config(format!("--parallel must be between 1 and 256, got {}", self.parallel)));
        }
        if (self.ctx_size as usize) < 16 * self.parallel {
            return Err(ServerError::Config(format!(
                "--ctx-size {} is too small for --parallel {} (at least 16 tokens per sequence)",
                self.ctx_size, self.parallel
            )));
        }
        if self.queue_size == 0 {
            return Err(ServerError::Config("--queue-size must be at least 1".into()));
        }
        if self.api_key.as_deref().is_some_and(str::is_empty) {
            return Err(ServerError::Config("--api-key is empty".into()));
        }
        if matches!(self.speculation, Some(Speculation::DraftModel(_))) && self.draft_model.is_none() {
            return Err(ServerError::Config("draft-model speculation needs --draft-model".into()));
        }
        if let Some(name) = &self.tool_format {
            name.parse::<stencil_tools::ToolFormat>()
                .map_err(|e| ServerError::Config(format!("--tool-format: {e}")))?;
        }
        if let Some(draft) = self.draft_model.as_deref().filter(|d| !d.is_file()) {
            return Err(ServerError::Config(format!("--draft-model {}: no such file", draft.display())));
        }
        Ok(())
    }
}

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// The settings.
    pub config: Arc<ServerConfig>,
    /// The model, once loaded (handlers render and tokenize prompts with it).
    pub model: Arc<OnceLock<Arc<Model>>>,
    /// The engine's queue.
    pub jobs: SyncSender<Job>,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// Compiled constraints.
    pub cache: Arc<GrammarCache>,
    /// The model's id in answers.
    pub model_id: String,
    /// When the server started (Unix seconds).
    pub created: u64,
    /// Set on SIGINT/SIGTERM: new requests get a 503.
    pub stopping: Arc<AtomicBool>,
}

impl AppState {
    /// A state whose engine queue is `jobs` (the receiving end goes to [`engine::run`]).
    pub fn new(config: ServerConfig, jobs: SyncSender<Job>) -> Self {
        let model_id =
            config.model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".to_string());
        AppState {
            config: Arc::new(config),
            model: Arc::new(OnceLock::new()),
            jobs,
            metrics: Arc::new(Metrics::default()),
            cache: Arc::new(GrammarCache::new(128, 16 << 20)),
            model_id,
            created: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            stopping: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The request limits.
    pub fn limits(&self) -> request::Limits {
        request::Limits { max_n: self.config.parallel, max_tokens: self.config.max_tokens_limit }
    }

    /// What building a request needs of the settings ([`request::build`]).
    pub fn serving(&self) -> request::Serving {
        request::Serving {
            ctx_size: self.config.ctx_size as usize,
            parallel: self.config.parallel,
            max_tokens_limit: self.config.max_tokens_limit,
            speculation: self.config.speculation.clone(),
            has_draft: self.config.draft_model.is_some(),
            tool_format: self.config.tool_format.clone(),
            reasoning_budget: self.config.reasoning_budget,
        }
    }

    /// True once shutdown started.
    pub fn shutting_down(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }
}

/// Runs the server until SIGINT or SIGTERM: binds, starts the engine thread (which loads
/// the model; `/health` answers 503 meanwhile), serves, and on a signal stops taking
/// requests, lets those in flight finish for up to [`ServerConfig::shutdown_timeout`],
/// then cancels what is left.
///
/// # Errors
///
/// [`ServerError`] when the settings are wrong, the address cannot be bound, or the model
/// does not load.
pub fn serve(config: ServerConfig) -> Result<(), ServerError> {
    config.check()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(serve_async(config))
}

async fn serve_async(config: ServerConfig) -> Result<(), ServerError> {
    let addr = format!("{}:{}", config.host, config.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|source| ServerError::Bind { addr: addr.clone(), source })?;
    let local: SocketAddr = listener.local_addr()?;
    let (jobs_tx, jobs_rx) = std::sync::mpsc::sync_channel(config.queue_size);
    let settings = engine::EngineSettings {
        model_path: config.model.clone(),
        draft_path: config.draft_model.clone(),
        chat_template: config.chat_template.clone(),
        session: SessionOptions {
            n_ctx: config.ctx_size,
            n_threads: config.threads,
            n_seq_max: config.parallel as u32,
            flash_attention: config.flash_attention,
            ..SessionOptions::default()
        },
    };
    let shutdown_timeout = config.shutdown_timeout;
    let state = AppState::new(config, jobs_tx);
    let abort = Arc::new(AtomicBool::new(false));
    let (loaded_tx, loaded_rx) = tokio::sync::oneshot::channel();
    let engine = {
        let (model, metrics, abort) = (state.model.clone(), state.metrics.clone(), abort.clone());
        std::thread::Builder::new()
            .name("stencil-engine".into())
            .spawn(move || engine::run(settings, jobs_rx, model, loaded_tx, metrics, abort))?
    };
    tracing::info!(address = %local, "listening");
    if !local.ip().is_loopback() {
        tracing::warn!(address = %local, "listening beyond loopback");
    }

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let app = router(state.clone());
    let server = axum::serve(listener, app).with_graceful_shutdown({
        let mut stop_rx = stop_rx;
        async move {
            let _ = stop_rx.wait_for(|s| *s).await;
        }
    });
    let mut server = tokio::spawn(server.into_future());
    let mut load_failed = None;
    let mut loaded_rx = Some(loaded_rx);
    loop {
        tokio::select! {
            _ = wait_for_signal() => {
                tracing::info!("shutting down: no new requests; waiting for those in flight");
                break;
            }
            r = async { loaded_rx.as_mut().expect("polled once").await }, if loaded_rx.is_some() => {
                loaded_rx = None;
                match r {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::error!(error = %e, "the model did not load");
                        load_failed = Some(e);
                        break;
                    }
                    Err(_) => break,
                }
            }
            r = &mut server => {
                r.map_err(|e| ServerError::Io(std::io::Error::other(e)))??;
                return Ok(());
            }
        }
    }
    state.stopping.store(true, Ordering::Relaxed);
    let _ = stop_tx.send(true);
    match tokio::time::timeout(shutdown_timeout, &mut server).await {
        Ok(r) => {
            r.map_err(|e| ServerError::Io(std::io::Error::other(e)))??;
        }
        Err(_) => {
            tracing::warn!(seconds = shutdown_timeout.as_secs_f64(), "requests still running; cancelling them");
            abort.store(true, Ordering::Relaxed);
            if tokio::time::timeout(Duration::from_secs(2), &mut server).await.is_err() {
                server.abort();
            }
        }
    }
    abort.store(true, Ordering::Relaxed);
    drop(state);
    // The engine stops once its queue is closed and its sequences are done (they were
    // cancelled above); a model still loading stops at its next progress report.
    let joined = tokio::task::spawn_blocking(move || engine.join());
    let _ = tokio::time::timeout(Duration::from_secs(5), joined).await;
    tracing::info!("stopped");
    match load_failed {
        Some(e) => Err(ServerError::Runtime(e)),
        None => Ok(()),
    }
}

async fn wait_for_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
