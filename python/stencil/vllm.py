"""A vLLM (v1 engine) structured-output backend running on Stencil.

`StencilBackend` and `StencilGrammar` subclass vLLM's `StructuredOutputBackend` and
`StructuredOutputGrammar` (`vllm/v1/structured_output/backend_types.py`), like its
xgrammar and guidance backends. The request types map onto `stencil.Compiler`:

    json          -> compile_json_schema (flexible whitespace unless
                     structured_outputs_config.disable_any_whitespace)
    json_object   -> compile_json_schema({"type": "object"})
    regex         -> compile_regex
    grammar       -> compile_grammar: GBNF as it is, a Lark grammar (no `::=` on any
                     line) converted to GBNF by `stencil.lark.lark_to_gbnf`
    choice        -> compile_regex of the escaped alternatives
    structural_tag -> Compiler.compile_structural_tag (the XGrammar 0.2 JSON: `format`, or
                      the legacy `structures` + `triggers`)

`compile_grammar` takes the request's stop tokens (`stop_token_ids`, which vLLM 0.33
passes: the EOS and user stop ids): they become the grammar's end tokens, masked until
the grammar can end (a stop id that is not the vocabulary's EOS ends it like EOS; an EOS
id vLLM would not stop on is never allowed). Releases whose base class does not pass them
call it without (the parameter is optional), and the vocabulary's EOS ids end it.

Enabling it in a real vLLM. vLLM has no registry of structured-output backends:
`structured_outputs_config.backend` is a closed set ("auto", "xgrammar", "guidance",
"outlines", "lm-format-enforcer"), validated in the front end
(`SamplingParams._validate_structured_outputs` in 0.33; `InputProcessor` or `Processor`
in older releases) and turned into a backend object in the engine core by
`StructuredOutputManager.grammar_init`, which looks the class up by name in the module
`vllm.v1.structured_output`. `register()` takes over the "guidance" name: it replaces
that module's `GuidanceBackend` with `StencilBackend`, and the front end's
`validate_guidance_grammar` (wherever the release binds it) with
`validate_stencil_grammar`, so the engine must be started with
`structured_outputs_config={"backend": "guidance"}` (`--structured-outputs-config.backend
guidance` for `vllm serve`). `register()` must run in the process that builds the engine
core:

* offline (`vllm.LLM`): call `stencil.vllm.register()` before creating the `LLM`, with
  `VLLM_ENABLE_V1_MULTIPROCESSING=0` (engine core in-process), as
  `python/scripts/gpu_check.py` does; or
* any deployment (`vllm serve` included): as a vLLM general plugin, which vLLM loads in
  every process it starts (front end, engine core, workers): this package declares the
  entry point `stencil = "stencil.vllm:plugin"`, which registers when `STENCIL_VLLM=1` is
  set in the server's environment (and does nothing otherwise).

This replaces private names of vLLM; `python/tests/engines/test_vllm_real.py` drives the pinned
release (python/README.md says which releases are claimed). The bitmask is applied on the
GPU by vLLM's own code; Stencil's bitmask has the layout of xgrammar's and llguidance's.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import CompileError, Compiler, Matcher, Vocab, bitmask_words
from ._util import env_flag, utf8_prefix
from .lark import LarkError, is_lark, lark_to_gbnf

logger = logging.getLogger(__name__)

try:  # vLLM's classes where it is installed (python/tests/engines drives the real one)
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
    # Stop tokens of the request that are not the vocabulary's EOS: allowed exactly when
    # EOS is, and consumed as EOS.
    stop_ids: frozenset[int] = frozenset()
    # The vocabulary's EOS ids that are not stop tokens of the request (vLLM would not
    # stop on them): never allowed.
    blocked_ids: frozenset[int] = frozenset()
    num_processed_tokens: int = field(default=0, repr=False, init=False)

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        """Accepts `tokens` in order and advances. True when all were accepted; tokens
        after the one that terminated the grammar (EOS) are ignored and not counted, as
        in vLLM's xgrammar and guidance backends. False (and a logged error) on the first
        refused token, the tokens before it staying accepted."""
        for token in tokens:
            if self.matcher.is_terminated():
                break
            if (
                not self._in_range(token)
                or token in self.blocked_ids
                or not self.matcher.consume_token(self._as_eos(token))
            ):
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
        while n < len(tokens) and self._in_range(tokens[n]) and tokens[n] not in self.blocked_ids:
            n += 1
        if n == 0:
            return []
        k = self.matcher.validate_tokens([self._as_eos(int(t)) for t in tokens[:n]])
        return list(tokens[:k])

    def rollback(self, num_tokens: int) -> None:
        """Undoes the last `num_tokens` accepted tokens, EOS included (none when <= 0)."""
        num_tokens = min(num_tokens, self.matcher.num_tokens)
        if num_tokens <= 0:
            return
        self.matcher.rollback(num_tokens)
        self.num_processed_tokens -= num_tokens

    def fill_bitmask(self, bitmask: Any, idx: int) -> None:
        """Writes the allowed-token bits into row `idx` of `bitmask` (a CPU int32 tensor or
        numpy array), the request's stop tokens set as EOS is."""
        self.matcher.fill_next_token_bitmask(bitmask, idx)
        if self.stop_ids or self.blocked_ids:
            row = bitmask[idx]
            row = (row.numpy() if hasattr(row, "numpy") else row).view(np.uint32)
            eos = self.matcher.grammar.vocab.eos_ids[0]
            can_end = bool(row[eos >> 5] >> np.uint32(eos & 31) & np.uint32(1))
            for t in self.stop_ids:
                bit = np.uint32(1 << (t & 31))
                row[t >> 5] = (row[t >> 5] | bit) if can_end else (row[t >> 5] & ~bit)
            for t in self.blocked_ids:
                row[t >> 5] &= ~np.uint32(1 << (t & 31))

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def reset(self) -> None:
        self.matcher.reset()
        self.num_processed_tokens = 0

    def find_jump_string(self) -> str | None:
        """The text every continuation starts with (jump-forward), or None."""
        data = self.matcher.forced_bytes()
        text = utf8_prefix(data)
        return text or None

    def _in_range(self, token: int) -> bool:
        return 0 <= int(token) < self.vocab_size

    def _as_eos(self, token: int) -> int:
        """A request stop token stands for the vocabulary's EOS."""
        return self.matcher.grammar.vocab.eos_ids[0] if token in self.stop_ids else int(token)




