"""The record of what apply put in a checkout, kept next to verl/ as .trace-instrument.json.

For each point in place: its file and the digests of the templates it was applied with (so
check can tell `stale` from hand-edited; the texts of templates no release shipped are kept
whole). For each instrumented file: its business code as apply found it, as a digest and one
short mark per statement (the baseline of verify's zero-intrusion proof). For each rewrite and
replace_expr edit in place: the exact lines it replaced and a digest of the text it made (so
remove gives the bytes back). Written as text a reviewer reads (docs/design.md, "The manifest"):
keys sorted, one record or one code line per line, so a re-apply's diff shows what changed.
Format 1 (releases up to 0.2.0: base64 blobs, whole template texts) is read as it is; the
next apply writes it again in format 2.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trace_instrument.edit.digests import digest
from trace_instrument.engine.files import CheckoutError, PendingWrite
from trace_instrument.model import BodyExtent, ChangeKind, Extents, Point, RunError, RunErrorKind
from trace_instrument.spec.shipped import shipped_templates

MANIFEST_NAME = ".trace-instrument.json"
FORMAT = 2  # the manifest format this release writes ("format"; a manifest without one is format 1)
# a statement's mark in a baseline: one character for 6 bits of its fingerprint (it tells where a
# change is; the digest of the whole fingerprints proves there is none)
MARKS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
MARKS_PER_LINE = 240  # statements per line of a baseline (lines stay under ~300 characters)
MODULE_SCOPE = "<module>"  # the scope of a file's statements outside any def or class


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
        # the text as its lines ("\n".join gives it back byte for byte, "\r" kept where it is)
        body: dict[str, object] = {"digest": self.digest, "text": Lines(self.text.split("\n"))}
        if self.inside:
            body["inside"] = list(self.inside)
        if self.within:
            body["within"] = list(self.within)
        if self.bodies:
            body["bodies"] = {
                str(i): [e.length, e.first, e.last, e.before, e.after, e.beyond_first, e.beyond_last]
                for i, e in sorted(self.bodies.items())
            }
        return dict(sorted(body.items()))


Replacements = dict[int, Replaced]  # edit index within its point -> what it replaced


@dataclass(frozen=True)
class Business:
    """A file's business code as recorded: the digest of its statements' fingerprints (what proves
    it unchanged) and, per statement in order, a mark (one character of its fingerprint, or all of
    it) that tells where a change is. `scopes`: (def or class name, statements) runs, for the layout."""

    digest: str
    marks: tuple[str, ...]
    scopes: tuple[tuple[str, int], ...] = ()
    whole: bool = False  # each mark is the whole fingerprint (a tree at hand, nothing to save)

    @classmethod
    def of(cls, fingerprints: Sequence[str], scopes: Sequence[str] = (), whole: bool = False) -> Business:
        """The record of statements with these fingerprints (in order) and, optionally, the name of
        the innermost def or class each one is in."""
        runs: list[tuple[str, int]] = []
        for name in scopes:
            _count(runs, name, 1)
        marks = tuple(fingerprints) if whole else tuple(mark(f) for f in fingerprints)
        return cls(sequence_digest(fingerprints), marks, tuple(runs), whole)

    def mark(self, fingerprint: str) -> str:
        """A statement's mark, as this record writes it."""
        return fingerprint if self.whole else mark(fingerprint)

    def lines(self) -> Iterator[str]:
        """`<scope> <marks>` lines, at most MARKS_PER_LINE statements each."""
        runs = self.scopes or ((MODULE_SCOPE, len(self.marks)),)
        at = 0
        for name, count in runs:
            for start in range(at, at + count, MARKS_PER_LINE):
                yield f"{name} {''.join(self.marks[start : min(start + MARKS_PER_LINE, at + count)])}"
            at += count


def _count(runs: list[tuple[str, int]], name: str, count: int) -> None:
    """Add `count` statements of scope `name` to the runs (the last one, when it is that scope's)."""
    if runs and runs[-1][0] == name:
        runs[-1] = (name, runs[-1][1] + count)
    else:
        runs.append((name, count))


def mark(fingerprint: str) -> str:
    """The one character a baseline keeps of a statement's fingerprint (hex: its first 6 bits)."""
    return MARKS[int(fingerprint[:2], 16) >> 2]


