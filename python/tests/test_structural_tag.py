"""Structural tags: Stencil's accept/reject equals XGrammar's, text for text.

XGrammar (the Python package, 0.2.8: the version vLLM 0.33 pins) compiles each tag with
`GrammarCompiler.compile_structural_tag` and reads each text with
`GrammarMatcher.accept_string` (a matcher made with `terminate_without_stop_token=True`):
the text is accepted when `accept_string` returns True and `is_terminated()` is then True.
Stencil compiles the same tag with `Compiler.compile_structural_tag` over a byte-level
vocabulary and feeds the text one byte token at a time: accepted when every byte is
consumed and `is_accepting()`.

The tags and texts are written for this test. Definitional differences (listed in
STRUCTURAL_TAGS.md) are checked apart, in `DIFFERENCES`, each with both engines' verdicts:

* JSON Schema semantics: an object without `additionalProperties` may have other
  properties (XGrammar compiles structural tags in its strict mode, which forbids them).
* Whitespace between JSON tokens: runs of at most 2 by default (XGrammar: unbounded).
"""

import json

import pytest

import stencil

import xgrammar as xgr  # noqa: E402  (python/requirements-test.txt pins it)

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
    "additionalProperties": False,
}


def call(name, schema=WEATHER):
    return {
        "type": "tag",
        "begin": '<tool_call>{"name": "%s", "arguments": ' % name,
        "content": {"type": "json_schema", "json_schema": schema},
        "end": "}</tool_call>",
    }


THINK = {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"}

CASES = [
    ({"type": "const_string", "value": "yes"}, ["yes", "ye", "yes ", ""]),
    (
        {"type": "json_schema", "json_schema": WEATHER},
        ['{"city": "Oslo"}', '{"city":"Oslo","days":3}', '{"days": 3}', '{"city": 1}', '{"city": "a"} x'],
    ),
    ({"type": "regex", "pattern": "[a-c]+-[0-9]{2}"}, ["ab-12", "ab-1", "-12", "abc-99", "d-11"]),
    ({"type": "grammar", "grammar": 'root ::= "(" [xy]* ")"'}, ["()", "(xyx)", "(z)", "(x"]),
    ({"type": "any_text", "excludes": ["</a>", "<b"]}, ["", "hello", "x</a>", "a<b", "a<c<", "</ a>"]),
    ({"type": "any_text", "max_chars": 3}, ["abc", "abcd", "é€😀", "é€😀!"]),
    (THINK, ["<think></think>", "<think>a</thi</think>", "<think>a</think>b", "<think>a"]),
    ({"type": "tag", "begin": "<r>", "content": {"type": "any_text"}, "end": ["</r>", "</x>"]}, ["<r>a</x>", "<r>a</r>", "<r>a</y>"]),
    (
        {"type": "sequence", "elements": [THINK, {"type": "json_schema", "json_schema": {"type": "integer"}}]},
        ["<think>6*7</think>42", "<think>6*7</think>", "<think></think>-1", "42"],
    ),
    ({"type": "or", "elements": [{"type": "const_string", "value": "a"}, {"type": "regex", "pattern": "[0-9]+"}]}, ["a", "12", "a1", ""]),
    ({"type": "optional", "content": {"type": "const_string", "value": "x"}}, ["", "x", "xx"]),
    ({"type": "star", "content": {"type": "const_string", "value": "ab"}}, ["", "abab", "aba"]),
    ({"type": "plus", "content": {"type": "const_string", "value": "ab"}}, ["", "ab", "ababab"]),
    ({"type": "repeat", "min": 2, "max": 3, "content": {"type": "const_string", "value": "z"}}, ["z", "zz", "zzz", "zzzz"]),
    (
        {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [call("get_weather"), call("noop", {"type": "object", "properties": {}, "additionalProperties": False})]},
        [
            "",
            "Just text.",
            "Text <tool_c",
            'Hi <tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call> bye',
            '<tool_call>{"name": "noop", "arguments": {}}</tool_call><tool_call>{"name": "noop", "arguments": {}}</tool_call>',
            '<tool_call>{"name": "other", "arguments": {}}</tool_call>',
            '<tool_call>{"name": "get_weather", "arguments": {"town": "Oslo"}}</tool_call>',
            "<tool_call>",
        ],
    ),
    (
        {"type": "triggered_tags", "triggers": ["<tool_call>"], "at_least_one": True, "tags": [call("noop", {"type": "object", "properties": {}, "additionalProperties": False})]},
        ["", "text", '<tool_call>{"name": "noop", "arguments": {}}</tool_call>', '<tool_call>{"name": "noop", "arguments": {}}</tool_call> after'],
    ),
    (
        {"type": "triggered_tags", "triggers": ["<f="], "stop_after_first": True, "excludes": ["STOP"], "tags": [{"begin": "<f=a>", "content": {"type": "const_string", "value": "1"}, "end": "</f>"}]},
        ["x<f=a>1</f>", "x<f=a>1</f>y", "<f=a>1</f><f=a>1</f>", "STOP", "ST OP"],
    ),
    (
        {"type": "triggered_tags", "triggers": ["<f="], "stop_after_first": True, "at_least_one": True, "tags": [{"begin": "<f=a>", "content": {"type": "const_string", "value": "1"}, "end": "</f>"}, {"begin": "<f=b>", "content": {"type": "const_string", "value": "2"}, "end": "</f>"}]},
        ["<f=b>2</f>", "<f=a>2</f>", "x<f=a>1</f>", ""],
    ),
    (
        {"type": "sequence", "elements": [THINK, {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [call("get_weather")]}]},
        ['<think>hmm</think>ok <tool_call>{"name": "get_weather", "arguments": {"city": "x"}}</tool_call>', "<think>hmm</think>", "ok"],
    ),
    (
        {"type": "tag", "begin": "<t>", "content": {"type": "triggered_tags", "triggers": ["<f>"], "tags": [{"begin": "<f>", "content": {"type": "const_string", "value": "1"}, "end": "</f>"}]}, "end": "</t>"},
        ["<t>a<f>1</f>b</t>", "<t>a</t>", "<t>a</t>b</t>", "<t><f>1</f></t>"],
    ),
    (
        {"type": "tags_with_separator", "separator": ",", "tags": [{"begin": "<i>", "content": {"type": "json_schema", "json_schema": {"type": "integer"}}, "end": "</i>"}]},
        ["", "<i>1</i>", "<i>1</i>,<i>-2</i>", "<i>1</i><i>2</i>", "<i>1</i>,"],
    ),
    (
        {"type": "tags_with_separator", "separator": "", "at_least_one": True, "stop_after_first": True, "tags": [{"begin": "<i>", "content": {"type": "const_string", "value": "x"}, "end": "</i>"}]},
        ["", "<i>x</i>", "<i>x</i><i>x</i>"],
    ),
    (
        {"type": "json_schema", "style": "qwen_xml", "json_schema": {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}}, "required": ["city"]}},
        [
            "<parameter=city>Oslo</parameter>",
            "<parameter=city>\nSan Jose\n</parameter>\n<parameter=n>\n3\n</parameter>",
            "<parameter=city>a < b</parameter>",
            "<parameter=n>3</parameter>",
            "<parameter=city>a</parameter>b</parameter>",
            "<parameter=city>a</parameter><parameter=n>x</parameter>",
        ],
    ),
]

