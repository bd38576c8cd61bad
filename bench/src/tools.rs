//! Tool calling: the `stencil-tools` evaluation (`tools/examples/eval.rs`: multi-stage,
//! single-grammar and unconstrained decoding, then each tool format, on the fixture prompts,
//! greedy; SmolLM2, and Gemma 3 for the formats), run as its release binary (`scripts/bench.sh` builds it) and included as
//! a section.

use std::path::Path;
use std::process::Command;

use stencil_test_support::fixtures::{model_path, GEMMA3_MODEL_FILE};

/// Runs the evaluation (SmolLM2: strategies and formats; Gemma 3: formats); returns its
/// Markdown section.
pub fn run(repo: &Path) -> String {
    let smollm2 = eval(repo, &[]);
    let gemma = model_path(GEMMA3_MODEL_FILE);
    let gemma = eval(repo, &["--model".as_ref(), gemma.as_os_str(), "--no-strategies".as_ref()]);
    format!(
        "## Tool calling: multi-stage vs one grammar vs unconstrained, and each model family's format\n\n\
         `cargo run --release -p stencil-tools --example eval` (the same model, prompts, tools and \
         greedy sampling for every row; llama.cpp on one thread, CPU). *Valid calls*: the reply holds \
         at least one call, each names a tool of the set with arguments that validate and obey the \
         tool choice; *correct tool*: its first call names the tool the prompt asks for; *expected \
         arguments*: moreover, that call holds every argument the prompt determines, with an equal \
         value. With `auto` the model may answer in text instead (*text replies*). Under `required` a \
         call is valid by construction unless `max_tokens` cuts it. The formats tables: neither model \
         has a tool format of its own, so each format is shown by a system prompt.\n\n{smollm2}\n\n{gemma}\n"
    )
}

/// One run of the evaluation's release binary with `args`: its tables.
fn eval(repo: &Path, args: &[&std::ffi::OsStr]) -> String {
    let exe = repo.join("target/release/examples/eval");
    let out = std::env::temp_dir().join(format!("stencil-tools-eval-{}.md", std::process::id()));
    eprintln!("tools: {} {args:?}", exe.display());
    let status = Command::new(&exe)
        .args(args)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/bench.sh builds it first)", exe.display()));
    assert!(status.success(), "the tool-calling evaluation failed ({status})");
    let table = std::fs::read_to_string(&out).expect("the evaluation's table");
    let _ = std::fs::remove_file(&out);
    table.trim().to_string()
}
