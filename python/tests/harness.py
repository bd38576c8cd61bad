"""Replays of vLLM's and SGLang's call sequences against Stencil's adapters.

Each simulator drives an adapter the way the engine's scheduler does (compile, allocate a
bitmask, per step fill the rows of a batch of requests, sample a token from the allowed
set, accept it; a speculative-decoding loop with drafts, validation and rollback) and
checks every mask, and every state after a rollback, against a matcher replayed from
scratch over the tokens accepted so far. Outputs are then checked by independent means
(jsonschema, Python's `re`), never against hard-coded answers.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

import stencil

MAX_STEPS = 400  # per request; a request still running after that fails the test


# -- requests ---------------------------------------------------------------------------


@dataclass
class Spec:
    """One structured-output request: its kind, the spec string the engine passes, and a
    check of the final text that does not use Stencil."""

    kind: str  # "json", "json_object", "regex", "grammar", "choice"
    spec: str
    check: Callable[[str], None]
    name: str = ""


def json_spec(schema: dict, name: str = "") -> Spec:
    import jsonschema

    def check(text: str) -> None:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise AssertionError(f"{name}: output is not JSON ({e}): {text!r}") from e
        cls = jsonschema.validators.validator_for(schema)
        errors = [e.message for e in cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(value)]
        assert not errors, f"{name}: output {text!r} does not validate: {errors}"

    return Spec("json", json.dumps(schema), check, name or "json")


def json_object_spec() -> Spec:
    def check(text: str) -> None:
        value = json.loads(text)
        assert isinstance(value, dict), f"json_object: output {text!r} is not an object"

    return Spec("json_object", "", check, "json_object")


def regex_spec(pattern: str, python_pattern: str | None = None) -> Spec:
    """`pattern` in the syntax both Rust's `regex` and Python's `re` read the same way."""
    rx = re.compile(python_pattern or pattern)

    def check(text: str) -> None:
        assert rx.fullmatch(text), f"regex {pattern!r}: output {text!r} does not match"

    return Spec("regex", pattern, check, f"regex {pattern}")


def grammar_spec(gbnf: str, python_pattern: str) -> Spec:
    """A GBNF grammar with an equivalent Python regex to check outputs with."""
    rx = re.compile(python_pattern)

    def check(text: str) -> None:
        assert rx.fullmatch(text), f"grammar: output {text!r} does not match {python_pattern!r}"

    return Spec("grammar", gbnf, check, "grammar")


def choice_spec(choices: list[str]) -> Spec:
    def check(text: str) -> None:
        assert text in choices, f"choice: output {text!r} is not one of {choices}"

    return Spec("choice", json.dumps(choices), check, "choice")


_COMMON_META = set("\\.+*?()|[]{}^$-")


def alternatives_regex(choices: list[str]) -> str:
    """A regex of exactly these strings, in the syntax Rust's `regex` and Python's `re`
    share (written here, not taken from the adapters)."""
    return "|".join("".join("\\" + c if c in _COMMON_META else c for c in s) for s in choices)


def assert_compact(text: str) -> None:
    """No whitespace outside JSON strings (compact output)."""
    in_string = escaped = False
    for i, c in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        else:
            assert c not in " \t\n\r", f"whitespace at {i} outside strings: {text!r}"


def reference_grammar(compiler: stencil.Compiler, spec: Spec, *, whitespace: str) -> stencil.Grammar:
    """The grammar a request means, compiled directly (not through an adapter)."""
    if spec.kind == "json":
        return compiler.compile_json_schema(json.loads(spec.spec), whitespace=whitespace, strict=False)
    if spec.kind == "json_object":
        return compiler.compile_json_schema({"type": "object"}, whitespace=whitespace, strict=False)
    if spec.kind == "regex":
        return compiler.compile_regex(spec.spec)
    if spec.kind == "grammar":
        return compiler.compile_grammar(spec.spec)
    if spec.kind == "choice":
        return compiler.compile_regex(alternatives_regex(json.loads(spec.spec)))
    raise ValueError(spec.kind)


# -- the requests the tests run (bounded outputs) ---

RECORD = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 0, "maximum": 999},
        "tag": {"enum": ["alpha", "beta", "gamma"]},
        "ok": {"type": "boolean"},
    },
    "required": ["id", "tag", "ok"],
    "additionalProperties": False,
}
POINTS = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8, "pattern": "^[a-z]+$"},
        "pts": {
            "type": "array",
            "items": {"type": "integer", "minimum": -9, "maximum": 9},
            "minItems": 1,
            "maxItems": 3,
        },
    },
    "required": ["name", "pts"],
    "additionalProperties": False,
}
PAIRS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"k": {"type": "string", "maxLength": 4}, "v": {"type": ["boolean", "null"]}},
        "required": ["k"],
        "additionalProperties": False,
    },
    "maxItems": 2,
}
GBNF = 'root ::= "[" item ("," item)? ("," item)? "]"\nitem ::= [a-c] [0-9]?\n'
GBNF_PY = r"\[[a-c][0-9]?(,[a-c][0-9]?){0,2}\]"


def all_specs() -> list[Spec]:
    """One request of each kind, outputs bounded in length."""
    from conftest import load_schema

    return [
        json_spec(RECORD, "record"),
        json_spec(POINTS, "points"),
        json_spec(PAIRS, "pairs"),
        json_spec(load_schema("answer"), "fixtures/schemas/answer.json"),
        json_object_spec(),
        regex_spec(r"[a-z]{2,5}-[0-9]{1,3}"),
        grammar_spec(GBNF, GBNF_PY),
        choice_spec(["red", "green", "blue-ish", "a.b"]),
    ]



# -- replays ----------------------------------------------------------------------------


def replay(grammar: stencil.Grammar, tokens: list[int]) -> stencil.Matcher:
    """A fresh matcher that consumed `tokens` one by one (each must be accepted)."""
    m = stencil.Matcher(grammar)
    for i, t in enumerate(tokens):
        assert m.consume_token(t), f"replay: token {t} at position {i} refused ({tokens})"
    return m


def tokens_for(vocab: stencil.Vocab, grammar: stencil.Grammar, text: str) -> list[int]:
    """A token sequence spelling `text` that the grammar accepts, found greedily (longest
    allowed token that is a prefix of the rest)."""
    m = stencil.Matcher(grammar)
    data = text.encode()
    out = []
    while data:
        allowed = m.next_token_mask()
        best = max(
            (t for t in allowed if vocab.is_text(t) and data.startswith(vocab.token_bytes(t))),
            key=lambda t: len(vocab.token_bytes(t)),
            default=None,
        )
        assert best is not None, f"no token spells the rest of {text!r}: {data!r}"
        assert m.consume_token(best)
        out.append(best)
        data = data[len(vocab.token_bytes(best)) :]
    return out


def mask_row(matcher: stencil.Matcher, words: int) -> np.ndarray:
    row = np.zeros((1, words), dtype=np.int32)
    matcher.fill_next_token_bitmask(row, 0)
    return row[0]


def allowed_ids(row: np.ndarray, limit: int) -> np.ndarray:
    bits = np.unpackbits(np.ascontiguousarray(row, dtype="<i4").view(np.uint8), bitorder="little")
    return np.flatnonzero(bits[:limit])


def decode(vocab: stencil.Vocab, tokens: list[int]) -> str:
    eos = set(vocab.eos_ids)
    return b"".join(vocab.token_bytes(t) for t in tokens if t not in eos).decode("utf-8")


def assert_rows_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    if not np.array_equal(got, want):
        diff = np.flatnonzero(got != want)
        raise AssertionError(
            f"{what}: bitmask differs from the replay in {len(diff)} words "
            f"(first at word {diff[0]}: got {got[diff[0]]:#x}, want {want[diff[0]]:#x})"
        )


def closing_tokens(vocab: stencil.Vocab) -> np.ndarray:
    """Per token id: whether its bytes close something (a quote, a bracket, a comma).
    Uniform sampling alone would rarely leave a free-text string; the samplers favour
    these tokens so that every request ends in a bounded number of steps."""
    out = np.zeros(vocab.size, dtype=bool)
    for t in range(vocab.size):
        if vocab.is_text(t):
            b = vocab.token_bytes(t)
            out[t] = any(c in b for c in (b'"', b"}", b"]", b","))
    return out


def pick_token(rng: random.Random, allowed: np.ndarray, eos: set[int], closing: np.ndarray) -> int:
    """A token from `allowed`: EOS whenever it is allowed (every request ends as soon as
    its grammar can), else half the time one of the closing tokens, else any."""
    assert len(allowed) > 0, "no token allowed"
    ends = [int(t) for t in allowed if int(t) in eos]
    if ends:
        return ends[0]
    closers = allowed[closing[allowed]]
    if len(closers) and rng.random() < 0.5:
        return int(closers[rng.randrange(len(closers))])
    return int(allowed[rng.randrange(len(allowed))])


def pick_invalid(rng: random.Random, allowed: np.ndarray, vocab_size: int) -> int:
    allowed_set = set(int(t) for t in allowed)
    for _ in range(10_000):
        t = rng.randrange(vocab_size)
        if t not in allowed_set:
            return t
    raise AssertionError("could not find a refused token")


@dataclass
class Request:
    rid: str
    spec: Spec
    reference: stencil.Grammar
    adapter: Any  # the engine-side grammar object
    tokens: list[int] = field(default_factory=list)
    done: bool = False

    def text(self) -> str:
        return decode(self.reference.vocab, self.tokens)


# -- vLLM -------------------------------------------------------------------------------


class _Sim:
    """What both engines' simulations hold: the backend under test, the compiler and its
    vocabulary, the seeded generators, and the tokens that close open JSON."""

    def __init__(self, backend: Any, compiler: stencil.Compiler, *, seed: int, whitespace: str):
        self.backend = backend
        self.compiler = compiler
        self.vocab = compiler.vocab
        self.words = stencil.bitmask_words(self.vocab.size)
        self.eos = set(self.vocab.eos_ids)
        self.rng = random.Random(seed)
        self.torch_gen = torch.Generator().manual_seed(seed)
        self.whitespace = whitespace
        self.closing = closing_tokens(self.vocab)


class VllmSim(_Sim):
    """vLLM v1's scheduler and StructuredOutputManager, as far as they touch a backend:
    `grammar_bitmask` (fill per request, -1 rows for terminated ones, spec positions
    advanced and rolled back), `update_draft_token_ids` (`validate_tokens`) and
    `update_from_output` (`accept_tokens`)."""

    def __init__(self, backend: Any, compiler: stencil.Compiler, *, max_num_seqs: int, seed: int,
                 whitespace: str = "flexible", num_spec_tokens: int = 0):
        super().__init__(backend, compiler, seed=seed, whitespace=whitespace)
        self.num_spec_tokens = num_spec_tokens
        # One row per sequence and spec position, as the manager allocates it.
        self.bitmask = backend.allocate_token_bitmask(max_num_seqs * (1 + num_spec_tokens))
        assert isinstance(self.bitmask, torch.Tensor) and self.bitmask.dtype == torch.int32
        assert tuple(self.bitmask.shape) == (max_num_seqs * (1 + num_spec_tokens), self.words)
        assert bool((self.bitmask == -1).all()), "a fresh bitmask must allow every token"
        self.max_num_seqs = max_num_seqs
        self.steps = 0

    def add(self, rid: str, spec: Spec) -> Request:
        from stencil.vllm import StructuredOutputOptions

        rtype = StructuredOutputOptions[spec.kind.upper()]
        adapter = self.backend.compile_grammar(rtype, spec.spec)
        ref = reference_grammar(self.compiler, spec, whitespace=self.whitespace)
        return Request(rid, spec, ref, adapter)

    def check_state(self, req: Request, what: str) -> None:
        """The adapter's state equals a replay of `req.tokens` from scratch."""
        ref = replay(req.reference, req.tokens)
        assert req.adapter.is_terminated() == ref.is_terminated(), f"{what}: is_terminated"
        assert req.adapter.matcher.num_tokens == len(req.tokens), f"{what}: num_tokens"
        assert req.adapter.num_processed_tokens == len(req.tokens), f"{what}: num_processed_tokens"
        if not ref.is_terminated():
            scratch = torch.zeros((1, self.words), dtype=torch.int32)
            req.adapter.fill_bitmask(scratch, 0)
            assert_rows_equal(scratch[0].numpy(), mask_row(ref, self.words), what)

    def step(self, batch: list[Request]) -> None:
        """One decoding step (no speculation) over `batch`, in scheduling order."""
        assert 0 < len(batch) <= self.max_num_seqs
        for idx, req in enumerate(batch):  # StructuredOutputManager._fill_bitmasks
            if not req.adapter.is_terminated():
                req.adapter.fill_bitmask(self.bitmask, idx)
            else:
                self.bitmask[idx].fill_(-1)
        rows = self.bitmask[: len(batch)].numpy()
        # The model runner: logits, the mask applied, the sampler (argmax over noise).
        logits = torch.randn((len(batch), self.vocab.size), generator=self.torch_gen)
        for t in self.eos:
            logits[:, t] += 8.0
        if self.rng.random() < 0.5:  # favour closing tokens every other step
            logits[:, torch.from_numpy(self.closing)] += 2.0
        stencil.apply_token_bitmask_inplace(logits, self.bitmask[: len(batch)])
        sampled = logits.argmax(dim=-1).tolist()
        for idx, req in enumerate(batch):
            ref = replay(req.reference, req.tokens)
            want = mask_row(ref, self.words)
            assert_rows_equal(rows[idx], want, f"{req.rid} step {len(req.tokens)}")
            allowed = allowed_ids(want, self.vocab.size)
            token = int(sampled[idx])
            assert token in set(allowed.tolist()), f"{req.rid}: sampled {token}, not allowed"
            assert req.adapter.accept_tokens(req.rid, [token]), f"{req.rid}: refused {token}"
            req.tokens.append(token)
            if token in self.eos:
                req.done = True
                assert req.adapter.is_terminated()
            elif len(req.tokens) > MAX_STEPS:
                raise AssertionError(f"{req.rid}: no end after {MAX_STEPS} tokens: {req.text()!r}")
        self.steps += 1

    def run(self, specs: list[Spec], *, arrivals: list[int] | None = None) -> list[Request]:
        """Runs every request to its end, admitting request i at step arrivals[i] and
        shuffling the batch order every step (the scheduler's order varies)."""
        arrivals = arrivals or [0] * len(specs)
        pending = sorted(range(len(specs)), key=lambda i: arrivals[i])
        running: list[Request] = []
        finished: list[Request] = []
        reqs: dict[int, Request] = {}
        while pending or running:
            while pending and arrivals[pending[0]] <= self.steps and len(running) < self.max_num_seqs:
                i = pending.pop(0)
                reqs[i] = self.add(f"req-{i}", specs[i])
                running.append(reqs[i])
            if not running:
                self.steps += 1
                continue
            self.rng.shuffle(running)
            self.step(running)
            for r in [r for r in running if r.done]:
                running.remove(r)
                finished.append(r)
        return [reqs[i] for i in range(len(specs))]

    def speculative(self, spec: Spec, *, rid: str, k: int, invalid_rate: float) -> Request:
        """One request decoded with speculation: a draft of up to `k` tokens per step (some
        deliberately invalid), `validate_tokens`, the manager's per-position masks
        (accept then rollback), the target's verification (a random accepted prefix plus a
        bonus token), and explicit `rollback` of rejected tokens."""
        assert k <= self.num_spec_tokens, "allocate the simulator with num_spec_tokens >= k"
        req = self.add(rid, spec)
        while not req.done:
            ref = replay(req.reference, req.tokens)
            # The draft model: valid tokens, then maybe one the grammar refuses, then noise.
            drafts: list[int] = []
            probe = ref.fork()
            bad_at = self.rng.randrange(k) if self.rng.random() < invalid_rate else k
            for j in range(k):
                if probe.is_terminated():
                    break
                allowed = allowed_ids(mask_row(probe, self.words), self.vocab.size)
                if j == bad_at:
                    drafts.append(pick_invalid(self.rng, allowed, self.vocab.size))
                    drafts.extend(self.rng.randrange(self.vocab.size) for _ in range(k - j - 1))
                    break
                t = pick_token(self.rng, allowed, self.eos, self.closing)
                drafts.append(t)
                assert probe.consume_token(t)
            # Independent count of the valid prefix: a replay consuming one by one.
            check = ref.fork()
            n_valid = 0
            for t in drafts:
                if not check.consume_token(t):
                    break
                n_valid += 1
            valid = req.adapter.validate_tokens(list(drafts))
            assert valid == drafts[:n_valid], f"{rid}: validate_tokens {valid} != {drafts[:n_valid]}"
            self.check_state(req, f"{rid} after validate_tokens")

            # StructuredOutputManager.grammar_bitmask with scheduled spec tokens.
            advanced = 0
            for j, t in enumerate(valid + [-1]):
                if not req.adapter.is_terminated():
                    req.adapter.fill_bitmask(self.bitmask, j)
                else:
                    self.bitmask[j].fill_(-1)
                exp = replay(req.reference, req.tokens + valid[:j])
                want = (
                    np.full(self.words, -1, dtype=np.int32)
                    if exp.is_terminated()
                    else mask_row(exp, self.words)
                )
                assert_rows_equal(self.bitmask[j].numpy(), want, f"{rid} spec position {j}")
                if t != -1 and not req.adapter.is_terminated():
                    assert req.adapter.accept_tokens(rid, [t])
                    advanced += 1
            if advanced:
                req.adapter.rollback(advanced)
            self.check_state(req, f"{rid} after the spec-position rollback")

            # Verification: the target keeps a prefix of the drafts, then samples a bonus.
            keep = self.rng.randint(0, len(valid))
            if keep < len(valid):
                # Rejection with the rollback path: accept all, roll the rejected back.
                assert req.adapter.accept_tokens(rid, list(valid))
                req.adapter.rollback(len(valid) - keep)
                req.tokens.extend(valid[:keep])
                self.check_state(req, f"{rid} after rolling back {len(valid) - keep} rejected")
                accepted: list[int] = []
            else:
                accepted = list(valid)
            after = replay(req.reference, req.tokens + accepted)
            if not after.is_terminated():
                bonus_allowed = allowed_ids(mask_row(after, self.words), self.vocab.size)
                accepted.append(pick_token(self.rng, bonus_allowed, self.eos, self.closing))
            if accepted:
                assert req.adapter.accept_tokens(rid, accepted), f"{rid}: refused {accepted}"
                req.tokens.extend(accepted)
            eos_at = next((i for i, t in enumerate(req.tokens) if t in self.eos), None)
            if eos_at is not None:
                assert eos_at == len(req.tokens) - 1, "tokens after EOS"
                req.done = True
            self.check_state(req, f"{rid} after accepting {accepted}")
            if len(req.tokens) > MAX_STEPS:
                raise AssertionError(f"{rid}: no end after {MAX_STEPS} tokens: {req.text()!r}")
        return req


