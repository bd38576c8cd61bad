"""An SGLang grammar backend running on Stencil.

`StencilGrammarBackend` has the shape of SGLang's `BaseGrammarBackend`
(`python/sglang/srt/constrained/base_grammar_backend.py`: `dispatch_json`,
`dispatch_regex`, `dispatch_ebnf`, `dispatch_structural_tag`, returning grammar objects)
and `StencilGrammar` that of `BaseGrammarObject` (`accept_token`, `rollback`,
`is_terminated`, `allocate_vocab_mask`, `fill_vocab_mask`, `move_vocab_mask`,
`apply_vocab_mask`, `copy`, `try_jump_forward`, `jump_forward_str_state`,
`jump_and_retokenize`); both subclass SGLang's classes when SGLang is importable.

Enabling it. SGLang keeps a registry of custom grammar backends
(`register_grammar_backend(name, init_func)`, consulted before the built-in names by
`create_grammar_backend`); `register()` adds "stencil" there and, where the release has
it, to the `--grammar-backend` choices (`server_args.add_grammar_backend_choices`). The
backend is created in the scheduler process, which SGLang starts with the "spawn" method:
`register()` must run there too, so

* with `sglang.Engine(..., grammar_backend="stencil")` in a script, call
  `stencil.sglang.register()` at the top level of the script (spawned children re-import
  the main module; a call under `if __name__ == "__main__":` would not run in them), as
  `python/scripts/gpu_check.py` does;
* for the server, `python -m stencil.sglang --model-path ... [launch_server arguments]`
  registers the backend (in the scheduler too) and runs `sglang.launch_server` with
  `--grammar-backend stencil`;
* releases with SGLang's plugin framework (`sglang.srt.plugins`, loaded early in every
  process) also take an installed entry point:
  `[project.entry-points."sglang.srt.plugins"] stencil = "stencil.sglang:register"`.

Request keys: ("json", schema text, or "$$ANY$$" for any JSON), ("regex", pattern),
("ebnf", GBNF grammar), ("structural_tag", the XGrammar 0.2 JSON); a refused request gets
an invalid-grammar object, which makes SGLang abort the request with the message.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, List, Optional, Tuple

from . import (
    CompileError,
    Compiler,
    Grammar,
    Matcher,
    Vocab,
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
)
from ._util import env_flag, utf8_prefix

logger = logging.getLogger(__name__)

try:  # SGLang's classes where it is installed (python/tests/engines drives the real one)
    from sglang.srt.constrained import base_grammar_backend as _sgl

    _ObjectBase = _sgl.BaseGrammarObject
    _BackendBase = _sgl.BaseGrammarBackend
    HAVE_SGLANG = True
except ImportError:
    _sgl = None
    HAVE_SGLANG = False

    class _ObjectBase:  # type: ignore[no-redef]
        """Stand-in for sglang's BaseGrammarObject."""

        def __init__(self) -> None:
            self._finished = False
            self.grammar_stats = None
            self.current_token = None

        @property
        def finished(self) -> bool:
            return self._finished

        @finished.setter
        def finished(self, finished: bool) -> None:
            self._finished = finished

        def maybe_init_reasoning(self, reasoning: bool) -> None:
            pass

    class _BackendBase:  # type: ignore[no-redef]
        """Stand-in for sglang's BaseGrammarBackend."""

        def __init__(self) -> None:
            self.cache: dict = {}

        def _init_value_dispatch(self, key: Tuple[str, str], *_: Any) -> Any:
            key_type, key_string = key
            if key_type == "json":
                return self.dispatch_json(key_string)
            if key_type == "regex":
                return self.dispatch_regex(key_string)
            if key_type == "ebnf":
                return self.dispatch_ebnf(key_string)
            if key_type == "structural_tag":
                return self.dispatch_structural_tag(key_string)
            raise ValueError(f"Invalid key_type: {key_type}={key_string}")

        def reset(self) -> None:
            self.cache.clear()


__all__ = ["StencilGrammar", "StencilGrammarBackend", "InvalidGrammar", "register", "HAVE_SGLANG"]

BACKEND_NAME = "stencil"


def _invalid(message: str) -> Any:
    """SGLang's marker of a grammar that failed to compile: `InvalidGrammarObject(msg)`
    in recent releases, the `INVALID_GRAMMAR_OBJ` sentinel or None in older ones."""
    if _sgl is not None:
        cls = getattr(_sgl, "InvalidGrammarObject", None)
        if cls is not None:
            return cls(message)
        return getattr(_sgl, "INVALID_GRAMMAR_OBJ", None)
    return InvalidGrammar(message)


