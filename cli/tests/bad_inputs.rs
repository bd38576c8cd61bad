//! Bad command lines (`fixtures/bad/cli/NAME.args`, one argument a line, paths relative to
//! the repository root): each gives its expected exit status and messages — the snapshot
//! `NAME.args.expected`, compared exactly (`STENCIL_UPDATE=1` rewrites them) — and
//! none panics or dies by a signal.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::*;
use stencil_test_support::snapshot::check_snapshots;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn bad_command_lines_give_their_expected_errors() {
    let checked = check_snapshots(&repo_root().join("fixtures/bad/cli"), ".args", |input| {
        let args: Vec<String> = std::fs::read_to_string(input).unwrap().lines().map(String::from).collect();
        let o = Command::new(BIN).args(&args).current_dir(repo_root()).output().expect("the stencil binary runs");
        let Some(status) = o.status.code() else { panic!("killed by a signal: {:?}", o.status) };
        let (out, err) = (stdout(&o), stderr(&o));
        if err.contains("panicked") || status == 101 {
            panic!("the binary panicked:\n{err}");
        }
        format!("exit status {status}\n--- stdout\n{out}--- stderr\n{err}")
    });
    assert!(checked >= 10, "{checked} bad command lines");
}
