//! # stencil-tools
//!
//! Tool calling on a local model with constrained decoding: the model can only name a tool
//! of the set, and only write arguments that follow that tool's JSON Schema.
//!
//! - **Tools** come from Rust types with `#[derive(Tool)]` ([`Tool`], [`Tools`]), from
//!   OpenAI-style JSON ([`ToolSet::from_openai_json`]) or from [`ToolDefinition`]s; a
//!   [`ToolSet`] holds them, each schema compiled (strict by default) to the grammar of its
//!   arguments. A name is any printable text up to [`ToolSet::MAX_NAME_BYTES`] bytes
//!   (`github.create_issue`, `fs/read_file`, `mcp:weather.get` are fine), JSON-escaped
//!   wherever it is written and compared exactly ([`ToolSet::check_name`]).
//! - **Decoding** ([`ToolCaller::call`]) renders the tools into the prompt ([`prompt`]: the
//!   chat template's own tool support, or a documented fallback block), then decodes the
//!   name from the closed set and the arguments under the tool's schema
//!   ([`Strategy::MultiStage`]), or the whole reply under one grammar
//!   ([`Strategy::SingleGrammar`]), or freely ([`Strategy::Unconstrained`], the baseline).
//!   [`ToolChoice`] says whether a call is optional, required, forbidden or of one tool;
//!   [`CallOptions::parallel`] allows several calls per reply. See [`decode`].
//! - **Results** ([`ToolTurn`]) hold [`ToolCall`]s validated against their schemas (post
//!   hoc, with the `jsonschema` crate, whatever the strategy), which [`ToolCall::parse`]
//!   turns into the caller's types. An invalid reply is a [`CallError`] whose
//!   [`feedback`](CallError::feedback) can be sent back to the model; [`CallOptions::retries`]
//!   does so automatically (default: no retry). Nothing is coerced.
//! - The text form of calls is the [`Envelope`]; see [`envelope`] for the format.
//!
//! # Deriving tools
//!
//! `#[derive(Tool)]` on a struct with named fields makes it a tool: the name is the type
//! name in snake case (or `#[tool(name = "...")]`), the description its doc comment (or
//! `#[tool(description = "...")]`), the argument schema comes from `schemars` (so the
//! struct also derives `schemars::JsonSchema` — field doc comments become property
//! descriptions — and `serde::Deserialize`; depend on `schemars = "1"` and `serde`). See
//! [`arguments_schema`] for how the schema is normalized. On an enum whose variants each
//! wrap one tool type, it gives the set and deserializes a call into the right variant.
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use serde_json::json;
//! use stencil_tools::{Tool, ToolCall, ToolSet};
//!
//! /// Current weather in a city.
//! #[derive(Tool, JsonSchema, Deserialize, Debug, PartialEq)]
//! struct GetWeather {
//!     /// The city, e.g. "Paris".
//!     city: String,
//!     unit: Option<Unit>,
//! }
//!
//! #[derive(JsonSchema, Deserialize, Debug, PartialEq)]
//! #[serde(rename_all = "lowercase")]
//! enum Unit { Celsius, Fahrenheit }
//!
//! /// Set a timer.
//! #[derive(Tool, JsonSchema, Deserialize, Debug, PartialEq)]
//! struct SetTimer { minutes: u32 }
//!
//! #[derive(Tool, Debug, PartialEq)]
//! enum Assistant { Weather(GetWeather), Timer(SetTimer) }
//!
//! let tools = ToolSet::from_tools::<Assistant>()?;
//! assert_eq!(tools.names().collect::<Vec<_>>(), ["get_weather", "set_timer"]);
//!
//! // What decoding returns, as the enum:
//! let call = ToolCall::new("set_timer", json!({"minutes": 10}));
//! assert_eq!(call.parse::<Assistant>()?, Assistant::Timer(SetTimer { minutes: 10 }));
//! // Arguments are validated before serde sees them, and errors are for the model too:
//! let bad = ToolCall::new("get_weather", json!({"city": "Paris", "unit": "kelvin"}));
//! let err = bad.parse::<Assistant>().unwrap_err();
//! assert!(err.feedback().starts_with("Your tool call is invalid: the arguments of \"get_weather\" do not validate"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Decoding
//!
//! See [`ToolCaller`] for a complete example, `examples/agent.rs` (the `stencil-examples`
//! crate) for an agent loop, and `tools/examples/eval.rs` for the comparison of the
//! strategies.

#![deny(missing_docs)]

mod call;
pub mod decode;
pub mod envelope;
pub mod format;
mod grammar;
pub mod prompt;
mod set;
pub mod stream;
mod tool;

pub use call::{CallError, ToolCall};
pub use decode::{CallOptions, Strategy, ToolCaller, ToolError, ToolTurn};
pub use envelope::{Envelope, Reply, ToolChoice};
pub use format::{CompiledFormat, ToolFormat};
pub use prompt::PromptStyle;
pub use set::{NameError, ToolEntry, ToolSet, ToolSetError};
pub use stencil_derive::Tool;
pub use stream::{ReplyStream, StreamEvent};
pub use tool::{arguments_schema, deserialize_call, Tool, ToolDefinition, Tools};

/// The `schemars` this crate generates schemas with (1.x), for matching versions.
pub use schemars;
