"""vLLM's own front end and `StructuredOutputManager`, driven as vLLM's scheduler drives
them, with Stencil registered as the "guidance" backend.

Per request: `InputProcessor.process_inputs` (the front end: `SamplingParams.verify`, which
validates the structured-output request, and the generation config's stop tokens), a
`vllm.v1.request.Request` from it, `StructuredOutputManager.grammar_init` and the wait for
the compiled grammar (a failed compile fails that request alone, as the scheduler does).
Per step, over the running batch: `grammar_bitmask` with each request's scheduled
speculative tokens (validated, padded with -1), the rejection sampler emulated on the
returned rows (a draft is kept while the sampler agrees with it, then one token is sampled
from the row), vLLM's `check_stop` on each new token, `accept_tokens`, then the next
drafts through `validate_tokens`.

Nothing here trusts the backend: every row vLLM returns is compared with a row computed
from a fresh Stencil matcher replayed over the request's content tokens (the tokens after
`</think>` when the request reasons), with the request's stop tokens allowed exactly where
EOS is; every draft validation with an independent count; every finished output with its
spec's own check (jsonschema, Python's `re`).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import stencil
import stencil.vllm
from harness import MAX_STEPS, Spec, allowed_ids, assert_rows_equal, closing_tokens, decode, replay

FULL = -1  # a row vLLM leaves unconstrained


def so_params(spec: Spec) -> dict[str, Any]:
    """The `StructuredOutputsParams` of a spec, as a user fills them."""
    import json

    if spec.kind == "json":
        return {"json": json.loads(spec.spec)}
    if spec.kind == "json_object":
        return {"json_object": True}
    if spec.kind == "choice":
        return {"choice": json.loads(spec.spec)}
    return {spec.kind: spec.spec}


@dataclass
class Live:
    """One request in the emulated scheduler."""

    rid: str
    spec: Spec
    request: Any  # vllm.v1.request.Request
    reference: stencil.Grammar
    stop_ids: frozenset[int]
    reasoning: bool  # the grammar starts after `</think>`
    drafts: list[int] = field(default_factory=list)  # scheduled for the next step
    finished: bool = False

    @property
    def output(self) -> list[int]:
        return list(self.request.output_token_ids)


class VllmDriver:
    def __init__(self, vllm_config: Any, ref_compiler: stencil.Compiler, *, seed: int,
                 whitespace: str = "flexible", accept_rate: float = 0.6, invalid_rate: float = 0.3):
        from vllm.v1.engine.input_processor import InputProcessor
        from vllm.v1.structured_output import StructuredOutputManager

        self.config = vllm_config
        self.processor = InputProcessor(vllm_config)
        self.manager = StructuredOutputManager(vllm_config)
        self.k = vllm_config.num_speculative_tokens
        self.compiler = ref_compiler
        self.vocab = ref_compiler.vocab
        self.words = stencil.bitmask_words(self.vocab.size)
        self.eos = self.vocab.eos_ids[0]
        tok = self.processor.tokenizer
        self.think = tok.convert_tokens_to_ids("<think>")
        self.end_think = tok.convert_tokens_to_ids("</think>")
        so_config = vllm_config.structured_outputs_config
        # Requests whose prompt leaves `<think>` open start unconstrained.
        self.reasons = bool(so_config.reasoning_parser) and not so_config.enable_in_reasoning
        self.rng = random.Random(seed)
        self.whitespace = whitespace
        self.closing = closing_tokens(self.vocab)
        self.text_ids = np.array([t for t in range(len(tok)) if self.vocab.is_text(t)])
        self.accept_rate = accept_rate
        self.invalid_rate = invalid_rate
        self.steps = 0
        # What the run exercised, for the tests to assert on.
        self.stats = {"rows": 0, "constrained_rows": 0, "stop_masked_rows": 0, "drafts": 0,
                      "drafts_refused": 0, "drafts_kept": 0, "reasoning_rows": 0}

    # -- the front end and grammar_init --------------------------------------------------

    def sampling_params(self, spec: Spec, **kwargs: Any) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        return SamplingParams(max_tokens=MAX_STEPS + 50, structured_outputs=StructuredOutputsParams(**so_params(spec)), **kwargs)

    def prompt(self, reasoning: bool) -> list[int]:
        """A prompt whose reasoning is still open (`<think>` last) or closed."""
        tail = [self.think] if reasoning else [self.think, self.end_think]
        return [1, 28, 29] + tail

    def submit(self, rid: str, spec: Spec, reference: stencil.Grammar, *, reasoning: bool = False,
               stop_token_ids: list[int] | None = None) -> Live:
        """Front end, then grammar_init; raises what the front end raises."""
        from vllm.v1.request import Request

        params = self.sampling_params(spec, stop_token_ids=stop_token_ids)
        ecr = self.processor.process_inputs(rid, {"prompt_token_ids": self.prompt(reasoning)}, params, ("generate",))
        request = Request.from_engine_core_request(ecr, None)
        stops = frozenset(int(t) for t in request.sampling_params.all_stop_token_ids)
        self.manager.grammar_init(request)
        return Live(rid, spec, request, reference, stops, reasoning and self.reasons)

    def wait_grammar(self, live: Live, timeout: float = 60.0) -> Any:
        """The compiled grammar, or the exception the compile raised (what the scheduler
        sees through `is_grammar_ready` / `grammar`)."""
        so = live.request.structured_output_request
        deadline = time.monotonic() + timeout
        while not so.is_grammar_ready:
            assert time.monotonic() < deadline, f"{live.rid}: grammar not ready after {timeout} s"
            time.sleep(0.005)
        return so.grammar

    # -- expectations, computed without the backend -------------------------------------

    def content(self, live: Live, tokens: list[int]) -> list[int] | None:
        """The tokens the grammar sees: all of them, or those after `</think>` while the
        request reasons (None before it)."""
        if not live.reasoning:
            return tokens
        if self.end_think not in tokens:
            return None
        return tokens[tokens.index(self.end_think) + 1 :]

    def as_eos(self, live: Live, tokens: list[int]) -> list[int]:
        return [self.eos if t in live.stop_ids else t for t in tokens]

    def expected_row(self, live: Live, tokens: list[int]) -> np.ndarray:
        content = self.content(live, tokens)
        if content is None:
            return np.full(self.words, FULL, dtype=np.int32)
        m = replay(live.reference, self.as_eos(live, content))
        if m.is_terminated():
            return np.full(self.words, FULL, dtype=np.int32)
        row = np.zeros((1, self.words), dtype=np.int32)
        m.fill_next_token_bitmask(row, 0)
        bits = row[0].view(np.uint32)
        can_end = bool(bits[self.eos >> 5] >> (self.eos & 31) & 1)
        if not can_end and live.stop_ids - set(self.vocab.eos_ids):
            self.stats["stop_masked_rows"] += 1
        for t in live.stop_ids:  # the grammar ends on exactly the request's stop tokens
            if can_end:
                bits[t >> 5] |= np.uint32(1 << (t & 31))
            else:
                bits[t >> 5] &= ~np.uint32(1 << (t & 31))
        for t in set(self.vocab.eos_ids) - live.stop_ids if live.stop_ids else ():
            bits[t >> 5] &= ~np.uint32(1 << (t & 31))
        return row[0]

    def valid_prefix(self, live: Live, drafts: list[int]) -> int:
        """How many drafts vLLM must keep: reasoning tokens freely, then those the grammar
        accepts one by one (a replay), none after it terminated."""
        done = list(live.output)
        for n, t in enumerate(drafts):
            content = self.content(live, done)
            if content is not None:
                m = replay(live.reference, self.as_eos(live, content))
                if m.is_terminated() or not m.consume_token(self.as_eos(live, [t])[0]):
                    return n
            done.append(t)
        return len(drafts)

    # -- the model: tokens sampled from the rows -----------------------------------------

    def sample(self, row: np.ndarray, live: Live, reasoning: bool) -> int:
        if reasoning:  # thinking: text, and an end of thinking now and then
            if self.rng.random() < 0.2:
                return self.end_think
            return int(self.text_ids[self.rng.randrange(len(self.text_ids))])
        allowed = allowed_ids(row, self.vocab.size)
        assert len(allowed), f"{live.rid}: no token allowed"
        ends = [int(t) for t in allowed if int(t) in self.vocab.eos_ids or int(t) in live.stop_ids]
        if ends:
            return self.rng.choice(ends)
        closers = allowed[self.closing[allowed]]
        if len(closers) and self.rng.random() < 0.5:
            return int(closers[self.rng.randrange(len(closers))])
        return int(allowed[self.rng.randrange(len(allowed))])

    def propose(self, live: Live) -> list[int]:
        """The draft model: up to k tokens from the replayed masks, some refused ones."""
        drafts: list[int] = []
        done = list(live.output)
        for _ in range(self.k):
            if self.rng.random() < self.invalid_rate:
                drafts.append(self.rng.randrange(self.vocab.size))
                break
            row = self.expected_row(live, done)
            reasoning = self.content(live, done) is None
            if not reasoning and (row == FULL).all():
                break  # terminated
            t = self.sample(row, live, reasoning)
            drafts.append(t)
            done.append(t)
            if t == self.eos or t in live.stop_ids:
                break
        return drafts

    # -- the scheduler -------------------------------------------------------------------

    def step(self, running: list[Live]) -> None:
        from vllm.v1.core.sched.utils import check_stop

        self.steps += 1
        requests = {lv.rid: lv.request for lv in running}
        scheduled = {lv.rid: list(lv.drafts) for lv in running if lv.drafts}
        bitmask = self.manager.grammar_bitmask(requests, [lv.rid for lv in running], scheduled)
        assert bitmask is not None and bitmask.dtype == np.int32
        stride = self.k + 1
        for i, lv in enumerate(running):
            drafts = lv.drafts
            n_valid = drafts.index(-1) if -1 in drafts else len(drafts)
            rows = bitmask[i * stride : i * stride + len(drafts) + 1]
            out = list(lv.output)
            for j in range(len(drafts) + 1):
                want = (
                    self.expected_row(lv, out + drafts[:j])
                    if j <= n_valid
                    else np.full(self.words, FULL, dtype=np.int32)
                )
                assert_rows_equal(rows[j], want, f"{lv.rid} step {self.steps} position {j}")
                self.stats["rows"] += 1
                self.stats["constrained_rows"] += not (want == FULL).all()
                self.stats["reasoning_rows"] += j <= n_valid and self.content(lv, out + drafts[:j]) is None
            # The rejection sampler: keep drafts while the target agrees, then sample.
            new: list[int] = []
            for j in range(n_valid + 1):
                reasoning = self.content(lv, out + new) is None
                d = drafts[j] if j < n_valid else None
                if d is not None and self.rng.random() < self.accept_rate:
                    self.stats["drafts_kept"] += 1
                    new.append(d)
                    continue
                new.append(self.sample(rows[j], lv, reasoning))
                break
            stopped = False
            kept: list[int] = []
            for t in new:
                lv.request.append_output_token_ids(t)
                kept.append(t)
                if check_stop(lv.request, self.config.model_config.max_model_len):
                    stopped = True
                    break
            assert self.manager.accept_tokens(lv.request, kept), f"{lv.rid}: grammar refused {kept}"
            self.check_state(lv)
            if stopped:
                lv.finished = True
                lv.drafts = []
                continue
            assert len(lv.output) <= MAX_STEPS, f"{lv.rid}: no end after {MAX_STEPS} tokens"
            proposed = self.propose(lv)
            validated = self.manager.validate_tokens(lv.request, list(proposed))
            n = self.valid_prefix(lv, proposed)
            self.stats["drafts"] += len(proposed)
            self.stats["drafts_refused"] += len(proposed) - n
            assert validated == proposed[:n], f"{lv.rid}: validate_tokens {validated} != {proposed[:n]}"
            lv.drafts = validated + [-1] * (len(proposed) - len(validated)) if self.k else []

    def check_state(self, lv: Live) -> None:
        """The grammar object equals a replay of the content tokens."""
        grammar = lv.request.structured_output_request.grammar
        content = self.content(lv, lv.output)
        if content is None:
            assert grammar.matcher.num_tokens == 0, f"{lv.rid}: grammar advanced while reasoning"
            return
        ref = replay(lv.reference, self.as_eos(lv, content))
        assert grammar.is_terminated() == ref.is_terminated(), f"{lv.rid}: is_terminated"
        assert grammar.matcher.num_tokens == len(content), f"{lv.rid}: {grammar.matcher.num_tokens} != {len(content)}"

    def run(self, lives: list[Live], *, abort: dict[str, int] | None = None) -> None:
        """Steps until every request finished, at most `max_num_seqs` running at once (the
        rest wait their turn), a request in `abort` dropped at that step."""
        waiting = list(lives)
        running: list[Live] = []
        limit = self.config.scheduler_config.max_num_seqs
        abort = dict(abort or {})
        while waiting or running:
            while waiting and len(running) < limit:
                lv = waiting.pop(0)
                # WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR until the compile is done.
                grammar = self.wait_grammar(lv)
                assert isinstance(grammar, stencil.vllm.StencilGrammar), f"{lv.rid}: {grammar!r}"
                running.append(lv)
            for lv in list(running):
                if abort.get(lv.rid) == self.steps:
                    running.remove(lv)  # the scheduler frees it; the manager keeps nothing
            if not running:
                continue
            self.rng.shuffle(running)
            self.step(running)
            running = [lv for lv in running if not lv.finished]

    def text(self, lv: Live) -> str:
        """The structured part of the output: after `</think>`, without the stop token."""
        content = self.content(lv, lv.output) or []
        if content and (content[-1] == self.eos or content[-1] in lv.stop_ids):
            content = content[:-1]
        return decode(self.vocab, content)
