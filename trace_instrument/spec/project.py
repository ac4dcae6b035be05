"""The project configuration: the selection and anchors folders a checkout's commands take by default.

Read from the checkout's `pyproject.toml` (table `[tool.trace-instrument]`) or its
`.trace-instrument.toml` (the same keys at top level); both at once is refused as ambiguous.
Command-line flags replace the configured value key by key (the command line merges them).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_instrument.model import EXTRAS, FACILITIES

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
        hint = _did_you_mean(name, choices)
        if key == "facility":
            return f"unknown facility {name!r}{hint} (choose from {', '.join(FACILITIES)})"
        if key == "extras":
            return f"unknown extra {name!r}{hint} (choose from {', '.join(EXTRAS)})"
        return f"unknown point id {name!r}{hint} (`trace-instrument points` lists them)"
    return None


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    import difflib  # only to suggest a name for a word that is not one

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


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
            hint = _did_you_mean(key, KEYS)
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
