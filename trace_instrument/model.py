"""The vocabulary every layer shares: frozen records, no behaviour.

Layering (each layer imports only the ones above it):
    model  <-  spec  <-  locate  <-  edit  <-  engine  <-  cli
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

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
        "trace_agent_stop",
    }
)
TRACING_MODULE = "verl.utils.tracing"
# Everything else the runtime package exports: names too generic to tell tracing code by.
GENERIC_RUNTIME_NAMES = frozenset({"Turn", "Trajectory", "flush"})
# The runtime's `__all__` is exactly these (it stands alone inside verl, so it keeps its own copy;
# tests/test_vocabulary.py keeps the two equal).
RUNTIME_EXPORTS = TRACING_NAMES | GENERIC_RUNTIME_NAMES

# The trace files' format (CSV columns, events, trajectory keys) is the runtime's: see formats.py.


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
        """The edit adds statements next to its anchor (after, before, body_start, body_end)."""
        return self in (EditKind.AFTER, EditKind.BEFORE, EditKind.BODY_START, EditKind.BODY_END)


class Status(str, enum.Enum):
    """State of one point in one checkout (shared by apply, check, remove and verify)."""

    PRESENT = "present"  # the template is in place, where its anchor puts it, and can run
    MISSING = "missing"  # absent, its anchor is found exactly once
    APPLIED = "applied"  # apply put it in place in this run
    REPAIRED = "repaired"  # apply put back what it needs at run time (an import)
    UPDATED = "updated"  # apply --update replaced an older template's code with today's
    REMOVED = "removed"  # remove took it out in this run
    DRIFTED = "drifted"  # present but edited by hand
    MOVED = "moved"  # present, but not where its anchor puts it
    STALE = "stale"  # present as an older template version
    BROKEN = "broken"  # present, but what it needs at run time is not (a name, the runtime)
    CONTEXT_CHANGED = "context-changed"  # code that must run on every path, or after a block, may not there
    REFUSED = "refused"  # absent; its anchor is found but inserting there is unsafe
    ANCHOR_LOST = "anchor-lost"  # absent and its anchor (or its scope) is not found
    AMBIGUOUS = "ambiguous"  # absent and its anchor matches several places
    NOT_APPLICABLE = "not-applicable"  # the target file does not exist in this checkout
    SKIPPED = "skipped"  # not attempted (requirement not in place, file error, ...)
    KEPT = "kept"  # remove left it in place (edited by hand, still needed, unknown to the catalog)
    UNEXPECTED = "unexpected"  # tracing code no point accounts for
    UNFINISHED = "unfinished"  # a killed run left the tree so: code no manifest records, or staged copies
    ERROR = "error"

    @property
    def in_place(self) -> bool:
        """The point's code is in the file as the catalog wants it (after this run)."""
        return self in (Status.PRESENT, Status.APPLIED, Status.REPAIRED, Status.UPDATED)


class Reason(str, enum.Enum):
    """Why a point has the status it has, when the status alone does not say."""

    SCOPE_NOT_FOUND = "scope-not-found"
    ANCHOR_NOT_FOUND = "anchor-not-found"
    SEVERAL_MATCHES = "several-matches"
    EXPRESSION_NOT_UNIQUE = "expression-not-unique"
    OVERLAP = "overlap"  # two points would rewrite the same statement
    CROWDED_LINE = "crowded-line"  # `a; b` or a one-line block at the anchor
    NAME_CONFLICT = "name-conflict"  # a name the code binds or uses is bound differently here
    UNBOUND_NAME = "unbound-name"  # a name the code uses is not defined where it sits
    MISSING_IMPORT = "missing-import"  # an import the code needs is not in the module
    UNSET_ATTRIBUTE = "unset-attribute"  # an attribute the code reads on self is set by nothing in its class
    RUNTIME_INCOMPLETE = "runtime-incomplete"  # the runtime package is missing, partial or edited
    NOT_OURS = "not-ours"  # runtime: a file, folder or link there that trace-instrument did not write
    STALE_BYTECODE = "stale-bytecode"  # runtime: bytecode Python would load instead of an installed file
    REQUIREMENT = "requirement"  # a point it requires is not in place
    NOT_SELECTED = "not-selected"  # a point it requires is not selected
    FILE_PROBLEM = "file-problem"  # the file could not be read, parsed or written
    EDITED_BY_HAND = "edited-by-hand"
    OLDER_TEMPLATE = "older-template"
    WOULD_BREAK = "would-break"  # removing it would leave names the remaining code uses unbound
    REQUIRED_BY = "required-by"  # remove: a point that stays in place requires it
    NOT_ON_EVERY_PATH = "not-on-every-path"  # what it sets up for other code may be skipped where it stands
    BEFORE_BLOCK_EXIT = "before-block-exit"  # it reads what a block writes on exit, inside or before that block
    UNKNOWN_POINT = "unknown-point"  # in the manifest, not in the catalog
    NO_MANIFEST = "no-manifest"  # tracing code in the tree, and no manifest recording it
    STAGING_LEFTOVERS = "staging-leftovers"  # staged copies (*.ti-tmp) a killed run left next to their targets
    INTERNAL = "internal"  # a bug in the tool


