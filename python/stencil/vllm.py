"""A vLLM (v1 engine) structured-output backend running on Stencil.

`StencilBackend` and `StencilGrammar` have the shape of vLLM's
`vllm/v1/structured_output/backend_types.py` (`StructuredOutputBackend` /
`StructuredOutputGrammar`), like its xgrammar and guidance backends, and subclass those
base classes when vLLM is importable. The request types map onto `stencil.Compiler`:

    json          -> compile_json_schema (flexible whitespace unless
                     structured_outputs_config.disable_any_whitespace)
    json_object   -> compile_json_schema({"type": "object"})
    regex         -> compile_regex
    grammar       -> compile_grammar (GBNF; a Lark grammar is converted with vLLM's own
                     convert_lark_to_ebnf when vLLM is importable)
    choice        -> compile_regex of the escaped alternatives
    structural_tag -> not supported (ValueError)

Enabling it in a real vLLM. vLLM has no registry of structured-output backends:
`structured_outputs_config.backend` is a closed set ("auto", "xgrammar", "guidance",
"outlines", "lm-format-enforcer"), validated in the front end
(`InputProcessor._validate_structured_output`, `Processor` in older releases) and turned
into a backend object in the engine core by `StructuredOutputManager.grammar_init`, which
looks the class up by name in the module `vllm.v1.structured_output`. `register()` takes
over the "guidance" name: it replaces that module's `GuidanceBackend` with
`StencilBackend` and the front end's `validate_guidance_grammar` with a Stencil check, so
the engine must be started with `structured_outputs_config={"backend": "guidance"}`
(`--structured-outputs-config.backend guidance` for `vllm serve`). `register()` must run
in the process that builds the engine core:

* offline (`vllm.LLM`): call `stencil.vllm.register()` before creating the `LLM`, with
  `VLLM_ENABLE_V1_MULTIPROCESSING=0` (engine core in-process), as
  `python/scripts/gpu_check.py` does; or
* any deployment (`vllm serve` included): as a vLLM general plugin, which vLLM loads in
  every process it starts (front end, engine core, workers): this package declares the
  entry point `stencil = "stencil.vllm:plugin"`, which registers when `STENCIL_VLLM=1` is
  set in the server's environment (and does nothing otherwise).

This replaces a private name in vLLM's module; it was read against vLLM's v1 sources
(0.10-0.12 era) and may need adjusting for other releases. The bitmask is applied on the
GPU by vLLM's own code (xgrammar's kernel); Stencil's bitmask has the same layout.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from . import CompileError, Compiler, Matcher, Vocab, bitmask_words
from ._util import env_flag, utf8_prefix

logger = logging.getLogger(__name__)

try:  # pragma: no cover - vLLM is GPU-only and not installed in the test environment
    from vllm.v1.structured_output.backend_types import (
        StructuredOutputBackend as _BackendBase,
        StructuredOutputGrammar as _GrammarBase,
        StructuredOutputOptions,
    )

    HAVE_VLLM = True
except ImportError:
    import enum
    from abc import ABC

    HAVE_VLLM = False

    class StructuredOutputOptions(enum.Enum):  # type: ignore[no-redef]
        """vLLM's request types (a copy: vLLM is not importable)."""

        JSON = enum.auto()
        JSON_OBJECT = enum.auto()
        REGEX = enum.auto()
        GRAMMAR = enum.auto()
        CHOICE = enum.auto()
        STRUCTURAL_TAG = enum.auto()

    class _GrammarBase(ABC):  # type: ignore[no-redef]
        """Stand-in for vllm's StructuredOutputGrammar."""

    @dataclass
    class _BackendBase(ABC):  # type: ignore[no-redef]
        """Stand-in for vllm's StructuredOutputBackend."""

        vllm_config: Any
        tokenizer: Any
        vocab_size: int


__all__ = [
    "StencilBackend",
    "StencilGrammar",
    "StructuredOutputOptions",
    "register",
    "validate_stencil_grammar",
    "HAVE_VLLM",
]

_REGEX_META = set("\\.+*?()|[]{}^$#&-~")


def _regex_escape(text: str) -> str:
    """A regex (Rust `regex` syntax) matching exactly `text`."""
    return "".join("\\" + c if c in _REGEX_META else c for c in text)


def choice_as_regex(choices: list[str]) -> str:
    """The regex of a choice request: one of the strings, exactly."""
    if not choices:
        raise ValueError("a choice request needs at least one choice")
    return "|".join(f"(?:{_regex_escape(str(c))})" for c in choices)


def _so_config(vllm_config: Any) -> Any:
    """`vllm_config.structured_outputs_config` (`decoding_config` in older releases)."""
    for name in ("structured_outputs_config", "decoding_config"):
        cfg = getattr(vllm_config, name, None)
        if cfg is not None:
            return cfg
    return None


