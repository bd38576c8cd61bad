"""Stencil inside the real vLLM (the pinned release of python/requirements-vllm.txt): the
plugin entry point, vLLM's front-end validation, and its `StructuredOutputManager` driven
as its scheduler drives it (engines/vllm_driver.py), on CPU, with no model forward."""

from __future__ import annotations

import inspect
import json

import pytest

from stencil import vllm as sv

from .engine_model import END_THINK, MODEL_LOGITS, SECOND_EOS
from harness import (
    POINTS,
    RECORD,
    all_specs,
    assert_compact,
    choice_spec,
    json_spec,
    lark_spec,
    reference_grammar,
    regex_spec,
)
from .vllm_driver import VllmDriver

LARK_ID = lark_spec('start: "id=" NUM\nNUM: /[0-9]{2,4}/', 'root ::= "id=" [0-9]{2,4}', r"id=[0-9]{2,4}", "lark id")
LARK_SQL = lark_spec(
    """
?start: select_statement
?select_statement: "SELECT " column_list " FROM " table_name
?column_list: column_name ("," column_name)*
?table_name: identifier
?column_name: identifier
?identifier: /[a-z_][a-z0-9_]{0,6}/
""",
    'root ::= "SELECT " id ("," id)* " FROM " id\nid ::= [a-z_] [a-z0-9_]{0,6}\n',
    r"SELECT [a-z_][a-z0-9_]{0,6}(,[a-z_][a-z0-9_]{0,6})* FROM [a-z_][a-z0-9_]{0,6}",
    "lark sql",
)
LARK_IGNORE = lark_spec(
    """
start: "[" [pair ("," pair)*] "]"
pair: NAME ":" SIGNED_INT
NAME: /[a-z]{1,3}/
%import common.SIGNED_INT
%import common.WS_INLINE
%ignore WS_INLINE
""",
    'root ::= ws "[" (pair (ws "," pair)*)? ws "]" ws\n'
    'pair ::= ws [a-z]{1,3} ws ":" ws [+-]? [0-9]+\nws ::= [ \\t]*\n',
    r"[ \t]*\[([ \t]*[a-z]{1,3}[ \t]*:[ \t]*[+-]?[0-9]+([ \t]*,[ \t]*[a-z]{1,3}[ \t]*:[ \t]*[+-]?[0-9]+)*)?[ \t]*\][ \t]*",
    "lark %ignore",
)


def every_kind() -> list:
    return all_specs() + [LARK_ID, LARK_SQL, LARK_IGNORE]


def engine_config(model_dir, *, spec_tokens=0, reasoning_parser=None, disable_any_whitespace=False, max_num_seqs=8):
    from vllm.config import (
        DeviceConfig,
        ModelConfig,
        ParallelConfig,
        SchedulerConfig,
        SpeculativeConfig,
        StructuredOutputsConfig,
        VllmConfig,
    )

    mc = ModelConfig(model=str(model_dir), tokenizer=str(model_dir), dtype="float32", max_model_len=1024, seed=0)
    so = StructuredOutputsConfig(
        backend="guidance", reasoning_parser=reasoning_parser or "", disable_any_whitespace=disable_any_whitespace
    )
    sc = SchedulerConfig(max_num_seqs=max_num_seqs, max_num_batched_tokens=2048, max_model_len=1024, is_encoder_decoder=False)
    spec = None
    if spec_tokens:
        spec = SpeculativeConfig(
            method="ngram", num_speculative_tokens=spec_tokens, prompt_lookup_max=3, prompt_lookup_min=1,
            target_model_config=mc, target_parallel_config=ParallelConfig(),
        )
    return VllmConfig(model_config=mc, device_config=DeviceConfig(device="cpu"), structured_outputs_config=so,
                      scheduler_config=sc, speculative_config=spec)


@pytest.fixture(scope="module")
def spec_config(model_dir):
    """Speculative decoding (3 tokens per step) and DeepSeek-R1's reasoning parser."""
    return engine_config(model_dir, spec_tokens=3, reasoning_parser="deepseek_r1")