@dataclass(frozen=True)
class NameIssue:
    """One name that would not mean, at run time, what the point's code means by it."""

    name: str
    line: int  # where the point's code uses or binds the name
    problem: Reason  # NAME_CONFLICT, UNBOUND_NAME or MISSING_IMPORT
    binding: str = ""  # the conflicting binding's code, e.g. "from time import time"
    binding_line: int = 0
    expected: str = ""  # what the point's code means by it, e.g. "import time"
    relation: str = "bound by"  # one of NAME_RELATIONS: "used by", business code reads a name the point binds

    def __str__(self) -> str:
        if self.problem is Reason.MISSING_IMPORT:
            return f"'{self.name}' is not imported (the code needs `{self.expected}`)"
        if self.problem is Reason.UNSET_ATTRIBUTE:
            return (
                f"'{self.name}' is read by the code (line {self.line}), but {self.binding} and its bases in the "
                "checkout never set it (renamed?)"
            )
        if self.relation in ("set up by", "assigned by"):
            # bound in the function, but not on every path to the code (UnboundLocalError at run time)
            return (
                f"'{self.name}' may be unassigned where the code reads it (line {self.line}): it is "
                f"{self.relation} '{self.binding}' at line {self.binding_line}, which does not run on every path to it"
            )
        if self.problem is Reason.UNBOUND_NAME:
            return f"'{self.name}' is not defined where the code uses it (line {self.line})"
        where = f" at line {self.binding_line}" if self.binding_line else ""
        if self.relation == "made local by":
            return (
                f"'{self.name}' is made local to the whole function by '{self.binding}'{where}, so it is not "
                f"yet assigned where the code reads it (line {self.line}: UnboundLocalError)"
            )
        return f"'{self.name}' is {self.relation} '{self.binding}'{where}"


# How a NameIssue's binding relates to the point's code (its `relation`).
NAME_RELATIONS = ("bound by", "used by", "made local by", "set up by", "assigned by")


@dataclass(frozen=True)
class ContextIssue:
    """Code that must run on every path (or after a block) where it stands may not: what, and why.

    `subject` is what the point's code sets up or reads (`self._trajectory_store`, `_pp`,
    `timing_raw['gen']`); `statement` the code that makes it conditional (an enclosing `if`, a
    `return` before it, the `with` block that writes the value), with its line.
    """

    subject: str
    line: int  # where the point's code sets it up or reads it
    problem: Reason  # NOT_ON_EVERY_PATH or BEFORE_BLOCK_EXIT
    statement: str = ""
    statement_line: int = 0
    why: str = ""  # how the statement keeps it from running ("may skip it", "leaves before it runs", ...)
    reader: str = ""  # the point whose code reads what this one sets up ("" when declared or its own)
    reader_where: str = ""  # where that code is: "line 744", a scope, or a file

    def __str__(self) -> str:
        where = f"`{self.statement}` " if self.statement else ""
        if self.statement and self.statement_line:
            where += f"(line {self.statement_line}) "
        if self.problem is Reason.BEFORE_BLOCK_EXIT:
            return f"it reads {self.subject}, which {where}writes when the block exits: {self.why}"
        if not self.reader:  # declared: it must run, whoever reads what it does
            return f"it must run on every path ({self.subject}), but {where}{self.why}"
        return f"it sets up {self.subject} for {self.reader} ({self.reader_where}), but {where}{self.why}"


