"""Shared fixtures of the Python tests: the two real models, their Hugging Face tokenizers
(converted from the GGUF files by transformers) and the Stencil vocabularies built from
those tokenizers. Everything expensive is cached for the whole session.

Nothing here skips: a missing model or a missing native module is a failure whose message
says what to run (`scripts/fetch-models.sh`, `scripts/test-python.sh`).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

try:
    import stencil
    import stencil._stencil  # noqa: F401  (the native module)
except ImportError as exc:  # pragma: no cover - a set-up problem, not a test
    raise ImportError(
        "the native module stencil._stencil is not importable "
        f"({exc}); build and install it with scripts/test-python.sh "
        "(or scripts/build-python.sh) before running pytest"
    ) from exc

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES_DIR = REPO_ROOT / "fixtures"
SCHEMAS_DIR = FIXTURES_DIR / "schemas"

SMOLLM2_GGUF = "smollm2-135m-instruct.q4_1.gguf"
GEMMA_GGUF = "gemma-3-270m-q4_k_m.gguf"


def models_dir() -> Path:
    """`$STENCIL_MODELS_DIR`, default `~/.cache/stencil/models` (scripts/fetch-models.sh)."""
    env = os.environ.get("STENCIL_MODELS_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "stencil" / "models"


def model_path(name: str) -> Path:
    """The path of a model file; a test failure (never a skip) when it is missing."""
    path = models_dir() / name
    if not path.is_file():
        pytest.fail(
            f"model file {path} is missing: run scripts/fetch-models.sh "
            "(it downloads the test models into $STENCIL_MODELS_DIR, "
            "default ~/.cache/stencil/models)",
            pytrace=False,
        )
    return path


_GGUF_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def _gguf_tensor_shapes(path: str) -> dict[str, list[int]]:
    """Tensor name -> dims (ggml order) from a GGUF header, reading nothing else (the
    `gguf` package's reader parses the whole file: tens of seconds for Gemma)."""
    import struct

    with open(path, "rb") as f:
        def read(n: int) -> bytes:
            b = f.read(n)
            if len(b) != n:
                raise ValueError(f"{path}: truncated GGUF header")
            return b

        def u32() -> int:
            return struct.unpack("<I", read(4))[0]

        def u64() -> int:
            return struct.unpack("<Q", read(8))[0]

        def skip_value(vtype: int) -> None:
            if vtype in _GGUF_SCALAR:
                f.seek(_GGUF_SCALAR[vtype], 1)
            elif vtype == 8:
                f.seek(u64(), 1)
            elif vtype == 9:
                itype, n = u32(), u64()
                if itype in _GGUF_SCALAR:
                    f.seek(_GGUF_SCALAR[itype] * n, 1)
                else:
                    for _ in range(n):
                        skip_value(itype)
            else:
                raise ValueError(f"{path}: unknown GGUF value type {vtype}")

        if read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        version = u32()
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version} is too old")
        n_tensors, n_kv = u64(), u64()
        for _ in range(n_kv):
            f.seek(u64(), 1)  # key
            skip_value(u32())
        shapes = {}
        for _ in range(n_tensors):
            name = read(u64()).decode("utf-8")
            dims = [u64() for _ in range(u32())]
            u32()  # ggml type
            u64()  # offset
            shapes[name] = dims
        return shapes


@functools.lru_cache(maxsize=None)
def gguf_logits_width(path: str) -> int:
    """The model's logits count, read from the GGUF tensors: the rows of `output.weight`
    (or of `token_embd.weight` when the embeddings are tied)."""
    shapes = _gguf_tensor_shapes(path)
    for name in ("output.weight", "token_embd.weight"):
        if name in shapes:
            # ggml order: ne[0] is the embedding width, ne[1] the vocabulary.
            return int(shapes[name][1])
    raise AssertionError(f"{path}: no output.weight or token_embd.weight tensor")


@functools.lru_cache(maxsize=None)
def load_hf_tokenizer(path: str):
    """A transformers fast tokenizer converted from the GGUF file at `path`."""
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        pytest.fail(f"transformers is missing ({exc}): run scripts/test-python.sh", pytrace=False)
    p = Path(path)
    tok = AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
    assert tok.is_fast, f"{p.name}: transformers did not build a fast tokenizer"
    return tok


@functools.lru_cache(maxsize=None)
def load_vocab(path: str) -> stencil.Vocab:
    """`stencil.Vocab.from_huggingface` of the GGUF's tokenizer, as wide as its logits."""
    tok = load_hf_tokenizer(path)
    width = gguf_logits_width(path)
    n_tok = len(tok)
    vocab_size = width if width != n_tok else None
    return stencil.Vocab.from_huggingface(tok, vocab_size=vocab_size)


def load_schema(name: str) -> dict:
    """`fixtures/schemas/NAME.json`, parsed."""
    with open(SCHEMAS_DIR / f"{name}.json", encoding="utf-8") as f:
        return json.load(f)


def load_instances(name: str, kind: str = "valid") -> list:
    """`fixtures/schemas/NAME.{valid,invalid}.jsonl`, one parsed record per line."""
    out = []
    with open(SCHEMAS_DIR / f"{name}.{kind}.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
    return out


# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """Path of SmolLM2-135M-Instruct Q4_1 (GGUF)."""
    return model_path(SMOLLM2_GGUF)


@pytest.fixture(scope="session")
def gemma_gguf() -> Path:
    """Path of Gemma 3 270M Q4_K_M (GGUF)."""
    return model_path(GEMMA_GGUF)


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_gguf):
    return load_hf_tokenizer(str(smollm2_gguf))


@pytest.fixture(scope="session")
def gemma_tokenizer(gemma_gguf):
    return load_hf_tokenizer(str(gemma_gguf))


@pytest.fixture(scope="session")
def smollm2_vocab(smollm2_gguf, smollm2_tokenizer) -> stencil.Vocab:
    return load_vocab(str(smollm2_gguf))


@pytest.fixture(scope="session")
def gemma_vocab(gemma_gguf, gemma_tokenizer) -> stencil.Vocab:
    return load_vocab(str(gemma_gguf))


@pytest.fixture(scope="session")
def smollm2_compiler(smollm2_vocab) -> stencil.Compiler:
    return stencil.Compiler(smollm2_vocab)


@pytest.fixture(scope="session")
def gemma_compiler(gemma_vocab) -> stencil.Compiler:
    return stencil.Compiler(gemma_vocab)


@pytest.fixture(scope="session")
def schemas_dir() -> Path:
    return SCHEMAS_DIR
