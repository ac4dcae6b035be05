"""Analysis <-> JSON for the result cache (plain data, never pickle: the cache sits in the trace folder)."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from enum import Enum
from typing import Any

from trace_instrument.traces import model


def to_json(analysis: model.Analysis) -> str:
    """The analysis as JSON text."""
    return json.dumps(dataclasses.asdict(analysis))


def from_json(text: str) -> model.Analysis:
    """The analysis back from ``to_json``'s text."""
    return typing.cast(model.Analysis, _build(model.Analysis, json.loads(text)))


def _build(kind: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(kind)
    args = typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _build(inner[0], value)
    if isinstance(kind, type) and issubclass(kind, Enum):
        return kind(value)  # the member, so that `is` comparisons hold after the cache
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind, vars(model))
        return kind(**{f.name: _build(hints[f.name], value[f.name]) for f in dataclasses.fields(kind) if f.init})
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_build(args[0], v) for v in value)
        return tuple(_build(a, v) for a, v in zip(args, value))
    if origin is dict:
        return {k: _build(args[1], v) for k, v in value.items()}
    return value