@dataclass(frozen=True)
class SpecSource:
    """Where something was declared, for error messages."""

    file: str
    line: int
    key: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file  # line 0: the file (or folder) as a whole
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
    """Code spliced in by an edit, parsed with `ast` at load (the edit layer parses it with LibCST)."""

    name: str
    text: str
    stmts: tuple[ast.stmt, ...]
    sha: str
    expression: bool = False  # REPLACE_EXPR: one expression, not statements
    leading_lines: int = 0  # comment and blank lines above its first statement (they travel with it)


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
    """One change a point makes: its template, put where the first anchor that matches says."""

    anchors: tuple[Anchor, ...]
    template: Template
    rank: int  # order among edits sharing a gap between two statements

    @property
    def kind(self) -> EditKind:
        """The first anchor's kind (the loader lets alternatives do only the same kind of edit)."""
        return self.anchors[0].kind


@dataclass(frozen=True)
class BodyExtent:
    """Where a body a rewrite captured ended up, as apply moved it: how many statements it holds
    and the digests of its first and last (`statement_print`), how many statements its list held
    before and after the rewritten region and the digests of the two next to it (other points'
    code never counted). Recorded for
    the bodies the template's own code does not bound (see `unbounded_bodies`)."""

    length: int
    first: str
    last: str
    before: int
    after: int
    beyond_first: str = ""  # the digest of the statement just before the region ("": none)
    beyond_last: str = ""  # ... and of the one just after it

    @property
    def prints(self) -> frozenset[str]:
        """Every statement digest the record names."""
        return frozenset(p for p in (self.first, self.last, self.beyond_first, self.beyond_last) if p)


# (point id, edit index) -> anchor index of each captured body -> its extent
Extents = Mapping[tuple[str, int], Mapping[int, BodyExtent]]


@dataclass(frozen=True, eq=False)
class Point:
    """One instrumentation point of the catalog: the edits that put one piece of tracing in one scope."""

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
    must_run: bool = False  # declared: its code runs on every normal way out of its function
    after_blocks: tuple[CodePattern, ...] = ()  # declared: blocks that must have run before its code
    bindings: tuple[tuple[str, str], ...] = ()  # `bind`: (name, expression) its code reads instead of the name
    overridden: Overridden | None = None  # re-anchored by an override (None: where its spec put it)

    @property
    def tracing_names(self) -> frozenset[str]:
        """The runtime package's names (TRACING_NAMES) its templates use."""
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
    earlier: dict[str, tuple[str, ...]] = field(default_factory=dict)  # file name -> hashes of older releases


@dataclass(frozen=True)
class Reader:
    """A point whose code reads an attribute or a module name, and the function that code runs in."""

    point: str
    function: str  # the def in the template holding the read, else the last part of the point's scope
    file: str
    scope: str


@dataclass(frozen=True)
class Relations:
    """Who reads what, across the catalog: attribute name -> readers; (file, module name) -> readers."""

    attributes: dict[str, tuple[Reader, ...]]
    module_names: dict[tuple[str, str], tuple[Reader, ...]]
    set_attributes: frozenset[str] = frozenset()  # attributes some template sets (`x.A = ...`, a def A)

    def attribute_readers(self, name: str, binder: str, function: str) -> tuple[Reader, ...]:
        """Readers of `.name` but the binder's own code in the same function (its own use)."""
        return tuple(r for r in self.attributes.get(name, ()) if not (r.point == binder and r.function == function))

    def name_readers(self, file: str, name: str, binder: str) -> tuple[Reader, ...]:
        return tuple(r for r in self.module_names.get((file, name), ()) if r.point != binder)


@dataclass(frozen=True, eq=False)
class Catalog:
    """Every point, the runtime package and the verl releases they were validated on, as loaded."""

    points: tuple[Point, ...]
    runtime: RuntimeModule
    validated_on: tuple[str, ...]
    helpers: frozenset[str] = frozenset()  # functions the templates define (tracing code too)
    relations: Relations = field(default_factory=lambda: Relations({}, {}))  # who reads what points set up
    digest: str = ""  # of every file it was read from ("" when not known): keys caches of results

    def point(self, point_id: str) -> Point:
        """The point with this id (KeyError when there is none)."""
        for p in self.points:
            if p.id == point_id:
                return p
        raise KeyError(point_id)

    @property
    def files(self) -> tuple[str, ...]:
        """The files the points edit, each once, in the order the points name them."""
        return tuple(dict.fromkeys(p.file for p in self.points))