@dataclass
class StencilBackend(_BackendBase):
    """Engine-level backend (vLLM's `StructuredOutputBackend`): one vocabulary and one
    compiler for the model's tokenizer, grammars compiled per request."""

    @staticmethod
    def is_tokenizer_supported(tokenizer: Any) -> bool:
        """Whether the backend can be built for `tokenizer`: a Hugging Face fast tokenizer
        (vLLM's front end asks its guidance backend this, by this name)."""
        if type(tokenizer).__name__ == "MistralTokenizer":
            return False
        try:
            from transformers import PreTrainedTokenizerFast
        except ImportError:  # pragma: no cover - vLLM depends on transformers
            return bool(getattr(tokenizer, "is_fast", False))
        return isinstance(tokenizer, PreTrainedTokenizerFast)

    def __post_init__(self) -> None:
        cfg = _so_config(self.vllm_config)
        self.disable_any_whitespace = bool(getattr(cfg, "disable_any_whitespace", False))
        self.disable_additional_properties = bool(
            getattr(cfg, "disable_additional_properties", False)
        )
        # vLLM has no strictness knob: like its other backends, compile what can be
        # enforced and log the rest (STENCIL_VLLM_STRICT=1 refuses such schemas).
        self.strict = env_flag("STENCIL_VLLM_STRICT")
        if not self.is_tokenizer_supported(self.tokenizer):
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
        self,
        request_type: StructuredOutputOptions,
        grammar_spec: str,
        stop_token_ids: set[int] | None = None,
    ) -> StencilGrammar:
        """The request's grammar object; ValueError when the spec does not compile.
        `stop_token_ids` (vLLM 0.33+: EOS and user stop ids) are then the grammar's end
        tokens, masked until it can end: stop ids that are not the vocabulary's EOS end it
        like EOS, EOS ids that are not stop ids (vLLM would not stop on them) are never
        allowed. Without them (older releases), the vocabulary's EOS ids end it."""
        grammar = compile_request(
            self.compiler,
            request_type,
            grammar_spec,
            disable_additional_properties=self.disable_additional_properties,
            **self._json_options(),
        )
        for w in grammar.warnings:
            logger.warning("Stencil: schema keyword not enforced: %s", w)
        eos = set(self.vocab.eos_ids)
        stops = {int(t) for t in (stop_token_ids or ()) if 0 <= int(t) < self.vocab_size}
        return StencilGrammar(
            matcher=Matcher(grammar),
            vocab_size=self.vocab_size,
            stop_ids=frozenset(stops - eos),
            blocked_ids=frozenset(eos - stops) if stops else frozenset(),
        )

    def allocate_token_bitmask(self, max_num_seqs: int) -> Any:
        import torch

        return torch.full(
            (max_num_seqs, bitmask_words(self.vocab_size)), -1, dtype=torch.int32
        )

    def destroy(self) -> None:
        pass


