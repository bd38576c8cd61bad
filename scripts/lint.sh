#!/usr/bin/env bash
# The habits CI enforces: no import cycle between the modules of server/src and mask/src
# (scripts/module-cycles.py), formatting, clippy with warnings denied, and rustdoc with
# warnings denied (broken intra-doc links included), over the whole workspace and the
# fuzz crate's formatting. Uses the test profile, so it reuses what scripts/test.sh built
# (llama.cpp is not compiled again).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0

echo "== import cycles (server/src, mask/src)"
python3 scripts/module-cycles.py --self-test
python3 scripts/module-cycles.py server/src mask/src

echo "== cargo fmt --check"
cargo fmt --all --check
(cd fuzz && cargo fmt --check)

echo "== cargo clippy (warnings denied)"
cargo clippy --locked --workspace --all-targets --profile test -- -D warnings

echo "== cargo doc (rustdoc warnings denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --locked --workspace --no-deps --profile test
echo "lint: clean"
