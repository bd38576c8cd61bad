//! `stencil generate --tools TOOLS.json`: tool calls from a local model, decoded with
//! `stencil-tools` (the name from the closed set, then the arguments under the tool's
//! schema) and validated.
//!
//! Output on stdout, one JSON object per line: the reasoning as `{"reasoning": TEXT}` when the
//! reply has some, the text for the user as `{"content": TEXT}` when there is some (or when
//! there is no call: then perhaps empty), then each call as `{"name": ..., "arguments":
//! {...}}`, in order. A summary goes to stderr.
//!
//! `--tool-format NAME` picks the format calls are written in (`stencil_tools::format`); by
//! default the chat template's, recognized by its markers, else the envelope.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use serde_json::json;
use stencil_runtime::ChatMessage;
use stencil_tools::{CallOptions, Strategy, ToolCaller, ToolChoice, ToolError, ToolFormat, ToolSet};

use crate::error::CliError;
use crate::generate::{self, Options};

/// The tool-calling flags of `generate`.
pub struct ToolArgs {
    /// OpenAI-style tool definitions.
    pub tools: PathBuf,
    /// `auto` (default), `required`, `none` or a tool name.
    pub choice: Option<String>,
    /// The most calls in one reply (default 1).
    pub max_calls: Option<u32>,
    /// `multi-stage` (default), `single-grammar`, `unconstrained` or `structural`.
    pub strategy: Option<String>,
    /// The tool-call format (default: the chat template's).
    pub format: Option<String>,
}

pub fn run(opts: &Options, args: &ToolArgs) -> Result<ExitCode, CliError> {
    if opts.beams.is_some() || opts.stream || opts.raw {
        return Err(CliError::Usage("--beams, --stream and --raw do not apply to --tools".into()));
    }
    let text = std::fs::read_to_string(&args.tools).map_err(|source| CliError::Read {
        what: "tools file",
        path: args.tools.clone(),
        source,
    })?;
    let tools = ToolSet::from_openai_json(&text)
        .map_err(|e| CliError::Usage(format!("tools file {}: {e}", args.tools.display())))?;
    let choice: ToolChoice = match &args.choice {
        Some(c) => c.parse().map_err(|e| CliError::Usage(format!("--tool-choice: {e}")))?,
        None => ToolChoice::Auto,
    };
    let strategy: Strategy = match &args.strategy {
        Some(s) => s.parse().map_err(|e| CliError::Usage(format!("--tool-strategy: {e}")))?,
        None => Strategy::MultiStage,
    };
    let format: Option<ToolFormat> = match &args.format {
        Some(f) => Some(f.parse().map_err(|e| CliError::Usage(format!("--tool-format: {e}")))?),
        None => None,
    };
    let max_calls = args.max_calls.unwrap_or(1).max(1) as usize;
    let params = generate::sampling_params(opts)?;
    let model_path = crate::models::resolve(opts.model.as_ref())?;
    let model = generate::load_model(&model_path, opts.quiet)?;
    let mut caller = ToolCaller::new(&model, tools);
    if let Some(format) = format {
        caller = caller.with_format(format).map_err(|e| CliError::Usage(format!("--tool-format: {e}")))?;
    }

    let mut messages: Vec<ChatMessage> = opts.system.iter().map(ChatMessage::system).collect();
    messages.push(ChatMessage::user(opts.prompt.clone()));
    let draft = generate::load_draft(opts)?;
    let mut session = generate::open_session(&model, draft.as_ref(), &generate::flag_session_options(opts))?;
    let options = CallOptions {
        choice,
        parallel: max_calls > 1,
        max_parallel_calls: max_calls,
        strategy,
        params,
        retries: 0,
        speculation: opts.speculation.clone(),
        ..CallOptions::default()
    };
    let start = Instant::now();
    let result = caller.call(&mut session, &messages, &options);
    let elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
    let records = match &result {
        Ok(turn) => turn.records.clone(),
        Err(ToolError::InvalidCall { records, .. }) => records.clone(),
        Err(_) => Vec::new(),
    };
    if let Some(log) = &opts.log {
        for record in &records {
            generate::append_line(log, &record.to_json_line())?;
        }
    }
    let tokens: usize = records.iter().map(|r| r.generated_tokens).sum();
    match result {
        Ok(turn) => {
            if let Some(reasoning) = &turn.reasoning {
                crate::print_line(&json!({"reasoning": reasoning}).to_string())?;
            }
            if turn.calls.is_empty() || turn.content.is_some() {
                crate::print_line(&json!({"content": turn.content.clone().unwrap_or_default()}).to_string())?;
            }
            for call in &turn.calls {
                crate::print_line(&call.to_json().to_string())?;
            }
            if !opts.quiet {
                eprintln!(
                    "{} ({} format, {strategy}, tool choice {}): {tokens} tokens in {} generations, {elapsed_ms:.0} ms; \
                     valid: every call names a tool of the set and its arguments validate",
                    match turn.calls.len() {
                        0 => "no call".to_string(),
                        1 => "1 call".to_string(),
                        n => format!("{n} calls"),
                    },
                    caller.format(),
                    options.choice,
                    records.len(),
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(ToolError::InvalidCall { error, text, .. }) => {
            eprintln!("invalid: {error}");
            eprintln!("the reply was: {text:?}");
            Ok(ExitCode::from(1))
        }
        Err(ToolError::Runtime(e)) => Err(generate::runtime(e)),
        Err(e @ ToolError::Grammar { .. }) => Err(CliError::EngineBug(e.to_string())),
        Err(ToolError::Format(e)) => Err(CliError::Usage(format!("--tool-format: {e}"))),
        Err(e) => Err(CliError::Usage(e.to_string())),
    }
}
