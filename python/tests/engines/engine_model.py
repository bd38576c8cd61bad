"""The local model folder that the real engines' configs read (engines/conftest.py makes it
once per session).

The folder holds the SmolLM2 tokenizer of `fixtures/vocab/smollm2-135m.tok.gguf.gz`
(converted by transformers) with `<think>` and `</think>` added as special tokens (vLLM's
reasoning parsers look them up), a Llama `config.json` whose vocabulary is wider than the
tokenizer (49,216 logits for 49,154 tokens, like padded models), and a
`generation_config.json` with a second EOS id (`<|endoftext|>`, 0), which vLLM turns into
a stop token of every request. No weights: nothing runs a model forward.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

FIXTURES_DIR = Path(__file__).resolve().parents[3] / "fixtures"
MODEL_LOGITS = 49216  # wider than the tokenizer, as padded models are
THINK, END_THINK = "<think>", "</think>"
SECOND_EOS = 0  # <|endoftext|> in SmolLM2's vocabulary


def build_model_dir(path: Path) -> Path:
    """Writes the model folder described in the module docs into `path`."""
    from transformers import AutoTokenizer

    src = path / "gguf"
    src.mkdir(parents=True, exist_ok=True)
    with gzip.open(FIXTURES_DIR / "vocab" / "smollm2-135m.tok.gguf.gz") as f, open(src / "tok.gguf", "wb") as g:
        shutil.copyfileobj(f, g)
    tok = AutoTokenizer.from_pretrained(str(src), gguf_file="tok.gguf")
    tok.add_special_tokens({"additional_special_tokens": [THINK, END_THINK]})
    model = path / "model"
    tok.save_pretrained(str(model))
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": MODEL_LOGITS,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 2,
        "num_hidden_layers": 1,
        "num_key_value_heads": 1,
        "max_position_embeddings": 2048,
        "bos_token_id": tok.bos_token_id,
        "eos_token_id": tok.eos_token_id,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
    }
    (model / "config.json").write_text(json.dumps(config))
    gen = {"eos_token_id": [tok.eos_token_id, SECOND_EOS]}
    (model / "generation_config.json").write_text(json.dumps(gen))
    shutil.rmtree(src)
    return model


