"""What state each point is in, in one file: the judgement check and apply share.

A point is `present` only when its code is there as the template says, where its
anchor puts it (or apart from it by business code that changes nothing it reads
and cannot leave the body in between: locate/gap.py), and can run: every name it
uses resolves to what it means and the runtime package is complete. Otherwise the
assessment says what is wrong (`broken`, `moved`, `drifted`, `stale`) or, for an
absent point, where it would go or why it cannot (`missing`, `refused`,
`anchor-lost`, `ambiguous`).
"""

from __future__ import annotations

import ast
import difflib
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from trace_instrument.engine.analysis import FileWork
from trace_instrument.engine.manifest import Manifest
from trace_instrument.engine.results import point_result
from trace_instrument.engine.runtime import RuntimeState
from trace_instrument.locate import AnchorFailure, Block, FileLocator, Placement, PointState
from trace_instrument.locate.context import ContextChecks
from trace_instrument.locate.handedits import EditedBlock
from trace_instrument.locate.recognize import Departure
from trace_instrument.locate.runnable import Planned
from trace_instrument.model import (
    ContextIssue,
    Edit,
    EditKind,
    EditOutcome,
    NameIssue,
    Point,
    PointResult,
    Reason,
    Status,
)
from trace_instrument.spec.code import CodeError, parse_template, source_lines


@dataclass(frozen=True, eq=False)
class Unplaced:
    """The absent edits of a point that go nowhere, each with why (in edit order, never empty)."""

    failures: tuple[tuple[Edit, AnchorFailure], ...]


@dataclass(eq=False)
class Assessment:
    point: Point
    result: PointResult
    placements: list[Placement] = field(default_factory=list)  # MISSING: where each edit goes
    stale: PointState | None = None  # STALE: the older template's code, found in the file

    @property
    def status(self) -> Status:
        return self.result.status


