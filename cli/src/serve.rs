//! `stencil serve`: the OpenAI-compatible server of `stencil-server`, with the default model
//! as for `generate` and logs on stderr (`tracing`; `STENCIL_LOG` filters them, e.g.
//! `STENCIL_LOG=debug`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgGroup, Args};
use stencil_server::{ServerConfig, ServerError};

use crate::error::CliError;
use crate::speculate::SpeculationFlags;

/// The flags of `stencil serve`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("key").multiple(false).args(["api_key", "api_key_file"])))]
pub struct ServeArgs {
    /// The GGUF model (default: $STENCIL_MODEL, else SmolLM2-135M-Instruct from the cache).
    #[arg(long, short = 'm', value_name = "FILE")]
    model: Option<PathBuf>,
    /// The address to listen on; the default is loopback only.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    host: String,
    /// The port (0: any free port, named in the log).
    #[arg(long, value_name = "PORT", default_value_t = 8080)]
    port: u16,
    /// Requests decoded together, one llama.cpp batch per step (also the largest `n`).
    #[arg(long, value_name = "N", default_value_t = 4)]
    parallel: usize,
    /// The context in tokens, shared by the parallel sequences (default 4096 x --parallel).
    #[arg(long, value_name = "N")]
    ctx_size: Option<u32>,
    /// Clients must send `Authorization: Bearer KEY`.
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,
    /// Read the API key from the first line of this file (keeps it out of `ps`).
    #[arg(long, value_name = "FILE")]
    api_key_file: Option<PathBuf>,
    /// CPU threads for llama.cpp (default: all cores).
    #[arg(long, value_name = "N")]
    threads: Option<u32>,
    /// Requests that may wait for a free sequence; beyond, a 429.
    #[arg(long, value_name = "N", default_value_t = 64)]
    queue_size: usize,
    /// The largest max_tokens a request may ask for.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    max_tokens_limit: u32,
    /// Seconds in-flight requests may run after SIGINT/SIGTERM before they are cancelled.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    shutdown_timeout: f64,
    /// The tool-call format of requests without `tool_format` (default: recognized from the
    /// chat template, else the envelope): hermes, qwen3-coder, llama3, llama3-python-tag,
    /// mistral, mistral-args, harmony, deepseek-v3.1 or envelope.
    #[arg(long, value_name = "NAME")]
    tool_format: Option<String>,
    /// The most tokens a reply's reasoning may take, for requests without
    /// `reasoning_budget`; the grammar then closes the reasoning.
    #[arg(long, value_name = "N")]
    reasoning_budget: Option<u32>,
    /// A Jinja chat template that replaces the model's (for example one of
    /// fixtures/templates/).
    #[arg(long, value_name = "FILE")]
    chat_template_file: Option<PathBuf>,
    /// Speculation for requests that do not choose (their `speculation` field can also
    /// pick `prompt-lookup`, or `draft-model` when a draft model is loaded, or `none`).
    #[command(flatten)]
    speculation: SpeculationFlags,
}

/// Runs the server until SIGINT or SIGTERM.
pub fn run(args: &ServeArgs) -> Result<ExitCode, CliError> {
    crate::init_logging(Some("info"));
    let model = crate::models::resolve(args.model.as_ref())?;
    let mut config = ServerConfig::new(model);
    config.host = args.host.clone();
    config.port = args.port;
    config.parallel = args.parallel;
    config.ctx_size = args.ctx_size.unwrap_or_else(|| 4096u32.saturating_mul(args.parallel as u32));
    if let Some(t) = args.threads {
        config.threads = t;
    }
    config.api_key = match (&args.api_key, &args.api_key_file) {
        (Some(k), _) => Some(k.clone()),
        (None, Some(path)) => Some(ServerConfig::read_api_key(path).map_err(server)?),
        (None, None) => None,
    };
    config.queue_size = args.queue_size;
    config.max_tokens_limit = args.max_tokens_limit;
    if !(args.shutdown_timeout.is_finite() && args.shutdown_timeout >= 0.0) {
        return Err(CliError::Usage("--shutdown-timeout must be a number of seconds >= 0".into()));
    }
    config.shutdown_timeout = Duration::from_secs_f64(args.shutdown_timeout);
    config.speculation = args.speculation.speculation()?;
    config.draft_model = args.speculation.draft_model.clone();
    config.flash_attention = args.speculation.flash_attention()?;
    config.tool_format = args.tool_format.clone();
    config.reasoning_budget = args.reasoning_budget;
    if let Some(path) = &args.chat_template_file {
        let source = std::fs::read_to_string(path)
            .map_err(|e| CliError::Usage(format!("--chat-template-file {}: {e}", path.display())))?;
        config.chat_template = Some(source);
    }
    stencil_server::serve(config).map_err(server)?;
    Ok(ExitCode::SUCCESS)
}

fn server(e: ServerError) -> CliError {
    match e {
        ServerError::Runtime(e) => CliError::Runtime(Box::new(e)),
        other => CliError::Usage(other.to_string()),
    }
}
