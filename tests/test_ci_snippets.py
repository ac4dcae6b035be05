"""The CI and pre-commit snippets of README.md and docs/ci.md work as pasted (issue 39): the tool's
source is one variable the user sets, never a placeholder URL, and pre-commit says `pre-commit install`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[1]
PAGES = (ROOT / "README.md", ROOT / "docs" / "ci.md")
VARIABLE = "TRACE_INSTRUMENT_SOURCE"


def _yaml_blocks(page: Path) -> list[object]:
    text = page.read_text(encoding="utf-8")
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)]


def _steps(block: object) -> list[dict[str, str]]:
    if isinstance(block, list):
        return [s for s in block if isinstance(s, dict)]
    if isinstance(block, dict) and "jobs" in block:
        return [s for job in block["jobs"].values() for s in job["steps"]]
    return []


def _actions(page: Path) -> list[dict[str, str]]:
    steps = [_steps(b) for b in _yaml_blocks(page)]
    found = [s for s in steps if any("trace-instrument check" in step.get("run", "") for step in s)]
    assert len(found) == 1, f"{page.name}: one GitHub Actions snippet"
    return found[0]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_actions_snippet_installs_from_the_one_variable(page: Path) -> None:
    install = [s["run"] for s in _actions(page) if "pip install" in s.get("run", "")]
    assert len(install) == 1
    assert "<" not in install[0] and "github.com" not in install[0], install[0]
    assert f'"${VARIABLE}"' in install[0] or f'"${{{{ vars.{VARIABLE} }}}}"' in install[0], install[0]


def test_the_variable_is_documented_with_each_kind_of_source() -> None:
    ci = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    section = ci.split("## GitHub Actions", 1)[1].split("\n## ", 1)[0]
    assert f"`{VARIABLE}`" in section and "repository variable" in section
    for kind in ("a folder of the repository", "a URL", "a name on a package index"):
        assert kind in section, kind
    job = next(b for b in _yaml_blocks(ROOT / "docs" / "ci.md") if isinstance(b, dict) and "jobs" in b)
    assert job["jobs"]["tracing"]["env"][VARIABLE] == f"${{{{ vars.{VARIABLE} }}}}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_pre_commit_snippet_says_pre_commit_install_and_names_a_hook_that_exists(page: Path) -> None:
    hooks = {h["id"] for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}
    configs = [b for b in _yaml_blocks(page) if isinstance(b, dict) and "repos" in b]
    assert len(configs) == 1
    (repo,) = configs[0]["repos"]
    assert {h["id"] for h in repo["hooks"]} <= hooks
    assert "<" not in str(repo["rev"]) and "<" not in repo["repo"]
    assert "pre-commit install" in page.read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_install_step_fails_with_one_line_when_the_variable_is_not_set() -> None:
    step = next(s["run"] for s in _actions(ROOT / "docs" / "ci.md") if "pip install" in s.get("run", ""))
    ran = subprocess.run(
        ["bash", "-c", step], check=False, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True
    )
    assert ran.returncode == 1
    assert ran.stdout.strip().startswith(f"::error::set the repository variable {VARIABLE}")