class FileAssessor:
    """Assess the points of one analysed file."""

    def __init__(self, work: FileWork, manifest: Manifest, runtime: RuntimeState):
        self.work = work
        self.manifest = manifest
        self.runtime = runtime
        self._placements: dict[str, list[Placement] | Unplaced] = {}
        self._planned: Planned | None = None
        self._planned_placements: list[Placement] | None = None
        self._checks: ContextChecks | None = None
        self._assessed: dict[str, Assessment] = {}
        self._assessing: set[str] = set()  # a guard against `requires` cycles

    def assess(self, point: Point) -> Assessment:
        if point.id not in self._assessed:
            self._assessing.add(point.id)
            try:
                self._assessed[point.id] = self._assess(point)
            finally:
                self._assessing.discard(point.id)
        return self._assessed[point.id]

    def _assess(self, point: Point) -> Assessment:
        state = self.work.state(point)
        if state.complete:
            return self._in_file(point, state)
        stale = stale_state(self.work, point, self.manifest)
        if state.untouched and stale is None:
            return self._absent(point, state)
        if stale is not None and stale.departures:
            # an older template's code around business code the fork edited: not refreshed blindly
            return Assessment(point, self.departed(point, stale))
        if stale is not None:
            message = "applied with an older template; `trace-instrument apply --update` refreshes it in place"
            result = point_result(point, Status.STALE, line=stale.line, message=message, reason=Reason.OLDER_TEMPLATE)
            return Assessment(point, result, stale=stale)
        if not state.marker_nodes:
            # some edits exactly in place, the others simply gone (say, lost in a merge): apply completes it
            return self._absent(point, state)
        missing = self.work.names.hand_edited_imports(point)
        if missing:  # what breaks at run time first: apply adds the imports, the hand edits stay
            broken = self._broken(point, state, missing)
            message = f"{drift_message(state)}; {broken.result.message}"
            return Assessment(point, replace(broken.result, message=message))
        return Assessment(point, self.drifted(point, state))

    # -- a point whose code is all there ---------------------------------------------------

    def _in_file(self, point: Point, state: PointState) -> Assessment:
        issues = self.work.names.issues(point) + self.checks.name_issues(point)
        if issues:
            return self._broken(point, state, issues)
        if point.tracing_names and not self.runtime.complete:
            message = f"the runtime package is not as the catalog ships it: {self.runtime.problem}"
            if self.runtime.repairable:
                message += "; `trace-instrument apply` puts it back"
            result = point_result(
                point, Status.BROKEN, line=state.line, message=message, reason=Reason.RUNTIME_INCOMPLETE
            )
            return Assessment(point, result)
        context = self.checks.context_issues(point)
        if context:
            return Assessment(point, context_changed(point, context, placed=True))
        if state.departures:  # run-time problems first: those say what breaks
            return Assessment(point, self.departed(point, state))
        unbounded = next((b for b in state.blocks if b.unbounded), None)
        if unbounded is not None:
            message = unbounded_message(unbounded) + "; `remove` leaves it until they are as apply left them"
            result = point_result(
                point, Status.DRIFTED, line=unbounded.line, message=message, reason=Reason.EDITED_BY_HAND
            )
            return Assessment(point, result)
        return Assessment(point, self._where_blocks_are(point, state))

    def _where_blocks_are(self, point: Point, state: PointState) -> PointResult:
        """Present, or (the first block with a problem decides) moved, or unanchored: then every
        block whose anchor is lost is named, not only the first."""
        placed = [(block, self.work.locator.finder.misplaced(point, block)) for block in state.blocks]
        for _block, moved in placed:
            if isinstance(moved, AnchorFailure):
                return _unanchored(point, [(b, m) for b, m in placed if isinstance(m, AnchorFailure)])
            if moved is not None:
                return point_result(
                    point, Status.MOVED, line=moved.line, message=moved.message, expected_line=moved.expected
                )
        return point_result(point, Status.PRESENT, line=state.line)

    def _broken(self, point: Point, state: PointState, issues: list[NameIssue]) -> Assessment:
        repairable = all(i.problem is Reason.MISSING_IMPORT for i in issues)
        reason = Reason.MISSING_IMPORT if repairable else _worst(issues)
        message = "; ".join(dict.fromkeys(str(i) for i in issues))
        if repairable:
            message += "; `trace-instrument apply` adds the import"
        line = min(i.line for i in issues)
        result = point_result(point, Status.BROKEN, line=line, message=message, reason=reason, names=tuple(issues))
        return Assessment(point, result)

    # -- a point not there at all ------------------------------------------------------------

    def _absent(self, point: Point, state: PointState) -> Assessment:
        """A point not there at all, or (partial) some of whose edits are gone and the rest exact."""
        placed = self.placements(point)
        if isinstance(placed, Unplaced):
            outcomes = tuple(edit_outcome(point, edit, failure) for edit, failure in placed.failures)
            return Assessment(point, failed_edits(point, outcomes))
        blocked = self._required_not_placeable(point)
        if blocked is not None:
            # before the names: the names a required point would bind are unbound without it
            required, status = blocked
            message = f"requires {required} ({status.value})"
            return Assessment(point, point_result(point, Status.SKIPPED, message=message, reason=Reason.REQUIREMENT))
        issues = self.placement_issues(point, placed) or self.checks.name_issues(point)
        line = min(p.line for p in placed)
        if issues:
            message = f"{_worst(issues).value}: " + "; ".join(dict.fromkeys(str(i) for i in issues))
            result = point_result(
                point, Status.REFUSED, line=line, message=message, reason=_worst(issues), names=tuple(issues)
            )
            return Assessment(point, result)
        context = self.checks.context_issues(point)
        if context:
            return Assessment(point, context_changed(point, context, placed=False))
        if len(state.absent) == len(point.edits):
            result = point_result(point, Status.MISSING, line=line, message="not applied; `apply` adds it here")
            return Assessment(point, result, placements=list(placed))
        # partly there: the diff names each missing edit with the line it belongs on
        gone = [edit for edit in point.edits if _among(edit, state.absent)]
        numbers = ", ".join(str(point.edits.index(edit) + 1) for edit in gone)
        message = f"edit {numbers} of {len(point.edits)} missing, the others in place; `apply` adds it here"
        diff = "\n".join(self._edit_diff(point, edit, state, []) for edit in gone)
        result = point_result(point, Status.MISSING, line=line, message=message, diff=diff)
        return Assessment(point, result, placements=list(placed))

    def _required_not_placeable(self, point: Point) -> tuple[str, Status] | None:
        """A point of this file that `point` requires and that apply would not put in place.

        (Requirements in other files are settled by apply once every file is done.)
        """
        for required in point.requires:
            other = next((p for p in self.work.points if p.id == required), None)
            if other is None or required in self._assessing:
                continue
            assessment = self.assess(other)
            if not will_be_in_place(assessment):
                return required, assessment.status
        return None

    def placements(self, point: Point) -> list[Placement] | Unplaced:
        """Where each absent edit of a point goes (remembered), or why those that go nowhere do not
        (every one of them: a lost first anchor does not hide the second's problem)."""
        if point.id not in self._placements:
            found: list[Placement] = []
            failures: list[tuple[Edit, AnchorFailure]] = []
            absent = self.work.state(point).absent
            for edit in (e for e in point.edits if _among(e, absent)):
                placed = self.work.locator.place(point, edit)
                if isinstance(placed, AnchorFailure):
                    failures.append((edit, placed))
                else:
                    found.append(placed)
            self._placements[point.id] = Unplaced(tuple(failures)) if failures else found
        return self._placements[point.id]

    def placement_issues(self, point: Point, placed: Iterable[Placement]) -> list[NameIssue]:
        issues: list[NameIssue] = []
        for placement in placed:
            stmts = _template_stmts(placement.edit)
            issues += self.work.names.placement_issues(point, stmts, placement, self.planned)
        return issues

    @property
    def planned(self) -> Planned:
        """Names every absent point of the file would bind where it goes (a requirement's variables)."""
        if self._planned is None:
            bound: set[tuple[int, str]] = set()
            for placement in self.planned_placements:
                bound |= self.work.names.planned_bindings(_template_stmts(placement.edit), placement)
            self._planned = frozenset(bound)
        return self._planned

    @property
    def planned_placements(self) -> list[Placement]:
        """Where apply would put every absent edit of the file's points (those it can place)."""
        if self._planned_placements is None:
            found: list[Placement] = []
            for point in self.work.points:
                state = self.work.state(point)
                if state.marker_nodes or not state.absent:
                    continue  # in place, or edited by hand: nothing of it is placed
                placed = self.placements(point)
                if not isinstance(placed, Unplaced):
                    found.extend(placed)
            self._planned_placements = found
        return self._planned_placements

    @property
    def checks(self) -> ContextChecks:
        """The control-flow checks of the file, with every absent point where apply would put it."""
        if self._checks is None:
            self._checks = self.work.names.checks(self.work.points, self.planned_placements)
        return self._checks

    # -- edited by hand ------------------------------------------------------------------------

    def drifted(self, point: Point, state: PointState) -> PointResult:
        blocks = state.edited
        message = drift_message(state)
        diff = "\n".join(self._edit_diff(point, edit, state, blocks) for edit in point.edits).strip("\n")
        return point_result(
            point, Status.DRIFTED, line=state.line, message=message, diff=diff, reason=Reason.EDITED_BY_HAND
        )

    def departed(self, point: Point, state: PointState) -> PointResult:
        """All its code is there, but business code one of its rewrites keeps was edited: its anchor
        no longer holds, so the template's assumptions about that code are unproven (apply would not
        place it on this code either). The diff shows each kept statement against its anchor."""
        departures = state.departures
        lines = ", ".join(str(d.line) for d in departures)
        at = f"line {lines}" if len(departures) == 1 else f"lines {lines}"
        message = (
            f"its anchor no longer holds: the business code its rewrite keeps at {at} was edited "
            "and no longer matches the anchor; restore it, or re-anchor the point on the fork's code "
            "(an `overrides:` entry, --anchors DIR)"
        )
        diff = "\n".join(self._departure_diff(point, block, d) for block in state.blocks for d in block.departures)
        line = departures[0].line
        return point_result(point, Status.DRIFTED, line=line, message=message, diff=diff, reason=Reason.EDITED_BY_HAND)

    def _departure_diff(self, point: Point, block: Block, departure: Departure) -> str:
        number = f"edit {point.edits.index(block.edit) + 1} of {len(point.edits)}"
        statement = f"statement {departure.index + 1} of {len(block.edit.anchors[0].target.stmts)}"
        expected = ast.unparse(departure.expected).splitlines()
        found = ast.unparse(departure.found).splitlines()
        label = f"{self.work.path}:{departure.line} (the code it keeps, as it was before the rewrite)"
        header = f"anchor ({point.id}, {number}, {statement})"
        return "\n".join(difflib.unified_diff(expected, found, header, label, lineterm=""))

    def _edit_diff(self, point: Point, edit: Edit, state: PointState, blocks: list[EditedBlock]) -> str:
        number = f"edit {point.edits.index(edit) + 1} of {len(point.edits)}"
        if any(b.edit is edit for b in state.blocks):
            return ""
        mine = [b for b in blocks if b.edit is edit]
        expected = _template_lines(edit)
        if not mine:
            where = self._expected_line(point, edit)
            at = f"missing, expected at line {where}" if where else "missing"
            header = [
                f"--- template ({point.id}, {number})",
                f"+++ {self.work.path} ({at})",
                f"@@ -1,{len(expected)} +0,0 @@",
            ]
            return "\n".join([*header, *(f"-{line}" for line in expected)])
        parts = []
        for block in mine:
            actual = self._source_lines(block)
            label = f"{self.work.path}:{block.first_line}"
            parts.append(
                "\n".join(
                    difflib.unified_diff(expected, actual, f"template ({point.id}, {number})", label, lineterm="")
                )
            )
        return "\n".join(parts)

    def _expected_line(self, point: Point, edit: Edit) -> int:
        placed = self.work.locator.place(point, edit)
        if not isinstance(placed, Placement):
            return 0
        neighbour = placed.neighbor
        if neighbour is None:
            return placed.line
        return (neighbour.end_lineno or neighbour.lineno) + 1 if placed.after else neighbour.lineno

    def _source_lines(self, block: EditedBlock) -> list[str]:
        lines = source_lines(self.work.text)
        first = block.first_line - 1
        while first > 0 and lines[first - 1].strip().startswith("#"):
            first -= 1  # the block's own comment lines
        return textwrap.dedent("\n".join(lines[first : block.last_line])).splitlines()


