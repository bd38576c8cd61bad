"""Small helpers the engine adapters share."""

from __future__ import annotations


def utf8_prefix(data: bytes) -> str:
    """The longest prefix of `data` that is whole UTF-8 characters, decoded (forced bytes
    may end inside a character)."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            return data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return ""