@dataclass(frozen=True)
class Selection:
    """Which points a run is about."""

    facilities: frozenset[str] = frozenset(FACILITIES)
    only: frozenset[str] = frozenset()
    skip: frozenset[str] = frozenset()
    extras: frozenset[str] = frozenset()

    def wants(self, point: Point) -> bool:
        """Is the point selected? `skip` wins; `only` names points outright (extras too);
        otherwise its facility must be selected, and an extra's point needs its extra."""
        if point.id in self.skip:
            return False
        if self.only:
            return point.id in self.only  # named explicitly: extras included
        if point.facility not in self.facilities:
            return False
        return point.extra is None or point.extra in self.extras

    @property
    def wants_runtime(self) -> bool:
        """Is the runtime package part of the run (its facility selected, no `only`)?"""
        return "runtime" in self.facilities and not self.only


@dataclass(frozen=True)
class Candidate:
    """A place that looks like an anchor, offered when the anchor is lost."""

    line: int
    code: str
    score: float


@dataclass(frozen=True)
class EditOutcome:
    """One edit of a point whose anchor places it nowhere, or where apply refuses to insert: which
    edit, and why (each such edit of a point is named, not only the first)."""

    index: int  # 1-based, in the order the point lists its edits
    of: int  # how many edits the point has
    template: str  # the template's name: its file, or the spec file and line of its code
    status: Status  # ANCHOR_LOST, AMBIGUOUS or REFUSED
    reason: Reason
    message: str
    line: int = 0
    candidates: tuple[Candidate, ...] = ()


@dataclass(frozen=True)
class PointResult:
    """What one operation found or did for one point."""

    point_id: str
    facility: str
    file: str
    status: Status
    line: int = 0
    message: str = ""
    candidates: tuple[Candidate, ...] = ()
    diff: str = ""
    reason: Reason | None = None
    expected_line: int = 0  # MOVED: where the anchor puts the code; missing edits: where it would go
    names: tuple[NameIssue, ...] = ()  # BROKEN / REFUSED by names
    context: tuple[ContextIssue, ...] = ()  # CONTEXT_CHANGED: what may not run where it must
    # ANCHOR_LOST / AMBIGUOUS / REFUSED by its anchors: every failing edit, in edit order; the point's
    # status, reason, line and candidates are those of the first of them
    edits: tuple[EditOutcome, ...] = ()
    overridden: Overridden | None = None  # apply: the override that placed it (port's grade when port wrote it)
    insert_lines: tuple[int, ...] = ()  # apply: per edit it inserts, the line of the file as read its code follows


class FileProblemKind(str, enum.Enum):
    """Why a whole file could not be worked on."""

    UNREADABLE = "unreadable"
    OUTSIDE = "outside-checkout"  # a link out of the checkout
    NOT_A_FILE = "not-a-file"
    SYNTAX = "syntax"
    ENCODING = "encoding"
    READ_ONLY = "read-only"
    EDIT_FAILED = "edit-failed"
    INTERNAL = "internal"


@dataclass(frozen=True)
class FileError:
    """Why one file could not be worked on (for an internal error, with the tool's traceback)."""

    kind: FileProblemKind
    message: str
    traceback: str = ""  # INTERNAL: the tool's own traceback, for the bug report

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class FileResult:
    """What one operation found or did in one catalog file: its points, and its text before and after."""

    path: str
    points: tuple[PointResult, ...]
    original: str | None = None  # text before (None: file absent)
    updated: str | None = None  # text after, when this run changes the file
    error: FileError | None = None

    @property
    def changed(self) -> bool:
        """Does this run change the file's text?"""
        return self.updated is not None and self.updated != self.original


class RuntimeStatus(str, enum.Enum):
    """State of one file of the runtime package (verl/utils/tracing/)."""

    PRESENT = "present"  # as the catalog ships it
    MISSING = "missing"
    OUTDATED = "outdated"  # as an older catalog shipped it (per the manifest): apply updates it
    DRIFTED = "drifted"  # edited by hand: left alone
    CREATED = "created"
    UPDATED = "updated"
    REMOVED = "removed"
    KEPT_IN_USE = "kept-in-use"  # remove: code in the checkout still imports the package
    KEPT_EDITED = "kept-edited"  # remove: a file of it was edited by hand (--force removes it)
    # a file, folder or link the tool did not write, where the package goes or with the import name of
    # the package or of one of its modules: apply refuses to install, remove never deletes it
    NOT_OURS = "not-ours"
    STALE_BYTECODE = "stale-bytecode"  # __pycache__ bytecode Python would load instead of an installed file

    @property
    def ok(self) -> bool:
        """After this run, the file is as the catalog ships it."""
        return self in (RuntimeStatus.PRESENT, RuntimeStatus.CREATED, RuntimeStatus.UPDATED)


