"""Small helpers the engine adapters share."""

from __future__ import annotations

import os


def env_flag(name: str) -> bool:
    """True when the environment variable `name` is set to anything but "", "0" or "false"."""
    return os.environ.get(name, "0") not in ("", "0", "false")


def utf8_prefix(data: bytes) -> str:
    """The longest prefix of `data` that is whole UTF-8 characters, decoded (forced bytes
    may end inside a character)."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            return data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return ""
