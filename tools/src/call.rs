//! Tool calls and why a call can be refused.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use stencil_schema::{Registry, ValidationIssue};
use thiserror::Error;

use crate::tool::Tools;

/// A call: the tool's name and its arguments as JSON.
///
/// Calls returned by [`ToolCaller::call`](crate::ToolCaller::call) name a tool of the set
/// and their arguments have been validated against its schema. [`ToolCall::parse`] turns
/// one into the caller's Rust type.
///
/// ```
/// use serde_json::json;
/// let call = stencil_tools::ToolCall::new("get_weather", json!({"city": "Paris"}));
/// assert_eq!(call.to_json(), json!({"name": "get_weather", "arguments": {"city": "Paris"}}));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The tool's name.
    pub name: String,
    /// The arguments (for a valid call, an instance of the tool's parameters schema).
    pub arguments: Value,
}

impl ToolCall {
    /// A call from its parts.
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        ToolCall { name: name.into(), arguments }
    }

    /// `{"name": ..., "arguments": ...}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({"name": self.name, "arguments": self.arguments})
    }

    /// The call as `T` (a derived tool struct, or a derived enum of tools): the arguments
    /// are validated against the tool's schema (as `T` defines it), then deserialized with
    /// serde. Nothing is coerced: a string where a number is expected is an error.
    ///
    /// ```
    /// # use schemars::JsonSchema; use serde::Deserialize; use serde_json::json;
    /// use stencil_tools::{CallError, Tool, ToolCall};
    /// #[derive(Tool, JsonSchema, Deserialize, Debug)]
    /// struct SetTimer { minutes: u16 }
    ///
    /// let timer: SetTimer = ToolCall::new("set_timer", json!({"minutes": 5})).parse()?;
    /// assert_eq!(timer.minutes, 5);
    /// let err = ToolCall::new("set_timer", json!({"minutes": "5"})).parse::<SetTimer>().unwrap_err();
    /// assert!(matches!(err, CallError::InvalidArguments { .. }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`CallError::UnknownTool`], [`CallError::InvalidArguments`] (with every validation
    /// issue) or [`CallError::Deserialize`].
    pub fn parse<T: Tools>(&self) -> Result<T, CallError> {
        let definitions = T::definitions();
        let Some(def) = definitions.iter().find(|d| d.name == self.name) else {
            return Err(CallError::UnknownTool {
                name: self.name.clone(),
                known: definitions.into_iter().map(|d| d.name).collect(),
            });
        };
        validate_arguments(&self.name, &def.parameters, &self.arguments, &Registry::new())?;
        T::from_call(self)
    }
}

/// Validates `arguments` against `schema` (post hoc, with the `jsonschema` crate).
pub(crate) fn validate_arguments(
    name: &str,
    schema: &Value,
    arguments: &Value,
    registry: &Registry,
) -> Result<(), CallError> {
    stencil_schema::validate(schema, arguments, registry)
        .map_err(|issues| CallError::InvalidArguments { name: name.to_string(), issues })
}

/// Why a model's reply is not an acceptable tool call. Each variant says what is wrong
/// precisely; [`CallError::feedback`] words it for the model, to ask again in a follow-up
/// turn.
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum CallError {
    /// The call names a tool outside the set.
    #[error("there is no tool named {name:?} (the tools are {})", list(.known))]
    UnknownTool {
        /// The name in the call.
        name: String,
        /// The names of the set.
        known: Vec<String>,
    },
    /// The arguments do not validate against the tool's schema.
    #[error("the arguments of {name:?} do not validate: {}", issues_text(.issues))]
    InvalidArguments {
        /// The tool.
        name: String,
        /// Every reason, with JSON pointers into the arguments and the schema.
        issues: Vec<ValidationIssue>,
    },
    /// The arguments validate but serde refuses them (a schema narrower than the type, or a
    /// hand-written `Deserialize`).
    #[error("the arguments of {name:?} do not deserialize: {message}")]
    Deserialize {
        /// The tool.
        name: String,
        /// serde's message.
        message: String,
    },
    /// The reply does not follow the call format (unconstrained decoding only).
    #[error("the reply is not in the tool call format: {reason}")]
    Malformed {
        /// What departs from the format.
        reason: String,
    },
    /// A call was required but the reply is plain text (unconstrained decoding only).
    #[error("a tool call was required but the reply is plain text")]
    NoCall,
    /// The reply calls a tool that the tool choice excludes (unconstrained decoding only).
    #[error("the reply calls {name:?} but tool_choice is {choice}")]
    NotAllowed {
        /// The tool called.
        name: String,
        /// The tool choice, as written (`none` or a tool name).
        choice: String,
    },
    /// More calls than one reply may hold (unconstrained decoding only).
    #[error("the reply makes {count} calls but at most {max} are allowed")]
    TooManyCalls {
        /// Calls in the reply.
        count: usize,
        /// Calls allowed.
        max: usize,
    },
    /// The reply was cut (the token budget or the context ran out, or a stop string
    /// matched) in the middle of a call.
    #[error("the reply was cut {0}")]
    Truncated(String),
}

fn list(names: &[String]) -> String {
    names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ")
}

fn issues_text(issues: &[ValidationIssue]) -> String {
    issues.iter().map(issue_text).collect::<Vec<_>>().join("; ")
}

fn issue_text(issue: &ValidationIssue) -> String {
    let at =
        if issue.instance_pointer.is_empty() { "the arguments".to_string() } else { issue.instance_pointer.clone() };
    format!("at {at}: {}", issue.message)
}

impl CallError {
    /// A message for the model, to send as the next user (or tool) message so that it can
    /// correct its call: what was wrong, and what to do.
    ///
    /// ```
    /// use stencil_tools::CallError;
    /// let e = CallError::UnknownTool { name: "wether".into(), known: vec!["weather".into()] };
    /// assert_eq!(
    ///     e.feedback(),
    ///     "Your tool call is invalid: there is no tool named \"wether\" (the tools are \"weather\"). \
    ///      Call one of the listed tools, with arguments that follow its parameters schema."
    /// );
    /// ```
    pub fn feedback(&self) -> String {
        let fix = match self {
            CallError::UnknownTool { .. } => {
                "Call one of the listed tools, with arguments that follow its parameters schema."
            }
            CallError::InvalidArguments { .. } | CallError::Deserialize { .. } => {
                "Call the tool again with arguments that follow its parameters schema."
            }
            CallError::Malformed { .. } => "Write each call exactly in the tool call format of the instructions.",
            CallError::NoCall => "You must call one of the listed tools.",
            CallError::NotAllowed { choice, .. } if choice == "none" => "Reply in plain text, without calling a tool.",
            CallError::NotAllowed { choice, .. } => {
                let tool = Value::String(choice.clone());
                return format!("Your tool call is invalid: {self}. Call the tool {tool}.");
            }
            CallError::TooManyCalls { max: 1, .. } => "Make exactly one call.",
            CallError::TooManyCalls { .. } => "Make fewer calls.",
            CallError::Truncated(_) => "Call the tool again with shorter arguments.",
        };
        format!("Your tool call is invalid: {self}. {fix}")
    }
}
