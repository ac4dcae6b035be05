"""The documentation holds together: the CLI reference is the application's, and every link lands.

docs/cli.md is generated from the typer application by tools/clidoc.py; a change to a command, an
option or its help makes it stale, and the test names the command that writes it again. Every
relative link of README.md, CONTRIBUTING.md and docs/*.md must name a file that exists and, with
a #fragment, a heading (GitHub's slug) or an explicit anchor of that file.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)


def _clidoc() -> ModuleType:
    spec = importlib.util.spec_from_file_location("clidoc", ROOT / "tools" / "clidoc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_is_generated_from_the_application() -> None:
    clidoc = _clidoc()
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert page == clidoc.render(), f"docs/cli.md is stale: run `{clidoc.REGENERATE}` and commit docs/cli.md"


def test_the_cli_reference_has_every_command_and_option() -> None:
    """Independent of the generator: each command and each of its options, as the app declares them."""
    import typer

    from trace_instrument.cli import app

    group = typer.main.get_command(app)
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name, command in group.commands.items():
        section = page.split(f"## `{name}`\n", 1)[1].split("\n## ", 1)[0]
        assert f"trace-instrument {name} " in section
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert f"`{opt}`" in section, f"{name}: {opt} is not in docs/cli.md"


def test_the_cli_reference_does_not_depend_on_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    clidoc = _clidoc()
    first = clidoc.render()
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("NO_COLOR", "1")
    assert clidoc.render() == first


def _prose(markdown: str) -> str:
    """The text links can live in: fenced blocks and code spans removed."""
    return CODE_SPAN.sub("", FENCE.sub("", markdown))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text, lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every #fragment a page answers to: its headings' slugs (repeats numbered as GitHub does) and <a id>s."""
    seen: dict[str, int] = {}
    found = set(HTML_ANCHOR.findall(markdown))
    for _, heading in HEADING.findall(FENCE.sub("", markdown)):
        base = slug(heading)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def links(page: Path) -> list[str]:
    targets = LINK.findall(_prose(page.read_text(encoding="utf-8")))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t)]  # http:, mailto:, ...


def test_the_slugs_are_githubs() -> None:
    assert slug("Whose `verl/utils/tracing/` is") == "whose-verlutilstracing-is"
    assert slug("`_catalog.yaml`") == "_catalogyaml"
    assert slug("A run being written (`--follow`)") == "a-run-being-written---follow"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in links(page):
        path_part, _, fragment = target.partition("#")
        destination = (page.parent / path_part).resolve() if path_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif fragment and destination.suffix == ".md" and fragment not in anchors(destination.read_text("utf-8")):
            broken.append(f"{target}: no heading #{fragment} in {destination.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_lands(page: Path) -> None:
    broken = broken_links(page)
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_link_checker_sees_a_broken_link(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Here\n", encoding="utf-8")
    page = tmp_path / "page.md"
    text = "[a](other.md#here) [b](other.md#gone) `[c](no.md)` [d](https://x.y/z) [e](none.md) [f](#self)\n"
    page.write_text(text + "## Self\n", encoding="utf-8")
    assert links(page) == ["other.md#here", "other.md#gone", "none.md", "#self"]
    assert broken_links(page) == ["other.md#gone: no heading #gone in other.md", "none.md: no such file"]


def ragged_rows(markdown: str) -> list[str]:
    """Table rows whose cell count differs from their header's (an unescaped | in a cell, a lost cell)."""
    lines = FENCE.sub("", markdown).split("\n")
    cells = [len(re.split(r"(?<!\\)\|", line.strip().strip("|"))) for line in lines]
    ragged, header = [], None
    for index, line in enumerate(lines):
        if not line.lstrip().startswith("|"):
            header = None
        elif header is None:
            header = cells[index]
        elif cells[index] != header:
            ragged.append(line)
    return ragged


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_table_row_has_its_headers_cells(page: Path) -> None:
    assert ragged_rows(page.read_text(encoding="utf-8")) == []


def test_a_ragged_table_is_seen() -> None:
    table = "| a | b |\n|---|---|\n| `x\\|y` | z |\n| `x|y` | z |\n\n| c |\n|---|\n| d |\n"
    assert ragged_rows(table) == ["| `x|y` | z |"]


SET_UP = {
    "demo": "python3 -m venv .venv && . .venv/bin/activate && pip install . && trace-instrument demo",
    "tests": "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && python -m pytest",
}


def test_the_readme_starts_with_the_two_set_up_commands() -> None:
    """A fresh clone is set up by the README's first two code blocks: the demo, then the default tests."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [block.strip() for block in re.findall(r"^```bash\n(.*?)^```", readme, re.MULTILINE | re.DOTALL)]
    assert blocks[:2] == [SET_UP["demo"], SET_UP["tests"]]