def sequence_digest(fingerprints: Sequence[str]) -> str:
    """The digest of a sequence of statement fingerprints (a Business record's)."""
    return digest("\n".join(fingerprints))


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
    named = top.get("format", 1)
    version = next((v for v in (1, FORMAT) if named == v and not isinstance(named, bool)), None)
    if version is None:
        raise _Shape(f"format: {named!r} is not a format this release reads (1 or {FORMAT}); a newer release wrote it")
    texts: dict[str, str] = {}
    if version == 1:  # each point holds its templates' texts; each baseline is a packed blob
        points = {key: _point_v1(value, key, texts) for key, value in _section(top, "points").items()}
        baselines = {key: Business.of(_fingerprints(value, key)) for key, value in _section(top, "baselines").items()}
    else:
        points = {key: _point(value, key) for key, value in _section(top, "points").items()}
        texts = {key: _text(value, f"templates.{key}") for key, value in _section(top, "templates").items()}
        baselines = {key: _business(value, key) for key, value in _section(top, "baselines").items()}
    imports = {key: tuple(_strings(value, f"imports.{key}")) for key, value in _section(top, "imports").items()}
    runtime = {key: _string(value, f"runtime.{key}") for key, value in _section(top, "runtime").items()}
    replaced = {key: _replacements(value, key) for key, value in _section(top, "replaced").items()}
    tool = top.get("tool")
    return Manifest(
        points, baselines, imports, runtime, replaced, texts, tool if isinstance(tool, str) else "", version
    )


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


def _text(value: object, where: str) -> str:
    """A text written as its lines (format 2), or as one string (format 1)."""
    return value if isinstance(value, str) else "\n".join(_strings(value, where))


def _point(value: object, point: str) -> tuple[str, tuple[str, ...]]:
    """A point: [its file, the digest of each of its templates]."""
    match _strings(value, f"points.{point}"):
        case [file, *templates]:
            return file, tuple(templates)
        case _:
            raise _Shape(f"points.{point}: expected [file, template digest, ...], found an empty list")


def _point_v1(value: object, point: str, texts: dict[str, str]) -> tuple[str, tuple[str, ...]]:
    """A format-1 point ({file, templates}: their texts); the texts go to `texts`."""
    fields = _object(value, f"points.{point}")
    file = _string(fields.get("file"), f"points.{point}.file")
    templates = _strings(fields.get("templates"), f"points.{point}.templates")
    texts.update((digest(text), text) for text in templates)
    return file, tuple(digest(text) for text in templates)


def _fingerprints(value: object, file: str) -> tuple[str, ...]:
    try:
        return _unpack(_string(value, f"baselines.{file}"))
    except (ValueError, zlib.error) as exc:  # binascii.Error and UnicodeDecodeError are ValueErrors
        raise _Shape(f"baselines.{file}: not a packed list of fingerprints ({exc})") from None


def _business(value: object, file: str) -> Business:
    where = f"baselines.{file}"
    fields = _object(value, where)
    marks: list[str] = []
    runs: list[tuple[str, int]] = []
    for index, line in enumerate(_strings(fields.get("code"), f"{where}.code")):
        name, _, packed = line.rpartition(" ")
        if not name or not packed or any(c not in MARKS for c in packed):
            raise _Shape(f"{where}.code[{index}]: expected `<scope> <marks>`, one mark a statement")
        marks.extend(packed)
        _count(runs, name, len(packed))
    return Business(_string(fields.get("digest"), f"{where}.digest"), tuple(marks), tuple(runs))


