//! Helpers shared by the end-to-end tests of the `stencil` binary: what needs the binary or
//! this test binary's scratch folder; the rest is `stencil-test-support`'s.

// Each test binary uses a part of these.
#![allow(dead_code, unused_imports)]

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use stencil_test_support::fixtures::dir as fixtures;
use stencil_test_support::fixtures::{model_path, GEMMA3_PATH, SMOLLM2_MODEL_FILE, SMOLLM2_PATH};
pub use stencil_test_support::process::{code, stderr, stdout};

pub const BIN: &str = env!("CARGO_BIN_EXE_stencil");

/// SmolLM2's vocabulary fixture (`fixtures/vocab/`), as a `--vocab` argument.
pub fn smollm2() -> PathBuf {
    PathBuf::from(SMOLLM2_PATH)
}

/// Gemma 3's vocabulary fixture (`fixtures/vocab/`), as a `--vocab` argument.
pub fn gemma3() -> PathBuf {
    PathBuf::from(GEMMA3_PATH)
}

/// The real default model (SmolLM2-135M-Instruct, from the model cache;
/// `scripts/fetch-models.sh` fetches it).
pub fn model() -> PathBuf {
    model_path(SMOLLM2_MODEL_FILE)
}

/// `stencil generate` with the real default model, llama.cpp on one thread, quiet.
pub fn generate(extra: &[&str]) -> Output {
    let model = model();
    let mut args = vec!["generate", "--model", model.to_str().unwrap(), "--threads", "1", "--quiet"];
    args.extend_from_slice(extra);
    run(args)
}

/// A scratch file for this test binary (under Cargo's per-target temp dir).
pub fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let test = exe.file_stem().unwrap().to_string_lossy().into_owned();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("stencil-{test}"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Runs `sample SOURCE_FLAG SOURCE --vocab VOCAB --random --count COUNT --seed SEED EXTRA...`
/// and returns the output and the printed samples (decoded from their JSON lines).
pub fn sample_random(
    source_flag: &str,
    source: &Path,
    vocab: &Path,
    count: usize,
    seed: u64,
    extra: &[&str],
) -> (Output, Vec<String>) {
    let mut args: Vec<OsString> = vec![
        "sample".into(),
        source_flag.into(),
        source.into(),
        "--vocab".into(),
        vocab.into(),
        "--random".into(),
        "--count".into(),
        count.to_string().into(),
        "--seed".into(),
        seed.to_string().into(),
    ];
    args.extend(extra.iter().map(Into::into));
    let o = run(args);
    let samples = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str::<String>(l).unwrap_or_else(|e| panic!("not a JSON string: {l:?}: {e}")))
        .collect();
    (o, samples)
}

pub fn run<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Command::new(BIN).args(args).output().expect("the stencil binary runs")
}
