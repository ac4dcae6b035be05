"""The project configuration: the selection and anchors folders a checkout's commands take by default.

Read from the checkout's `pyproject.toml` (table `[tool.trace-instrument]`) or its
`.trace-instrument.toml` (the same keys at top level); both at once is refused as ambiguous.
Command-line flags replace the configured value key by key (the command line merges them).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_instrument.model import EXTRAS, FACILITIES
from trace_instrument.spec.errors import did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

PYPROJECT = "pyproject.toml"
OWN_FILE = ".trace-instrument.toml"
TABLE = ("tool", "trace-instrument")
TABLE_NAME = ".".join(TABLE)
# the keys that name points, facilities and extras, in the order their names are checked
NAME_KEYS = ("facility", "extras", "only", "skip")
KEYS = ("anchors", *NAME_KEYS)


class ConfigError(Exception):
    """A configuration that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class ProjectConfig:
    """One checkout's configuration: each key's value, None where the file leaves it out."""

    file: Path  # the file read
    in_pyproject: bool  # the keys sit in pyproject.toml's [tool.trace-instrument] table
    anchors: tuple[Path, ...] | None = None  # absolute: resolved against the checkout root
    facility: tuple[str, ...] | None = None
    extras: tuple[str, ...] | None = None
    only: tuple[str, ...] | None = None
    skip: tuple[str, ...] | None = None

    @property
    def label(self) -> str:
        """How outputs name the configuration: the file's name, and its table in pyproject.toml."""
        return f"{PYPROJECT} [{TABLE_NAME}]" if self.in_pyproject else OWN_FILE

    def where(self, key: str) -> str:
        """The place a problem of `key` is reported at: the file (and table) and the key."""
        table = f" [{TABLE_NAME}]" if self.in_pyproject else ""
        return f"{self.file}{table}: key {key!r}"

    def names(self, key: str) -> tuple[str, ...] | None:
        """The value of one of NAME_KEYS."""
        values = {"facility": self.facility, "extras": self.extras, "only": self.only, "skip": self.skip}
        return values[key]


def unknown_name(key: str, names: Iterable[str], point_ids: Sequence[str]) -> str | None:
    """What is wrong with the first name a `key` (facility, extras, only, skip) does not know, or None.

    The one wording of the problem, for the flags and the configuration alike.
    """
    choices = {"facility": FACILITIES, "extras": EXTRAS}.get(key, point_ids)
    for name in names:
        if name in choices:
            continue
        hint = did_you_mean(name, choices)
        if key == "facility":
            return f"unknown facility {name!r}{hint} (choose from {', '.join(FACILITIES)})"
        if key == "extras":
            return f"unknown extra {name!r}{hint} (choose from {', '.join(EXTRAS)})"
        return f"unknown point id {name!r}{hint} (`trace-instrument points` lists them)"
    return None


def find_config(checkout: Path) -> ProjectConfig | None:
    """The checkout's configuration, validated but for point ids (the catalog knows those), or None.

    Raises ConfigError for a file that is not TOML, both files configuring, an unknown key, a value
    of the wrong type, an unknown facility or extra, or an anchors folder that does not exist.
    """
    root = checkout.resolve()
    if not (root / "verl").is_dir():
        return None  # not a checkout: the command names what is wrong with the path
    candidates = []
    pyproject = checkout / PYPROJECT
    if pyproject.is_file():
        table = _table(pyproject, _read(pyproject))
        if table is not None:
            candidates.append((pyproject, True, table))
    own = checkout / OWN_FILE
    if own.is_file():
        candidates.append((own, False, _read(own)))
    if len(candidates) > 1:
        raise ConfigError(f"two project configurations: {pyproject} [{TABLE_NAME}] and {own}; keep one of them")
    if not candidates:
        return None
    file, in_pyproject, keys = candidates[0]
    return _config(ProjectConfig(file, in_pyproject), keys, root)


def _read(file: Path) -> dict[str, Any]:
    try:
        with file.open("rb") as stream:
            document: dict[str, Any] = tomllib.load(stream)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot be read: {exc}") from None
    return document


def _table(file: Path, document: dict[str, Any]) -> dict[str, Any] | None:
    tool = document.get(TABLE[0])
    if not isinstance(tool, dict) or TABLE[1] not in tool:
        return None
    table = tool[TABLE[1]]
    if not isinstance(table, dict):
        raise ConfigError(f"{file}: [{TABLE_NAME}] must be a table, not {_type(table)}")
    return table


def _config(empty: ProjectConfig, keys: dict[str, Any], root: Path) -> ProjectConfig:
    for key in keys:
        if key not in KEYS:
            hint = did_you_mean(key, KEYS)
            raise ConfigError(f"{empty.where(key)}: unknown key{hint} (allowed: {', '.join(KEYS)})")
    values = {key: _strings(empty, key, keys[key]) for key in KEYS if key in keys}
    for key in ("facility", "extras"):  # point ids wait for the catalog
        problem = unknown_name(key, values.get(key, ()), ())
        if problem:
            raise ConfigError(f"{empty.where(key)}: {problem}")
    for key in ("facility", "only"):
        if values.get(key) == ():
            # an empty list reads as "none", while a flag not given means "every one"
            raise ConfigError(f"{empty.where(key)}: is empty; leave the key out to select every one")
    anchors = values.get("anchors")
    return ProjectConfig(
        empty.file,
        empty.in_pyproject,
        anchors=None if anchors is None else tuple(_folder(empty, name, root) for name in anchors),
        facility=values.get("facility"),
        extras=values.get("extras"),
        only=values.get("only"),
        skip=values.get("skip"),
    )


