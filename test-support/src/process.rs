//! A finished command's exit status and output, as the CLI's end-to-end tests read them.

use std::process::Output;

/// Its standard output, lossily decoded.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Its standard error, lossily decoded.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Its exit code; panics when a signal ended it.
pub fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally")
}