def test_plugin_entry_point_registers(spec_config, monkeypatch):
    """vLLM's own plugin loader runs the package's entry point; with STENCIL_VLLM=1
    (set by conftest_engines) the "guidance" name is Stencil's, in the engine core and in
    the front end."""
    import vllm.sampling_params as sp
    import vllm.v1.structured_output as so
    import vllm.v1.structured_output.backend_guidance as bg
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    assert so.GuidanceBackend is sv.StencilBackend and bg.GuidanceBackend is sv.StencilBackend
    assert bg.validate_guidance_grammar is sv.validate_stencil_grammar
    assert sp._get_llg_tokenizer is sv._front_end_tokenizer
    calls = []
    monkeypatch.setattr(sv, "register", lambda: calls.append(1))
    monkeypatch.delenv("STENCIL_VLLM")
    sv.plugin()
    assert calls == []  # installed but not enabled: vLLM unchanged
    monkeypatch.setenv("STENCIL_VLLM", "1")
    sv.plugin()
    assert calls == [1]


def test_every_kind_with_speculation_reasoning_stops_abort_and_a_failed_compile(spec_config, ref_compiler):
    """Eleven requests of every kind (two Lark grammars and one with %ignore), half of
    them reasoning first, one with a user stop token, one aborted mid-way, plus one whose
    compile fails in the engine core: the rest of the batch is unaffected, every row vLLM
    returns equals the replay's, every finished output validates."""
    driver = VllmDriver(spec_config, ref_compiler, seed=2024)
    specs = every_kind()
    comma = ref_compiler.vocab.size and next(
        t for t in range(ref_compiler.vocab.size) if ref_compiler.vocab.token_bytes(t) == b","
    )
    lives = []
    for i, spec in enumerate(specs):
        ref = reference_grammar(ref_compiler, spec, whitespace="flexible")
        stops = [comma] if spec.name == "record" else None
        lives.append(driver.submit(f"req-{i}", spec, ref, reasoning=i % 2 == 1, stop_token_ids=stops))
    for lv in lives:
        grammar = driver.wait_grammar(lv)
        assert isinstance(grammar, sv.StencilGrammar), f"{lv.rid}: {grammar!r}"
    assert isinstance(driver.manager.backend, sv.StencilBackend)
    assert driver.manager.backend.vocab_size == MODEL_LOGITS
    # The stop tokens vLLM passed: its EOS, the generation config's second EOS, the user's.
    assert SECOND_EOS in lives[0].stop_ids and comma in lives[0].stop_ids

    # A request that skipped the front end (e.g. from an API server without the plugin):
    # its compile fails in the engine core, and only it fails.
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams
    from vllm.v1.request import Request

    bad = SamplingParams(max_tokens=10, structured_outputs=StructuredOutputsParams(regex="a(b"))
    bad.structured_outputs._backend = "guidance"
    bad_req = Request("bad", [1, 2], bad, None)
    driver.manager.grammar_init(bad_req)
    from .vllm_driver import Live

    err = driver.wait_grammar(Live("bad", regex_spec("x"), bad_req, None, frozenset(), False))
    assert isinstance(err, ValueError) and "Stencil could not compile the regex request" in str(err)

    abort_rid = lives[2].rid
    driver.run(lives, abort={abort_rid: 3})
    stats = driver.stats
    assert stats["constrained_rows"] > 100 and stats["reasoning_rows"] > 5, stats
    assert stats["drafts_kept"] > 20 and stats["drafts_refused"] > 5, stats
    assert stats["stop_masked_rows"] > 5, stats  # the comma masked while the record is open
    speculated = 0
    for lv in lives:
        if lv.rid == abort_rid:
            assert not lv.finished
            continue
        assert lv.finished, lv.rid
        assert lv.request.structured_output_request.grammar.is_terminated(), lv.rid
        lv.spec.check(driver.text(lv))
        if lv.reasoning:
            assert END_THINK in driver.processor.tokenizer.convert_ids_to_tokens(lv.output)
        speculated += len(lv.output) > 0
    assert speculated >= len(lives) - 1


