"""Where the shipped anchor specs and templates live (trace_instrument.data finds them), and the
JSON Schemas of the spec files."""

from __future__ import annotations

from pathlib import Path

from trace_instrument.data import data_dir


def anchors_dir() -> Path:
    return data_dir("anchors")


def templates_dir() -> Path:
    return data_dir("templates")


def schema_path(name: str = "anchors") -> Path:
    """The JSON Schema of spec files ("anchors") or of anchors/_catalog.yaml ("catalog").

    Editors use it through the `# yaml-language-server: $schema=...` line of a spec file.
    """
    return Path(__file__).resolve().parent / f"{name}.schema.json"