@dataclass(frozen=True)
class RuntimeFile:
    """One file of the runtime package in the checkout, and its state."""

    path: str
    status: RuntimeStatus
    users: tuple[str, ...] = ()  # KEPT_IN_USE: files that import the package
    detail: str = ""  # NOT_OURS, STALE_BYTECODE: what is there, why it is not the tool's, the way out


class ChangeKind(str, enum.Enum):
    """Whose file a run's write is: a catalog file of verl's (the business change), a file of the
    runtime package, or the manifest."""

    SOURCE = "source"
    RUNTIME = "runtime"
    MANIFEST = "manifest"
    LEFTOVER = "leftover"  # a staged copy a killed run left, removed (never in a patch: pristine has none)


class ChangeState(str, enum.Enum):
    """What a run does to one file it changes."""

    NEW = "new"
    UPDATED = "updated"
    REMOVED = "removed"


@dataclass(frozen=True)
class FileChange:
    """One file a run changes or would change: its texts before and after (None: absent), and whose it is."""

    path: str
    before: str | None
    after: str | None
    kind: ChangeKind

    @property
    def state(self) -> ChangeState:
        """Does the run make the file, change it or delete it?"""
        if self.before is None:
            return ChangeState.NEW
        return ChangeState.REMOVED if self.after is None else ChangeState.UPDATED


@dataclass(frozen=True)
class ChangeSummary:
    """One changed file in a line, for a file whose text is the tool's own (a runtime file, the manifest):
    the lines and digest of the text it ends with (removed: of the text that goes) and, for the
    manifest, the points that text records."""

    path: str
    kind: ChangeKind
    state: ChangeState
    lines: int
    digest: str  # as the manifest records a runtime file: engine.runtime.digest of its UTF-8 text
    points: int | None = None  # MANIFEST: the points its text records


class RunErrorKind(str, enum.Enum):
    """Why a whole run stopped."""

    NOT_A_CHECKOUT = "not-a-checkout"
    LOCKED = "locked"
    WRITE_FAILED = "write-failed"
    CHANGED = "changed-meanwhile"  # a file changed after the run read it; nothing written, the edit kept
    NEWER_WRITER = "written-by-newer"  # a newer release of the tool wrote the tree: this one would downgrade it
    INTERRUPTED = "interrupted"
    RUNTIME_NOT_OURS = "runtime-not-ours"  # apply: the runtime package's place holds what the tool did not write
    MANIFEST_CONFLICT = "manifest-conflict"  # the manifest holds a merge's conflict markers
    MANIFEST_INVALID = "manifest-invalid"  # the manifest is not JSON, not UTF-8, or not a manifest's shape
    FORMATTER_MISSING = "formatter-missing"  # apply: the checkout's formatter is not installed here


class Formatter(str, enum.Enum):
    """The code formatters whose style inserted code follows (see spec/style.py)."""

    RUFF = "ruff"
    BLACK = "black"


@dataclass(frozen=True)
class CodeStyle:
    """The formatter a checkout's configuration names, and what it says of the style.

    `found_in` is where it was named (`pyproject.toml [tool.ruff]`, `.pre-commit-config.yaml
    hook ruff-format`), relative to the checkout root. Ruff reads its own settings (it is run
    on the target file's path); black's come from `[tool.black]` and the hook's arguments.
    """

    formatter: Formatter
    found_in: str
    directory: str = ""  # absolute folder holding that configuration (ruff resolves its settings from there)
    line_length: int = 88
    string_normalization: bool = True
    magic_trailing_comma: bool = True
    preview: bool = False
    target_versions: tuple[str, ...] = ()  # black's `target-version` (py310, ...), as configured
    pinned: str = ""  # the version a pre-commit hook pins (`rev: v0.12.2` -> "0.12.2"), else ""
    # ruff: the hook's arguments that shape its output (`--line-length=120`, `--config=...`), given to
    # `ruff format` as the hook gives them
    arguments: tuple[str, ...] = ()
    config_file: str = ""  # the file `found_in` names, relative to the checkout root (`../pyproject.toml`)

    @property
    def install(self) -> str:
        """The command that installs this formatter (at the hook's version when one is pinned)."""
        version = f"=={self.pinned}" if self.pinned else ""
        return f"pip install '{self.formatter.value}{version}'"


