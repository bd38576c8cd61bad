//! Bad command lines (`fixtures/bad/cli/NAME.args`, one argument a line, paths relative to
//! the repository root): each gives its expected exit status and messages — the snapshot
//! `NAME.args.expected`, compared exactly (`STENCIL_UPDATE_SNAPSHOTS=1` rewrites them) — and
//! none panics or dies by a signal.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::*;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn bad_command_lines_give_their_expected_errors() {
    let update = std::env::var_os("STENCIL_UPDATE_SNAPSHOTS").is_some();
    let dir = repo_root().join("fixtures/bad/cli");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "args"))
        .collect();
    inputs.sort();
    assert!(inputs.len() >= 10, "{inputs:?}");
    let mut failures = Vec::new();
    for input in inputs {
        let name = input.file_name().unwrap().to_string_lossy().into_owned();
        let args: Vec<String> = std::fs::read_to_string(&input).unwrap().lines().map(String::from).collect();
        let o = Command::new(BIN).args(&args).current_dir(repo_root()).output().expect("the stencil binary runs");
        let Some(status) = o.status.code() else {
            failures.push(format!("{name}: killed by a signal: {:?}", o.status));
            continue;
        };
        let (out, err) = (stdout(&o), stderr(&o));
        if err.contains("panicked") || status == 101 {
            failures.push(format!("{name}: panicked:\n{err}"));
            continue;
        }
        let actual = format!("exit status {status}\n--- stdout\n{out}--- stderr\n{err}");
        let path = input.with_file_name(format!("{name}.expected"));
        if update {
            std::fs::write(&path, &actual).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!("{name}:\n=== expected\n{expected}=== actual\n{actual}")),
            Err(_) => failures.push(format!("{name}: no {} (run with STENCIL_UPDATE_SNAPSHOTS=1)", path.display())),
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n\n{}", failures.len(), failures.join("\n"));
}
