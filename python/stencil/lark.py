"""Lark grammars (the syntax vLLM users send as `grammar`) converted to GBNF.

vLLM's `grammar` request takes either GBNF (`root ::= ...`) or Lark (`start: ...`); a
grammar with no `::=` on any line is Lark (`is_lark`, vLLM's own test). `lark_to_gbnf`
turns a Lark grammar into a GBNF grammar with the same language, read character by
character:

    >>> print(lark_to_gbnf('start: "id=" NUM\\nNUM: /[0-9]{2,4}/'))
    root ::= start
    start ::= "id=" NUM
    NUM ::= (([0-9]){2,4})

What is read: rules (`name:`, with the `?`, `!` and `_` prefixes and `.N` priorities, which
only shape Lark's trees), terminals (`NAME:`), alternatives (`|`, also at the start of a
continuation line), groups, `[optional]`, `?`, `*`, `+`, `~ n`, `~ n..m`, aliases
(`-> name`), strings (`"..."`, `"..."i`), ranges (`"a".."z"`), regular expressions
(`/.../` with the flags `i`, `s`, `x`, `m`, `u`; Python's syntax, translated to GBNF),
`%import common.NAME` (and `common (A, B)`, `-> ALIAS`) for the terminals of Lark's
`common` library, and `%ignore` (the ignored terminals may appear before every terminal of
a rule and at the end). The start rule is `start`.

Differences from Lark, which lexes before it parses: the result is character-level (no
longest-match lexer, no terminal priorities), `\\d`, `\\w` and `\\s` are ASCII classes, and
a regex may not use anchors, look-arounds or back-references. Templates, `%declare`,
`%override`, `%extend` and imports of other libraries are refused. Every refusal is a
`LarkError` (a ValueError) that names the line and column.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

try:  # Python 3.11+
    import re._constants as _sre  # type: ignore[import-not-found]
    import re._parser as _sre_parse  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

__all__ = ["LarkError", "is_lark", "lark_to_gbnf"]


class LarkError(ValueError):
    """A Lark grammar that cannot be converted; `line` and `col` are 1-based."""

    def __init__(self, message: str, line: int, col: int):
        super().__init__(f"Lark grammar: {message} at line {line}, column {col}")
        self.line = line
        self.col = col


def is_lark(grammar: str) -> bool:
    """True when no line of `grammar` (comments removed) defines a GBNF rule (`::=`)."""
    for line in grammar.split("\n"):
        line = re.sub(r"(#|//).*$", "", line).strip()
        if "::=" in line:
            return False
    return bool(grammar.strip())


# -- lexing -------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\f\r]+|\\\n)
  | (?P<comment>//[^\n]*|\#[^\n]*)
  | (?P<nl>\n)
  | (?P<string>"(?:\\.|[^"\\\n])*"i?)
  | (?P<regex>/(?!/)(?:\\.|[^/\\\n])+/[imsxlu]*)
  | (?P<directive>%[a-z]+)
  | (?P<name>[?!]?[_a-zA-Z][_a-zA-Z0-9]*(?:\.[_a-zA-Z][_a-zA-Z0-9]*)*)
  | (?P<number>-?[0-9]+)
  | (?P<op>->|\.\.|[:|()\[\]?*+~,{}.])
    """,
    re.VERBOSE,
)


@dataclass
class _Tok:
    kind: str
    text: str
    line: int
    col: int


