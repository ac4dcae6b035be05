"""Every reason the runtime counts a loss under is one of the format's loss reasons, named by its
constant (never spelled again), and the documentation's table lists exactly those reasons."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from trace_instrument import formats

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "templates" / "runtime"
COUNTING = {"count_lost", "count_drop"}


def _reason_arguments() -> list[tuple[str, ast.expr]]:
    found = []
    for path in sorted(RUNTIME.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
                if name in COUNTING:
                    index = 1 if name == "count_lost" else 0
                    if len(node.args) > index:
                        found.append((f"{path.name}:{node.lineno}", node.args[index]))
    return found


def test_the_runtime_names_each_reason_by_its_constant():
    arguments = _reason_arguments()
    assert len(arguments) >= 10, "the count calls were not found"
    literal = [where for where, argument in arguments if isinstance(argument, ast.Constant)]
    assert not literal, f"a loss reason spelled as a string instead of formats.LOST_*: {literal}"


def _docstrings(tree: ast.Module) -> set[int]:
    owners = [
        tree,
        *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)),
    ]
    return {id(owner.body[0].value) for owner in owners if owner.body and isinstance(owner.body[0], ast.Expr)}


def test_no_runtime_module_spells_a_reason_but_the_format():
    spelled = []
    for path in sorted(RUNTIME.glob("*.py")):
        if path.name == "formats.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in formats.LOSS_REASONS and id(node) not in skip:
                spelled.append(f"{path.name}:{node.lineno} {node.value!r}")
    assert not spelled, f"loss reasons spelled outside formats.py: {spelled}"


def test_the_reasons_are_distinct_strings_each_named_once():
    assert len(set(formats.LOSS_REASONS)) == len(formats.LOSS_REASONS)
    named = [value for name, value in vars(formats._FORMAT).items() if name.startswith("LOST_")]
    assert sorted(named) == sorted(formats.LOSS_REASONS)


def test_the_documented_reasons_are_the_formats():
    page = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    table = page.split("Reasons:", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `([^`]+)` \|", table, flags=re.MULTILINE)
    assert documented == list(formats.LOSS_REASONS)
