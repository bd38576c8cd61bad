"""Stencil inside the real SGLang (the pinned release of python/requirements-sglang.txt):
its backend registry, grammar manager, mask update and EAGLE tree masks
(engines/sglang_driver.py), on CPU, with no model forward."""

from __future__ import annotations

import json

import pytest

from stencil import sglang as sg

from .engine_model import MODEL_LOGITS
from harness import RECORD, POINTS, all_specs, assert_compact, json_spec, reference_grammar, regex_spec
from .sglang_driver import SglangDriver


@pytest.fixture()
def driver(hf_tokenizer, sglang_ref_compiler):
    d = SglangDriver(hf_tokenizer, sglang_ref_compiler, seed=77, vocab_size=MODEL_LOGITS)
    yield d
    d.close()


def specs_with_refs(compiler, specs, whitespace="flexible"):
    return [(f"r{i}", s, reference_grammar(compiler, s, whitespace=whitespace)) for i, s in enumerate(specs)]


def test_registered_backend_is_created_by_sglang(driver):
    """register() put "stencil" in SGLang's registry and its --grammar-backend choices;
    SGLang's create_grammar_backend built Stencil's backend with the model's EOS."""
    from sglang.srt import server_args as sa
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY, BaseGrammarBackend

    assert GRAMMAR_BACKEND_REGISTRY["stencil"] is sg.create_backend
    assert "stencil" in sa.GRAMMAR_BACKEND_CHOICES
    backend = driver.manager.grammar_backend
    assert isinstance(backend, sg.StencilGrammarBackend) and isinstance(backend, BaseGrammarBackend)
    assert backend.vocab_size == MODEL_LOGITS
    assert sg.HAVE_SGLANG and issubclass(sg.StencilGrammar, sg._sgl.BaseGrammarObject)


def test_batch_of_every_kind_with_plain_rows_and_the_cache(driver, sglang_ref_compiler):
    """Every request kind at once plus a repeated schema (a cache hit: a copy of the
    cached grammar), in batches holding a request without a grammar: every row SGLang
    builds equals the replay's, outputs validate, finished requests stop."""
    specs = all_specs() + [json_spec(RECORD, "record again")]
    lives = driver.admit(specs_with_refs(sglang_ref_compiler, specs[:-1]))
    again = driver.admit(specs_with_refs(sglang_ref_compiler, specs[-1:]))
    assert again[0].req.grammar is not lives[0].req.grammar  # copied out of the cache
    assert ("json", specs[0].spec) in driver.manager.grammar_backend.cache
    lives += again
    for lv in lives:
        assert isinstance(lv.req.grammar, sg.StencilGrammar), (lv.rid, lv.req.grammar)
    driver.run(lives)
    for lv in lives:
        assert lv.req.finished() and lv.req.grammar.is_terminated()
        lv.spec.check(driver.text(lv))
    assert driver.stats["plain_rows"] > 5


def test_invalid_grammar_aborts_only_its_request(driver, sglang_ref_compiler):
    """A spec Stencil refuses: SGLang's manager aborts that request with Stencil's
    message (also when the refusal comes from the cache); the others run."""
    good = regex_spec(r"[0-9]{2}")
    bad = regex_spec("x")
    bad.spec = "a(b"
    lives = driver.admit([("ok", good, reference_grammar(sglang_ref_compiler, good, whitespace="flexible")), ("bad", bad, None)])
    bad_req = lives[1].req
    assert bad_req.finished() or bad_req.to_finish is not None
    reason = bad_req.to_finish or bad_req.finished_reason
    assert "Stencil could not compile the regex" in str(reason.message if hasattr(reason, "message") else reason)
    again = driver.admit([("bad2", bad, None)])[0].req  # cached InvalidGrammarObject
    reason = again.to_finish or again.finished_reason
    assert "Stencil could not compile the regex" in str(getattr(reason, "message", reason))
    driver.run([lives[0]])
    lives[0].spec.check(driver.text(lives[0]))


