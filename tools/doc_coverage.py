"""Which sentences of an older README are not findable in today's README, CONTRIBUTING.md and docs/?

    python tools/doc_coverage.py bda5a99                  # every fact of that commit's README.md
    python tools/doc_coverage.py some-branch --since bda5a99   # only what that branch's README added

The README was one 1,075-line file until it became one page plus docs/; a branch that still edits the
old README is merged by moving its new sentences into the page that now holds the subject. This
lists them. Units: each sentence of prose, each table cell, each line of a code block; a unit counts
as found when at least --threshold of its word 4-grams occur in the new pages (text normalised:
markdown marks, links and line breaks ignored). Every `code span` and number is also looked up on
its own. Exit 1 when something is not found.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# pages that existed beside the old README and kept their own text, and the generated reference
NOT_TARGETS = {"anchors.md", "benchmarks.md", "cli.md"}
SENTENCE_END = re.compile(r"(?<=[.;:!?])\s+(?=[A-Z`(*])")
WORD = re.compile(r"[\w./:'\-\[\]{}()=,;%+<>\"@$~^]+")


def normalise(text: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link counts as its text
    text = re.sub(r'<a id="[^"]*"></a>', "", text.replace("\\|", "|"))
    text = re.sub(r"[*`>#|]", " ", text)
    text = re.sub(r"^\s*-\s+", " ", text, flags=re.MULTILINE)
    return re.sub(r"\s+", " ", text).strip().lower()


def grams(text: str, size: int = 4) -> set[tuple[str, ...]]:
    words = WORD.findall(normalise(text))
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def units(markdown: str) -> list[str]:
    """The old README cut into sentences, table cells and code lines."""
    found: list[str] = []
    paragraph: list[str] = []
    in_code = False

    def flush() -> None:
        if paragraph:
            found.extend(SENTENCE_END.split(" ".join(paragraph)))
            paragraph.clear()

    for line in markdown.split("\n"):
        if line.startswith("```"):
            flush()
            in_code = not in_code
        elif in_code:
            found.extend([line] if line.strip() else [])
        elif line.startswith("|"):
            flush()
            if not re.fullmatch(r"\|[-| :]+\|", line.strip()):
                found.extend(cell for cell in re.split(r"(?<!\\)\|", line.strip("|")) if cell.strip())
        elif not line.strip() or line.startswith("#") or re.match(r"\s*- ", line):
            flush()
            found.extend([line] if line.startswith("#") else [])
            paragraph.extend([line] if re.match(r"\s*- ", line) else [])
        else:
            paragraph.append(line)
    flush()
    return found


def new_pages() -> str:
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
    pages += [p for p in sorted((ROOT / "docs").glob("*.md")) if p.name not in NOT_TARGETS]
    return "\n".join(p.read_text(encoding="utf-8") for p in pages if p.exists())


def old_readme(ref: str) -> str:
    show = ["git", "-C", str(ROOT), "show", f"{ref}:README.md"]
    return subprocess.run(show, capture_output=True, text=True, check=True).stdout


def missing(old: str, new: str, threshold: float) -> tuple[list[str], list[str], list[str]]:
    """(units below the threshold, code spans not found, numbers not found)."""
    new_grams, new_text = grams(new), normalise(new)
    lost_units = []
    for unit in units(old):
        unit_grams = grams(unit)
        if unit_grams:
            share = len(unit_grams & new_grams) / len(unit_grams)
            if share < threshold:
                lost_units.append(f"{share:4.0%}  {unit.strip()}")
        elif normalise(unit) and normalise(unit) not in new_text:
            lost_units.append(f"  0%  {unit.strip()}")
    spans = sorted(set(re.findall(r"`([^`\n]+)`", old)))
    lost_spans = [s for s in spans if s.lower() not in new.lower() and normalise(s) not in new_text]
    numbers = sorted(set(re.findall(r"(?<![\w.])\d[\d,.]*\d|(?<![\w.])\d(?!\w)", old)))
    lost_numbers = [n for n in numbers if not re.search(rf"(?<!\d){re.escape(n)}(?!\d)", new)]
    return lost_units, lost_spans, lost_numbers


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ref", help="the commit or branch whose README.md is checked")
    parser.add_argument("--since", help="only what REF's README adds to this commit's README")
    parser.add_argument("--threshold", type=float, default=0.9, help="share of 4-grams found (default 0.9)")
    args = parser.parse_args(argv)
    old = old_readme(args.ref)
    lost_units, lost_spans, lost_numbers = missing(old, new_pages(), args.threshold)
    if args.since:  # what the base README had and the docs lack is the docs' own business
        base_units, base_spans, base_numbers = missing(old_readme(args.since), new_pages(), args.threshold)
        lost_units = [u for u in lost_units if u not in set(base_units)]
        lost_spans = [s for s in lost_spans if s not in set(base_spans)]
        lost_numbers = [n for n in lost_numbers if n not in set(base_numbers)]
    print(f"{args.ref}:README.md: {len(units(old))} units; not found (< {args.threshold:.0%}): {len(lost_units)}")
    print("\n".join(f"  {u[:200]}" for u in lost_units))
    print(f"code spans not found: {len(lost_spans)}" + "".join(f"\n  `{s}`" for s in lost_spans))
    print(f"numbers not found: {len(lost_numbers)} {' '.join(lost_numbers)}")
    return 1 if lost_units or lost_spans or lost_numbers else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
