"""The vocabulary every layer shares: frozen records, no behaviour.

Layering (each layer imports only the ones above it):
    model  <-  spec  <-  locate  <-  edit  <-  engine  <-  cli
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass, field
from typing import Any

FACILITIES = ("sample_flow", "progress", "trajectory", "env", "runtime")
EXTRAS = ("sglang-timing", "reward-score-metric")

# Names the runtime package exports that instrumentation calls; a call to one of them is
# tracing code. (Turn, Trajectory and flush are exported too, but their names are too
# generic to tell tracing code from verl's own.)
TRACING_NAMES = frozenset(
    {
        "trace_flow",
        "log_progress",
        "log_gen_throughput",
        "log_gen_throughput_tokens",
        "log_rollout_completed",
        "log_step_window",
        "get_trace_dir",
        "set_trace_dir",
        "suppress_sample_trace",
        "TurnRecord",
        "TrajectoryStore",
        "TrajectoryTracker",
    }
)
TRACING_MODULE = "verl.utils.tracing"


class EditKind(str, enum.Enum):
    """Where an edit puts its template relative to its anchor."""

    AFTER = "after"  # after the last statement of the anchor sequence
    BEFORE = "before"  # before the first statement of the anchor sequence
    BODY_START = "body_start"  # first in the anchor block's body (after a docstring)
    BODY_END = "body_end"  # last in the anchor block's body
    REWRITE = "rewrite"  # the anchor statements are replaced by the template
    REPLACE_EXPR = "replace_expr"  # one expression inside the anchor statement is replaced

    @property
    def inserts(self) -> bool:
        return self in (EditKind.AFTER, EditKind.BEFORE, EditKind.BODY_START, EditKind.BODY_END)


class Status(str, enum.Enum):
    """State of one point in one checkout (shared by apply, check, remove and verify)."""

    PRESENT = "present"  # the template is in place
    MISSING = "missing"  # absent, its anchor is found exactly once
    APPLIED = "applied"  # apply put it in place in this run
    REMOVED = "removed"  # remove took it out in this run
    DRIFTED = "drifted"  # present but edited by hand
    STALE = "stale"  # present as an older template version
    ANCHOR_LOST = "anchor-lost"  # absent and its anchor is not found
    AMBIGUOUS = "ambiguous"  # absent and its anchor matches several places
    NOT_APPLICABLE = "not-applicable"  # the target file does not exist in this checkout
    SKIPPED = "skipped"  # not attempted (dependency failed, file error, ...)
    UNEXPECTED = "unexpected"  # tracing code no point accounts for
    ERROR = "error"

    @property
    def in_place(self) -> bool:
        return self in (Status.PRESENT, Status.APPLIED)


@dataclass(frozen=True)
class SpecSource:
    """Where something was declared, for error messages."""

    file: str
    line: int
    key: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}"
        return f"{where} ({self.key})" if self.key else where


@dataclass(frozen=True, eq=False)
class CodePattern:
    """Python code parsed once; matched structurally (ast), formatting ignored.

    `...` is a wildcard: an expression, trailing call arguments, or (alone in a
    block) any statements. Names `__anchor_N__`, `__anchor_N_value__` and
    `__anchor_N_body__` are captures used by rewrite templates.
    """

    text: str
    stmts: tuple[ast.stmt, ...]
    source: SpecSource


@dataclass(frozen=True, eq=False)
class Template:
    """Code spliced in by an edit. `cst` holds LibCST nodes parsed at load."""

    name: str
    text: str
    stmts: tuple[ast.stmt, ...]
    cst: tuple[Any, ...]  # libcst statements, or a single expression for REPLACE_EXPR
    sha: str


@dataclass(frozen=True, eq=False)
class Anchor:
    """One way of finding an edit's place. An edit may list alternatives."""

    kind: EditKind
    target: CodePattern  # statement sequence, or the block statement for BODY_*
    inside: CodePattern | None = None  # an enclosing block that must hold the target
    expr: CodePattern | None = None  # REPLACE_EXPR: the expression to replace
    source: SpecSource = field(default_factory=lambda: SpecSource("?", 0))


