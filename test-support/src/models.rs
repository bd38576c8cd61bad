//! The real models (fetched by `scripts/fetch-models.sh`; a missing model fails loudly with
//! that instruction), loaded once per test binary. llama.cpp runs on one thread in the
//! sessions made here: its threads spin-wait for each other, which collapses on a busy
//! machine.

use std::sync::OnceLock;

use stencil_runtime::{ChatMessage, Model, ModelOptions, Prompt, Session, SessionOptions};

use crate::fixtures::{model_path, GEMMA3_MODEL_FILE, SMOLLM2_MODEL_FILE};

/// SmolLM2-135M-Instruct, loaded once.
pub fn smollm2() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| Model::load(model_path(SMOLLM2_MODEL_FILE), &ModelOptions::default()).unwrap())
}

/// Gemma 3 270M, loaded once.
pub fn gemma3() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| Model::load(model_path(GEMMA3_MODEL_FILE), &ModelOptions::default()).unwrap())
}

/// A session of `n_ctx` tokens on one thread.
pub fn session(model: &Model, n_ctx: u32) -> Session<'_> {
    model.session(&SessionOptions { n_ctx, n_threads: 1, ..Default::default() }).unwrap()
}

/// An extraction task's prompt for `model`: the user's message through its chat template,
/// or, for a model without one (Gemma 3 270M's GGUF), the text followed by `JSON:`.
pub fn extraction_prompt(model: &Model, task: impl Into<String>) -> Prompt {
    let task = task.into();
    if model.chat_template().is_some() {
        Prompt::Chat(vec![ChatMessage::user(task)])
    } else {
        Prompt::Text(format!("{task}\nJSON:"))
    }
}
