//! Tool calling: the `stencil-tools` evaluation (`tools/examples/eval.rs`: multi-stage,
//! single-grammar and unconstrained decoding, then each tool format, on the fixture prompts,
//! SmolLM2, greedy), run as its release binary (`scripts/bench.sh` builds it) and included as
//! a section.

use std::path::Path;
use std::process::Command;

/// Runs the evaluation; returns its Markdown section.
pub fn run(repo: &Path) -> String {
    let exe = repo.join("target/release/examples/eval");
    let out = std::env::temp_dir().join(format!("stencil-tools-eval-{}.md", std::process::id()));
    eprintln!("tools: {}", exe.display());
    let status = Command::new(&exe)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/bench.sh builds it first)", exe.display()));
    assert!(status.success(), "the tool-calling evaluation failed ({status})");
    let table = std::fs::read_to_string(&out).expect("the evaluation's table");
    let _ = std::fs::remove_file(&out);
    format!(
        "## Tool calling: multi-stage vs one grammar vs unconstrained, and each model family's format\n\n\
         `cargo run --release -p stencil-tools --example eval` (the same model, prompts, tools and \
         greedy sampling for every row; llama.cpp on one thread, CPU). *Valid calls*: the reply holds \
         at least one call, each names a tool of the set with arguments that validate and obey the \
         tool choice; *correct tool*: its first call names the tool the prompt asks for; *expected \
         arguments*: moreover, that call holds every argument the prompt determines, with an equal \
         value. With `auto` the model may answer in text instead (*text replies*). Under `required` a \
         call is valid by construction unless `max_tokens` cuts it. The formats table: SmolLM2 has \
         no tool format of its own, so each format is shown by a system prompt.\n\n{table}\n"
    )
}