@dataclass
class StencilGrammar(_GrammarBase):
    """One request's parse state (vLLM's `StructuredOutputGrammar`)."""

    matcher: Matcher
    vocab_size: int
    num_processed_tokens: int = field(default=0, repr=False, init=False)
    # Tokens handed to accept_tokens after EOS, ignored but counted so that a
    # rollback of `n` undoes exactly the last `n` tokens it was given.
    _ignored: int = field(default=0, repr=False, init=False)

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        """Accepts `tokens` in order and advances. True when all were accepted; tokens
        after the one that terminated the grammar (EOS) are ignored. False (and a logged
        error) on the first refused token, the tokens before it staying accepted, as in
        the xgrammar backend."""
        for token in tokens:
            if self.matcher.is_terminated():
                self._ignored += 1
                continue
            if not self._in_range(token) or not self.matcher.consume_token(token):
                logger.error(
                    "Failed to advance FSM for request %s for tokens %s. Please file an issue.",
                    request_id,
                    token,
                )
                return False
            self.num_processed_tokens += 1
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        """The longest prefix of `tokens` the grammar accepts from here, without
        advancing (draft verification in speculative decoding)."""
        if not tokens or self.matcher.is_terminated():
            return []
        n = 0
        while n < len(tokens) and self._in_range(tokens[n]):
            n += 1
        if n == 0:
            return []
        k = self.matcher.validate_tokens([int(t) for t in tokens[:n]])
        return list(tokens[:k])

    def rollback(self, num_tokens: int) -> None:
        """Undoes the last `num_tokens` tokens given to accept_tokens (none when <= 0)."""
        if num_tokens <= 0:
            return
        lag = min(num_tokens, self._ignored)
        self._ignored -= lag
        num_tokens -= lag
        if num_tokens:
            self.matcher.rollback(num_tokens)
            self.num_processed_tokens -= num_tokens

    def fill_bitmask(self, bitmask: Any, idx: int) -> None:
        """Writes the allowed-token bits into row `idx` of `bitmask` (a CPU int32 tensor)."""
        self.matcher.fill_next_token_bitmask(bitmask, idx)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def reset(self) -> None:
        self.matcher.reset()
        self.num_processed_tokens = 0
        self._ignored = 0

    def find_jump_string(self) -> str | None:
        """The text every continuation starts with (jump-forward), or None."""
        data = self.matcher.forced_bytes()
        text = utf8_prefix(data)
        return text or None

    def _in_range(self, token: int) -> bool:
        return 0 <= int(token) < self.vocab_size




@dataclass
class StencilBackend(_BackendBase):
    """Engine-level backend (vLLM's `StructuredOutputBackend`): one vocabulary and one
    compiler for the model's tokenizer, grammars compiled per request."""

    def __post_init__(self) -> None:
        cfg = _so_config(self.vllm_config)
        self.disable_any_whitespace = bool(getattr(cfg, "disable_any_whitespace", False))
        self.disable_additional_properties = bool(
            getattr(cfg, "disable_additional_properties", False)
        )
        # vLLM has no strictness knob: like its other backends, compile what can be
        # enforced and log the rest (STENCIL_VLLM_STRICT=1 refuses such schemas).
        self.strict = env_flag("STENCIL_VLLM_STRICT")
        if type(self.tokenizer).__name__ == "MistralTokenizer":
            raise ValueError(
                "the Stencil backend needs a Hugging Face fast tokenizer; "
                "use tokenizer_mode='hf' for Mistral models"
            )
        width = max(int(self.vocab_size), len(self.tokenizer))
        self.vocab = Vocab.from_huggingface(self.tokenizer, vocab_size=width)
        self.vocab_size = self.vocab.size
        self.compiler = Compiler(self.vocab)

    def _json_options(self) -> dict[str, Any]:
        return {
            "whitespace": "compact" if self.disable_any_whitespace else "flexible",
            "strict": self.strict,
        }

    def compile_grammar(
        self, request_type: StructuredOutputOptions, grammar_spec: str
    ) -> StencilGrammar:
        grammar = compile_request(
            self.compiler,
            request_type,
            grammar_spec,
            disable_additional_properties=self.disable_additional_properties,
            **self._json_options(),
        )
        for w in grammar.warnings:
            logger.warning("Stencil: schema keyword not enforced: %s", w)
        return StencilGrammar(matcher=Matcher(grammar), vocab_size=self.vocab_size)

    def allocate_token_bitmask(self, max_num_seqs: int) -> Any:
        import torch

        return torch.full(
            (max_num_seqs, bitmask_words(self.vocab_size)), -1, dtype=torch.int32
        )

    def destroy(self) -> None:
        pass


def _no_additional_properties(schema: Any) -> Any:
    """vLLM's disable_additional_properties: `additionalProperties: false` wherever an
    object lists properties and says nothing about the others (a copy)."""
    if isinstance(schema, dict):
        out = {k: _no_additional_properties(v) for k, v in schema.items()}
        if "additionalProperties" not in out and ("properties" in out or "patternProperties" in out):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_no_additional_properties(v) for v in schema]
    return schema


