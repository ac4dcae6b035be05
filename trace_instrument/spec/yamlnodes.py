"""YAML read as nodes that remember their line, so every error can name file, line and key."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from trace_instrument.model import SpecSource
from trace_instrument.spec.errors import SpecError, SpecProblem

_STRING_TAG = "tag:yaml.org,2002:str"
# libyaml's loader when PyYAML has it (several times faster); nodes and marks are the same
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SCALAR_NAMES = {
    "tag:yaml.org,2002:int": "a number",
    "tag:yaml.org,2002:float": "a number",
    "tag:yaml.org,2002:bool": "true/false",
    "tag:yaml.org,2002:null": "an empty value",
    "tag:yaml.org,2002:timestamp": "a date",
}


@dataclass(frozen=True)
class Node:
    """A YAML node plus the file it came from."""

    raw: yaml.Node
    file: str

    @property
    def line(self) -> int:
        return self.raw.start_mark.line + 1

    def where(self, key: str = "") -> SpecSource:
        return SpecSource(self.file, self.line, key)

    @property
    def is_mapping(self) -> bool:
        return isinstance(self.raw, yaml.MappingNode)

    @property
    def is_sequence(self) -> bool:
        return isinstance(self.raw, yaml.SequenceNode)

    @property
    def is_scalar(self) -> bool:
        return isinstance(self.raw, yaml.ScalarNode)

    @property
    def is_string(self) -> bool:
        """A scalar YAML reads as a string (`12`, `true` and an empty value are not)."""
        return self.is_scalar and self.raw.tag == _STRING_TAG

    @property
    def is_boolean(self) -> bool:
        return self.is_scalar and self.raw.tag == "tag:yaml.org,2002:bool"

    @property
    def boolean(self) -> bool:
        """A YAML boolean's value (true, True, yes, on ...: what YAML 1.1 reads as true)."""
        return str(self.raw.value).lower() in ("true", "yes", "on", "y")

    @property
    def kind_name(self) -> str:
        """What the node is, in words, for error messages."""
        if self.is_mapping:
            return "a mapping"
        if self.is_sequence:
            return "a list"
        return _SCALAR_NAMES.get(self.raw.tag, "a string")

    def items(self) -> list[tuple[str, Node]]:
        return [(k.value, Node(v, self.file)) for k, v in self.raw.value]

    def elements(self) -> list[Node]:
        return [Node(v, self.file) for v in self.raw.value]

    @property
    def text(self) -> str:
        return str(self.raw.value)

    @property
    def block_first_line(self) -> int:
        """1-based line of the first content line of a (block) scalar."""
        if isinstance(self.raw, yaml.ScalarNode) and self.raw.style in ("|", ">"):
            return self.raw.start_mark.line + 2
        return self.line


def read_yaml(path: Path, display: str) -> Node:
    try:
        with path.open("r", encoding="utf-8") as handle:
            root = yaml.compose(handle, Loader=_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 0
        raise SpecError([SpecProblem(SpecSource(display, line), f"not valid YAML: {exc}")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([SpecProblem(SpecSource(display, 0), f"cannot read: {exc}")]) from None
    if root is None:
        raise SpecError([SpecProblem(SpecSource(display, 1), "empty file")])
    return Node(root, display)
