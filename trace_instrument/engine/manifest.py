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

from trace_instrument.engine.files import CheckoutError, PendingWrite
from trace_instrument.model import BodyExtent, ChangeKind, Extents, Point, RunError, RunErrorKind

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
    bodies: dict[int, BodyExtent] = field(default_factory=dict)  # where its unbounded captured bodies are

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
        if self.bodies:
            body["bodies"] = {
                str(i): [e.length, e.first, e.last, e.before, e.after, e.beyond_first, e.beyond_last]
                for i, e in sorted(self.bodies.items())
            }
        return body


Replacements = dict[int, Replaced]  # edit index within its point -> what it replaced

# git's conflict markers (`|||||||` opens the base's side in the diff3 and zdiff3 styles); a line of
# the JSON apply writes never starts with one (each starts with a space, a brace or a bracket)
CONFLICT_MARKERS = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")


class ManifestError(CheckoutError):
    """A manifest no run can trust: the run stops (exit 2), nothing written, and says how to resolve it."""

    def __init__(self, message: str, advice: str, line: int = 0, conflict: bool = False):
        kind = RunErrorKind.MANIFEST_CONFLICT if conflict else RunErrorKind.MANIFEST_INVALID
        super().__init__(f"{message}. {advice}", run_kind=kind)
        self.line = line

    def as_run_error(self) -> RunError:
        return RunError(self.run_kind, str(self), path=MANIFEST_NAME, line=self.line)


def conflict_advice() -> str:
    """How to resolve a manifest two merged branches both wrote, and what that costs."""
    return (
        "Both branches ran apply and each side holds its own records; neither is the merged tree's. "
        f"Keep one side whole (`git checkout --ours {MANIFEST_NAME}`, or `--theirs`; once the merge is "
        f"committed, `git checkout HEAD^1 -- {MANIFEST_NAME}`), then run `trace-instrument apply` and commit: "
        "it records what the merged tree holds (the points in place, their business code, the runtime "
        "package). What only the other side recorded is lost: a point only it applied with an older "
        "template is drifted instead of stale, `remove` may leave in imports only it added, and rebuilds "
        "from the anchor, rather than restoring byte for byte, the regions only it rewrote"
    )


def invalid_advice() -> str:
    """How to resolve a manifest that cannot be read as one, and what that costs."""
    return (
        f"Put the committed one back (`git checkout HEAD -- {MANIFEST_NAME}`), or delete it and run "
        "`trace-instrument apply`, which writes a fresh one from the tree (losing what only the old one "
        "recorded: the templates of points applied with an older one, the imports apply added, the exact "
        "originals of rewritten regions)"
    )


def parse(data: bytes) -> Manifest:
    """A manifest from the bytes of .trace-instrument.json (ManifestError: see Manifest.load)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ManifestError(f"{MANIFEST_NAME}:{line}: not UTF-8 text", invalid_advice(), line) from None
    for number, line_text in enumerate(text.splitlines(), 1):
        marker = next((m for m in CONFLICT_MARKERS if line_text.startswith(m)), None)
        if marker is not None:
            message = f"{MANIFEST_NAME}:{number}: a merge left its conflict markers in the manifest (`{marker}`)"
            raise ManifestError(message, conflict_advice(), number, conflict=True)
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        message = f"{MANIFEST_NAME}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno})"
        raise ManifestError(message, invalid_advice(), exc.lineno) from None
    try:
        return _from_json(body)
    except _Shape as exc:
        message = f"{MANIFEST_NAME}: not the shape of a trace-instrument manifest: {exc}"
        raise ManifestError(message, invalid_advice()) from None


class _Shape(Exception):
    """Where a manifest's JSON differs from the shape apply writes."""


def _from_json(body: object) -> Manifest:
    top = _object(body, "the top level")
    points = {
        key: (_string(_object(value, f"points.{key}").get("file"), f"points.{key}.file"), _templates(value, key))
        for key, value in _section(top, "points").items()
    }
    baselines = {key: _fingerprints(value, key) for key, value in _section(top, "baselines").items()}
    imports = {key: tuple(_strings(value, f"imports.{key}")) for key, value in _section(top, "imports").items()}
    runtime = {key: _string(value, f"runtime.{key}") for key, value in _section(top, "runtime").items()}
    replaced = {key: _replacements(value, key) for key, value in _section(top, "replaced").items()}
    tool = top.get("tool")
    return Manifest(points, baselines, imports, runtime, replaced, tool if isinstance(tool, str) else "")