def _lex(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos, line, line_start = 0, 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise LarkError(f"unexpected character {text[pos]!r}", line, pos - line_start + 1)
        kind = m.lastgroup or ""
        if kind not in ("ws", "comment"):
            toks.append(_Tok(kind, m.group(), line, pos - line_start + 1))
        for i, c in enumerate(m.group()):
            if c == "\n":
                line, line_start = line + 1, pos + i + 1
        pos = m.end()
    toks.append(_Tok("nl", "", line, pos - line_start + 1))
    return toks


# -- parsing ------------------------------------------------------------------------------
# An expression is a nested tuple:
#   ("alt", [seq, ...]) / ("seq", [expr, ...]) / ("rep", expr, min, max|None)
#   ("name", name, tok) / ("lit", text, case_insensitive) / ("class", ranges, negated)
#   ("regex", pattern, flags, tok)


class _Parser:
    def __init__(self, toks: list[_Tok]):
        self.toks = toks
        self.i = 0

    def peek(self, offset: int = 0) -> _Tok:
        return self.toks[min(self.i + offset, len(self.toks) - 1)]

    def next(self) -> _Tok:
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, kind: str, text: str | None = None) -> _Tok:
        tok = self.next()
        if tok.kind != kind or (text is not None and tok.text != text):
            want = repr(text) if text else kind
            got = repr(tok.text) if tok.text else "the end of the line"
            raise LarkError(f"expected {want}, found {got}", tok.line, tok.col)
        return tok

    def at(self, kind: str, text: str | None = None) -> bool:
        tok = self.peek()
        return tok.kind == kind and (text is None or tok.text == text)

    def skip_newlines(self) -> None:
        while self.at("nl") and self.peek().text:
            self.next()

    def continuation(self) -> bool:
        """A newline followed by `|` continues the definition."""
        j = self.i
        while self.toks[j].kind == "nl" and self.toks[j].text:
            j += 1
        if j > self.i and self.toks[j].kind == "op" and self.toks[j].text == "|":
            self.i = j
            return True
        return False

    def alternatives(self, depth: int) -> tuple:
        seqs = [self.sequence(depth)]
        while self.at("op", "|") or (depth == 0 and self.continuation()):
            self.next()
            if depth > 0:
                self.skip_newlines()
            seqs.append(self.sequence(depth))
        return ("alt", seqs)

    def sequence(self, depth: int) -> tuple:
        items = []
        while True:
            if depth > 0:
                self.skip_newlines()
            tok = self.peek()
            if tok.kind == "op" and tok.text == "->":
                self.next()
                self.expect("name")  # an alias names the tree node only
                continue
            if tok.kind in ("nl", "directive") or (tok.kind == "op" and tok.text in "|)]"):
                break
            items.append(self.quantified(depth))
        return ("seq", items)

    def quantified(self, depth: int) -> tuple:
        expr = self.atom(depth)
        while True:
            tok = self.peek()
            if tok.kind == "op" and tok.text in ("?", "*", "+"):
                self.next()
                lo, hi = {"?": (0, 1), "*": (0, None), "+": (1, None)}[tok.text]
                expr = ("rep", expr, lo, hi)
            elif tok.kind == "op" and tok.text == "~":
                self.next()
                lo = int(self.expect("number").text)
                hi = lo
                if self.at("op", ".."):
                    self.next()
                    hi = int(self.expect("number").text)
                if lo < 0 or hi < lo:
                    raise LarkError(f"bad repetition ~ {lo}..{hi}", tok.line, tok.col)
                expr = ("rep", expr, lo, hi)
            else:
                return expr

    def atom(self, depth: int) -> tuple:
        tok = self.next()
        if tok.kind == "op" and tok.text in "([":
            inner = self.alternatives(depth + 1)
            self.skip_newlines()
            self.expect("op", ")" if tok.text == "(" else "]")
            return inner if tok.text == "(" else ("rep", inner, 0, 1)
        if tok.kind == "string":
            text, ci = _string_value(tok)
            if self.at("op", ".."):
                self.next()
                end_tok = self.expect("string")
                end, _ = _string_value(end_tok)
                if len(text) != 1 or len(end) != 1 or ord(end) < ord(text):
                    raise LarkError("a range needs two single characters in order", tok.line, tok.col)
                return ("class", [(ord(text), ord(end))], False)
            return ("lit", text, ci)
        if tok.kind == "regex":
            body, flags = tok.text[1:].rsplit("/", 1)
            return ("regex", body, flags, tok)
        if tok.kind == "name" and tok.text[0] not in "?!" and "." not in tok.text:
            if self.at("op", "{"):
                raise LarkError("templates are not supported", tok.line, tok.col)
            return ("name", tok.text, tok)
        got = repr(tok.text) if tok.text else "the end of the line"
        raise LarkError(f"expected a rule, terminal, string or regex, found {got}", tok.line, tok.col)


def _string_value(tok: _Tok) -> tuple[str, bool]:
    text = tok.text
    ci = text.endswith("i")
    if ci:
        text = text[:-1]
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError) as e:
        raise LarkError(f"bad string {tok.text}: {e}", tok.line, tok.col) from None
    return value, ci


# -- Lark's `common` library (the terminals vLLM users import), as Lark ----------------