class InvalidGrammar(_ObjectBase):
    """Without SGLang: what a failed compilation returns (SGLang's InvalidGrammarObject)."""

    def __init__(self, error_message: str) -> None:
        super().__init__()
        self.error_message = error_message

    def __repr__(self) -> str:
        return f"InvalidGrammar({self.error_message!r})"


class StencilGrammar(_ObjectBase):
    """One request's parse state (SGLang's `BaseGrammarObject`)."""

    def __init__(self, grammar: Grammar, key_string: str = "", matcher: Matcher | None = None):
        super().__init__()
        self.grammar = grammar
        self.vocab_size = grammar.vocab.size
        self.key_string = key_string
        self.matcher = matcher if matcher is not None else Matcher(grammar)
        self.accepted_tokens: List[int] = []

    def accept_token(self, token: int) -> None:
        """Accepts `token`; ignored once terminated. ValueError when the grammar refuses
        it (the scheduler then aborts the request)."""
        if self.matcher.is_terminated():
            return
        self.current_token = token
        if not (0 <= int(token) < self.vocab_size) or not self.matcher.consume_token(int(token)):
            raise ValueError(
                f"Tokens not accepted: {token}\nAccepted tokens: {self.accepted_tokens}\n"
                f"Key string: {self.key_string}"
            )
        self.accepted_tokens.append(int(token))

    def rollback(self, k: int) -> None:
        if k <= 0:
            return
        self.matcher.rollback(k)
        del self.accepted_tokens[-k:]

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> Any:
        """A CPU int32 bitmask of `batch_size` rows, every token allowed (rows of requests
        without a grammar stay so)."""
        return allocate_token_bitmask(batch_size, max(int(vocab_size), self.vocab_size), backend="torch")

    def fill_vocab_mask(self, vocab_mask: Any, idx: int) -> None:
        self.matcher.fill_next_token_bitmask(vocab_mask, idx)

    @staticmethod
    def move_vocab_mask(vocab_mask: Any, device: Any) -> Any:
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: Any, vocab_mask: Any) -> None:
        """-inf on the logits of disallowed tokens (xgrammar's GPU kernel when available;
        Stencil's torch implementation otherwise)."""
        if getattr(logits, "is_cuda", False):
            try:  # pragma: no cover - CUDA logits: needs a GPU
                import xgrammar

                xgrammar.apply_token_bitmask_inplace(logits, vocab_mask.to(logits.device))
                return
            except ImportError:  # pragma: no cover
                pass
        apply_token_bitmask_inplace(logits, vocab_mask)

    def copy(self) -> "StencilGrammar":
        """A fresh grammar object at the start (SGLang copies cached grammars per request)."""
        return StencilGrammar(self.grammar, self.key_string)

    def try_jump_forward(self, tokenizer: Any) -> Optional[Tuple[List[int], str]]:
        text = utf8_prefix(self.matcher.forced_bytes())
        if text:
            return [], text
        return None

    def jump_forward_str_state(self, helper: Tuple[List[int], str]) -> Tuple[str, int]:
        _, text = helper
        return text, -1

    def jump_and_retokenize(
        self, old_output_ids: List[int], new_output_ids: List[int], next_state: int
    ) -> None:
        """After a jump forward re-tokenized the output: rolls back to the common prefix of
        the old and new ids, then accepts the rest of the new ones."""
        k = 0
        for old, new in zip(old_output_ids, new_output_ids):
            if old != new:
                break
            k += 1
        if k < len(old_output_ids):
            self.rollback(len(old_output_ids) - k)
        for t in new_output_ids[k:]:
            self.accept_token(t)

    def __repr__(self) -> str:
        return f"StencilGrammar(key_string={self.key_string!r}, accepted={len(self.accepted_tokens)})"