def context_changed(point: Point, issues: list[ContextIssue], *, placed: bool) -> PointResult:
    """A point whose code must run on every path (or after a block) and may not where it is (placed)
    or would go: the line is the statement that makes it conditional, the message what would break
    and what to do."""
    first = issues[0]
    after_block = first.problem is Reason.BEFORE_BLOCK_EXIT
    if placed:
        fix = "move it after the block" if after_block else "move it (or that statement) so that it always runs"
    else:
        where = "after the block" if after_block else "where it always runs"
        fix = f"not placed: anchor it {where} with an override (docs/anchors.md#overrides)"
    message = "; ".join(context_sentences(issues)) + f"; {fix}"
    line = first.statement_line or first.line
    return point_result(
        point, Status.CONTEXT_CHANGED, line=line, message=message, reason=first.problem, context=tuple(issues)
    )


def context_sentences(issues: list[ContextIssue]) -> list[str]:
    """One sentence per cause: the subjects one statement keeps from being set up for one reader go together."""
    groups: dict[tuple[object, ...], list[ContextIssue]] = {}
    for issue in issues:
        key = (issue.problem, issue.statement, issue.statement_line, issue.why, issue.reader, issue.reader_where)
        groups.setdefault(key, []).append(issue)
    return [str(replace(group[0], subject=", ".join(i.subject for i in group))) for group in groups.values()]