_COMMON = {
    "DIGIT": '"0".."9"',
    "HEXDIGIT": '"a".."f" | "A".."F" | DIGIT',
    "INT": "DIGIT+",
    "SIGNED_INT": '["+"|"-"] INT',
    "DECIMAL": 'INT "." INT? | "." INT',
    "_EXP": '("e"|"E") SIGNED_INT',
    "FLOAT": "INT _EXP | DECIMAL _EXP?",
    "SIGNED_FLOAT": '["+"|"-"] FLOAT',
    "NUMBER": "FLOAT | INT",
    "SIGNED_NUMBER": '["+"|"-"] NUMBER',
    "ESCAPED_STRING": r'"\"" (/[^"\\\n]/ | "\\" /[^\n]/)* "\""',
    "LCASE_LETTER": '"a".."z"',
    "UCASE_LETTER": '"A".."Z"',
    "LETTER": "UCASE_LETTER | LCASE_LETTER",
    "WORD": "LETTER+",
    "CNAME": '("_"|LETTER) ("_"|LETTER|DIGIT)*',
    "WS_INLINE": '(" "|/\\t/)+',
    "WS": "/[ \\t\\f\\r\\n]/+",
    "CR": "/\\r/",
    "LF": "/\\n/",
    "NEWLINE": "(CR? LF)+",
    "SH_COMMENT": "/#[^\\n]*/",
    "CPP_COMMENT": "/\\/\\/[^\\n]*/",
    "C_COMMENT": r'"/*" (/[^*]/ | "*"+ /[^*\/]/)* "*"+ "/"',
    "SQL_COMMENT": "/--[^\\n]*/",
}


def _common_definition(name: str, tok: _Tok) -> tuple:
    if name not in _COMMON:
        raise LarkError(f"%import common.{name}: no such terminal in Lark's common library", tok.line, tok.col)
    p = _Parser(_lex(_COMMON[name]))
    return p.alternatives(0)


# -- the grammar --------------------------------------------------------------------------


@dataclass
class _Definition:
    expr: tuple
    tok: _Tok
    terminal: bool


def _parse(text: str) -> tuple[dict[str, _Definition], list[tuple]]:
    p = _Parser(_lex(text))
    defs: dict[str, _Definition] = {}
    ignore: list[tuple] = []
    while True:
        p.skip_newlines()
        tok = p.peek()
        if tok.kind == "nl":
            break
        if tok.kind == "directive":
            _directive(p, defs, ignore)
            continue
        if tok.kind != "name":
            raise LarkError(f"expected a rule or terminal definition, found {tok.text!r}", tok.line, tok.col)
        p.next()
        name = tok.text.lstrip("?!")
        if "." in name:
            raise LarkError(f"bad name {tok.text!r}", tok.line, tok.col)
        if p.at("op", "{"):
            raise LarkError("templates are not supported", tok.line, tok.col)
        if p.at("op", "."):  # priority
            p.next()
            p.expect("number")
        p.expect("op", ":")
        expr = p.alternatives(0)
        if not p.at("nl"):
            bad = p.peek()
            raise LarkError(f"unexpected {bad.text!r}", bad.line, bad.col)
        if name in defs and not defs[name].tok.kind == "common":
            raise LarkError(f"{name} is defined twice", tok.line, tok.col)
        defs[name] = _Definition(expr, tok, name.lstrip("_")[:1].isupper())
    return defs, ignore


def _directive(p: _Parser, defs: dict[str, _Definition], ignore: list[tuple]) -> None:
    tok = p.next()
    if tok.text == "%ignore":
        ignore.append(p.alternatives(0))
        return
    if tok.text != "%import":
        raise LarkError(f"{tok.text} is not supported", tok.line, tok.col)
    path = p.expect("name")
    names: list[tuple[str, str, _Tok]] = []
    if p.at("op", "("):
        if path.text != "common":
            raise LarkError(f"%import {path.text}: only Lark's common library is available", path.line, path.col)
        p.next()
        while True:
            n = p.expect("name")
            names.append((n.text, n.text, n))
            if p.at("op", ","):
                p.next()
                continue
            p.expect("op", ")")
            break
    else:
        lib, _, name = path.text.rpartition(".")
        if lib != "common":
            raise LarkError(f"%import {path.text}: only Lark's common library is available", path.line, path.col)
        alias = name
        if p.at("op", "->"):
            p.next()
            alias = p.expect("name").text
        names.append((name, alias, path))
    for name, alias, ntok in names:
        _import_common(name, alias, ntok, defs)


def _import_common(name: str, alias: str, tok: _Tok, defs: dict[str, _Definition]) -> None:
    expr = _common_definition(name, tok)
    common_tok = _Tok("common", name, tok.line, tok.col)
    defs.setdefault(alias, _Definition(expr, common_tok, True))
    # What the definition itself refers to (NUMBER -> FLOAT, INT, ...).
    for dep in _names_in(expr):
        if dep not in defs:
            _import_common(dep, dep, tok, defs)


def _names_in(expr: tuple) -> list[str]:
    kind = expr[0]
    if kind == "name":
        return [expr[1]]
    if kind in ("alt", "seq"):
        return [n for e in expr[1] for n in _names_in(e)]
    if kind == "rep":
        return _names_in(expr[1])
    return []