# Where a JSON Schema holds subschemas: maps of them, and single ones or lists of them.
# Everything else (`const`, `enum`, `default`, `examples`...) is data, left as it is.
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMAS = (
    "additionalProperties", "unevaluatedProperties", "propertyNames", "contains", "items",
    "prefixItems", "additionalItems", "unevaluatedItems", "not", "if", "then", "else",
    "allOf", "anyOf", "oneOf", "contentSchema",
)


def _no_additional_properties(schema: Any) -> Any:
    """vLLM's disable_additional_properties: `additionalProperties: false` in every
    (sub)schema that lists properties and says nothing about the others. A new schema;
    literal values (`const`, `enum`...) are not rewritten even when they hold a
    "properties" key.

        >>> _no_additional_properties({"properties": {"a": {"const": {"properties": 1}}}})
        {'properties': {'a': {'const': {'properties': 1}}}, 'additionalProperties': False}
    """
    if isinstance(schema, list):
        return [_no_additional_properties(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _SUBSCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {k: _no_additional_properties(v) for k, v in out[key].items()}
    for key in _SUBSCHEMAS:
        if isinstance(out.get(key), (dict, list)):
            out[key] = _no_additional_properties(out[key])
    if "additionalProperties" not in out and (
        isinstance(out.get("properties"), dict) or isinstance(out.get("patternProperties"), dict)
    ):
        out["additionalProperties"] = False
    return out


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
        if kind == "STRUCTURAL_TAG":
            tag = json.loads(grammar_spec) if isinstance(grammar_spec, str) else grammar_spec
            return compiler.compile_structural_tag(tag, strict=strict)
    except (CompileError, LarkError) as e:
        raise ValueError(f"Stencil could not compile the {kind.lower()} request: {e}") from e
    except json.JSONDecodeError as e:
        raise ValueError(f"Invalid JSON in the {kind.lower()} request: {e}") from e
    raise ValueError(f"grammar is not of valid supported types. ({request_type!s})")


def _maybe_lark_to_gbnf(grammar: str) -> str:
    """GBNF as it is; a Lark grammar (no `::=` on any line) converted."""
    return lark_to_gbnf(grammar) if is_lark(grammar) else grammar


# -- front-end validation and registration ---------------------------------------------

_CHECK_COMPILERS: dict[int, tuple[Any, Compiler]] = {}


def _check_compiler(tokenizer: Any = None) -> Compiler:
    """The compiler the front end checks requests with: over the model's tokenizer when
    the front end passes a Hugging Face one (so that GBNF `<token>` references resolve
    as in the engine), else over a byte vocabulary (256 one-byte tokens + EOS)."""
    key = id(tokenizer)
    hit = _CHECK_COMPILERS.get(key)
    if hit is not None and hit[0] is tokenizer:
        return hit[1]
    vocab = None
    if tokenizer is not None and StencilBackend.is_tokenizer_supported(tokenizer):
        try:
            vocab = Vocab.from_huggingface(tokenizer)
        except Exception as e:  # a tokenizer object Stencil cannot read: check without it
            logger.warning("Stencil: front-end check without the model's vocabulary (%s)", e)
    if vocab is None:
        tokens: list[bytes | None] = [bytes([b]) for b in range(256)] + [None]
        vocab = Vocab.from_tokens(tokens, eos_ids=[256])
    compiler = Compiler(vocab)
    _CHECK_COMPILERS[key] = (tokenizer, compiler)
    return compiler


def _validation_error(message: str) -> Exception:
    """vLLM's `VLLMValidationError` (a 400 in the server) where the release has it."""
    try:
        from vllm.exceptions import VLLMValidationError
    except ImportError:  # releases before it: the front end turns ValueError into a 400
        return ValueError(message)
    return VLLMValidationError(message)


def validate_stencil_grammar(sampling_params: Any, tokenizer: Any = None) -> None:
    """Replacement of vLLM's `validate_guidance_grammar(sampling_params, tokenizer=None)`:
    vLLM's validation error, with Stencil's located message, when the request does not
    compile with Stencil."""
    from vllm.v1.structured_output.request import get_structured_output_key

    params = getattr(sampling_params, "structured_outputs", None)
    if params is None:  # releases before 0.11 named it guided_decoding
        params = getattr(sampling_params, "guided_decoding", None)
    if params is None:
        return
    request_type, spec = get_structured_output_key(params)
    try:
        compile_request(_check_compiler(tokenizer), request_type, spec)
    except ValueError as e:
        raise _validation_error(str(e)) from e


def _front_end_tokenizer(tokenizer: Any) -> Any:
    """Replacement of `sampling_params._get_llg_tokenizer` (llguidance's tokenizer for
    Mistral models, None otherwise): the front end's own tokenizer, for
    `validate_stencil_grammar`."""
    return tokenizer


def plugin() -> None:
    """The `vllm.general_plugins` entry point, which vLLM calls in each of its processes:
    `register()` when `STENCIL_VLLM=1`, nothing otherwise (installing the package must
    not take over the "guidance" backend of every vLLM on the machine)."""
    if env_flag("STENCIL_VLLM"):
        register()


# Where releases bind the front end's `validate_guidance_grammar`: 0.33 imports it from
# backend_guidance when it validates; older ones import it at module level.
_FRONT_END_MODULES = (
    "vllm.v1.structured_output.backend_guidance",
    "vllm.v1.engine.input_processor",
    "vllm.v1.engine.processor",
)


def register() -> None:
    """Makes vLLM's "guidance" structured-output backend run on Stencil in this process
    (see the module docstring). Idempotent."""
    import importlib

    import vllm.v1.structured_output as so
    import vllm.v1.structured_output.backend_guidance as bg

    so.GuidanceBackend = StencilBackend  # type: ignore[attr-defined]
    # The front end asks backend_guidance.GuidanceBackend.is_tokenizer_supported.
    bg.GuidanceBackend = StencilBackend  # type: ignore[attr-defined]
    for name in _FRONT_END_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "validate_guidance_grammar"):
            mod.validate_guidance_grammar = validate_stencil_grammar
    try:
        import vllm.sampling_params as sp
    except ImportError:  # pragma: no cover - every release with the v1 engine has it
        sp = None
    if sp is not None and hasattr(sp, "_get_llg_tokenizer"):
        sp._get_llg_tokenizer = _front_end_tokenizer
    logger.info("Stencil: vLLM's 'guidance' structured-output backend now runs on Stencil")