@dataclass(frozen=True, eq=False)
class Edit:
    anchors: tuple[Anchor, ...]
    template: Template
    rank: int  # order among edits sharing a gap between two statements

    @property
    def kind(self) -> EditKind:
        return self.anchors[0].kind


@dataclass(frozen=True, eq=False)
class Point:
    id: str
    facility: str
    title: str
    file: str  # path relative to the checkout, posix separators
    scope: str  # dotted Class.method path, or "<module>"
    edits: tuple[Edit, ...]
    imports: tuple[str, ...]  # extra import statements the code needs
    requires: tuple[str, ...]
    markers: frozenset[str]  # signatures that tell this point is (partly) present
    marker_patterns: tuple[CodePattern, ...]  # declared markers, for code without tracing calls
    extra: str | None  # opt-in extra name, None for core points
    changes_behaviour: str  # non-empty for points that do more than observe
    source: SpecSource

    @property
    def tracing_names(self) -> frozenset[str]:
        names: set[str] = set()
        for edit in self.edits:
            for stmt in edit.template.stmts:
                names.update(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id in TRACING_NAMES)
        return frozenset(names)


@dataclass(frozen=True, eq=False)
class RuntimeModule:
    """The package installed as verl/utils/tracing/."""

    target_dir: str
    files: tuple[tuple[str, bytes], ...]  # (file name, content)


@dataclass(frozen=True, eq=False)
class Catalog:
    points: tuple[Point, ...]
    runtime: RuntimeModule
    validated_on: tuple[str, ...]
    helpers: frozenset[str] = frozenset()  # functions the templates define (tracing code too)

    def point(self, point_id: str) -> Point:
        for p in self.points:
            if p.id == point_id:
                return p
        raise KeyError(point_id)

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.file for p in self.points))


@dataclass(frozen=True)
class Selection:
    """Which points a run is about."""

    facilities: frozenset[str] = frozenset(FACILITIES)
    only: frozenset[str] = frozenset()
    skip: frozenset[str] = frozenset()
    extras: frozenset[str] = frozenset()

    def wants(self, point: Point) -> bool:
        if self.only:
            return point.id in self.only  # named explicitly: extras included
        if point.id in self.skip or point.facility not in self.facilities:
            return False
        return point.extra is None or point.extra in self.extras

    @property
    def wants_runtime(self) -> bool:
        return "runtime" in self.facilities and not self.only


@dataclass(frozen=True)
class Candidate:
    """A place that looks like an anchor, offered when the anchor is lost."""

    line: int
    code: str
    score: float


@dataclass(frozen=True)
class PointResult:
    point_id: str
    facility: str
    file: str
    status: Status
    line: int = 0
    message: str = ""
    candidates: tuple[Candidate, ...] = ()
    diff: str = ""


@dataclass(frozen=True)
class FileResult:
    path: str
    points: tuple[PointResult, ...]
    original: str | None = None  # text before (None: file absent)
    updated: str | None = None  # text after, when this run changes the file
    error: str = ""

    @property
    def changed(self) -> bool:
        return self.updated is not None and self.updated != self.original


@dataclass(frozen=True)
class RunResult:
    root: str
    files: tuple[FileResult, ...]
    runtime_files: tuple[tuple[str, str], ...] = ()  # (path, "created"/"removed"/"present"/"drifted"/...)
    written: bool = False
    error: str = ""
    other_changes: tuple[tuple[str, str | None, str | None], ...] = ()  # (path, before, after): runtime, manifest

    @property
    def points(self) -> tuple[PointResult, ...]:
        return tuple(p for f in self.files for p in f.points)


@dataclass(frozen=True)
class Finding:
    """One verify check on one subject (a file, a facility, the runtime)."""

    check: str  # counts, imports, compile, zero-intrusion, runtime, points
    subject: str
    ok: bool
    message: str = ""
    line: int = 0


@dataclass(frozen=True)
class VerifyResult:
    root: str
    findings: tuple[Finding, ...]
    counts: tuple[tuple[str, str, int, int], ...] = ()  # (file, call, expected, actual)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and all(f.ok for f in self.findings)
