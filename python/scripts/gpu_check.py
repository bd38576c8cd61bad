"""One JSON-schema request through each installed engine (vLLM, SGLang) with the Stencil
backend enabled; prints whether the output validates. Needs a GPU machine with vLLM
and/or SGLang and a local model (a Hugging Face model directory or hub name):

    python python/scripts/gpu_check.py --model HuggingFaceTB/SmolLM2-135M-Instruct
    python python/scripts/gpu_check.py --model /models/qwen2.5-0.5b --engines sglang

Exit status 0 when every engine that ran produced valid JSON through Stencil.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile

import stencil

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "languages": {"type": "array", "items": {"enum": ["en", "fr", "de"]}, "maxItems": 3},
    },
    "required": ["name", "age", "languages"],
    "additionalProperties": False,
}
PROMPT = "Return a JSON record for Ada, 36, who speaks English and French.\n"
# Set in the first process, inherited by the engines' children.
MARKER = os.environ.setdefault(
    "STENCIL_GPU_CHECK_MARKER", os.path.join(tempfile.gettempdir(), f"stencil-gpu-check-{os.getpid()}")
)

# SGLang starts its scheduler with "spawn", which re-imports this file in the child: the
# registration must happen at import time, outside the __main__ guard.
if importlib.util.find_spec("sglang") is not None:
    import stencil.sglang
    from sglang.srt.constrained.base_grammar_backend import register_grammar_backend

    stencil.sglang.register()

    def _marked_backend(*args, **kwargs):  # proves the scheduler built a Stencil backend
        with open(MARKER + ".sglang", "w") as f:
            f.write("stencil")
        return stencil.sglang.create_backend(*args, **kwargs)

    register_grammar_backend("stencil", _marked_backend)


def validate(text: str) -> list[str]:
    """Errors of `text` against SCHEMA, by Stencil's post-hoc validator (no extra deps)."""
    vocab = stencil.Vocab.from_tokens([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
    return stencil.Compiler(vocab).compile_json_schema(SCHEMA).validate(text)


def run_vllm(model: str) -> str:
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine core in-process
    import stencil.vllm

    stencil.vllm.register()
    created = []
    original = stencil.vllm.StencilBackend.__post_init__

    def post_init(self):
        created.append(self)
        original(self)

    stencil.vllm.StencilBackend.__post_init__ = post_init
    from vllm import LLM, SamplingParams

    common = dict(model=model, max_model_len=2048, gpu_memory_utilization=0.4, enforce_eager=True)
    try:
        from vllm.sampling_params import StructuredOutputsParams

        llm = LLM(structured_outputs_config={"backend": "guidance"}, **common)
        params = SamplingParams(
            temperature=0.0, max_tokens=200, structured_outputs=StructuredOutputsParams(json=SCHEMA)
        )
    except ImportError:  # releases before structured_outputs (guided_decoding)
        from vllm.sampling_params import GuidedDecodingParams

        llm = LLM(guided_decoding_backend="guidance", **common)
        params = SamplingParams(
            temperature=0.0, max_tokens=200, guided_decoding=GuidedDecodingParams(json=SCHEMA)
        )
    text = llm.generate([PROMPT], params)[0].outputs[0].text
    if not created:
        raise RuntimeError("vLLM did not build the Stencil backend (engine core in another process?)")
    return text


def run_sglang(model: str) -> str:
    import sglang

    if os.path.exists(MARKER + ".sglang"):
        os.remove(MARKER + ".sglang")
    engine = sglang.Engine(model_path=model, grammar_backend="stencil", mem_fraction_static=0.4)
    try:
        out = engine.generate(
            PROMPT, {"temperature": 0.0, "max_new_tokens": 200, "json_schema": json.dumps(SCHEMA)}
        )
    finally:
        engine.shutdown()
    if not os.path.exists(MARKER + ".sglang"):
        raise RuntimeError("SGLang's scheduler did not build the Stencil backend")
    return out["text"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.environ.get("STENCIL_GPU_MODEL", "HuggingFaceTB/SmolLM2-135M-Instruct"))
    ap.add_argument("--engines", default="vllm,sglang", help="comma-separated: vllm, sglang")
    args = ap.parse_args()
    ran, ok = 0, True
    for engine in [e.strip() for e in args.engines.split(",") if e.strip()]:
        if importlib.util.find_spec(engine) is None:
            print(f"{engine}: not installed, skipped")
            continue
        ran += 1
        try:
            text = {"vllm": run_vllm, "sglang": run_sglang}[engine](args.model)
        except Exception as e:  # report and go on to the next engine
            print(f"{engine}: FAILED to run: {type(e).__name__}: {e}")
            ok = False
            continue
        errors = validate(text)
        print(f"{engine}: {'VALID' if not errors else 'INVALID'} {text!r}")
        for err in errors:
            print(f"  {err}")
        ok = ok and not errors
    if ran == 0:
        print("neither vLLM nor SGLang is installed: nothing checked")
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
