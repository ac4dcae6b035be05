"""Which formatter a checkout's own configuration names, so inserted code is written its way.

Looked for in the checkout root (the folder `apply PATH` works on) and its parents up to the
git root (the first folder holding `.git`; without one, the checkout root alone: a
`pyproject.toml` in a home folder is not the checkout's). The nearest folder holding any
formatter configuration decides; in it, first match wins:

1. `.pre-commit-config.yaml`: a `ruff-format` or `black` hook (what runs on every commit; with
   both, the one listed last, which writes last);
2. `.ruff.toml`, `ruff.toml` (ruff's own order), or `[tool.ruff.format]` in `pyproject.toml`: ruff;
3. `[tool.black]` in `pyproject.toml`: black (a `[tool.ruff]` beside it may be lint settings only);
4. `[tool.ruff]` in `pyproject.toml`: ruff (its `line-length` is its formatter's too: verl's case).

No configuration: None, and apply writes the templates as they are (its output before formatters
were read). Ruff reads its own settings when it formats (run on the target file's path), so of
ruff only its hook's arguments are read here (`--line-length`, `--config`, ...: given to `ruff
format` as the hook gives them); of black, `[tool.black]` and the hook's arguments (arguments win,
as on black's command line). A hook's `rev` is the version the checkout pins (apply says when the
one installed differs). Files that do not parse count as absent: they configure nothing here.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from trace_instrument.model import CodeStyle, Formatter

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

PYPROJECT = "pyproject.toml"
RUFF_FILES = (".ruff.toml", "ruff.toml")
PRE_COMMIT = ".pre-commit-config.yaml"
HOOKS = {"ruff-format": Formatter.RUFF, "black": Formatter.BLACK}
_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)$")


def find_style(root: Path) -> CodeStyle | None:
    """The formatter the checkout at `root` is configured with, and its style; None without one."""
    for folder in _folders(root):
        style = _style_in(folder, root)
        if style is not None:
            return style
    return None


def _folders(root: Path) -> Iterator[Path]:
    """The checkout root and its parents up to the git root (the root alone outside git)."""
    root = root.resolve()
    chain = [root, *root.parents]
    top = next((i for i, folder in enumerate(chain) if (folder / ".git").exists()), 0)
    yield from chain[: top + 1]


def _style_in(folder: Path, root: Path) -> CodeStyle | None:
    pyproject = _toml(folder / PYPROJECT)
    tool = pyproject.get("tool", {}) if isinstance(pyproject.get("tool"), dict) else {}
    black = tool.get("black") if isinstance(tool.get("black"), dict) else None
    where = _relative(folder, root)

    def named(formatter: Formatter, file: str, part: str = "") -> CodeStyle:
        """The style named in `file` (its `part`: a table or a hook), labelled from the checkout root."""
        label = f"{where}{file} {part}" if part else f"{where}{file}"
        return CodeStyle(formatter, label, str(folder), config_file=f"{where}{file}")

    hook = _pre_commit_hook(folder / PRE_COMMIT)
    if hook is not None:
        formatter, rev, args = hook
        style = named(formatter, PRE_COMMIT, f"hook {_hook_id(formatter)}")
        if formatter is Formatter.BLACK:
            style = _with_black_args(_with_black_table(style, black or {}), args)
        else:
            style = _with_ruff_args(style, args)
        return replace(style, pinned=rev)
    for name in RUFF_FILES:
        if (folder / name).is_file():
            return named(Formatter.RUFF, name)
    ruff = tool.get("ruff") if isinstance(tool.get("ruff"), dict) else None
    if ruff is not None and isinstance(ruff.get("format"), dict):
        return named(Formatter.RUFF, PYPROJECT, "[tool.ruff.format]")
    if black is not None:
        return _with_black_table(named(Formatter.BLACK, PYPROJECT, "[tool.black]"), black)
    if ruff is not None:
        return named(Formatter.RUFF, PYPROJECT, "[tool.ruff]")
    return None


def _relative(folder: Path, root: Path) -> str:
    """How a folder's files are named in outputs: from the checkout root ("" there, `../` above)."""
    depth = len(root.resolve().parts) - len(folder.parts)
    return "../" * depth


