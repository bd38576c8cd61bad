//! A small agent loop with three derived tools, on the default model (SmolLM2-135M-Instruct).
//!
//! ```sh
//! scripts/fetch-models.sh                      # once: the models, with pip
//! cargo run --release -p stencil-examples --bin agent -- "What is 12 times 7, and the weather in Oslo?"
//! ```
//!
//! Each round the model replies with tool calls (constrained: a real tool, valid
//! arguments), the program runs them and gives the results back, until the model answers in
//! plain text; the last round forbids calls so that the loop always ends with an answer.
//! `--model FILE` runs another GGUF model.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use stencil_runtime::{ChatMessage, Model, ModelOptions, SessionOptions};
use stencil_test_support::fixtures::{models_dir, SMOLLM2_MODEL_FILE};
use stencil_tools::{CallOptions, Tool, ToolCaller, ToolChoice, ToolSet};

/// Get the current weather in a city.
#[derive(Tool, JsonSchema, Deserialize, Debug)]
struct GetWeather {
    /// The city, e.g. "Paris".
    city: String,
}

/// Compute `a OP b`.
#[derive(Tool, JsonSchema, Deserialize, Debug)]
struct Calculate {
    a: f64,
    b: f64,
    op: Op,
}

#[derive(JsonSchema, Deserialize, Debug, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Op {
    Add,
    Subtract,
    Multiply,
    Divide,
}

/// The current date and time (UTC).
#[derive(Tool, JsonSchema, Deserialize, Debug)]
struct GetTime {}

/// The agent's tools: a call deserializes into one of the variants.
#[derive(Tool, Debug)]
enum AgentTool {
    Weather(GetWeather),
    Calculate(Calculate),
    Time(GetTime),
}

/// Runs a call (the weather is made up: this is an example).
fn run_tool(tool: &AgentTool) -> Value {
    match tool {
        AgentTool::Weather(w) => {
            let temp = 8 + w.city.len() % 17;
            json!({"city": w.city, "temperature_c": temp, "sky": if temp > 15 { "sunny" } else { "cloudy" }})
        }
        AgentTool::Calculate(c) => {
            let r = match c.op {
                Op::Add => c.a + c.b,
                Op::Subtract => c.a - c.b,
                Op::Multiply => c.a * c.b,
                Op::Divide if c.b == 0.0 => return json!({"error": "division by zero"}),
                Op::Divide => c.a / c.b,
            };
            json!({"result": r})
        }
        AgentTool::Time(_) => {
            let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            json!({"unix_seconds": secs})
        }
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut model_path = models_dir().join(SMOLLM2_MODEL_FILE);
    let mut question = "What is the weather in Paris, and what is 12 times 7?".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--model" => model_path = PathBuf::from(args.next().ok_or("--model needs a file")?),
            _ => question = arg,
        }
    }
    if !model_path.is_file() {
        return Err(format!("model {} is missing: run scripts/fetch-models.sh", model_path.display()).into());
    }
    let model = Model::load(&model_path, &ModelOptions::default())?;
    let mut session = model.session(&SessionOptions { n_threads: 2, ..Default::default() })?;
    let caller = ToolCaller::new(&model, ToolSet::from_tools::<AgentTool>()?);

    println!("user: {question}");
    let mut messages = vec![ChatMessage::user(question)];
    const ROUNDS: usize = 3;
    for round in 0..ROUNDS {
        let choice = match round {
            0 => ToolChoice::Required,
            r if r + 1 == ROUNDS => ToolChoice::None,
            _ => ToolChoice::Auto,
        };
        // One call per reply (`parallel: true` allows several; this small model then tends
        // to repeat its first call).
        let options = CallOptions { choice, retries: 1, ..CallOptions::default() };
        let turn = caller.call(&mut session, &messages, &options)?;
        messages.push(turn.assistant_message());
        if turn.calls.is_empty() {
            println!("assistant: {}", turn.content.unwrap_or_default());
            return Ok(());
        }
        for (call, tool) in turn.calls.iter().zip(turn.parse::<AgentTool>()?) {
            let result = run_tool(&tool);
            println!("call: {} {} -> {result}", call.name, call.arguments);
            messages.push(caller.result_message(&call.name, &result));
        }
    }
    Ok(())
}