class StencilGrammarBackend(_BackendBase):
    """Compiles SGLang's grammar requests with Stencil (SGLang's `BaseGrammarBackend`)."""

    def __init__(
        self,
        tokenizer: Any,
        vocab_size: int | None = None,
        *,
        any_whitespace: bool = True,
        strict: bool = False,
        vocab: Vocab | None = None,
    ) -> None:
        super().__init__()
        if vocab is None:
            width = max(int(vocab_size or 0), len(tokenizer))
            vocab = Vocab.from_huggingface(tokenizer, vocab_size=width)
        self.vocab = vocab
        self.vocab_size = vocab.size
        self.compiler = Compiler(vocab)
        self.any_whitespace = any_whitespace
        self.strict = strict

    def _wrap(self, compile_fn, kind: str, key_string: str) -> Any:
        try:
            grammar = compile_fn()
        except (CompileError, ValueError) as e:
            logger.error("Hit invalid %s: key_string=%r, e=%s", kind, key_string, e)
            return _invalid(f"Stencil could not compile the {kind}: {e}")
        for w in grammar.warnings:
            logger.warning("Stencil: schema keyword not enforced: %s", w)
        return StencilGrammar(grammar, key_string)

    def dispatch_json(self, key_string: str) -> Any:
        ws = "flexible" if self.any_whitespace else "compact"
        if key_string == "$$ANY$$":
            # Any JSON value (SGLang's response_format json_object).
            if self.any_whitespace:
                fn = lambda: self.compiler.compile_json_schema(True, whitespace=ws)  # noqa: E731
            else:
                fn = self.compiler.compile_builtin_json
            return self._wrap(fn, "json", key_string)

        def fn():
            schema = json.loads(key_string)
            return self.compiler.compile_json_schema(schema, whitespace=ws, strict=self.strict)

        return self._wrap(fn, "json", key_string)

    def dispatch_regex(self, key_string: str) -> Any:
        return self._wrap(lambda: self.compiler.compile_regex(key_string), "regex", key_string)

    def dispatch_ebnf(self, key_string: str) -> Any:
        return self._wrap(lambda: self.compiler.compile_grammar(key_string), "ebnf", key_string)

    def dispatch_structural_tag(self, key_string: str) -> Any:
        def fn():
            return self.compiler.compile_structural_tag(json.loads(key_string), strict=self.strict)

        return self._wrap(fn, "structural_tag", key_string)

    def dispatch_fallback(self, key_type: str, key_string: str) -> Any:
        return _invalid(f"the Stencil grammar backend does not support {key_type!r} requests")


def _serving_option(server_args: Any, name: str) -> Any:
    """A server option as the running SGLang resolved it: `get_serving()` in releases
    with the runtime context (0.5.2x: the raw ServerArgs field may keep its default), the
    ServerArgs attribute in older ones."""
    try:
        from sglang.srt.runtime_context import get_serving

        return getattr(get_serving(), name)
    except (ImportError, AttributeError, ValueError, RuntimeError):
        return getattr(server_args, name, None)


def create_backend(
    server_args: Any = None,
    tokenizer: Any = None,
    vocab_size: int | None = None,
    eos_token_ids: Any = None,
    **kwargs: Any,
) -> StencilGrammarBackend:
    """The `init_func` given to `register_grammar_backend`: SGLang calls it with
    (server_args, tokenizer, vocab_size, eos_token_ids). The grammar ends on exactly the
    model's EOS ids when SGLang passes them (the tokens its scheduler stops on): an end
    token the tokenizer declares but the scheduler does not stop on would end the grammar
    and leave the request running unconstrained."""
    disable_ws = kwargs.get("constrained_json_disable_any_whitespace")
    if disable_ws is None:
        disable_ws = bool(_serving_option(server_args, "constrained_json_disable_any_whitespace"))
    strict = env_flag("STENCIL_SGLANG_STRICT")
    vocab = None
    if eos_token_ids:
        width = max(int(vocab_size or 0), len(tokenizer))
        ids = sorted(int(t) for t in eos_token_ids if 0 <= int(t) < width)
        vocab = Vocab.from_huggingface(tokenizer, vocab_size=width, eos_ids=ids)
    return StencilGrammarBackend(tokenizer, vocab_size, any_whitespace=not disable_ws, strict=strict, vocab=vocab)


def register(name: str = BACKEND_NAME) -> None:
    """Registers the backend with SGLang under `name` (see the module docstring)."""
    from sglang.srt.constrained.base_grammar_backend import register_grammar_backend

    register_grammar_backend(name, create_backend)
    try:
        from sglang.srt import server_args as sa

        choices = getattr(sa, "GRAMMAR_BACKEND_CHOICES", None)
        add = getattr(sa, "add_grammar_backend_choices", None)
        if choices is not None and name not in choices:
            if add is not None:
                add([name])
            else:
                choices.append(name)
    except ImportError:  # pragma: no cover - every release with the registry has server_args
        pass


if __name__ == "__mp_main__":  # pragma: no cover - a spawned SGLang child of `python -m`
    register()

if __name__ == "__main__":
    register()
    from sglang.srt.server_args import prepare_server_args

    try:
        from sglang.launch_server import run_server
    except ImportError:
        from sglang.srt.entrypoints.http_server import launch_server as run_server

    argv = sys.argv[1:]
    if "--grammar-backend" not in argv:
        argv += ["--grammar-backend", BACKEND_NAME]
    run_server(prepare_server_args(argv))
