"""Hugging Face transformers integration: a `LogitsProcessor` that constrains
`model.generate()` to a Stencil grammar.

Example::

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from stencil.hf import StencilLogitsProcessor

    tok = AutoTokenizer.from_pretrained(name)
    model = AutoModelForCausalLM.from_pretrained(name)
    proc = StencilLogitsProcessor.from_json_schema(
        tok, {"type": "object", "properties": {"n": {"type": "integer"}}},
        vocab_size=model.config.vocab_size)
    out = model.generate(**tok(prompt, return_tensors="pt"), logits_processor=[proc],
                         max_new_tokens=64, do_sample=False)

One processor follows one `generate()` call (any batch size, greedy or sampling): it keeps
one `Matcher` per row, learns the prompt length on its first call and consumes the tokens
appended since. Call `reset()` (or make a new processor) before reusing it for another
call. Beam search (`num_beams > 1`) reorders rows between steps and is not supported: the
processor notices the reordering and raises.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from . import (
    Compiler,
    Grammar,
    Matcher,
    Vocab,
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    fill_next_token_bitmask_batch,
)

try:  # transformers is optional: without it the class is a plain callable.
    from transformers import LogitsProcessor as _Base
except ImportError:  # pragma: no cover - exercised only without transformers
    _Base = object  # type: ignore[assignment,misc]

__all__ = ["StencilLogitsProcessor"]


class StencilLogitsProcessor(_Base):  # type: ignore[misc,valid-type]
    """Masks the scores of every token the grammar does not allow next.

    grammar: a compiled `stencil.Grammar` (its vocabulary must be the model's tokenizer).
    eos_token_ids: the ids allowed to a row once its matcher is terminated (default: the
    grammar vocabulary's EOS ids); pad_token_id: also allowed there (transformers pads
    finished rows with it)."""

    def __init__(
        self,
        grammar: Grammar,
        *,
        eos_token_ids: Sequence[int] | None = None,
        pad_token_id: int | None = None,
    ) -> None:
        if not isinstance(grammar, Grammar):
            raise TypeError(f"grammar must be a stencil.Grammar, got {type(grammar).__name__}")
        self.grammar = grammar
        self.vocab: Vocab = grammar.vocab
        ids = list(self.vocab.eos_ids if eos_token_ids is None else eos_token_ids)
        if pad_token_id is not None and pad_token_id not in ids:
            ids.append(int(pad_token_id))
        self.end_token_ids: list[int] = [int(t) for t in ids]
        self.reset()

    # -- construction from a tokenizer ------------------------------------------------

    @classmethod
    def _for_tokenizer(
        cls, tokenizer: Any, vocab_size: int | None, compile: Callable[[Compiler], Grammar]
    ) -> "StencilLogitsProcessor":
        """A processor for the grammar `compile` makes against the tokenizer's vocabulary."""
        grammar = compile(Compiler(Vocab.from_huggingface(tokenizer, vocab_size=vocab_size)))
        return cls(grammar, pad_token_id=getattr(tokenizer, "pad_token_id", None))

    @classmethod
    def from_json_schema(
        cls, tokenizer: Any, schema: str | dict | bool, vocab_size: int | None = None, **options: Any
    ) -> "StencilLogitsProcessor":
        """A processor for a JSON Schema; `options` go to `Compiler.compile_json_schema`
        (whitespace, indent, separators, strict, property_order). `vocab_size`: the model's
        logits width (`model.config.vocab_size`) when it exceeds the tokenizer's."""
        return cls._for_tokenizer(tokenizer, vocab_size, lambda c: c.compile_json_schema(schema, **options))

    @classmethod
    def from_grammar(
        cls, tokenizer: Any, gbnf: str, vocab_size: int | None = None
    ) -> "StencilLogitsProcessor":
        """A processor for a GBNF grammar (llama.cpp's dialect, `root` rule)."""
        return cls._for_tokenizer(tokenizer, vocab_size, lambda c: c.compile_grammar(gbnf))

    @classmethod
    def from_regex(
        cls, tokenizer: Any, pattern: str, vocab_size: int | None = None
    ) -> "StencilLogitsProcessor":
        """A processor for a regular expression (anchored at both ends)."""
        return cls._for_tokenizer(tokenizer, vocab_size, lambda c: c.compile_regex(pattern))

    # -- state ------------------------------------------------------------------------

    def reset(self) -> None:
        """Forgets the batch: the next call starts a new generation."""
        self.matchers: list[Matcher] | None = None
        self.prompt_len: int | None = None
        self._seen: Any = None  # the generated tokens consumed so far, (B, n) tensor
        self._bitmask: Any = None

    @property
    def num_generated(self) -> int:
        """Generated tokens consumed per row so far."""
        return 0 if self._seen is None else int(self._seen.shape[1])

    def _start(self, input_ids: Any) -> None:
        batch, length = input_ids.shape
        self.prompt_len = int(length)
        self.matchers = [Matcher(self.grammar) for _ in range(batch)]
        self._seen = input_ids[:, length:].clone()
        self._bitmask = allocate_token_bitmask(batch, self.vocab.size, backend="torch")

    def _advance(self, input_ids: Any) -> None:
        assert self.matchers is not None and self.prompt_len is not None
        batch, length = input_ids.shape
        if batch != len(self.matchers):
            raise ValueError(
                f"StencilLogitsProcessor: the batch has {batch} rows, it had "
                f"{len(self.matchers)} at the previous step; num_beams > 1 and reusing one "
                "processor for another generate() call are not supported (call reset())"
            )
        start = self.prompt_len
        done = self.num_generated
        if length < start + done:
            raise ValueError(
                f"StencilLogitsProcessor: input_ids has {length} tokens, fewer than the "
                f"{start + done} already seen; call reset() before another generate() call"
            )
        if done and not bool((input_ids[:, start : start + done] == self._seen).all()):
            raise ValueError(
                "StencilLogitsProcessor: the rows' earlier tokens changed between steps "
                "(beam search reorders rows); num_beams > 1 is not supported"
            )
        fresh = input_ids[:, start + done :]
        if fresh.shape[1] == 0:
            return
        for row, tokens in enumerate(fresh.tolist()):
            m = self.matchers[row]
            for t in tokens:
                if m.is_terminated():
                    break  # a finished row: transformers pads it, nothing to follow
                if not m.consume_token(int(t)):
                    raise ValueError(
                        f"StencilLogitsProcessor: row {row} got token {t}, which the grammar "
                        "does not allow (another processor or a sampler ignored the mask?)"
                    )
        self._seen = input_ids[:, start:].clone()

    # -- the processor ----------------------------------------------------------------

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if input_ids.dim() != 2 or scores.dim() != 2:
            raise ValueError(
                f"expected 2-D input_ids and scores, got {tuple(input_ids.shape)} and "
                f"{tuple(scores.shape)}"
            )
        if input_ids.shape[0] != scores.shape[0]:
            raise ValueError(
                f"input_ids has {input_ids.shape[0]} rows, scores {scores.shape[0]}"
            )
        if self.matchers is None:
            self._start(input_ids)
        else:
            self._advance(input_ids)
        assert self.matchers is not None
        bitmask = self._bitmask
        live = [i for i, m in enumerate(self.matchers) if not m.is_terminated()]
        if live:
            fill_next_token_bitmask_batch([self.matchers[i] for i in live], bitmask, live)
        for i, m in enumerate(self.matchers):
            if m.is_terminated():
                bitmask[i].zero_()
                for t in self.end_token_ids:
                    if 0 <= t < self.vocab.size:
                        bitmask[i, t // 32] |= _bit(t % 32)
        scores = scores.clone()
        apply_token_bitmask_inplace(scores, bitmask, vocab_size=self.vocab.size)
        return scores


def _bit(k: int) -> int:
    """Bit k of an int32 word, as a signed int32 value."""
    return (1 << k) - (1 << 32) if k == 31 else 1 << k