def _kind(request_type: Any) -> str:
    name = getattr(request_type, "name", request_type)
    return str(name).upper()


def compile_request(
    compiler: Compiler,
    request_type: Any,
    grammar_spec: str,
    *,
    whitespace: str = "flexible",
    strict: bool = False,
    disable_additional_properties: bool = False,
):
    """Compiles one vLLM request (`StructuredOutputOptions`, spec string) to a Grammar;
    ValueError when the type is unsupported or the spec does not compile."""
    kind = _kind(request_type)
    try:
        if kind == "JSON":
            schema = json.loads(grammar_spec) if isinstance(grammar_spec, str) else grammar_spec
            if disable_additional_properties:
                schema = _no_additional_properties(schema)
            return compiler.compile_json_schema(schema, whitespace=whitespace, strict=strict)
        if kind == "JSON_OBJECT":
            return compiler.compile_json_schema(
                {"type": "object"}, whitespace=whitespace, strict=strict
            )
        if kind == "REGEX":
            return compiler.compile_regex(grammar_spec)
        if kind == "GRAMMAR":
            return compiler.compile_grammar(_maybe_lark_to_gbnf(grammar_spec))
        if kind == "CHOICE":
            choices = json.loads(grammar_spec) if isinstance(grammar_spec, str) else grammar_spec
            if not isinstance(choices, list):
                raise ValueError(f"a choice request needs a JSON list, got {grammar_spec!r}")
            return compiler.compile_regex(choice_as_regex([str(c) for c in choices]))
    except CompileError as e:
        raise ValueError(f"Stencil could not compile the {kind.lower()} request: {e}") from e
    except json.JSONDecodeError as e:
        raise ValueError(f"Invalid JSON in the {kind.lower()} request: {e}") from e
    if kind == "STRUCTURAL_TAG":
        raise ValueError(
            "the Stencil backend does not support structural_tag requests; "
            "use the xgrammar or guidance backend for them"
        )
    raise ValueError(f"grammar is not of valid supported types. ({request_type!s})")


def _maybe_lark_to_gbnf(grammar: str) -> str:
    try:  # pragma: no cover - needs vLLM
        from vllm.v1.structured_output.utils import convert_lark_to_ebnf, grammar_is_likely_lark
    except ImportError:
        return grammar
    if grammar_is_likely_lark(grammar):  # pragma: no cover - needs vLLM
        return convert_lark_to_ebnf(grammar)
    return grammar


# -- front-end validation and registration ---------------------------------------------

_CHECK_COMPILER: Compiler | None = None


def _check_compiler() -> Compiler:
    """A compiler over a byte vocabulary (256 one-byte tokens + EOS): enough to check that
    a request compiles, without the model's tokenizer."""
    global _CHECK_COMPILER
    if _CHECK_COMPILER is None:
        tokens: list[bytes | None] = [bytes([b]) for b in range(256)] + [None]
        _CHECK_COMPILER = Compiler(Vocab.from_tokens(tokens, eos_ids=[256]))
    return _CHECK_COMPILER


def validate_stencil_grammar(sampling_params: Any, tokenizer: Any = None) -> None:
    """Replacement of vLLM's `validate_guidance_grammar(sampling_params, tokenizer=None)`:
    ValueError when the request does not compile with Stencil."""
    from vllm.v1.structured_output.request import get_structured_output_key  # pragma: no cover

    params = getattr(sampling_params, "structured_outputs", None)  # pragma: no cover
    if params is None:  # pragma: no cover
        params = getattr(sampling_params, "guided_decoding", None)
    if params is None:  # pragma: no cover
        return
    request_type, spec = get_structured_output_key(params)  # pragma: no cover
    compile_request(_check_compiler(), request_type, spec)  # pragma: no cover


def plugin() -> None:
    """The `vllm.general_plugins` entry point, which vLLM calls in each of its processes:
    `register()` when `STENCIL_VLLM=1`, nothing otherwise (installing the package must
    not take over the "guidance" backend of every vLLM on the machine)."""
    if env_flag("STENCIL_VLLM"):
        register()


def register() -> None:
    """Makes vLLM's "guidance" structured-output backend run on Stencil in this process
    (see the module docstring). Idempotent."""
    import importlib

    import vllm.v1.structured_output as so  # pragma: no cover - needs vLLM

    so.GuidanceBackend = StencilBackend  # type: ignore[attr-defined]  # pragma: no cover
    for name in ("vllm.v1.engine.input_processor", "vllm.v1.engine.processor"):  # pragma: no cover
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "validate_guidance_grammar"):
            mod.validate_guidance_grammar = validate_stencil_grammar
    logger.info("Stencil: vLLM's 'guidance' structured-output backend now runs on Stencil")
