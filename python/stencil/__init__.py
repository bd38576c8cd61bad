"""Stencil: grammar-constrained generation for Python.

The engine (vocabularies, compilers, matchers and token bitmasks) is native Rust; this
package re-exports it and adds the bitmask helpers that work with numpy arrays and torch
tensors. Integrations: `stencil.hf` (transformers), `stencil.vllm`, `stencil.sglang`.

Example::

    import numpy as np, stencil
    vocab = stencil.Vocab.from_huggingface(tokenizer, vocab_size=model.config.vocab_size)
    grammar = stencil.Compiler(vocab).compile_json_schema({"type": "object"})
    matcher = stencil.Matcher(grammar)
    bitmask = stencil.allocate_token_bitmask(1, vocab.size)
    while not matcher.is_terminated():
        matcher.fill_next_token_bitmask(bitmask)
        logits = next_logits()                      # shape (vocab.size,), float
        stencil.apply_token_bitmask_inplace(logits, bitmask)
        matcher.consume_token(int(np.argmax(logits)))

numpy and torch are optional: each helper imports the one its arguments come from.
"""

from __future__ import annotations

from typing import Any, Literal

from ._stencil import (
    CompileError,
    Compiler,
    Grammar,
    Matcher,
    MatchError,
    StencilError,
    Vocab,
    VocabError,
    bitmask_words,
    fill_next_token_bitmask_batch,
)

__all__ = [
    "StencilError",
    "VocabError",
    "CompileError",
    "MatchError",
    "Vocab",
    "Grammar",
    "Compiler",
    "Matcher",
    "fill_next_token_bitmask_batch",
    "bitmask_words",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "__version__",
]


def _version() -> str:
    from . import _stencil

    v = getattr(_stencil, "__version__", None)
    if isinstance(v, str):
        return v
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("stencil-structured")
        except PackageNotFoundError:
            pass
    except ImportError:  # pragma: no cover
        pass
    return "0.0.0+unknown"


__version__: str = _version()


def _is_torch(x: Any) -> bool:
    # No import of torch: a tensor's class lives in the `torch` package.
    return type(x).__module__.split(".")[0] == "torch"


