"""SGLang's grammar machinery (the pinned release), driven as its scheduler drives it, with
Stencil registered as the "stencil" grammar backend.

What runs is SGLang's own code: `register_grammar_backend` and `create_grammar_backend`
(under a published `ServerArgs(grammar_backend="stencil")`), the scheduler's
`GrammarManager` (`process_req_with_grammar`: cache lookup or compile future;
`get_ready_grammar_requests`: the result, the copy put in the cache, an invalid grammar
aborting its request), real `Req` objects and their finish checks, per decode step
`SamplingBatchInfo.update_regex_vocab_mask` and `GrammarMask.apply` on the logits, the
result processor's `_accept_grammar_tokens`, and EAGLE's `generate_token_bitmask` over a
draft tree (accept, fill, roll back per node).

What is not SGLang's: the scheduler object the manager reads (its model config and its
single-rank groups, a `SimpleNamespace`), the batch info's fields the mask update reads
(also a namespace: a real `SamplingBatchInfo` is built from a GPU batch), and the model
(tokens come from the masks). Every row is compared with a fresh Stencil replay.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

import stencil
from harness import MAX_STEPS, Spec, alternatives_regex, allowed_ids, assert_rows_equal, closing_tokens, decode, mask_row, replay


def sglang_params(spec: Spec) -> dict[str, Any]:
    """The request's `SamplingParams` fields (SGLang's OpenAI layer turns `choice` into a
    regex of the alternatives and `json_object` into an object schema)."""
    if spec.kind == "json":
        return {"json_schema": spec.spec}
    if spec.kind == "json_object":
        return {"json_schema": json.dumps({"type": "object"})}
    if spec.kind == "regex":
        return {"regex": spec.spec}
    if spec.kind == "grammar":
        return {"ebnf": spec.spec}
    if spec.kind == "choice":
        return {"regex": alternatives_regex(json.loads(spec.spec))}
    if spec.kind == "structural_tag":
        return {"structural_tag": spec.spec}
    raise ValueError(spec.kind)


@dataclass
class SLive:
    rid: str
    spec: Spec
    req: Any  # sglang.srt.managers.schedule_batch.Req
    reference: stencil.Grammar


class SglangDriver:
    def __init__(self, tokenizer: Any, ref_compiler: stencil.Compiler, *, seed: int, vocab_size: int,
                 disable_any_whitespace: bool = False):
        from sglang.srt.constrained.grammar_manager import GrammarManager
        from sglang.srt.runtime_context import get_context, get_parallel

        import stencil.sglang as sg

        sg.register()
        self._override = get_context().override_server_args(
            grammar_backend="stencil", constrained_json_disable_any_whitespace=disable_any_whitespace
        )
        server_args = self._override.install()
        get_parallel().override_permanently(pp_rank=0, pp_size=1, tp_rank=0, tp_size=1)
        eos = {tokenizer.eos_token_id}
        self.scheduler = SimpleNamespace(
            server_args=server_args,
            tokenizer=tokenizer,
            model_config=SimpleNamespace(vocab_size=vocab_size, hf_eos_token_id=eos, think_end_ids=None),
            dp_tp_cpu_group=None,
            dp_tp_group=SimpleNamespace(world_size=1, first_rank=0, is_first_rank=True),
            pp_group=None,
        )
        self.manager = GrammarManager(self.scheduler)
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.compiler = ref_compiler
        self.vocab = ref_compiler.vocab
        self.words = stencil.bitmask_words(self.vocab.size)
        self.eos = set(self.vocab.eos_ids)
        self.rng = random.Random(seed)
        self.gen = torch.Generator().manual_seed(seed)
        self.closing = closing_tokens(self.vocab)
        self.stats = {"rows": 0, "plain_rows": 0, "tree_nodes": 0, "tree_refused": 0}

    def close(self) -> None:
        self._override.restore()

    # -- admission -----------------------------------------------------------------------

    def make_req(self, rid: str, spec: Spec) -> Any:
        from sglang.srt.managers.schedule_batch import Req
        from sglang.srt.sampling.sampling_params import SamplingParams

        params = SamplingParams(max_new_tokens=MAX_STEPS + 50, **sglang_params(spec))
        params.normalize(self.tokenizer)
        return Req(rid, "", [1, 2, 3], params, eos_token_ids=self.scheduler.model_config.hf_eos_token_id,
                   vocab_size=self.vocab_size)

    def admit(self, specs: list[tuple[str, Spec, stencil.Grammar | None]]) -> list[SLive]:
        """process_req_with_grammar for each, then get_ready_grammar_requests until all are
        back (the scheduler's grammar queue)."""
        lives = [SLive(rid, spec, self.make_req(rid, spec), ref) for rid, spec, ref in specs]
        queued = {lv.rid for lv in lives if self.manager.process_req_with_grammar(lv.req)}
        for _ in range(10_000):
            if not queued:
                break
            for req in self.manager.get_ready_grammar_requests():
                queued.discard(req.rid)
        assert not queued, f"grammars never ready: {queued}"
        return lives

    # -- decoding ------------------------------------------------------------------------

    def step(self, batch: list[SLive | None]) -> None:
        """One decode step; `None` is a request without a grammar."""
        from sglang.srt.managers.scheduler_components.batch_result_processor import SchedulerBatchResultProcessor
        from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo

        info = SimpleNamespace(
            grammars=[lv.req.grammar if lv else None for lv in batch],
            vocab_size=self.vocab_size,
            temperatures=torch.ones((len(batch), 1)),
            device="cpu",
            grammar_mask=None,
        )
        SamplingBatchInfo.update_regex_vocab_mask(info)
        rows = info.grammar_mask.vocab_mask.numpy().copy()
        logits = torch.randn((len(batch), self.vocab_size), generator=self.gen)
        for t in self.eos:
            logits[:, t] += 8.0
        if self.rng.random() < 0.5:
            logits[:, : self.vocab.size][:, torch.from_numpy(self.closing)] += 2.0
        info.grammar_mask.apply(logits)
        sampled = logits.argmax(dim=-1).tolist()
        for i, lv in enumerate(batch):
            self.stats["rows"] += 1
            if lv is None:
                self.stats["plain_rows"] += 1
                assert bool((rows[i] == -1).all()), "a row without a grammar must allow every token"
                assert bool(torch.isfinite(logits[i, : self.vocab.size]).all())
                continue
            tokens = list(lv.req.output_ids)
            want = mask_row(replay(lv.reference, tokens), self.words)
            assert_rows_equal(rows[i], want, f"{lv.rid} token {len(tokens)}")
            token = int(sampled[i])
            assert token in set(allowed_ids(want, self.vocab.size).tolist()), f"{lv.rid}: sampled {token}"
            lv.req.output_ids.append(token)
            lv.req.update_finish_state(1)
            SchedulerBatchResultProcessor._accept_grammar_tokens(None, lv.req, token)
            lv.req.grammar.finished = lv.req.finished()
            self.check_state(lv)
            assert len(lv.req.output_ids) <= MAX_STEPS, f"{lv.rid}: no end"

    def check_state(self, lv: SLive) -> None:
        g = lv.req.grammar
        tokens = list(lv.req.output_ids)
        ref = replay(lv.reference, tokens)
        assert g.is_terminated() == ref.is_terminated(), f"{lv.rid}: is_terminated"
        assert g.matcher.num_tokens == len(tokens) and g.accepted_tokens == tokens, f"{lv.rid}: state"
        assert lv.req.finished() == ref.is_terminated(), f"{lv.rid}: finished {lv.req.finished()}"

    def run(self, lives: list[SLive], *, plain_rows: bool = True) -> None:
        running = list(lives)
        while running:
            batch: list[SLive | None] = list(running)
            self.rng.shuffle(batch)
            if plain_rows:
                batch.insert(self.rng.randrange(len(batch) + 1), None)
            self.step(batch)
            running = [lv for lv in running if not lv.req.finished()]

    # -- EAGLE ---------------------------------------------------------------------------

    def draft_tree(self, lv: SLive, n_nodes: int) -> tuple[list[int], list[int], list[int]]:
        """A draft tree in EAGLE's layout: node 0 is the last verified token; each node has
        a first child and a next sibling (-1 when none). Tokens follow the replayed masks,
        with refused ones mixed in."""
        tokens = [lv.req.output_ids[-1] if lv.req.output_ids else 0]
        paths: list[list[int]] = [[]]
        next_token = [-1]
        next_sibling = [-1]
        while len(tokens) < n_nodes:
            parent = self.rng.randrange(len(tokens))
            path = paths[parent]
            m = replay(lv.reference, list(lv.req.output_ids))
            if not all(not m.is_terminated() and m.consume_token(t) for t in path) or m.is_terminated():
                continue  # below a refused or final token: the traversal never goes there
            allowed = allowed_ids(mask_row(m, self.words), self.vocab.size)
            if self.rng.random() < 0.25:
                t = self.rng.randrange(self.vocab.size)
            else:
                t = int(allowed[self.rng.randrange(len(allowed))])
            node = len(tokens)
            tokens.append(t)
            paths.append(path + [t])
            next_token.append(-1)
            next_sibling.append(-1)
            if next_token[parent] == -1:
                next_token[parent] = node
            else:
                c = next_token[parent]
                while next_sibling[c] != -1:
                    c = next_sibling[c]
                next_sibling[c] = node
        self._paths = paths
        return tokens, next_token, next_sibling

    def eagle_step(self, lv: SLive, n_nodes: int) -> None:
        """EAGLE's generate_token_bitmask over a draft tree: a node's row is the mask after
        its path, for every node whose path the grammar accepts (the others' rows are left
        as allocated); the grammar is back where it was."""
        from sglang.srt.speculative.spec_utils import generate_token_bitmask

        tokens, next_token, next_sibling = self.draft_tree(lv, n_nodes)
        bitmask, grammar = generate_token_bitmask(
            [lv.req], torch.tensor([next_token]), torch.tensor([next_sibling]), torch.tensor([tokens]), self.vocab_size
        )
        assert grammar is lv.req.grammar
        self.check_state(lv)
        done = list(lv.req.output_ids)
        for node, path in enumerate(self._paths):
            self.stats["tree_nodes"] += 1
            m = replay(lv.reference, done)
            # Visited and accepted: each token of the path allowed after the ones before.
            ok = all(not m.is_terminated() and m.consume_token(t) for t in path)
            if not ok:
                self.stats["tree_refused"] += 1
                continue
            want = np.full(self.words, -1, dtype=np.int32) if m.is_terminated() else mask_row(m, self.words)
            assert_rows_equal(bitmask[node].numpy(), want, f"{lv.rid} tree node {node} path {path}")

    def text(self, lv: SLive) -> str:
        return decode(self.vocab, [t for t in lv.req.output_ids if t not in self.eos])
