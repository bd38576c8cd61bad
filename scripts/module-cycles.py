#!/usr/bin/env python3
"""Import cycles between the top-level modules of a crate's src/ folder.

    scripts/module-cycles.py SRC_DIR [SRC_DIR ...]     e.g. server/src mask/src
    scripts/module-cycles.py --self-test               checks itself on made-up crates

A module is a top-level file of SRC_DIR (`trie.rs`) or folder (`automaton/`, with its
`mod.rs` and every file below it). Module A depends on module B when code in A names a
path into B: `use crate::b::…`, `crate::b::f()` in an expression, `super::…` or
`self::…` paths that climb out of A, or `crate::Name` where the crate root re-exports
`Name` from B (`pub use b::Name;`). Comments, doc comments, string and character
literals do not count; `#[cfg(test)]` code does (a test that needs B is a dependency
too). The crate root (`lib.rs`, `main.rs`) is not a module here: it declares and
re-exports them, and paths to its own items are left out.

Prints every cycle (one per strongly connected group of modules, with the file and line
of each edge) and exits 1 when there is one; prints nothing and exits 0 otherwise.
Python 3 standard library only.
"""

import os
import re
import sys

ROOTS = ("lib.rs", "main.rs")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def strip(text):
    """`text` with comments and string/char literals blanked out (newlines kept, so
    that line numbers still hold)."""
    out = []
    i, n = 0, len(text)
    blank = lambda s: re.sub(r"[^\n]", " ", s)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif c in "rb" and re.match(r"(?:br|rb|r)#*\"", text[i:i + 260]) and not (
            i and (text[i - 1].isalnum() or text[i - 1] == "_")
        ):
            m = re.match(r"(?:br|rb|r)(#*)\"", text[i:])
            end = text.find('"' + m.group(1), i + m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(blank(text[i:j]))
            i = j
        elif c == '"' or (c == "b" and text.startswith('b"', i)):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(blank(text[i:j + 1]))
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{2028}'), or a lifetime / label ('a, 'static).
            m = re.match(r"'(?:\\u\{[0-9A-Fa-f]+\}|\\x[0-9A-Fa-f]{2}|\\.|[^\\'\n])'", text[i:])
            j = i + (m.end() if m else 1)
            out.append(blank(text[i:j]) if m else c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def use_trees(code):
    """Each `use` declaration's tree, flattened into paths: `(offset, [segments])`."""
    for m in re.finditer(r"\buse\s+([^;]*);", code):
        for path in expand(m.group(1)):
            yield m.start(1), path


def expand(tree):
    """`a::{b, c::{d as e}}` → [[a, b], [a, c, d]] (`self` inside braces is the prefix)."""
    tree = re.sub(r"\s+as\s+[A-Za-z_][A-Za-z0-9_]*", "", tree)
    tree = re.sub(r"\s+", "", tree)
    paths = []

    def walk(prefix, s):
        depth, start, parts = 0, 0, []
        for k, ch in enumerate(s):
            depth += ch == "{"
            depth -= ch == "}"
            if ch == "," and depth == 0:
                parts.append(s[start:k])
                start = k + 1
        parts.append(s[start:])
        for part in filter(None, parts):
            brace = part.find("{")
            if brace >= 0:
                head = [x for x in part[:brace].split("::") if x]
                walk(prefix + head, part[brace + 1:part.rindex("}")])
            else:
                segs = [x for x in part.split("::") if x]
                if segs == ["self"]:
                    segs = []
                paths.append(prefix + segs)

    walk([], tree)
    return paths


def inline_mods(code):
    """`(start, end, name)` of each `mod name { … }` block, by braces."""
    spans = []
    for m in re.finditer(r"\bmod\s+(" + IDENT.pattern + r")\s*\{", code):
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += code[j] == "{"
            depth -= code[j] == "}"
            j += 1
        spans.append((m.end(), j, m.group(1)))
    return spans


def module_path(src, path):
    """The module path of file `path` under `src`: `automaton/text.rs` → [automaton, text]."""
    rel = os.path.relpath(path, src).replace(os.sep, "/")
    parts = rel[:-3].split("/")
    if parts[-1] == "mod" or (len(parts) == 1 and parts[0] + ".rs" in ROOTS):
        parts = parts[:-1]
    return parts


def root_reexports(src):
    """Names the crate root re-exports from a module: `{name: module}`."""
    names = {}
    for root in ROOTS:
        p = os.path.join(src, root)
        if not os.path.exists(p):
            continue
        code = strip(open(p, encoding="utf-8").read())
        for _, segs in use_trees(code):
            if segs and segs[0] == "crate":
                segs = segs[1:]
            if len(segs) >= 2:
                names[segs[-1]] = segs[0]
    return names


def edges_of(src):
    """`{(a, b): [where, …]}`: module a names a path into module b."""
    modules = set()
    files = []
    for dirpath, _, filenames in os.walk(src):
        for f in sorted(filenames):
            if f.endswith(".rs"):
                path = os.path.join(dirpath, f)
                files.append(path)
                mp = module_path(src, path)
                if mp:
                    modules.add(mp[0])
    reexports = root_reexports(src)
    edges = {}
    for path in sorted(files):
        base = module_path(src, path)
        if not base:
            continue  # the crate root
        code = strip(open(path, encoding="utf-8").read())
        spans = inline_mods(code)

        def here(offset):
            """The module path at `offset`, inline `mod` blocks included."""
            inner = [s for s in spans if s[0] <= offset < s[1]]
            return base + [name for _, _, name in sorted(inner)]

        def target(segs, offset):
            """The top-level module a path starting with `segs` lands in, if any."""
            if not segs:
                return None
            if segs[0] == "crate":
                rest = segs[1:]
            elif segs[0] in ("super", "self"):
                cur = here(offset)
                k = 0
                while k < len(segs) and segs[k] in ("super", "self"):
                    cur = cur[:-1] if segs[k] == "super" else cur
                    k += 1
                rest = cur + segs[k:]
            else:
                return None
            if not rest:
                return None
            if rest[0] in modules:
                return rest[0]
            return reexports.get(rest[0])

        def add(segs, offset):
            t = target(segs, offset)
            if t and t != base[0]:
                line = code.count("\n", 0, offset) + 1
                where = f"{os.path.relpath(path, src)}:{line}"
                seen = edges.setdefault((base[0], t), [])
                if where not in seen:
                    seen.append(where)

        uses = list(use_trees(code))
        for offset, segs in uses:
            add(segs, offset)
        use_spans = [(m.start(), m.end()) for m in re.finditer(r"\buse\s+[^;]*;", code)]
        # Paths in expressions and types: `crate::a::b`, `super::super::x`.
        for m in re.finditer(r"(?<![A-Za-z0-9_$:])((?:crate|super|self)(?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)+)", code):
            if any(s <= m.start() < e for s, e in use_spans):
                continue
            add([x.strip() for x in m.group(1).split("::")], m.start())
    return edges


def cycles(edges):
    """The strongly connected groups of more than one module (Tarjan), sorted."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return graph, sorted(out)


def one_cycle(graph, group):
    """A shortest cycle through the group's first module, inside the group."""
    start = group[0]
    prev, todo = {start: None}, [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph[v]):
            if w not in group:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w not in prev:
                prev[w] = v
                todo.append(w)
    return [start]


def self_test():
    """Made-up crates: a cycle through a re-export, `super::` and an expression path is
    found; paths in comments, doc comments, strings and `mod` declarations are not."""
    import tempfile

    scratch = tempfile.TemporaryDirectory(prefix="module-cycles-")

    def crate(files):
        root = tempfile.mkdtemp(dir=scratch.name)
        for name, text in files.items():
            path = os.path.join(root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        return root

    cyclic = crate({
        "lib.rs": "mod a;\nmod b;\nmod c;\npub use c::Thing;\n",
        "a/mod.rs": "mod inner;\npub fn f() {}\n",
        "a/inner.rs": "use super::super::b::g;\n",
        "b.rs": "pub fn g() -> u32 { crate::Thing::N }\n",
        "c.rs": "pub struct Thing;\nimpl Thing { pub const N: u32 = { crate::a::f(); 1 }; }\n",
    })
    _, groups = cycles(edges_of(cyclic))
    assert groups == [["a", "b", "c"]], groups
    clean = crate({
        "lib.rs": "mod a;\nmod b;\n",
        "a.rs": "use crate::b::g;\n/// [`crate::a`] is not a use\nfn h() { g(); }\n",
        "b.rs": "// use crate::a::h;\n/* crate::a::h() */\npub fn g() { let _ = \"crate::a::h\"; let _ = r#\"crate::a\"#;"
        " let _ = '\"'; }\n#[cfg(test)]\nmod tests { fn t<'a>(x: &'a str) -> &'a str { x } }\n",
    })
    edges = edges_of(clean)
    assert list(edges) == [("a", "b")], edges
    _, groups = cycles(edges)
    assert groups == [], groups
    scratch.cleanup()
    print("module-cycles: self-test passed")
    return 0


def main(args):
    if not args or any(a in ("-h", "--help") for a in args):
        print(__doc__.strip())
        return 0 if args else 2
    if args == ["--self-test"]:
        return self_test()
    found = False
    for src in args:
        if not os.path.isdir(src):
            print(f"module-cycles: {src}: no such folder", file=sys.stderr)
            return 2
        edges = edges_of(src)
        graph, groups = cycles(edges)
        for group in groups:
            found = True
            cycle = one_cycle(graph, group)
            print(f"{src}: import cycle: {' -> '.join(cycle)}")
            print(f"  modules in the cycle: {', '.join(group)}")
            for a in group:
                for b in group:
                    if (a, b) in edges:
                        where = edges[(a, b)]
                        more = f" (+{len(where) - 3} more)" if len(where) > 3 else ""
                        print(f"  {a} -> {b}: {', '.join(where[:3])}{more}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