@pytest.mark.parametrize("seed", [11, 12])
def test_speculation_many_seeds(spec_config, ref_compiler, seed):
    """More draft/verify/rollback sequences (all drafts scored), no reasoning."""
    driver = VllmDriver(spec_config, ref_compiler, seed=seed, accept_rate=0.8, invalid_rate=0.4)
    lives = [
        driver.submit(f"s{seed}-{i}", spec, reference_grammar(ref_compiler, spec, whitespace="flexible"))
        for i, spec in enumerate(every_kind())
    ]
    driver.run(lives)
    for lv in lives:
        lv.spec.check(driver.text(lv))
    assert driver.stats["drafts_kept"] > 20 and driver.stats["drafts_refused"] > 5, driver.stats


def test_compact_whitespace_without_speculation(model_dir, ref_compiler):
    """disable_any_whitespace: masks are the compact grammar's, outputs compact."""
    config = engine_config(model_dir, disable_any_whitespace=True)
    driver = VllmDriver(config, ref_compiler, seed=5, whitespace="compact")
    specs = [json_spec(RECORD, "record"), json_spec(POINTS, "points"), choice_spec(["a", "bc"])]
    lives = [
        driver.submit(f"c-{i}", s, reference_grammar(ref_compiler, s, whitespace="compact"))
        for i, s in enumerate(specs)
    ]
    driver.run(lives)
    for lv in lives:
        text = driver.text(lv)
        lv.spec.check(text)
        assert_compact(text)


# -- the front end ------------------------------------------------------------------------

REFUSED = [
    ({"json": {"type": "frobnicate"}}, "`type` at #"),
    ({"regex": "a(b"}, "regex"),
    ({"grammar": "root ::= missing"}, "line 1"),
    ({"grammar": 'start: "a" /^x/'}, "line 1, column 12"),
    ({"grammar": 'start: "a"\nfoo: bar'}, "line 2, column 6"),
    ({"choice": []}, "empty"),
]


@pytest.mark.parametrize("params,message", REFUSED, ids=[str(p) for p, _ in REFUSED])
def test_front_end_refuses_with_stencils_error(spec_config, params, message):
    from vllm import SamplingParams
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import StructuredOutputsParams
    from vllm.v1.engine.input_processor import InputProcessor

    proc = InputProcessor(spec_config)
    sp_ = SamplingParams(max_tokens=5, structured_outputs=StructuredOutputsParams(**params))
    with pytest.raises(VLLMValidationError, match=message) as info:
        proc.process_inputs("r", {"prompt_token_ids": [1, 2]}, sp_, ("generate",))
    if params.get("choice") != []:
        assert "Stencil" in str(info.value)


# Requests llguidance 1.7 (vLLM's own guidance check) refuses and Stencil compiles: once
# registered, the front end must let them through to Stencil's backend.
LLGUIDANCE_REFUSES = [
    {"json": {"type": "array", "uniqueItems": True, "items": {"type": "integer"}}},
    {"json": {"not": {"type": "string"}}},
    {"grammar": 'root ::= !<[5]> "a"\n'},  # any token but id 5, then "a"
    {"grammar": 'root ::= <think> "x"\n'},  # a special token by name: the model's vocabulary
]


@pytest.mark.parametrize("params", LLGUIDANCE_REFUSES, ids=[str(p) for p in LLGUIDANCE_REFUSES])
def test_front_end_accepts_what_stencil_accepts(spec_config, params, hf_tokenizer):
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams
    from vllm.v1.engine.input_processor import InputProcessor
    from vllm.v1.request import Request
    from vllm.v1.structured_output import StructuredOutputManager
    from vllm.v1.structured_output.backend_guidance import serialize_guidance_grammar
    from vllm.v1.structured_output.request import get_structured_output_key

    import llguidance

    sp_ = SamplingParams(max_tokens=5, structured_outputs=StructuredOutputsParams(**params))
    kind, spec = get_structured_output_key(sp_.structured_outputs)
    try:  # the check vLLM would run without Stencil
        refused = bool(llguidance.LLMatcher.validate_grammar(serialize_guidance_grammar(kind, spec), None))
    except (ValueError, KeyError, TypeError):
        refused = True
    assert refused, "pick a request llguidance refuses: this one proves nothing"
    ecr = InputProcessor(spec_config).process_inputs("ok", {"prompt_token_ids": [1, 2]}, sp_, ("generate",))
    req = Request.from_engine_core_request(ecr, None)
    manager = StructuredOutputManager(spec_config)
    manager.grammar_init(req)
    while not req.structured_output_request.is_grammar_ready:
        pass
    assert isinstance(req.structured_output_request.grammar, sv.StencilGrammar)