def _unanchored(point: Point, lost: Sequence[tuple[Block, AnchorFailure]]) -> PointResult:
    """Blocks in place whose anchor is lost (or matches several places, none beside them): nothing
    shows their code is where it belongs, nor that what it reads is there. Each such edit is named."""
    override = "with an override (docs/anchors.md#overrides)"
    outcomes, found = [], []
    for block, failure in sorted(lost, key=lambda pair: point.edits.index(pair[0].edit)):
        found.append(unanchored_sentence(block, failure))
        message = f"{found[-1]}: nothing shows it belongs there; re-anchor it {override}, or `remove --only` it"
        outcomes.append(edit_outcome(point, block.edit, replace(failure, line=block.line), message))
    if len(outcomes) == 1:
        return failed_edits(point, tuple(outcomes))
    each = "; ".join(f"edit {o.index} of {o.of}: {text}" for o, text in zip(outcomes, found))
    summary = f"{each}: nothing shows they belong there; re-anchor them {override}, or `remove --only` the point"
    return failed_edits(point, tuple(outcomes), summary)


def unanchored_sentence(block: Block, failure: AnchorFailure) -> str:
    """Where a block in place is, and why its anchor puts it nowhere."""
    return f"its code is at line {block.line}, but {failure.message}"


def edit_outcome(point: Point, edit: Edit, failure: AnchorFailure, message: str = "") -> EditOutcome:
    """One failing edit of the point, as results carry it (`message`: the failure's, unless given)."""
    return EditOutcome(
        index=point.edits.index(edit) + 1,
        of=len(point.edits),
        template=edit.template.name,
        status=failure.status,
        reason=failure.reason,
        message=message or failure.message,
        line=failure.line,
        candidates=failure.candidates,
    )