def _is_numpy(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "numpy"


def allocate_token_bitmask(
    batch_size: int, vocab_size: int, *, backend: Literal["numpy", "torch"] = "numpy"
) -> Any:
    """A bitmask of `batch_size` rows for a vocabulary of `vocab_size` tokens: int32, shape
    `(batch_size, ceil(vocab_size / 32))`, every bit set (every token allowed).

    `backend`: "numpy" (a `numpy.ndarray`) or "torch" (a CPU `torch.Tensor`), both
    C-contiguous, as `Matcher.fill_next_token_bitmask` wants them."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 0:
        raise ValueError(f"batch_size must be a non-negative int, got {batch_size!r}")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size <= 0:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    words = bitmask_words(vocab_size)
    if backend == "numpy":
        import numpy as np

        return np.full((batch_size, words), -1, dtype=np.int32)
    if backend == "torch":
        import torch

        return torch.full((batch_size, words), -1, dtype=torch.int32)
    raise ValueError(f'backend must be "numpy" or "torch", got {backend!r}')


def apply_token_bitmask_inplace(logits: Any, bitmask: Any, vocab_size: int | None = None) -> None:
    """Sets the logits of disallowed tokens to -inf, in place.

    `logits`: a float numpy array or torch tensor (any device), 1-D `(V,)` or 2-D `(B, V)`.
    `bitmask`: int32, `(B, W)` (or `(W,)` / `(1, W)` for 1-D logits), bit `t % 32` of word
    `t // 32` set = token t allowed; it is moved to the logits' device (torch) or
    converted (numpy <-> torch) as needed. `vocab_size`: the number of meaningful bits,
    default `min(V, 32 * W)`; columns of `logits` at or past it are disallowed too (the
    model's padding ids)."""
    if _is_torch(logits):
        _apply_torch(logits, bitmask, vocab_size)
    elif _is_numpy(logits):
        _apply_numpy(logits, bitmask, vocab_size)
    else:
        raise TypeError(
            f"logits must be a numpy.ndarray or a torch.Tensor, got {type(logits).__name__}"
        )


def _check_shapes(logits_shape: tuple, mask_shape: tuple, vocab_size: int | None) -> tuple:
    """(rows, V, W, n): validated shapes and the number of meaningful bits `n`."""
    if len(logits_shape) not in (1, 2):
        raise ValueError(f"logits must be 1-D or 2-D, got shape {tuple(logits_shape)}")
    if len(mask_shape) not in (1, 2):
        raise ValueError(f"bitmask must be 1-D or 2-D, got shape {tuple(mask_shape)}")
    rows = 1 if len(logits_shape) == 1 else int(logits_shape[0])
    v = int(logits_shape[-1])
    w = int(mask_shape[-1])
    mask_rows = 1 if len(mask_shape) == 1 else int(mask_shape[0])
    if len(logits_shape) == 2 and len(mask_shape) == 1:
        raise ValueError(
            f"2-D logits {tuple(logits_shape)} need a 2-D bitmask, got shape {tuple(mask_shape)}"
        )
    if mask_rows != rows:
        raise ValueError(
            f"bitmask has {mask_rows} rows but logits have {rows} "
            f"(logits {tuple(logits_shape)}, bitmask {tuple(mask_shape)})"
        )
    if vocab_size is None:
        n = min(v, 32 * w)
    else:
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 0:
            raise ValueError(f"vocab_size must be a non-negative int, got {vocab_size!r}")
        if vocab_size > 32 * w:
            raise ValueError(
                f"vocab_size {vocab_size} exceeds the bitmask's {32 * w} bits ({w} words)"
            )
        n = min(v, vocab_size)
    return rows, v, w, n


def _apply_numpy(logits: Any, bitmask: Any, vocab_size: int | None) -> None:
    import numpy as np

    if _is_torch(bitmask):
        bitmask = bitmask.detach().cpu().numpy()
    bitmask = np.asarray(bitmask)
    if not np.issubdtype(logits.dtype, np.floating):
        raise TypeError(f"logits must be a float array, got dtype {logits.dtype}")
    if bitmask.dtype != np.int32:
        raise TypeError(f"bitmask must be int32, got dtype {bitmask.dtype}")
    if not logits.flags.writeable:
        raise ValueError("logits is read-only; pass a writeable array")
    rows, v, w, n = _check_shapes(logits.shape, bitmask.shape, vocab_size)
    l2 = logits[None, :] if logits.ndim == 1 else logits  # a view either way
    m2 = np.ascontiguousarray(bitmask.reshape(rows, w), dtype="<i4")
    bits = np.unpackbits(m2.view(np.uint8), axis=1, bitorder="little")[:, :n]
    allowed = bits.astype(bool)
    l2[:, :n][~allowed] = -np.inf
    if n < v:
        l2[:, n:] = -np.inf


def _apply_torch(logits: Any, bitmask: Any, vocab_size: int | None) -> None:
    import torch

    if _is_numpy(bitmask):
        bitmask = torch.from_numpy(bitmask)
    if not isinstance(bitmask, torch.Tensor):
        raise TypeError(
            f"bitmask must be a torch.Tensor or numpy.ndarray, got {type(bitmask).__name__}"
        )
    if not logits.is_floating_point():
        raise TypeError(f"logits must be a float tensor, got dtype {logits.dtype}")
    if bitmask.dtype != torch.int32:
        raise TypeError(f"bitmask must be int32, got dtype {bitmask.dtype}")
    rows, v, w, n = _check_shapes(tuple(logits.shape), tuple(bitmask.shape), vocab_size)
    l2 = logits.unsqueeze(0) if logits.dim() == 1 else logits  # a view either way
    m2 = bitmask.reshape(rows, w).to(logits.device, non_blocking=True)
    shifts = torch.arange(32, dtype=torch.int32, device=logits.device)
    # Arithmetic shift of int32 words; `& 1` keeps bit k whatever the sign.
    bits = ((m2.unsqueeze(-1) >> shifts) & 1).reshape(rows, 32 * w)[:, :n]
    l2[:, :n].masked_fill_(bits == 0, float("-inf"))
    if n < v:
        l2[:, n:] = float("-inf")