# (tag, text, Stencil's verdict, XGrammar's verdict): differences by definition.
DIFFERENCES = [
    # additionalProperties unspecified: JSON Schema allows other properties.
    ({"type": "json_schema", "json_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}, '{"a":1,"b":2}', True, False),
    # Whitespace runs: at most 2 in Stencil by default.
    ({"type": "json_schema", "json_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}, '{"a":    1}', False, True),
]


def stencil_compiler():
    tokens = [b"<eos>"] + [bytes([b]) for b in range(256)]
    vocab = stencil.Vocab.from_tokens(tokens, eos_ids=[0])
    return stencil.Compiler(vocab)


def xgrammar_compiler():
    vocab = ["<eos>"] + [chr(b) for b in range(1, 128)]
    info = xgr.TokenizerInfo(vocab, vocab_type=xgr.VocabType.RAW, stop_token_ids=[0])
    return xgr.GrammarCompiler(info)


def stencil_accepts(grammar, text):
    m = stencil.Matcher(grammar)
    return all(m.consume_token(1 + b) for b in text.encode()) and m.is_accepting()


def xgrammar_accepts(compiled, text):
    m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    return m.accept_string(text) and m.is_terminated()


def tag_of(fmt):
    return {"type": "structural_tag", "format": fmt}


def test_xgrammar_is_the_pinned_version():
    from importlib.metadata import version

    assert version("xgrammar") == "0.2.8"


def test_accept_reject_equals_xgrammar():
    sc, xc = stencil_compiler(), xgrammar_compiler()
    checked = 0
    for fmt, texts in CASES:
        tag = tag_of(fmt)
        sg = sc.compile_structural_tag(tag)
        xg = xc.compile_structural_tag(json.dumps(tag))
        for text in texts:
            ours, theirs = stencil_accepts(sg, text), xgrammar_accepts(xg, text)
            assert ours == theirs, f"{json.dumps(fmt)}\n{text!r}: Stencil {ours}, XGrammar {theirs}"
            checked += 1
    assert checked >= 90


def test_definitional_differences():
    sc, xc = stencil_compiler(), xgrammar_compiler()
    for fmt, text, ours, theirs in DIFFERENCES:
        tag = tag_of(fmt)
        assert stencil_accepts(sc.compile_structural_tag(tag), text) == ours, text
        assert xgrammar_accepts(xc.compile_structural_tag(json.dumps(tag)), text) == theirs, text


def test_legacy_form():
    sc, xc = stencil_compiler(), xgrammar_compiler()
    tag = {
        "type": "structural_tag",
        "structures": [{"begin": "<function=f>", "schema": WEATHER, "end": "</function>"}],
        "triggers": ["<function="],
    }
    # XGrammar takes the legacy form through its converter to a `triggered_tags`.
    items = [xgr.StructuralTagItem(begin=s["begin"], schema=s["schema"], end=s["end"]) for s in tag["structures"]]
    legacy = xgr.StructuralTag.from_legacy_structural_tag(items, tag["triggers"])
    sg, xg = sc.compile_structural_tag(tag), xc.compile_structural_tag(legacy.model_dump_json())
    for text in ['a <function=f>{"city": "x"}</function> b', "<function=g>{}</function>", "plain"]:
        assert stencil_accepts(sg, text) == xgrammar_accepts(xg, text), text


def test_unsupported_formats_are_located_errors():
    sc = stencil_compiler()
    for fmt, pointer in [
        ({"type": "any_tokens"}, "/format"),
        ({"type": "sequence", "elements": [{"type": "dispatch", "rules": [["<a>", {"type": "const_string", "value": "x"}]]}]}, "/format/elements/0"),
        ({"type": "json_schema", "json_schema": {}, "style": "glm_xml"}, "/format/style"),
        ({"type": "json_schema", "json_schema": {}, "any_order": True}, "/format/any_order"),
    ]:
        with pytest.raises(stencil.CompileError, match=pointer):
            sc.compile_structural_tag(tag_of(fmt))