def _strings(config: ProjectConfig, key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ConfigError(f"{config.where(key)}: must be a list of strings, not {_type(value)}")
    for item in value:
        if not isinstance(item, str) or not item:
            wrong = "an empty string" if item == "" else _type(item)
            raise ConfigError(f"{config.where(key)}: must be a list of non-empty strings, not one with {wrong}")
    return tuple(value)


def _type(value: object) -> str:
    names = {dict: "a table", list: "a list", str: "a string", bool: "a boolean", int: "an integer"}
    return names.get(type(value), f"a {type(value).__name__}")


def _folder(config: ProjectConfig, name: str, root: Path) -> Path:
    folder = root / name  # an absolute name stays as it is
    if not folder.is_dir():
        raise ConfigError(f"{config.where('anchors')}: no such folder {name!r} (looked for {folder})")
    return folder


@dataclass(frozen=True)
class Recorded:
    """What naming an anchors folder in a checkout's configuration did."""

    folder: str  # as the configuration names it: relative to the checkout
    file: Path | None = None  # the configuration that names it (None: it could not be recorded)
    added: bool = False  # False: the configuration named it already (or could not be changed)
    problem: str = ""  # why it could not be recorded, and what to add by hand


def record_anchors(checkout: Path, folder: str) -> Recorded:
    """Name `folder` (relative to the checkout) in the checkout's `anchors`, so that every command reads
    it without a flag: in the configuration the checkout has (added to its `anchors` list, or as the key),
    else in a `[tool.trace-instrument]` table appended to its pyproject.toml, else in a new
    `.trace-instrument.toml`. The file is re-read after the change; a change it does not bear out is
    undone and reported, as is a configuration that cannot be read or a list written over lines."""
    root = checkout.resolve()
    by_hand = f"name it by hand: anchors = [{_quoted(folder)}]"
    try:
        config = find_config(root)
    except ConfigError as exc:
        return Recorded(folder, problem=f"{exc}; {by_hand}")
    target = (root / folder).resolve()
    if config is not None and any(a.resolve() == target for a in config.anchors or ()):
        return Recorded(folder, config.file)
    file, text = _configured(root, config)
    new = _with_folder(text, folder, config)
    if new is None:
        return Recorded(folder, problem=f"{file}: its `anchors` is not a one-line list; {by_hand}")
    try:
        file.write_text(new, encoding="utf-8")
        again = find_config(root)
        if again is None or not any(a.resolve() == target for a in again.anchors or ()):
            raise ConfigError(f"{file}: the change did not name {folder}")
    except (ConfigError, OSError) as exc:
        _restore(file, text)
        return Recorded(folder, problem=f"{exc}; {by_hand}")
    return Recorded(folder, file, added=True)


def _configured(root: Path, config: ProjectConfig | None) -> tuple[Path, str | None]:
    """The file to name the folder in, and its text (None: a file to create)."""
    file = config.file if config is not None else root / PYPROJECT
    if config is None and not file.is_file():
        file = root / OWN_FILE
    return file, file.read_text(encoding="utf-8") if file.is_file() else None


def _with_folder(text: str | None, folder: str, config: ProjectConfig | None) -> str | None:
    """The configuration's text with the folder named (None: a list this cannot edit safely)."""
    line = f"anchors = [{_quoted(folder)}]"
    if text is None:
        return line + "\n"
    if config is None:  # a pyproject.toml without the table: the table goes at its end
        return text + ("\n" if text and not text.endswith("\n") else "") + f"\n[{TABLE_NAME}]\n{line}\n"
    lines = text.splitlines(keepends=True)
    start, end = _table_lines(lines, config.in_pyproject)
    if start < 0:
        return None
    if config.anchors is None:
        lines.insert(start, line + "\n")
        return "".join(lines)
    listed = [i for i in range(start, end) if re.match(r"\s*anchors\s*=", lines[i])]
    found = re.match(r"(\s*anchors\s*=\s*\[)(.*)(\]\s*(#.*)?)$", lines[listed[0]].rstrip("\n")) if listed else None
    if found is None:
        return None
    items = found.group(2).strip().rstrip(",")
    lines[listed[0]] = f"{found.group(1)}{items + ', ' if items else ''}{_quoted(folder)}{found.group(3)}\n"
    return "".join(lines)


def _table_lines(lines: list[str], in_pyproject: bool) -> tuple[int, int]:
    """Where the configuration's keys are: the first line after its table's header (a file of its own:
    the top) and the line its table ends at; (-1, -1) when the header is not written as one line."""
    if not in_pyproject:
        start = 0
    else:
        header = re.compile(r'\s*\[\s*tool\s*\.\s*(trace-instrument|"trace-instrument")\s*\]\s*(#.*)?$')
        heads = [i for i, text in enumerate(lines) if header.match(text.rstrip("\n"))]
        if len(heads) != 1:
            return -1, -1
        start = heads[0] + 1
    ends = [i for i in range(start, len(lines)) if re.match(r"\s*\[", lines[i])]
    return start, ends[0] if ends else len(lines)


def _quoted(folder: str) -> str:
    return '"' + folder.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _restore(file: Path, text: str | None) -> None:
    try:
        if text is None:
            file.unlink(missing_ok=True)
        else:
            file.write_text(text, encoding="utf-8")
    except OSError:
        pass  # the problem reported names the file
