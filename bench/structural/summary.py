"""The goals of the structural-tag benchmark, read from its tables (bench/STRUCTURAL.md).

Usage: python bench/structural/summary.py bench/STRUCTURAL.md  (prints a Markdown paragraph)

Per vocabulary, the largest tool count's row: Stencil's total compile against the anchors'
compile column (llguidance's includes its first mask, which finishes its lazy compile;
Stencil's first masks are their own columns), and each goal met or not.
"""

import re
import sys

GOALS = "compile < 50 ms, >= 2x llguidance, >= 20x XGrammar, first masks < 1 ms, warm p99 < 50 µs"


def ms(cell: str) -> float:
    value, unit = cell.split()
    return float(value) / (1000.0 if unit == "µs" else 1.0)


def rows(text: str):
    """(vocab, cells) for every table row under a `### vocab` heading."""
    vocab = None
    for line in text.splitlines():
        if line.startswith("### "):
            vocab = line[4:].strip()
        elif line.startswith("|") and vocab and not re.match(r"\|\s*(tools|-)", line.replace(":", "")):
            yield vocab, [c.strip() for c in line.strip().strip("|").split("|")]


def main(path: str) -> None:
    stencil, anchors = {}, {}
    for vocab, cells in rows(open(path, encoding="utf-8").read()):
        n = int(cells[0])
        if len(cells) == 9:
            stencil[(vocab, n)] = cells
        else:
            anchors[(vocab, n, cells[2].split()[0])] = cells
    ok = lambda good: "reached" if good else "NOT reached"
    lines = []
    for vocab in dict.fromkeys(v for v, _ in stencil):
        n = max(k[1] for k in stencil if k[0] == vocab)
        s = stencil[(vocab, n)]
        total, firsts, p99 = ms(s[5]), [ms(s[6]), ms(s[7])], ms(s[8])
        llg = ms(anchors[(vocab, n, "llguidance")][3])
        xgr = ms(anchors[(vocab, n, "XGrammar")][3])
        lines.append(
            f"{vocab}, {n} tools: compile {total:.1f} ms ({ok(total < 50)}), "
            f"{llg / total:.1f}× faster than llguidance ({ok(llg / total >= 2)}), "
            f"{xgr / total:.0f}× faster than XGrammar ({ok(xgr / total >= 20)}); "
            f"first masks {max(firsts):.2f} ms at most ({ok(max(firsts) < 1)}), "
            f"warm p99 {p99 * 1000:.1f} µs ({ok(p99 < 0.05)})."
        )
    print(f"Goals ({GOALS}), from the tables above:")
    print()
    for line in lines:
        print(f"- {line}")


if __name__ == "__main__":
    main(sys.argv[1])