# -- the classes against vLLM's base classes ----------------------------------------------


@pytest.mark.parametrize("ours,base_name", [(sv.StencilGrammar, "StructuredOutputGrammar"), (sv.StencilBackend, "StructuredOutputBackend")])
def test_every_abstract_method_is_implemented_with_the_base_parameters(ours, base_name):
    """Read from the installed vLLM: each abstract method takes the base's parameters
    (by position; the index of fill_bitmask is named differently across vLLM's own
    backends), so the manager's calls reach ours unchanged."""
    import vllm.v1.structured_output.backend_types as bt

    base = getattr(bt, base_name)
    assert issubclass(ours, base)
    assert not inspect.isabstract(ours)
    for name in base.__abstractmethods__:
        want = list(inspect.signature(getattr(base, name)).parameters.values())
        got = list(inspect.signature(getattr(ours, name)).parameters.values())
        assert len(got) >= len(want), (name, got, want)
        for w, g in zip(want, got):
            if w.default is not inspect.Parameter.empty:
                assert g.default == w.default and g.name == w.name, (name, g, w)
    assert [m.name for m in sv.StructuredOutputOptions] == [m.name for m in bt.StructuredOutputOptions]
    assert sv.StructuredOutputOptions is bt.StructuredOutputOptions


def test_structural_tags_pass_the_front_end_and_bad_ones_fail_with_stencils_error(spec_config):
    from vllm import SamplingParams
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import StructuredOutputsParams
    from vllm.v1.engine.input_processor import InputProcessor

    legacy = json.dumps({"structures": [{"begin": "<f>", "schema": {}, "end": "</f>"}], "triggers": ["<f"]})
    sp_ = SamplingParams(max_tokens=5, structured_outputs=StructuredOutputsParams(structural_tag=legacy))
    InputProcessor(spec_config).process_inputs("t", {"prompt_token_ids": [1, 2]}, sp_, ("generate",))
    bad = json.dumps({"type": "structural_tag", "format": {"type": "any_tokens"}})
    sp_ = SamplingParams(max_tokens=5, structured_outputs=StructuredOutputsParams(structural_tag=bad))
    with pytest.raises(VLLMValidationError, match="any_tokens"):
        InputProcessor(spec_config).process_inputs("t", {"prompt_token_ids": [1, 2]}, sp_, ("generate",))


def test_front_end_refuses_tokenizers_stencil_cannot_read(spec_config, hf_tokenizer):
    """A slow or Mistral tokenizer is refused in the front end (vLLM asks the registered
    backend), not in the engine core."""
    from vllm import SamplingParams
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import StructuredOutputsParams

    class Slow:
        is_fast = False

    sp_ = SamplingParams(max_tokens=5, structured_outputs=StructuredOutputsParams(regex="[0-9]"))
    with pytest.raises(VLLMValidationError, match="fast"):
        sp_._validate_structured_outputs(spec_config.model_config, spec_config.structured_outputs_config, Slow())
    assert sv.StencilBackend.is_tokenizer_supported(hf_tokenizer)


def test_a_rollback_one_token_short_fails_the_driver(spec_config, ref_compiler, monkeypatch):
    """The checks can fail: with a rollback that undoes one token too few (a planted bug),
    the speculative run stops on a mismatch."""
    original = sv.StencilGrammar.rollback

    def short(self, num_tokens):
        original(self, num_tokens - 1)

    monkeypatch.setattr(sv.StencilGrammar, "rollback", short)
    driver = VllmDriver(spec_config, ref_compiler, seed=11, accept_rate=0.8, invalid_rate=0.4)
    lives = [
        driver.submit(f"short-{i}", spec, reference_grammar(ref_compiler, spec, whitespace="flexible"))
        for i, spec in enumerate(every_kind()[:4])
    ]
    with pytest.raises(AssertionError):
        driver.run(lives)
