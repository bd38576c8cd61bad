//! Helpers shared by the end-to-end tests of the `stencil` binary.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_stencil");

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

pub fn smollm2() -> PathBuf {
    fixtures().join("vocab/smollm2-135m.tok.gguf.gz")
}

pub fn gemma3() -> PathBuf {
    fixtures().join("vocab/gemma3-270m.tok.gguf.gz")
}

/// The real default model (SmolLM2-135M-Instruct, from the model cache;
/// `scripts/fetch-models.sh` fetches it).
pub fn model() -> PathBuf {
    stencil_mask::vocab::fixtures::model_path(stencil_mask::vocab::fixtures::SMOLLM2_MODEL_FILE)
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

pub fn run<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Command::new(BIN).args(args).output().expect("the stencil binary runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally")
}