@dataclass(frozen=True)
class FormatterMismatch:
    """The checkout pins its formatter's version (a pre-commit hook's `rev`) and another version is
    installed here: it wrote the inserted code, and versions may format alike code differently."""

    style: CodeStyle
    installed: str  # the version installed here ("0.17.6")


@dataclass(frozen=True)
class RunError:
    """What stopped a whole run: not a checkout, locked, the writes failed (nothing written), interrupted,
    a manifest no run can trust (with the file and line it is about)."""

    kind: RunErrorKind
    message: str
    path: str = ""  # the file it is about, relative to the checkout ("" when it is about none)
    line: int = 0  # the line in that file (0 when none)
    install: str = ""  # the command that installs what the run lacks (formatter-missing), else ""

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class RunResult:
    """What apply, check or remove found or did in one checkout."""

    root: str
    files: tuple[FileResult, ...]
    runtime_files: tuple[RuntimeFile, ...] = ()
    written: bool = False
    error: RunError | None = None
    other_changes: tuple[FileChange, ...] = ()  # the runtime package's files, the manifest
    verl_version: str = ""  # the checkout's verl release ("" when it does not say)
    validated_on: tuple[str, ...] = ()  # the releases the catalog was validated on
    unfinished: tuple[PointResult, ...] = ()  # check: what a killed run left (status UNFINISHED, id "tree")
    style: CodeStyle | None = None  # apply: the checkout's formatter, which wrote the inserted code
    formatter_mismatch: FormatterMismatch | None = None  # apply: that formatter not at the pinned version

    @property
    def points(self) -> tuple[PointResult, ...]:
        """Every point result, file by file."""
        return tuple(p for f in self.files for p in f.points)

    @property
    def validated(self) -> bool:
        """Is the checkout's verl a release the catalog was validated on (or unknown)?"""
        return not self.verl_version or not self.validated_on or self.verl_version in self.validated_on

    @property
    def instrumented(self) -> bool:
        """Does the checkout hold anything of the tool's? False when the run looked (no error) and found
        no point's code (each one absent or not applicable), no runtime file and nothing a run left."""
        if self.error is not None or self.unfinished or any(f.error is not None for f in self.files):
            return True
        points_absent = all(p.status in NOTHING_THERE for p in self.points)
        runtime_absent = all(f.status is RuntimeStatus.MISSING for f in self.runtime_files)
        return not (self.points and points_absent and runtime_absent)


# A point's statuses when the checkout holds none of its code (a required point so leaves the
# points that need it unable to run: engine/check.py).
CODE_ABSENT = frozenset({Status.MISSING, Status.REFUSED, Status.ANCHOR_LOST, Status.AMBIGUOUS, Status.NOT_APPLICABLE})
# ... and a skipped one's: check's words for "not there" (a checkout never instrumented holds only these)
NOTHING_THERE = CODE_ABSENT | {Status.SKIPPED}


class Check(str, enum.Enum):
    """The proofs verify makes."""

    COUNTS = "counts"
    POINTS = "points"
    FACILITIES = "facilities"
    IMPORTS = "imports"
    NAMES = "names"
    CONTEXT = "context"  # code that must run on every path (or after a block) does
    COMPILE = "compile"
    ZERO_INTRUSION = "zero-intrusion"
    RUNTIME = "runtime"


@dataclass(frozen=True)
class Finding:
    """One verify check on one subject (a file, a facility, the runtime)."""

    check: Check
    subject: str
    ok: bool
    message: str = ""
    line: int = 0


@dataclass(frozen=True)
class CallCount:
    """Call sites of one tracing function in one file: found, and expected by the catalog."""

    file: str
    call: str  # trace_flow or log_progress
    expected: int  # from the points whose anchors this checkout has
    actual: int


@dataclass(frozen=True)
class CallTotal:
    """A tracing function's call sites over all files: found, and expected by the catalog."""

    call: str
    found: int
    expected: int