def _hook_id(formatter: Formatter) -> str:
    return next(hook for hook, named in HOOKS.items() if named is formatter)


def _toml(path: Path) -> dict[str, Any]:
    """A TOML file's tables ({} when absent or not TOML)."""
    try:
        tables: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
        return tables
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _pre_commit_hook(path: Path) -> tuple[Formatter, str, tuple[str, ...]] | None:
    """The formatter hook of a pre-commit configuration that runs last: its formatter, the
    version its repo's `rev` pins ("" for none) and its `args`."""
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    found = None
    repos = config.get("repos") if isinstance(config, dict) else None
    for repo in repos if isinstance(repos, list) else []:
        if not isinstance(repo, dict) or not isinstance(repo.get("hooks"), list):
            continue
        version = _VERSION.match(str(repo.get("rev", "")))
        for hook in repo["hooks"]:
            formatter = HOOKS.get(hook.get("id", "")) if isinstance(hook, dict) else None
            if formatter is not None:
                args = hook.get("args")
                arguments = tuple(str(a) for a in args) if isinstance(args, list) else ()
                found = (formatter, version.group(1) if version else "", arguments)
    return found


def _with_black_table(style: CodeStyle, table: Mapping[str, Any]) -> CodeStyle:
    """Black's options from its `[tool.black]` table (black accepts `-` and `_` in keys)."""
    options = {key.replace("_", "-"): value for key, value in table.items()}
    length = options.get("line-length")
    targets = options.get("target-version")
    return replace(
        style,
        line_length=length if isinstance(length, int) and not isinstance(length, bool) else style.line_length,
        string_normalization=not bool(options.get("skip-string-normalization", False)),
        magic_trailing_comma=not bool(options.get("skip-magic-trailing-comma", False)),
        preview=bool(options.get("preview", False)),
        target_versions=tuple(str(t) for t in targets) if isinstance(targets, list) else style.target_versions,
    )


# ruff format's options that change what it writes, and whether each takes a value; its hook's other
# arguments (--check, --diff, --exit-non-zero-on-format, ...) are about the run, not the output
RUFF_OPTIONS = {
    "--line-length": True,
    "--config": True,
    "--target-version": True,
    "--preview": False,
    "--no-preview": False,
    "--isolated": False,
}


def _with_ruff_args(style: CodeStyle, args: Sequence[str]) -> CodeStyle:
    """ruff's options from its hook's arguments (`--line-length=120`, `--config pyproject.toml`,
    `--config "format.quote-style='single'"`), kept to be given to `ruff format` as the hook gives
    them; the line length is noted too."""
    words = [part for arg in args for part in (arg.split("=", 1) if arg.startswith("--") else [arg])]
    kept: list[str] = []
    for at, word in enumerate(words):
        following = words[at + 1] if at + 1 < len(words) else ""
        takes_value = RUFF_OPTIONS.get(word)
        if takes_value is None or (takes_value and not following):
            continue
        kept += [word, following] if takes_value else [word]
        if word == "--line-length" and following.isdigit():
            style = replace(style, line_length=int(following))
    return replace(style, arguments=tuple(kept))


def _with_black_args(style: CodeStyle, args: Sequence[str]) -> CodeStyle:
    """Black's options from a hook's arguments (`--line-length=120`, `-l 120`, `-S`, `-C`, `--preview`)."""
    words = [part for arg in args for part in (arg.split("=", 1) if arg.startswith("--") else [arg])]
    for at, word in enumerate(words):
        following = words[at + 1] if at + 1 < len(words) else ""
        if word in ("--line-length", "-l") and following.isdigit():
            style = replace(style, line_length=int(following))
        elif word in ("--skip-string-normalization", "-S"):
            style = replace(style, string_normalization=False)
        elif word in ("--skip-magic-trailing-comma", "-C"):
            style = replace(style, magic_trailing_comma=False)
        elif word == "--preview":
            style = replace(style, preview=True)
        elif word in ("--target-version", "-t") and following:
            style = replace(style, target_versions=(*style.target_versions, following))
    return style
