#!/usr/bin/env bash
# Machine set-up shared by the README's two commands: the system packages llama.cpp's
# build needs (cmake; libclang and clang's headers for bindgen), Python's pip for the
# model fetch, and a check for the Rust toolchain. Idempotent: installs only what is
# missing. On Debian/Ubuntu it uses apt-get (through sudo when not root); elsewhere it
# says what to install.
set -euo pipefail

# bindgen needs libclang and clang's own headers (stdbool.h).
have_libclang() {
    compgen -G "/usr/lib/llvm-*/lib/libclang.so*" >/dev/null && compgen -G "/usr/lib/llvm-*/lib/clang/*/include/stdbool.h" >/dev/null
}

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
have_libclang || missing+=(libclang-dev)
command -v c++ >/dev/null 2>&1 || missing+=(g++)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)

if [ ${#missing[@]} -gt 0 ]; then
    if command -v apt-get >/dev/null 2>&1; then
        SUDO=""
        if [ "$(id -u)" != 0 ]; then
            if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
                echo "setup: need root (or sudo) to install: ${missing[*]}" >&2
                exit 1
            fi
        fi
        echo "== installing system packages: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        $SUDO apt-get update -qq
        $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "setup: please install ${missing[*]} (cmake, libclang with clang's headers, a C++ compiler, python3 with pip)" >&2
        exit 1
    fi
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo is missing. Install Rust (rustup, stable >= 1.80) and run again." >&2
    exit 1
fi
