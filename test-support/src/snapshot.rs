//! Snapshot catalogues: a folder of inputs, each with its expected outcome in the file
//! `NAME.expected` beside the input `NAME` (the `fixtures/bad/` catalogues, see their
//! README), and the one variable that rewrites expected files, `STENCIL_UPDATE=1`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// The variable that rewrites expected files instead of comparing with them: the snapshots
/// here and the test suites' other expected files (`schema/tests/expected/`).
pub const UPDATE_VAR: &str = "STENCIL_UPDATE";

/// Whether this run rewrites expected files: [`UPDATE_VAR`] is set (to anything but `0`).
pub fn update_requested() -> bool {
    std::env::var_os(UPDATE_VAR).is_some_and(|v| v != "0")
}

/// `NAME.expected` beside the input `NAME`.
pub fn expected_path(input: &Path) -> PathBuf {
    input.with_file_name(format!("{}.expected", input.file_name().unwrap().to_string_lossy()))
}

/// Runs `outcome` on every input of `dir` ending in `suffix` and compares each result with
/// its snapshot `NAME.expected` exactly, up to trailing white space (a result is written
/// with one final newline); with [`UPDATE_VAR`] set, writes the snapshots instead. A panic
/// is an outcome too, and a failure: an outcome reports what is wrong beyond a difference
/// by panicking. Every mismatch is reported at once. Returns how many inputs it checked.
pub fn check_snapshots(dir: &Path, suffix: &str, outcome: impl Fn(&Path) -> String) -> usize {
    let update = update_requested();
    let inputs = crate::fixtures::files(dir, suffix);
    let mut failures = Vec::new();
    for input in &inputs {
        let name = input.file_name().unwrap().to_string_lossy().into_owned();
        let actual = match catch_unwind(AssertUnwindSafe(|| outcome(input))) {
            Ok(text) => format!("{}\n", text.trim_end()),
            Err(e) => {
                let msg =
                    e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
                failures.push(format!("{name}: panicked: {}", msg.unwrap_or_default()));
                continue;
            }
        };
        let path = expected_path(input);
        if update {
            std::fs::write(&path, &actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!("{name}:\n=== expected\n{expected}=== actual\n{actual}")),
            Err(_) => failures.push(format!("{name}: no {} (run with {UPDATE_VAR}=1)", path.display())),
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n\n{}", failures.len(), failures.join("\n"));
    inputs.len()
}