def _object(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise _Shape(f"{where}: expected an object, found {_kind(value)}")
    return value


def _section(top: dict[str, object], name: str) -> dict[str, object]:
    return _object(top.get(name, {}), name)


def _string(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise _Shape(f"{where}: expected a string, found {_kind(value)}")
    return value


def _strings(value: object, where: str) -> list[str]:
    if not isinstance(value, list):
        raise _Shape(f"{where}: expected a list of strings, found {_kind(value)}")
    return [_string(item, f"{where}[{index}]") for index, item in enumerate(value)]


def _templates(value: object, point: str) -> tuple[str, ...]:
    return tuple(_strings(_object(value, f"points.{point}").get("templates"), f"points.{point}.templates"))


def _fingerprints(value: object, file: str) -> tuple[str, ...]:
    try:
        return _unpack(_string(value, f"baselines.{file}"))
    except (ValueError, zlib.error) as exc:  # binascii.Error and UnicodeDecodeError are ValueErrors
        raise _Shape(f"baselines.{file}: not a packed list of fingerprints ({exc})") from None


def _replacements(value: object, point: str) -> Replacements:
    records: Replacements = {}
    for index, record in _object(value, f"replaced.{point}").items():
        where = f"replaced.{point}.{index}"
        if not index.isdecimal():
            raise _Shape(f"{where}: expected an edit number")
        fields = _object(record, where)
        inside, within = fields.get("inside", []), fields.get("within", [])
        records[int(index)] = Replaced(
            _string(fields.get("text"), f"{where}.text"),
            _string(fields.get("digest"), f"{where}.digest"),
            tuple(_strings(inside, f"{where}.inside")),
            tuple(_strings(within, f"{where}.within")),
            _bodies(fields.get("bodies", {}), f"{where}.bodies"),
        )
    return records


def _bodies(value: object, where: str) -> dict[int, BodyExtent]:
    extents: dict[int, BodyExtent] = {}
    for index, item in _object(value, where).items():
        at = f"{where}.{index}"
        match item:
            case [
                int(length),
                str(first),
                str(last),
                int(before),
                int(after),
                str(b_first),
                str(b_last),
            ] if index.isdecimal():
                extents[int(index)] = BodyExtent(length, first, last, before, after, b_first, b_last)
            case _:
                raise _Shape(
                    f"{at}: expected a capture number and [length, first, last, before, after, beyond_first, beyond_last]"
                )
    return extents


def _kind(value: object) -> str:
    """How JSON calls a value's type, for messages."""
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)


@dataclass(frozen=True)
class Manifest:
    points: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)  # id -> (file, templates)
    baselines: dict[str, tuple[str, ...]] = field(default_factory=dict)  # file -> business fingerprints
    imports: dict[str, tuple[str, ...]] = field(default_factory=dict)  # file -> plain imports apply added
    runtime: dict[str, str] = field(default_factory=dict)  # runtime file name -> hash of what apply installed
    replaced: dict[str, Replacements] = field(default_factory=dict)  # point id -> its edits' originals
    # who wrote it ("trace-instrument 0.2.0"; "" when unknown): not a record of the tree, so left out of ==
    tool: str = field(default="", compare=False)

    @classmethod
    def load(cls, root: Path) -> Manifest:
        """The checkout's manifest; an empty one when there is none (the next apply writes it).

        Raises ManifestError when there is one no run can trust: merge-conflict markers, text that
        is not UTF-8 or not JSON, or JSON that is not a manifest's shape (each with its line where
        it has one). Working from it as if it were absent would drop its records.
        """
        try:
            data = (root / MANIFEST_NAME).read_bytes()
        except FileNotFoundError:
            return cls()
        except OSError as exc:
            raise ManifestError(f"{MANIFEST_NAME}: cannot be read ({exc.strerror or exc})", invalid_advice()) from None
        return parse(data)

    @property
    def extents(self) -> Extents:
        """Where apply left the captured bodies of the rewrites in place, by (point, edit)."""
        return {(point, index): r.bodies for point, records in self.replaced.items() for index, r in records.items()}

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
            return PendingWrite(MANIFEST_NAME, None, kind=ChangeKind.MANIFEST)
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
        data = (json.dumps(body, indent=1, ensure_ascii=False) + "\n").encode()
        return PendingWrite(MANIFEST_NAME, data, kind=ChangeKind.MANIFEST)


def templates_of(point: Point) -> tuple[str, ...]:
    return tuple(edit.template.text for edit in point.edits)


def _pack(fingerprints: tuple[str, ...]) -> str:
    return base64.b64encode(zlib.compress("\n".join(fingerprints).encode(), 9)).decode()


def _unpack(text: str) -> tuple[str, ...]:
    raw = zlib.decompress(base64.b64decode(text)).decode()
    return tuple(raw.split("\n")) if raw else ()