@dataclass(frozen=True)
class VerifyResult:
    """What verify proved about one checkout: every finding, and the call counts behind them."""

    root: str
    findings: tuple[Finding, ...]
    counts: tuple[CallCount, ...] = ()
    error: RunError | None = None
    # False: the checkout holds no call of the tool's and no runtime file (it was never instrumented)
    instrumented: bool = True

    @property
    def ok(self) -> bool:
        """The run finished and every finding holds."""
        return self.error is None and all(f.ok for f in self.findings)

    def call_totals(self) -> tuple[CallTotal, ...]:
        """Each tracing function's call sites over all files: found, and expected."""
        totals: dict[str, list[int]] = {}
        for count in self.counts:
            entry = totals.setdefault(count.call, [0, 0])
            entry[0] += count.actual
            entry[1] += count.expected
        return tuple(CallTotal(call, found, expected) for call, (found, expected) in totals.items())


# -- port: carrying the catalog to a verl it was not validated on ----------------------------------


class Confidence(str, enum.Enum):
    """How sure port is of a place it found for a point (most sure first)."""

    EXACT = "exact"  # the anchors' statements verbatim in one place, and the point's neighbours agree
    LIKELY = "likely"  # one place, chosen with the neighbours' help (or against one of them)
    GUESS = "guess"  # a place that looks right, not proven to be the only one

    @property
    def rank(self) -> int:
        return list(Confidence).index(self)

    def at_least(self, other: Confidence) -> bool:
        """As sure as `other` or surer."""
        return self.rank <= other.rank


class PortCause(str, enum.Enum):
    """Why port left a point for a person, when its status alone does not say."""

    ENCLOSING_BLOCK = "enclosing-block"  # its anchor's statements are there, in another block than its `inside`
    REQUIRED_POINT = "required-point"  # a point it requires has no place port can prove (`blocked_by`)
    PROOFS = "proofs"  # apply's proofs refuse it at its new place (apply's reason in the message)


@dataclass(frozen=True)
class Overridden:
    """The override that re-anchors a point, and, when port wrote it, how sure port was and why."""

    source: SpecSource  # the override's file and line
    confidence: Confidence | None = None  # port's grade (None: an override a person wrote)
    evidence: str = ""  # port's reason for the place


class PortStatus(str, enum.Enum):
    """What port did for one point."""

    PORTED = "ported"  # a place found and proven; its override written (or, in a dry run, would be)
    UNSURE = "unsure"  # a place found, below --min-confidence: listed, not written
    TIE = "tie"  # two or more places fit equally: never broken by line order
    NOT_FOUND = "not-found"  # no place in the file fits (the feature may not exist in this verl)
    REFUSED = "refused"  # a place found, but apply's proofs refuse the point there


@dataclass(frozen=True)
class PortSuggestion:
    """One point port looked for: where it goes now (as an override of its scope and anchors)."""

    point_id: str
    file: str
    status: PortStatus
    old_scope: str
    new_scope: str = ""  # "" when none was found
    anchors: tuple[str, ...] = ()  # per edit: its new anchor text ("" where the old one stays)
    confidence: Confidence | None = None
    line: int = 0  # where its first edit goes in the new place
    evidence: str = ""  # why this place
    runners_up: tuple[str, ...] = ()  # the other scopes that fit (a tie's, or those set aside)
    message: str = ""  # why it was not written, when it was not
    bindings: tuple[tuple[str, str], ...] = ()  # `bind`: (name its code reads, this tree's spelling)
    insides: tuple[str, ...] = ()  # per edit: the block its new anchor must be inside ("" none)
    candidates: tuple[Candidate, ...] = ()  # not-found: the nearest statements to its anchor, as check lists them
    cause: PortCause | None = None  # not-found, refused: why, when the status alone does not say
    blocked_by: str = ""  # REQUIRED_POINT: the required point at the root of the chain, left for a person


@dataclass(frozen=True)
class PortResult:
    """A port run: a suggestion per point that was not in place, and the override files written."""

    root: str
    suggestions: tuple[PortSuggestion, ...]
    out: str = ""  # the folder the overrides go in
    written: tuple[str, ...] = ()  # the override files written (paths under `out`)
    error: RunError | None = None
    kept: tuple[str, ...] = ()  # override files port wrote before and a person edited since: left as they are
