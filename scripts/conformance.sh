#!/usr/bin/env bash
# The conformance command: JSONSchemaBench (third-party schemas, kept outside the
# repository) through the schema compiler, the mask and post-hoc validation; prints the
# counts per subset (schemas compiled, valid instances accepted, invalid ones rejected,
# unsound acceptances, panics, timeouts) and fails on a panic or an unsound acceptance.
#
#   scripts/conformance.sh [--corpus DIR] [--step N]
#
# DIR is a folder of subset folders (Github_easy/, Kubernetes/, ...), or a folder holding
# one such folder as jsonschemabench/; default ../shared/corpus/jsonschemabench beside the
# repository. --step N takes every Nth schema of each subset (default 1: all of them; the
# whole dev split takes a few minutes on 2 cores). Uses the test profile, so it reuses what
# scripts/test.sh built.
set -euo pipefail
cd "$(dirname "$0")/.."

corpus=../shared/corpus/jsonschemabench
step=1
while [ $# -gt 0 ]; do
    case "$1" in
        --corpus) corpus="${2:?--corpus needs a folder}"; shift 2 ;;
        --step) step="${2:?--step needs a number}"; shift 2 ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "conformance: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [ -d "$corpus/jsonschemabench" ]; then corpus="$corpus/jsonschemabench"; fi
if [ ! -d "$corpus" ]; then
    echo "conformance: no JSONSchemaBench split at $corpus (give one with --corpus DIR)" >&2
    exit 1
fi

echo "== conformance: JSONSchemaBench at $corpus, every ${step}th schema"
export CARGO_INCREMENTAL=0
STENCIL_JSONSCHEMABENCH="$(cd "$corpus" && pwd)" STENCIL_CONFORMANCE_STEP="$step" \
    cargo test --locked -p stencil-schema --test jsonschemabench -- --nocapture --test-threads=1
