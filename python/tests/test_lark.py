"""stencil.lark: Lark grammars converted to GBNF. Each grammar is compiled over a byte
vocabulary and its language compared, string by string, with a Python regex of the same
language written by hand (and with the strings Lark's own reading accepts or refuses)."""

from __future__ import annotations

import re

import pytest

import stencil
from stencil.lark import LarkError, is_lark, lark_to_gbnf


@pytest.fixture(scope="module")
def byte_compiler() -> stencil.Compiler:
    tokens: list[bytes | None] = [bytes([b]) for b in range(256)] + [None]
    return stencil.Compiler(stencil.Vocab.from_tokens(tokens, eos_ids=[256]))


def accepts(compiler: stencil.Compiler, lark: str, text: str) -> bool:
    return compiler.compile_grammar(lark_to_gbnf(lark)).validate(text) == []


CASES = [
    # (Lark, the language as a Python regex, strings to try)
    ('start: "id=" NUM\nNUM: /[0-9]{2,4}/', r"id=[0-9]{2,4}", ["id=12", "id=1", "id=12345", "id=2024", "ID=12"]),
    (
        '?start: a\n?a: "x" b*\n  | "y"\n!b: "b"~2..3 | _c\n_c: "c" ["d"]',
        r"x(bbb?|cd?)*|y",
        ["x", "y", "xbb", "xb", "xbbbcd", "xc", "xcdbb", "yx", "xbbbb"],
    ),
    ('start: A+\nA: "a".."c" | "Z"', r"[a-cZ]+", ["abc", "Z", "d", "", "aZc"]),
    ('start: "Hi"i " " WORD\n%import common.WORD', r"[hH][iI] [a-zA-Z]+", ["hI abc", "HI x", "hi ", "hi a1"]),
    (
        'start: SIGNED_NUMBER ("," SIGNED_NUMBER)*\n%import common.SIGNED_NUMBER',
        r"[+-]?([0-9]+([eE][+-]?[0-9]+)?|([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)(,[+-]?([0-9]+([eE][+-]?[0-9]+)?|([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?))*",
        ["1", "-2.5e3,+.5", "1.", "e3", "1,,2", "3E-1"],
    ),
    (
        'start: "[" [NAME ("," NAME)*] "]"\nNAME: /[a-z]+/\n%import common.WS\n%ignore WS',
        r"\s*\[(\s*[a-z]+(\s*,\s*[a-z]+)*)?\s*\]\s*",
        ["[]", " [ a , bc ]\n", "[a b]", "[a,]", "[\ta]"],
    ),
    ('start: ESCAPED_STRING\n%import common.ESCAPED_STRING', r'"([^"\\\n]|\\[^\n])*"', ['"a"', '"a\\"b"', '"a', '"\\\\"', '"x"y"']),
    ("start: /(?i:ab)?c|\\d\\s\\w/", r"(?:[aA][bB])?c|[0-9][ \t\n\r\f\v][a-zA-Z0-9_]", ["abc", "ABc", "c", "1 x", "1  x", "Ac"]),
    ('start: /a.b/s | /[^x]\\D/', r"a(.|\n)b|[^x][^0-9]", ["a\nb", "azb", "yy", "x1", "y1"]),
    ('start: C_COMMENT\n%import common.C_COMMENT', r"/\*([^*]|\*+[^*/])*\*+/", ["/**/", "/* a * b **/", "/* */ */", "/*/"]),
    ("// a comment\nstart: x # another\nx: \"q\" -> alias_q", r"q", ["q", "x"]),
]


@pytest.mark.parametrize("lark,python_re,texts", CASES, ids=[c[0][:30] for c in CASES])
def test_language_equals_the_hand_written_regex(byte_compiler, lark, python_re, texts):
    rx = re.compile(python_re)
    for text in texts:
        assert accepts(byte_compiler, lark, text) == bool(rx.fullmatch(text)), (lark, text)


REFUSED = [
    ("start: foo", "foo is not defined at line 1, column 8"),
    ('start: "a" /^x/', "an anchor is not supported at line 1, column 12"),
    ('start: "a" /(?=x)y/', "a look-around is not supported at line 1"),
    ("start: x{a}\nx: \"a\"", "templates are not supported at line 1, column 8"),
    ('start "a"', "expected ':', found '\"a\"' at line 1, column 7"),
    ("%import foo.BAR\nstart: BAR", "only Lark's common library is available at line 1, column 9"),
    ("%import common.NOPE\nstart: NOPE", "no such terminal in Lark's common library at line 1"),
    ("%declare X\nstart: X", "%declare is not supported at line 1, column 1"),
    ('start: "a" )', "unexpected ')' at line 1, column 12"),
    ('x: "a"', "no `start` rule"),
    ('start: "a"\nstart: "b"', "start is defined twice at line 2, column 1"),
    ('start: "b".."a"', "a range needs two single characters in order at line 1, column 8"),
    ('start: "a" ~ 3..1', "bad repetition"),
    ('start: "a" @', "unexpected character '@' at line 1, column 12"),
    ("start: /a(/", "bad regex /a(/"),
]


@pytest.mark.parametrize("lark,message", REFUSED, ids=[r[1][:30] for r in REFUSED])
def test_refusals_are_located(lark, message):
    with pytest.raises(LarkError) as info:
        lark_to_gbnf(lark)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError) and info.value.line >= 1 and info.value.col >= 1


def test_rule_names_map_to_gbnf_names(byte_compiler):
    """Lark names with `_`, a rule named `root`, terminals and rules of one name in two
    cases: all distinct GBNF rules."""
    lark = 'start: root _x\nroot: "r"\n_x: X x\nX: "X"\nx: "x"'
    gbnf = lark_to_gbnf(lark)
    assert byte_compiler.compile_grammar(gbnf).validate("rXx") == []
    assert byte_compiler.compile_grammar(gbnf).validate("rxX") != []


def test_is_lark():
    assert is_lark('start: "a"')
    assert not is_lark('root ::= "a"')
    assert not is_lark('# a comment: x\nroot ::= "a" # start: x')
    assert not is_lark("   \n")


def test_module_example():
    """The example of stencil.lark's docstring, as printed there."""
    import stencil.lark as lark_module

    doc = lark_module.__doc__
    want = doc[doc.index("    root ::= start") : doc.index("\n\nWhat is read")]
    got = lark_to_gbnf('start: "id=" NUM\nNUM: /[0-9]{2,4}/')
    assert got.rstrip("\n") == "\n".join(line[4:] for line in want.split("\n"))
