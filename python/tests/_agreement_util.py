"""Helpers shared by the matcher, thread and llguidance-agreement tests: bitmask <-> token
ids, seeded random walks over a grammar, and readable reports of differing masks.

Not a test module (pytest collects only `test_*.py`).
"""

from __future__ import annotations

import random
from typing import Callable, Sequence

import numpy as np

import stencil

# JSON's structural bytes: walks prefer tokens containing one, so that they leave strings
# and numbers and reach the end of the grammar within a bounded number of steps.
STRUCTURAL = frozenset(b'{}[],:"')


def new_row(vocab: stencil.Vocab) -> np.ndarray:
    """One zeroed bitmask row (`ceil(vocab.size / 32)` int32 words)."""
    return np.zeros(stencil.bitmask_words(vocab.size), dtype=np.int32)


def row_ids(row: np.ndarray) -> np.ndarray:
    """The token ids whose bit is set in a bitmask row (bit t % 32 of word t // 32)."""
    row = np.ascontiguousarray(row, dtype=np.int32)
    return np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little"))


def row_bits(row: np.ndarray, size: int) -> np.ndarray:
    """The bitmask row as one bool per token id (`size` of them)."""
    row = np.ascontiguousarray(row, dtype=np.int32)
    return np.unpackbits(row.view(np.uint8), bitorder="little")[:size].astype(bool)


def matcher_mask(matcher: stencil.Matcher) -> np.ndarray:
    """The matcher's next-token bitmask row, freshly filled."""
    row = new_row(matcher.grammar.vocab)
    matcher.fill_next_token_bitmask(row)
    return row


def token_text(vocab: stencil.Vocab, token: int) -> bytes:
    """The bytes a token adds to the output (nothing for a control/EOS token)."""
    return vocab.token_bytes(int(token)) if vocab.is_text(int(token)) else b""


def describe(vocab: stencil.Vocab, ids: Sequence[int], limit: int = 8) -> str:
    """`id bytes` for the first `limit` ids, and how many there are."""
    ids = [int(t) for t in ids]
    shown = ", ".join(f"{t} {vocab.token_bytes(t)!r}" for t in ids[:limit])
    more = f", ... ({len(ids)} in all)" if len(ids) > limit else ""
    return f"[{shown}{more}]"


def prefix_text(vocab: stencil.Vocab, tokens: Sequence[int], tail: int = 120) -> bytes:
    """The output so far (its last `tail` bytes)."""
    text = b"".join(token_text(vocab, t) for t in tokens)
    return text[-tail:]


_TABLES: dict[int, tuple] = {}


def token_tables(vocab: stencil.Vocab) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per token id (cached per vocabulary): single-byte text token; text token with a
    JSON structural byte; EOS id."""
    key = id(vocab)
    if key not in _TABLES:
        single = np.zeros(vocab.size, dtype=bool)
        structural = np.zeros(vocab.size, dtype=bool)
        for t in range(len(vocab)):
            if vocab.is_text(t):
                b = vocab.token_bytes(t)
                single[t] = len(b) == 1
                structural[t] = any(c in STRUCTURAL for c in b)
        is_eos = np.zeros(vocab.size, dtype=bool)
        is_eos[list(vocab.eos_ids)] = True
        _TABLES[key] = (vocab, single, structural, is_eos)  # the vocab keeps `key` unique
    return _TABLES[key][1:]


class TokenPicker:
    """Seeded choice of the next token among the allowed ones, biased so that walks make
    progress: an allowed EOS id with probability `eos_weight`; otherwise one of these
    pools (the non-empty ones) uniformly, then a non-EOS token in it uniformly: all
    allowed tokens; the single-byte ones; those with a JSON structural byte."""

    def __init__(self, vocab: stencil.Vocab, seed: int, eos_weight: float = 0.15):
        self.rng = random.Random(seed)
        self.vocab = vocab
        self.eos_weight = eos_weight
        self.single, self.structural, self.is_eos = token_tables(vocab)

    def pick(self, allowed: np.ndarray) -> int:
        assert len(allowed) > 0, "no token allowed"
        eos = allowed[self.is_eos[allowed]]
        if len(eos) and self.rng.random() < self.eos_weight:
            return int(self.rng.choice(eos.tolist()))
        pools = [allowed]
        single = allowed[self.single[allowed]]
        if len(single):
            pools.append(single)
        structural = allowed[self.structural[allowed]]
        if len(structural):
            pools.append(structural)
        pool = self.rng.choice(pools)
        text_pool = pool[~self.is_eos[pool]]
        return int(self.rng.choice((text_pool if len(text_pool) else pool).tolist()))


def random_walk(
    grammar: stencil.Grammar,
    seed: int,
    max_steps: int,
    picker: TokenPicker | None = None,
    on_step: Callable[[int, list[int], np.ndarray], None] | None = None,
    prefix: Sequence[int] = (),
) -> list[int]:
    """A seeded walk: at each step fill the mask, pick an allowed token, accept it; stop
    after an EOS or `max_steps` tokens. It starts after `prefix` (accepted first, part of
    the result). `on_step(step, tokens_so_far, mask_row)` is called before each choice.
    Returns the tokens (EOS included)."""
    vocab = grammar.vocab
    picker = picker or TokenPicker(vocab, seed)
    m = stencil.Matcher(grammar)
    tokens: list[int] = list(prefix)
    assert m.consume_tokens(tokens), "random_walk: the prefix is refused"
    for step in range(max_steps):
        if m.is_terminated():
            break
        row = matcher_mask(m)
        if on_step is not None:
            on_step(step, tokens, row)
        allowed = row_ids(row)
        if len(allowed) == 0:
            raise AssertionError(
                f"step {step}: empty mask of a non-terminated matcher after {prefix_text(vocab, tokens)!r}"
            )
        t = picker.pick(allowed)
        assert m.consume_token(t), f"step {step}: the matcher refused token {t} its own mask allows"
        tokens.append(t)
        if m.is_terminated():
            break
    return tokens