# -- printing GBNF ------------------------------------------------------------------------

_IGNORE = "0ignore"  # helper names start with a digit: no Lark name does


def _gbnf_name(name: str) -> str:
    if name == "root":
        return "1root"
    return name.replace("_", "-")


def _char(c: int, in_class: bool) -> str:
    special = '\\"[]-^' if in_class else '\\"'
    if 0x20 <= c < 0x7F and chr(c) not in special:
        return chr(c)
    if chr(c) in '\\"[]-':
        return "\\" + chr(c)
    if c < 0x100:
        return f"\\x{c:02X}"
    if c < 0x10000:
        return f"\\u{c:04X}"
    return f"\\U{c:08X}"


def _class(ranges: list[tuple[int, int]], negated: bool) -> str:
    body = "".join(_char(a, True) if a == b else f"{_char(a, True)}-{_char(b, True)}" for a, b in ranges)
    return f"[{'^' if negated else ''}{body}]"


def _literal(text: str, ci: bool) -> str:
    if not ci:
        return '"' + "".join(_char(ord(c), False) for c in text) + '"'
    parts = []
    for c in text:
        variants = sorted({ord(c), ord(c.lower()), ord(c.upper())} if len(c.lower()) == len(c.upper()) == 1 else {ord(c)})
        parts.append(_class([(v, v) for v in variants], False) if len(variants) > 1 else _literal(c, False))
    return " ".join(parts) or '""'


class _Printer:
    def __init__(self, defs: dict[str, _Definition], has_ignore: bool):
        self.defs = defs
        self.has_ignore = has_ignore

    def expr(self, e: tuple, in_rule: bool) -> str:
        kind = e[0]
        if kind == "alt":
            parts = [self.expr(s, in_rule) for s in e[1]]
            return parts[0] if len(parts) == 1 else "(" + " | ".join(parts) + ")"
        if kind == "seq":
            return " ".join(self.expr(x, in_rule) for x in e[1]) or '""'
        if kind == "rep":
            inner = self.expr(e[1], in_rule)
            lo, hi = e[2], e[3]
            if (lo, hi) == (0, 1):
                q = "?"
            elif (lo, hi) == (0, None):
                q = "*"
            elif (lo, hi) == (1, None):
                q = "+"
            else:
                q = "{%d,%s}" % (lo, "" if hi is None else hi) if hi != lo else "{%d}" % lo
            return f"({inner}){q}"
        if kind == "name":
            name, tok = e[1], e[2]
            d = self.defs.get(name)
            if d is None:
                raise LarkError(f"{name} is not defined", tok.line, tok.col)
            out = _gbnf_name(name)
            return self.ignored(out) if in_rule and d.terminal else out
        if kind == "lit":
            out = _literal(e[1], e[2])
        elif kind == "class":
            out = _class(e[1], e[2])
        else:
            out = "(" + _regex_to_gbnf(e[1], e[2], e[3]) + ")"
        return self.ignored(out) if in_rule else out

    def ignored(self, text: str) -> str:
        return f"{_IGNORE} {text}" if self.has_ignore else text


def lark_to_gbnf(text: str, start: str = "start") -> str:
    """The GBNF grammar (root rule `root`) of the Lark grammar `text`; LarkError (with the
    line and column) when it cannot be converted. See the module docs for what is read."""
    defs, ignore = _parse(text)
    if start not in defs:
        raise LarkError(f"no `{start}` rule", 1, 1)
    printer = _Printer(defs, bool(ignore))
    root = _gbnf_name(start) + (f" {_IGNORE}" if ignore else "")
    lines = [f"root ::= {root}"]
    for name, d in defs.items():
        lines.append(f"{_gbnf_name(name)} ::= {printer.expr(d.expr, not d.terminal)}")
    if ignore:
        alts = " | ".join(printer.expr(e, False) for e in ignore)
        lines.append(f"{_IGNORE} ::= ({alts})*")
    return "\n".join(lines) + "\n"


# -- regular expressions ------------------------------------------------------------------

_FLAGS = {"i": re.IGNORECASE, "s": re.DOTALL, "x": re.VERBOSE, "m": re.MULTILINE, "u": re.UNICODE, "l": 0}
_DIGIT = [(0x30, 0x39)]
_WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
_SPACE = [(0x09, 0x0D), (0x20, 0x20)]
_CATEGORIES = {
    "DIGIT": (_DIGIT, False),
    "NOT_DIGIT": (_DIGIT, True),
    "WORD": (_WORD, False),
    "NOT_WORD": (_WORD, True),
    "SPACE": (_SPACE, False),
    "NOT_SPACE": (_SPACE, True),
}


