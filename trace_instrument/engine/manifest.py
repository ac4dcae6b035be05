"""The record of what apply put in a checkout, kept next to verl/ as .trace-instrument.json.

For each point in place: its file and the template texts it was applied with
(so check can tell `stale` from hand-edited). For each instrumented file: the
fingerprints of its business code as apply found it (the baseline of verify's
zero-intrusion proof). For each rewrite and replace_expr edit in place: the exact
text it replaced and a digest of the text it made (so remove gives the bytes back).
"""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from trace_instrument.engine.files import PendingWrite
from trace_instrument.model import Point

MANIFEST_NAME = ".trace-instrument.json"


@dataclass(frozen=True)
class Replaced:
    """What one rewrite or replace_expr edit replaced: the exact original text, the digest of the
    text the region held after the run, the other points whose code sat inside the region then
    (`inside`) and those whose code is part of the original text (`within`)."""

    text: str
    digest: str
    inside: tuple[str, ...] = ()
    within: tuple[str, ...] = ()

    def exact_when(self, staying: frozenset[str]) -> bool:
        """May the original go back when the points `staying` keep their code? Only when exactly the
        points whose code the original holds stay (the others' code inside the region goes too)."""
        return all((p in staying) == (p in self.within) for p in {*self.inside, *self.within})

    def as_json(self) -> dict[str, object]:
        body: dict[str, object] = {"text": self.text, "digest": self.digest}
        if self.inside:
            body["inside"] = list(self.inside)
        if self.within:
            body["within"] = list(self.within)
        return body

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Replaced:
        inside, within = data.get("inside", []), data.get("within", [])
        if not isinstance(inside, list) or not isinstance(within, list):
            raise TypeError("inside and within are lists")
        return cls(str(data["text"]), str(data["digest"]), tuple(map(str, inside)), tuple(map(str, within)))


Replacements = dict[int, Replaced]  # edit index within its point -> what it replaced


@dataclass(frozen=True)
class Manifest:
    points: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)  # id -> (file, templates)
    baselines: dict[str, tuple[str, ...]] = field(default_factory=dict)  # file -> business fingerprints
    imports: dict[str, tuple[str, ...]] = field(default_factory=dict)  # file -> plain imports apply added
    runtime: dict[str, str] = field(default_factory=dict)  # runtime file name -> hash of what apply installed
    replaced: dict[str, Replacements] = field(default_factory=dict)  # point id -> its edits' originals

    @classmethod
    def load(cls, root: Path) -> Manifest:
        try:
            data = json.loads((root / MANIFEST_NAME).read_text(encoding="utf-8"))
            points = {str(k): (str(v["file"]), tuple(v["templates"])) for k, v in data.get("points", {}).items()}
            baselines = {str(k): _unpack(v) for k, v in data.get("baselines", {}).items()}
            imports = {str(k): tuple(str(i) for i in v) for k, v in data.get("imports", {}).items()}
            runtime = {str(k): str(v) for k, v in data.get("runtime", {}).items()}
            replaced = {
                str(k): {int(i): Replaced.from_json(r) for i, r in v.items()}
                for k, v in data.get("replaced", {}).items()
            }
            return cls(points, baselines, imports, runtime, replaced)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, zlib.error):
            return cls()

    @property
    def applied(self) -> frozenset[str]:
        """The points apply placed (by id)."""
        return frozenset(self.points)

    def recorded(self, point: Point) -> tuple[str, ...] | None:
        """The templates a point was applied with, when they differ from today's."""
        entry = self.points.get(point.id)
        if entry is None or entry[1] == templates_of(point):
            return None
        return entry[1]

    def updated(
        self,
        in_place: list[Point],
        gone: list[str],
        baselines: dict[str, tuple[str, ...]],
        imports: dict[str, tuple[str, ...]] | None = None,
        runtime: dict[str, str] | None = None,
        replaced: dict[str, Replacements] | None = None,
    ) -> Manifest:
        """The manifest after a run: points in place added, points gone dropped, baselines replaced.

        `runtime` (file name -> hash) replaces the recorded runtime files when given; `{}` clears them.
        `replaced` replaces the originals recorded for the points it names (`{}` for a point: none).
        """
        points = {k: v for k, v in self.points.items() if k not in gone}
        points.update({p.id: (p.file, templates_of(p)) for p in in_place})
        files = {file for file, _ in points.values()}
        merged = {**self.baselines, **baselines}
        added = dict(self.imports)
        for file, texts in (imports or {}).items():
            added[file] = tuple(dict.fromkeys([*added.get(file, ()), *texts]))
        originals = {**self.replaced, **(replaced or {})}
        return Manifest(
            points,
            {f: v for f, v in merged.items() if f in files},
            {f: v for f, v in added.items() if f in files and v},
            dict(self.runtime) if runtime is None else dict(runtime),
            {k: v for k, v in originals.items() if k in points and v},
        )

    def write(self, tool: str) -> PendingWrite:
        if not self.points:
            return PendingWrite(MANIFEST_NAME, None)
        body = {
            "tool": tool,
            "note": "written by trace-instrument apply; check and verify read it",
            "points": {k: {"file": f, "templates": list(t)} for k, (f, t) in sorted(self.points.items())},
            "baselines": {k: _pack(v) for k, v in sorted(self.baselines.items())},
            "imports": {k: list(v) for k, v in sorted(self.imports.items())},
            "runtime": dict(sorted(self.runtime.items())),
        }
        if self.replaced:
            body["replaced"] = {
                k: {str(i): r.as_json() for i, r in sorted(v.items())} for k, v in sorted(self.replaced.items())
            }
        return PendingWrite(MANIFEST_NAME, (json.dumps(body, indent=1, ensure_ascii=False) + "\n").encode())


def templates_of(point: Point) -> tuple[str, ...]:
    return tuple(edit.template.text for edit in point.edits)


def _pack(fingerprints: tuple[str, ...]) -> str:
    return base64.b64encode(zlib.compress("\n".join(fingerprints).encode(), 9)).decode()


def _unpack(text: str) -> tuple[str, ...]:
    raw = zlib.decompress(base64.b64decode(text)).decode()
    return tuple(raw.split("\n")) if raw else ()
