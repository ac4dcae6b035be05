"""The record of what apply put in a checkout, so check can tell stale from hand-edited.

It lives next to verl/ as .trace-instrument.json and maps each point in place
to the template texts it was applied with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from trace_instrument.engine.files import PendingWrite
from trace_instrument.model import Point

MANIFEST_NAME = ".trace-instrument.json"


@dataclass(frozen=True)
class Manifest:
    points: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path) -> Manifest:
        try:
            data = json.loads((root / MANIFEST_NAME).read_text(encoding="utf-8"))
            return cls({str(k): tuple(v["templates"]) for k, v in data.get("points", {}).items()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return cls()

    def recorded(self, point: Point) -> tuple[str, ...] | None:
        texts = self.points.get(point.id)
        return texts if texts and texts != templates_of(point) else None

    def updated(self, in_place: list[Point], gone: list[str]) -> Manifest:
        points = {k: v for k, v in self.points.items() if k not in gone}
        points.update({p.id: templates_of(p) for p in in_place})
        return Manifest(points)

    def write(self, tool: str) -> PendingWrite:
        if not self.points:
            return PendingWrite(MANIFEST_NAME, None)
        body = {
            "tool": tool,
            "note": "written by trace-instrument: the template of each point in place, to tell stale from edited",
            "points": {k: {"templates": list(v)} for k, v in sorted(self.points.items())},
        }
        return PendingWrite(MANIFEST_NAME, (json.dumps(body, indent=1, ensure_ascii=False) + "\n").encode())


def templates_of(point: Point) -> tuple[str, ...]:
    return tuple(edit.template.text for edit in point.edits)
