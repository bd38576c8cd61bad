"""Fixtures of the real-engine suite (scripts/test-python-engines.sh, in .venv-vllm/): the
pinned vLLM and SGLang packages, with Stencil's vLLM plugin enabled, and the local model
folder of engine_model.py. Nothing here skips: a missing engine is a failure that says
what to run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
# The plugin entry point (stencil.vllm:plugin) registers Stencil when vLLM loads plugins.
os.environ["STENCIL_VLLM"] = "1"

try:
    import vllm  # noqa: F401
except ImportError as exc:  # pragma: no cover - a set-up problem, not a test
    raise ImportError(
        f"vLLM is not importable ({exc}): the real-engine tests run in .venv-vllm/, "
        "made by scripts/test-python-engines.sh (scripts/test-python.sh calls it)"
    ) from exc

from .engine_model import MODEL_LOGITS, build_model_dir  # noqa: E402


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    return build_model_dir(tmp_path_factory.mktemp("engine-model"))


@pytest.fixture(scope="session")
def hf_tokenizer(model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    assert tok.is_fast
    return tok


@pytest.fixture(scope="session")
def ref_compiler(hf_tokenizer):
    """The reference: Stencil over the same tokenizer, as wide as the model's logits,
    built here and not by the backend."""
    import stencil

    return stencil.Compiler(stencil.Vocab.from_huggingface(hf_tokenizer, vocab_size=MODEL_LOGITS))


@pytest.fixture(scope="session")
def sglang_ref_compiler(hf_tokenizer):
    """The reference for SGLang: its scheduler stops on the model's EOS only (not on the
    tokenizer's other end token, `<|endoftext|>`), so the grammar ends on that alone."""
    import stencil

    vocab = stencil.Vocab.from_huggingface(hf_tokenizer, vocab_size=MODEL_LOGITS, eos_ids=[hf_tokenizer.eos_token_id])
    return stencil.Compiler(vocab)