# -- SGLang -----------------------------------------------------------------------------


class SglangSim(_Sim):
    """SGLang's scheduler and SamplingBatchInfo, as far as they touch a grammar backend:
    grammars from the backend's dispatch (a cached one copied per request), per step
    `allocate_vocab_mask` / `fill_vocab_mask` (live rows) / `move_vocab_mask` /
    `apply_vocab_mask` over a batch that may hold requests without a grammar, then
    `accept_token` and `finished`; EAGLE-style draft checks with accept/rollback."""

    def __init__(self, backend: Any, compiler: stencil.Compiler, *, seed: int, model_vocab_size: int,
                 whitespace: str = "flexible"):
        super().__init__(backend, compiler, seed=seed, whitespace=whitespace)
        self.model_vocab_size = model_vocab_size
        self.cache: dict[tuple[str, str], Any] = {}

    @staticmethod
    def key(spec: Spec) -> tuple[str, str]:
        if spec.kind == "json":
            return ("json", spec.spec)
        if spec.kind == "json_object":
            return ("json", '{"type": "object"}')
        if spec.kind == "regex":
            return ("regex", spec.spec)
        if spec.kind == "grammar":
            return ("ebnf", spec.spec)
        if spec.kind == "choice":
            # SGLang turns choices into a regex of alternatives before dispatch.
            return ("regex", alternatives_regex(json.loads(spec.spec)))
        raise ValueError(spec.kind)

    def dispatch(self, key: tuple[str, str]) -> Any:
        key_type, key_string = key
        fn = {
            "json": self.backend.dispatch_json,
            "regex": self.backend.dispatch_regex,
            "ebnf": self.backend.dispatch_ebnf,
            "structural_tag": self.backend.dispatch_structural_tag,
        }[key_type]
        return fn(key_string)

    def add(self, rid: str, spec: Spec) -> Request:
        key = self.key(spec)
        if key in self.cache:  # get_cached_or_future_value: a copy of the cached object
            grammar = self.cache[key].copy()
        else:
            grammar = self.dispatch(key)
            self.cache[key] = grammar
            grammar = grammar.copy()
        ref = reference_grammar(self.compiler, spec, whitespace=self.whitespace)
        return Request(rid, spec, ref, grammar)

    def check_state(self, req: Request, what: str) -> None:
        ref = replay(req.reference, req.tokens)
        assert req.adapter.is_terminated() == ref.is_terminated(), f"{what}: is_terminated"
        assert req.adapter.matcher.num_tokens == len(req.tokens), f"{what}: num_tokens"
        assert req.adapter.accepted_tokens == req.tokens, f"{what}: accepted_tokens"
        if not ref.is_terminated():
            scratch = req.adapter.allocate_vocab_mask(self.model_vocab_size, 1, "cpu")
            req.adapter.fill_vocab_mask(scratch, 0)
            assert_rows_equal(scratch[0].numpy(), mask_row(ref, self.words), what)

    def step(self, batch: list[Request | None]) -> None:
        """One decoding step; `None` entries are requests without a grammar."""
        grammars = [r.adapter if r is not None else None for r in batch]
        first = next(g for g in grammars if g is not None)
        vocab_mask = first.allocate_vocab_mask(
            vocab_size=self.model_vocab_size, batch_size=len(batch), device="cpu"
        )
        for i, g in enumerate(grammars):
            if g is not None and not g.finished and not g.is_terminated():
                g.fill_vocab_mask(vocab_mask, i)
        vocab_mask = first.move_vocab_mask(vocab_mask, "cpu")
        rows = vocab_mask.numpy().copy()
        logits = torch.randn((len(batch), self.model_vocab_size), generator=self.torch_gen)
        for t in self.eos:
            logits[:, t] += 8.0
        if self.rng.random() < 0.5:  # favour closing tokens every other step
            logits[:, : self.vocab.size][:, torch.from_numpy(self.closing)] += 2.0
        first.apply_vocab_mask(logits=logits, vocab_mask=vocab_mask)
        sampled = logits.argmax(dim=-1).tolist()
        for i, req in enumerate(batch):
            if req is None:
                assert bool((rows[i] == -1).all()), "a row without a grammar must allow all"
                assert bool(torch.isfinite(logits[i, : self.vocab.size]).all()), (
                    "a row without a grammar must keep its logits"
                )
                continue
            ref = replay(req.reference, req.tokens)
            want = mask_row(ref, self.words)
            assert_rows_equal(rows[i], want, f"{req.rid} step {len(req.tokens)}")
            allowed = set(allowed_ids(want, self.vocab.size).tolist())
            token = int(sampled[i])
            assert token in allowed, f"{req.rid}: sampled {token}, not allowed"
            req.adapter.accept_token(token)
            req.tokens.append(token)
            req.adapter.finished = token in self.eos
            if token in self.eos:
                req.done = True
                assert req.adapter.is_terminated()
            elif len(req.tokens) > MAX_STEPS:
                raise AssertionError(f"{req.rid}: no end after {MAX_STEPS} tokens: {req.text()!r}")
            self.check_jump_forward(req)

    def check_jump_forward(self, req: Request) -> None:
        """`try_jump_forward`'s string is a prefix of every continuation: each allowed
        token's bytes and the forced bytes agree on their common length."""
        if req.adapter.is_terminated():
            return
        helper = req.adapter.try_jump_forward(None)
        if helper is None:
            return
        text, _state = req.adapter.jump_forward_str_state(helper)
        forced = text.encode("utf-8")
        assert forced, "try_jump_forward returned an empty string"
        ref = replay(req.reference, req.tokens)
        for t in allowed_ids(mask_row(ref, self.words), self.vocab.size).tolist():
            if t in self.eos:
                raise AssertionError(f"{req.rid}: jump forward {text!r} while EOS is allowed")
            b = self.vocab.token_bytes(t)
            n = min(len(b), len(forced))
            assert b[:n] == forced[:n], f"{req.rid}: token {b!r} disagrees with forced {forced!r}"

    def run(self, specs: list[Spec], *, with_plain_rows: bool = True) -> list[Request]:
        reqs = [self.add(f"req-{i}", s) for i, s in enumerate(specs)]
        while any(not r.done for r in reqs):
            batch: list[Request | None] = [r for r in reqs if not r.done]
            self.rng.shuffle(batch)
            if with_plain_rows:
                batch.insert(self.rng.randrange(len(batch) + 1), None)
            self.step(batch)
        return reqs

    def speculative(self, spec: Spec, *, rid: str, k: int, invalid_rate: float) -> Request:
        """EAGLE-style verification: each draft token accepted in turn until the grammar
        refuses one (ValueError), then everything rolled back; the target keeps a prefix
        and a bonus token."""
        req = self.add(rid, spec)
        while not req.done:
            ref = replay(req.reference, req.tokens)
            probe = ref.fork()
            drafts: list[int] = []
            bad_at = self.rng.randrange(k) if self.rng.random() < invalid_rate else k
            for j in range(k):
                if probe.is_terminated():
                    break
                allowed = allowed_ids(mask_row(probe, self.words), self.vocab.size)
                if j == bad_at:
                    drafts.append(pick_invalid(self.rng, allowed, self.vocab.size))
                    break
                t = pick_token(self.rng, allowed, self.eos, self.closing)
                drafts.append(t)
                assert probe.consume_token(t)
            n_ok = 0
            for t in drafts:
                try:
                    req.adapter.accept_token(t)
                except ValueError:
                    break
                n_ok += 1
            check = ref.fork()
            n_valid = 0
            for t in drafts:
                if not check.consume_token(t):
                    break
                n_valid += 1
            assert n_ok == n_valid, f"{rid}: accepted {n_ok} drafts, the replay {n_valid}"
            if n_ok:
                req.adapter.rollback(n_ok)
            self.check_state(req, f"{rid} after rolling back {n_ok} drafts")
            keep = self.rng.randint(0, n_valid)
            accepted = drafts[:keep]
            after = replay(req.reference, req.tokens + accepted)
            if not after.is_terminated():
                accepted.append(
                    pick_token(self.rng, allowed_ids(mask_row(after, self.words), self.vocab.size), self.eos, self.closing)
                )
            for t in accepted:
                req.adapter.accept_token(t)
            req.tokens.extend(accepted)
            if req.tokens and req.tokens[-1] in self.eos:
                req.done = True
            self.check_state(req, f"{rid} after accepting {accepted}")
            if len(req.tokens) > MAX_STEPS:
                raise AssertionError(f"{rid}: no end after {MAX_STEPS} tokens: {req.text()!r}")
        return req