def _replacements(value: object, point: str) -> Replacements:
    records: Replacements = {}
    for index, record in _object(value, f"replaced.{point}").items():
        where = f"replaced.{point}.{index}"
        if not index.isdecimal():
            raise _Shape(f"{where}: expected an edit number")
        fields = _object(record, where)
        inside, within = fields.get("inside", []), fields.get("within", [])
        records[int(index)] = Replaced(
            _text(fields.get("text"), f"{where}.text"),
            # format 1 kept 24 hex digits of the same sha256: its first ones are today's digest
            _string(fields.get("digest"), f"{where}.digest")[: len(digest(""))],
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
    points: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)  # id -> (file, template digests)
    baselines: dict[str, Business] = field(default_factory=dict)  # file -> its business code
    imports: dict[str, tuple[str, ...]] = field(default_factory=dict)  # file -> plain imports apply added
    runtime: dict[str, str] = field(default_factory=dict)  # runtime file name -> hash of what apply installed
    replaced: dict[str, Replacements] = field(default_factory=dict)  # point id -> its edits' originals
    texts: dict[str, str] = field(default_factory=dict)  # template digest -> text, for those no release shipped
    # who wrote it ("trace-instrument 0.2.0"; "" when unknown) and in which format: not records of
    # the tree, so left out of ==
    tool: str = field(default="", compare=False)
    format: int = field(default=FORMAT, compare=False)

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
        """The templates a point was applied with, when they differ from today's (None: the same,
        or texts neither the manifest nor any shipped release holds)."""
        entry = self.points.get(point.id)
        if entry is None or entry[1] == template_digests(point):
            return None
        known = [self.texts.get(key) or shipped_templates().get(key) for key in entry[1]]
        return tuple(text for text in known if text is not None) if None not in known else None

    def outdated(self, tool: str) -> bool:
        """Is it to be written again although it records the same tree (another release or format)?"""
        return self.tool != tool or self.format != FORMAT

    def updated(
        self,
        in_place: list[Point],
        gone: list[str],
        baselines: dict[str, Business],
        imports: dict[str, tuple[str, ...]] | None = None,
        runtime: dict[str, str] | None = None,
        replaced: dict[str, Replacements] | None = None,
    ) -> Manifest:
        """The manifest after a run: points in place added, points gone dropped, baselines replaced.

        `runtime` (file name -> hash) replaces the recorded runtime files when given; `{}` clears them.
        `replaced` replaces the originals recorded for the points it names (`{}` for a point: none).
        """
        points = {k: v for k, v in self.points.items() if k not in gone}
        points.update({p.id: (p.file, template_digests(p)) for p in in_place})
        files = {file for file, _ in points.values()}
        merged = {**self.baselines, **baselines}
        added = dict(self.imports)
        for file, texts in (imports or {}).items():
            added[file] = tuple(dict.fromkeys([*added.get(file, ()), *texts]))
        originals = {**self.replaced, **(replaced or {})}
        known = {**self.texts, **{digest(t): t for p in in_place for t in templates_of(p)}}
        used = {key for _, keys in points.values() for key in keys}
        return Manifest(
            points,
            {f: v for f, v in merged.items() if f in files},
            {f: v for f, v in added.items() if f in files and v},
            dict(self.runtime) if runtime is None else dict(runtime),
            {k: v for k, v in originals.items() if k in points and v},
            {k: t for k, t in known.items() if k in used and k not in shipped_templates()},
        )

    def write(self, tool: str) -> PendingWrite:
        if not self.points:
            return PendingWrite(MANIFEST_NAME, None, kind=ChangeKind.MANIFEST)
        body: dict[str, object] = {
            "format": FORMAT,
            "tool": tool,
            "note": "written by trace-instrument apply; check, verify and remove read it (docs/design.md)",
            "points": {k: [f, *t] for k, (f, t) in sorted(self.points.items())},
            "templates": {k: Lines(t.split("\n")) for k, t in sorted(self.texts.items())},
            "baselines": {k: {"digest": b.digest, "code": Lines(b.lines())} for k, b in sorted(self.baselines.items())},
            "imports": {k: list(v) for k, v in sorted(self.imports.items())},
            "runtime": dict(sorted(self.runtime.items())),
            "replaced": {
                k: {str(i): r.as_json() for i, r in sorted(v.items())} for k, v in sorted(self.replaced.items())
            },
        }
        data = ("\n".join(_layout(body)) + "\n").encode()
        return PendingWrite(MANIFEST_NAME, data, kind=ChangeKind.MANIFEST)


INLINE = 160  # a list or object whose JSON fits in this many characters is written on one line


class Lines(list[str]):
    """Lines of code or text: one a line in the manifest however short (adding one changes one line)."""


def _layout(value: object, indent: str = "", lead: str = "") -> Iterator[str]:
    """The lines of `value` as JSON: a small list or object on one line, a larger one (or Lines) with
    one item a line (so a change shows as the lines it touches). Keys stay in the order given."""
    flat = json.dumps(value, ensure_ascii=False)
    inline = not isinstance(value, Lines) and len(indent) + len(lead) + len(flat) <= INLINE
    if not isinstance(value, (dict, list)) or not value or inline:
        yield f"{indent}{lead}{flat}"
        return
    items = list(value.items()) if isinstance(value, dict) else [(None, item) for item in value]
    yield f"{indent}{lead}{'{' if isinstance(value, dict) else '['}"
    for number, (key, item) in enumerate(items, 1):
        lines = list(_layout(item, indent + " ", "" if key is None else f"{json.dumps(key, ensure_ascii=False)}: "))
        yield from lines[:-1]
        yield lines[-1] + ("," if number < len(items) else "")
    yield f"{indent}{'}' if isinstance(value, dict) else ']'}"


def templates_of(point: Point) -> tuple[str, ...]:
    return tuple(edit.template.text for edit in point.edits)


def template_digests(point: Point) -> tuple[str, ...]:
    """How the manifest names the templates a point is applied with today."""
    return tuple(digest(text) for text in templates_of(point))


def _unpack(text: str) -> tuple[str, ...]:
    """The fingerprints a format-1 baseline packed (zlib, then base64)."""
    raw = zlib.decompress(base64.b64decode(text)).decode()
    return tuple(raw.split("\n")) if raw else ()