def _category(code: Any, tok: _Tok) -> tuple[list[tuple[int, int]], bool]:
    name = str(code).replace("CATEGORY_", "").replace("UNI_", "").replace("LOC_", "")
    if name not in _CATEGORIES:
        raise LarkError(f"regex class {code} is not supported", tok.line, tok.col)
    return _CATEGORIES[name]


def _case_variants(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = list(ranges)
    for a, b in ranges:
        for c in range(a, min(b, a + 512) + 1):
            for v in {chr(c).lower(), chr(c).upper()}:
                if len(v) == 1 and ord(v) != c:
                    out.append((ord(v), ord(v)))
    return out


def _regex_to_gbnf(pattern: str, flag_text: str, tok: _Tok) -> str:
    flags = 0
    for f in flag_text:
        flags |= _FLAGS[f]
    try:
        parsed = _sre_parse.parse(pattern, flags)
    except re.error as e:
        raise LarkError(f"bad regex /{pattern}/: {e}", tok.line, tok.col) from None
    return _RegexPrinter(flags, tok).seq(list(parsed))


class _RegexPrinter:
    def __init__(self, flags: int, tok: _Tok):
        self.ci = bool(flags & re.IGNORECASE)
        self.dotall = bool(flags & re.DOTALL)
        self.tok = tok

    def fail(self, what: str) -> LarkError:
        return LarkError(f"regex /.../: {what} is not supported", self.tok.line, self.tok.col)

    def seq(self, items: list) -> str:
        return " ".join(self.item(op, av) for op, av in items) or '""'

    def chars(self, ranges: list[tuple[int, int]], negated: bool) -> str:
        if self.ci:
            ranges = _case_variants(ranges)
        if not negated and len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            return _literal(chr(ranges[0][0]), False)
        return _class(ranges, negated)

    def item(self, op: Any, av: Any) -> str:
        if op is _sre.LITERAL:
            return self.chars([(av, av)], False)
        if op is _sre.NOT_LITERAL:
            return self.chars([(av, av)], True)
        if op is _sre.ANY:
            return "." if self.dotall else "[^\\n]"
        if op is _sre.IN:
            return self.charset(av)
        if op is _sre.CATEGORY:
            ranges, negated = _category(av, self.tok)
            return self.chars(ranges, negated)
        if op is _sre.BRANCH:
            return "(" + " | ".join(self.seq(list(s)) for s in av[1]) + ")"
        if op is _sre.SUBPATTERN:
            _group, add, delete, sub = av
            inner = self
            if add or delete:  # (?i:...), (?-s:...): i and s change the reading
                inner = _RegexPrinter(0, self.tok)
                inner.ci = bool(add & re.IGNORECASE) or (self.ci and not delete & re.IGNORECASE)
                inner.dotall = bool(add & re.DOTALL) or (self.dotall and not delete & re.DOTALL)
            return "(" + inner.seq(list(sub)) + ")"
        if op is getattr(_sre, "ATOMIC_GROUP", None):
            return "(" + self.seq(list(av)) + ")"
        if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)):
            lo, hi, sub = av
            inner = "(" + self.seq(list(sub)) + ")"
            if hi == _sre.MAXREPEAT:
                return inner + ("*" if lo == 0 else "+" if lo == 1 else "{%d,}" % lo)
            if (lo, hi) == (0, 1):
                return inner + "?"
            return inner + ("{%d}" % lo if lo == hi else "{%d,%d}" % (lo, hi))
        if op is _sre.AT:
            raise self.fail("an anchor")
        if op in (_sre.ASSERT, _sre.ASSERT_NOT):
            raise self.fail("a look-around")
        raise self.fail(f"{op}")

    def charset(self, items: list) -> str:
        negated = False
        ranges: list[tuple[int, int]] = []
        negated_parts: list[tuple[list[tuple[int, int]], bool]] = []
        for op, av in items:
            if op is _sre.NEGATE:
                negated = True
            elif op is _sre.LITERAL:
                ranges.append((av, av))
            elif op is _sre.RANGE:
                ranges.append(av)
            elif op is _sre.CATEGORY:
                cat, neg = _category(av, self.tok)
                if neg:
                    negated_parts.append((cat, True))
                else:
                    ranges.extend(cat)
            else:
                raise self.fail(f"{op} in a class")
        if not negated_parts:
            return self.chars(ranges, negated)
        if negated:
            raise self.fail("a negated class holding \\D, \\W or \\S")
        parts = [self.chars(r, n) for r, n in negated_parts]
        if ranges:
            parts.append(self.chars(ranges, False))
        return "(" + " | ".join(parts) + ")"
