#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ for the given time, one after another, at the lowest
# CPU priority, and prints a summary line per target (the numbers for FUZZING.md).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     default: 600 s, all targets
#
# FUZZ_ARGS adds libFuzzer flags (e.g. FUZZ_ARGS=-len_control=0: full-size inputs at once,
# which the slow structure-aware targets need to reach big schemas within minutes).
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`); on a stable toolchain the nightly-only
# flags cargo-fuzz passes are unlocked with RUSTC_BOOTSTRAP=1. Corpora stay in
# fuzz/corpus/<target> (ignored by git), crashes in fuzz/artifacts/<target>; minimize
# one with `cargo fuzz tmin <target> <file>` and commit it under
# fixtures/fuzz-regressions/<target>/ (see FUZZING.md), where a normal test replays it.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${1:-600}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(gbnf_parse schema_compile ecma_pattern matcher hostile)
fi
export RUSTC_BOOTSTRAP=1
command -v cargo-fuzz >/dev/null || { echo "cargo-fuzz is missing: cargo install cargo-fuzz" >&2; exit 2; }
nice -n 19 cargo fuzz build -O
status=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t" logs
    # Seeds, read only: the committed grammars for the GBNF parser.
    seeds=()
    [ "$t" = gbnf_parse ] && seeds=(../fixtures/gbnf ../fixtures/bad/gbnf)
    log="logs/$t.log"
    result=0
    echo "== $t: ${secs}s (log: fuzz/$log)"
    # -timeout: an input that runs longer than 60 s is a hang, reported as a crash (the
    # sanitizer and a busy 2-core machine make 10 s too tight for the slow oracles);
    # -rss_limit_mb: so is one that needs more than 2 GB.
    if ! nice -n 19 cargo fuzz run -O "$t" "corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$secs" -timeout=60 -rss_limit_mb=2048 -max_len=4096 \
        -print_final_stats=1 ${FUZZ_ARGS:-} >"$log" 2>&1; then
        status=1
        result=1
        echo "   CRASH: see fuzz/$log and fuzz/artifacts/$t/"
    fi
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    corpus=$(find "corpus/$t" -type f | wc -l)
    echo "   $(date -u +%Y-%m-%d) $t: ${secs}s, ${execs} execs, corpus ${corpus} inputs, $([ $result = 0 ] && echo "no crash" || echo CRASH)"
done
exit $status
