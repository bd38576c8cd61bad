//! The real models, loaded once per test binary (fetched by `scripts/fetch-models.sh`; a
//! missing model fails loudly with that instruction).

#![allow(dead_code)]

use std::sync::OnceLock;

use stencil_mask::vocab::fixtures::{model_path, GEMMA3_MODEL_FILE, SMOLLM2_MODEL_FILE};
use stencil_runtime::{Model, ModelOptions};

pub fn smollm2() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| Model::load(model_path(SMOLLM2_MODEL_FILE), &ModelOptions::default()).unwrap())
}

pub fn gemma3() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| Model::load(model_path(GEMMA3_MODEL_FILE), &ModelOptions::default()).unwrap())
}
