"""A pytest plugin for vLLM's own test suite (scripts/test-vllm-upstream.sh): in the
process that runs vLLM's tests, the "guidance" structured-output backend is Stencil's.

`stencil.vllm.register()` does what a deployment does (the engine core's and the front
end's `GuidanceBackend`, the front end's `validate_guidance_grammar`); vLLM's tests also
build `backend_guidance.GuidanceGrammar` themselves, so that name is Stencil's too.
`STENCIL_IN_PLACE=0` leaves vLLM alone: the baseline, vLLM's own llguidance backend. With `STENCIL_HUB_ALIAS=1`, the tokenizers vLLM's tests fetch from the
model hub by name ("gpt2", "openai-community/gpt2"), which cannot be reached here, resolve
to the SmolLM2 tokenizer of fixtures/vocab (through a local hub cache written at start):
the tests then run, on another vocabulary than the one they were written for.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

# vLLM's test_validation.py builds a 2,000-deep schema when it is imported.
sys.setrecursionlimit(20000)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# vLLM picks its CPU platform (no GPU here; its tests build configs with device "auto").
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

# The names vLLM's structured-output tests load: tokenizers, and the default model of
# ModelConfig.
ALIASES = ("gpt2", "openai-community/gpt2", "Qwen/Qwen3-0.6B")


def _write_hub_alias() -> None:
    """A hub cache under a fresh HF_HOME whose ALIASES hold the local model folder."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from engines.engine_model import build_model_dir

    home = Path(tempfile.mkdtemp(prefix="stencil-hub-"))
    # Before transformers is imported: huggingface_hub reads these once.
    os.environ["HF_HOME"] = str(home)
    os.environ["HF_HUB_CACHE"] = str(home / "hub")
    model = build_model_dir(home / "src")
    for name in ALIASES:
        repo = home / "hub" / ("models--" + name.replace("/", "--"))
        snap = repo / "snapshots" / ("0" * 40)
        snap.mkdir(parents=True)
        for f in model.iterdir():
            (snap / f.name).write_bytes(f.read_bytes())
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text("0" * 40)


if os.environ.get("STENCIL_HUB_ALIAS") == "1":
    _write_hub_alias()

if os.environ.get("STENCIL_IN_PLACE", "1") == "1":
    import stencil.vllm as sv
    import vllm.v1.structured_output.backend_guidance as bg

    sv.register()
    bg.GuidanceGrammar = sv.StencilGrammar