def test_an_unsupported_structural_tag_aborts_its_request_with_stencils_error(driver):
    tag = json.dumps({"type": "structural_tag", "format": {"type": "any_tokens"}})
    req = driver.make_req("tag", regex_spec("x"))
    req.sampling_params.regex = None
    req.sampling_params.structural_tag = tag
    driver.manager.process_req_with_grammar(req)
    for _ in range(1000):
        if req in driver.manager.get_ready_grammar_requests():
            break
    reason = req.to_finish or req.finished_reason
    assert "any_tokens" in str(getattr(reason, "message", reason))


@pytest.mark.parametrize("seed", [3, 4])
def test_eagle_draft_trees(hf_tokenizer, sglang_ref_compiler, seed):
    """EAGLE's generate_token_bitmask over random draft trees (some tokens refused) at
    every step of each request: the row of every accepted node equals the replay's after
    its path; the grammar is left where it was; then one token is decoded."""
    d = SglangDriver(hf_tokenizer, sglang_ref_compiler, seed=seed, vocab_size=MODEL_LOGITS)
    try:
        lives = d.admit(specs_with_refs(sglang_ref_compiler, all_specs()))
        for lv in lives:
            while not lv.req.finished():
                d.eagle_step(lv, n_nodes=8)
                d.step([lv])
            lv.spec.check(d.text(lv))
        assert d.stats["tree_nodes"] > 100 and d.stats["tree_refused"] > 10, d.stats
    finally:
        d.close()


def test_compact_whitespace(hf_tokenizer, sglang_ref_compiler):
    d = SglangDriver(hf_tokenizer, sglang_ref_compiler, seed=9, vocab_size=MODEL_LOGITS, disable_any_whitespace=True)
    try:
        specs = [json_spec(RECORD, "record"), json_spec(POINTS, "points")]
        lives = d.admit(specs_with_refs(sglang_ref_compiler, specs, whitespace="compact"))
        d.run(lives)
        for lv in lives:
            text = d.text(lv)
            lv.spec.check(text)
            assert_compact(text)
    finally:
        d.close()


def test_every_base_method_the_scheduler_calls_is_overridden():
    """Read from the installed SGLang: the grammar object overrides each method of
    BaseGrammarObject that raises NotImplementedError there, with the same parameters."""
    import inspect

    base = sg._sgl.BaseGrammarObject
    for name, fn in vars(base).items():
        fn = fn.__func__ if isinstance(fn, staticmethod) else fn
        if not callable(fn) or name.startswith("__"):
            continue
        if "NotImplementedError" not in inspect.getsource(fn):
            continue
        if name == "reset_vocab_mask":  # only for backends with a reusable mask buffer
            continue
        ours = inspect.getattr_static(sg.StencilGrammar, name)
        assert ours is not inspect.getattr_static(base, name), name
        ours_fn = ours.__func__ if isinstance(ours, staticmethod) else ours
        assert list(inspect.signature(ours_fn).parameters) == list(inspect.signature(fn).parameters), name


def test_a_custom_backend_is_not_wrapped_for_reasoning(hf_tokenizer, sglang_ref_compiler):
    """SGLang 0.5.23 returns a registered backend before it wraps backends in
    ReasonerGrammarBackend: with a reasoning parser, Stencil's backend constrains from the
    first token (python/README.md says so; this fails when SGLang changes it)."""
    from sglang.srt.constrained.base_grammar_backend import create_grammar_backend
    from sglang.srt.runtime_context import get_context

    sg.register()
    override = get_context().override_server_args(grammar_backend="stencil", reasoning_parser="deepseek-r1")
    server_args = override.install()
    try:
        end = hf_tokenizer.convert_tokens_to_ids("</think>")
        backend = create_grammar_backend(server_args, hf_tokenizer, MODEL_LOGITS, {2}, think_end_ids=[end])
        assert type(backend) is sg.StencilGrammarBackend
    finally:
        override.restore()


def test_the_server_entry_point_offers_the_stencil_backend():
    """`python -m stencil.sglang` registers the backend and hands its arguments to
    SGLang's server: its --help lists "stencil" among the grammar backends."""
    import os
    import re
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "stencil.sglang", "--help"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    choices = re.search(r"--grammar-backend \{([^}]*)\}", out.stdout)
    assert choices and "stencil" in choices.group(1).split(","), out.stdout[:2000]