def failed_edits(point: Point, outcomes: tuple[EditOutcome, ...], message: str = "") -> PointResult:
    """A point some of whose edits fail: its status, reason, line and candidates are the first
    failing edit's (in edit order); its message (unless given) is that edit's, or names each
    failing edit when there are several."""
    first = outcomes[0]
    if not message:
        message = first.message
        if len(outcomes) > 1:
            message = "; ".join(f"edit {o.index} of {o.of}: {o.message}" for o in outcomes)
    return point_result(
        point,
        first.status,
        line=first.line,
        message=message,
        candidates=first.candidates,
        reason=first.reason,
        edits=outcomes,
    )


def will_be_in_place(assessment: Assessment) -> bool:
    """Does apply leave this point in place (already there, added, or repaired)?"""
    status = assessment.status
    return status.in_place or status is Status.MISSING or (status is Status.BROKEN and may_be_repaired(assessment))


def may_be_repaired(assessment: Assessment) -> bool:
    """Broken only by names: imports apply adds, or names a point placed in the same run may define
    (not a local bound in the function, but not on every path to the code: no point puts that right)."""
    names = assessment.result.names
    return bool(names) and all(
        i.problem is Reason.MISSING_IMPORT or (i.problem is Reason.UNBOUND_NAME and not i.binding) for i in names
    )


def overlaps(assessments: Iterable[Assessment]) -> dict[str, tuple[str, int]]:
    """Points whose edits would rewrite a statement another point's edits rewrite too.

    Point id -> (the other point's id, the statement's line); neither can be made.
    """
    owner: dict[int, str] = {}
    found: dict[str, tuple[str, int]] = {}
    for assessment in assessments:
        mine = assessment.point.id
        for placement in assessment.placements:
            for stmt in placement.region:
                other = owner.setdefault(id(stmt), mine)
                if other != mine:
                    found.setdefault(mine, (other, stmt.lineno))
                    found.setdefault(other, (mine, stmt.lineno))
    return found


def overlap_message(other: str, line: int) -> str:
    return f"its anchor overlaps point {other} at line {line}; fix the anchor specs"


def _among(edit: Edit, edits: list[Edit]) -> bool:
    return any(edit is other for other in edits)


def _template_stmts(edit: Edit) -> tuple[ast.stmt, ...]:
    return edit.template.stmts


def _template_lines(edit: Edit) -> list[str]:
    return textwrap.dedent(edit.template.text).strip("\n").splitlines()


_SEVERITY = (Reason.NAME_CONFLICT, Reason.UNBOUND_NAME, Reason.UNSET_ATTRIBUTE, Reason.MISSING_IMPORT)


def _worst(issues: list[NameIssue]) -> Reason:
    problems = {i.problem for i in issues}
    return next(reason for reason in _SEVERITY if reason in problems)


def unbounded_message(block: Block) -> str:
    """Why the statements a rewrite's captured body holds are not known, and where its code is."""
    own = [s.lineno for s in block.instrumentation] or [block.line]
    return (
        f"its code is there (line {min(own)}), but {block.unbounded}: which statements are the body it "
        "captured is not known"
    )


def drift_message(state: PointState) -> str:
    present = len(state.blocks)
    total = present + len(state.absent)
    where = sorted({getattr(n, "lineno", 0) for n in state.marker_nodes} | {b.line for b in state.blocks})
    lines = ", ".join(str(line) for line in where if line)
    return f"present but edited by hand: {present} of {total} edits match the template (its code at lines {lines})"


def older_point(point: Point, manifest: Manifest) -> Point | None:
    """The point as the manifest says it was applied, when its templates differ from today's."""
    texts = manifest.recorded(point)
    if texts is None or len(texts) != len(point.edits):
        return None
    try:
        edits = tuple(
            replace(
                edit,
                template=parse_template(edit.template.name, text, expression=edit.kind is EditKind.REPLACE_EXPR),
            )
            for edit, text in zip(point.edits, texts)
        )
    except CodeError:
        return None
    return replace(point, edits=edits)


def stale_state(work: FileWork, point: Point, manifest: Manifest) -> PointState | None:
    """The point's code as an older template made it, when that is exactly what the file holds."""
    old = older_point(point, manifest)
    if old is None:
        return None
    others = [p for p in work.points if p.id != point.id]
    recognition = work.locator.recognition
    locator = FileLocator(
        work.tree,
        [*others, old],
        recognition.helper_names,
        work.text,
        extents=recognition.extents,
        unrecognisable=recognition.unrecognisable - {point.id},
    )
    state = locator.state(old)
    return state if state.complete else None
