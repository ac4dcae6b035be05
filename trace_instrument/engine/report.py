"""report: the final instrumentation report, generated from the checkout itself.

It combines check (what is in place, what is not and why) and verify (the
proofs) into the summary a person hands over after instrumenting: files
created, points per facility, progress stages covered, what was skipped, the
verify results, and how to switch tracing on.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from trace_instrument.engine.check import check
from trace_instrument.engine.files import CheckoutError, checkout_root
from trace_instrument.engine.verify import verify
from trace_instrument.engine.versions import verl_version
from trace_instrument.model import (
    FACILITIES,
    CallTotal,
    Catalog,
    PointResult,
    RunError,
    RunResult,
    RuntimeFile,
    RuntimeStatus,
    Status,
    VerifyResult,
)

# The training-stage panel's 11 stages and the progress line that marks each one.
PANEL_STAGES = (
    ("fetch batch", "load global batch"),
    ("compute reward", "start compute reward"),
    ("compute log prob", "start compute log prob"),
    ("compute ref log prob", "start compute ref log prob"),
    ("compute adv", "start compute adv"),
    ("update prompt2accs", "start update prompt2accs"),
    ("update actor", "start update actor"),
    ("record metrics", "start record metrics"),
    ("sync params", "start sync params"),
    ("eval", "start eval"),
    ("save checkpoint", "start save checkpoint"),
)
OUTPUTS = (
    ("sample flow CSV (no header)", "$VERL_TRACE_DIR/sample/{hostname}-pid{pid}.csv"),
    ("progress log (hourly)", "$VERL_TRACE_DIR/progress/{YYYYMMDD-HH}.log"),
    ("trajectory JSONL (100 MB rotation)", "$VERL_TRACE_DIR/trajectory/trajectory_{instance}_{ts}.jsonl"),
    ("stdout", "[FLOW_TRACE] lines (tracing on only) and the bare progress lines (always)"),
    (
        "discovery files",
        "/tmp/verl_trace_sample_path.txt, /tmp/verl_trace_trajectory_path.txt, /tmp/verl_progress_path.txt",
    ),
)


@dataclass(frozen=True)
class FacilityCount:
    """A facility's core points: how many are in place of those whose file is in the checkout."""

    facility: str
    in_place: int
    applicable: int


@dataclass(frozen=True)
class StageCoverage:
    """A training stage of the panel, and whether a catalog file holds the progress line marking it."""

    stage: str
    covered: bool


@dataclass(frozen=True)
class Report:
    """The hand-over report: what is in place, what is not and why, the proofs."""

    root: str
    verl_version: str
    validated_on: tuple[str, ...]
    runtime_files: tuple[RuntimeFile, ...]
    facilities: tuple[FacilityCount, ...]
    calls: tuple[CallTotal, ...]
    stages: tuple[StageCoverage, ...]
    not_in_place: tuple[PointResult, ...]
    verify: VerifyResult
    error: RunError | None = None

    @property
    def ok(self) -> bool:
        """No error, verify ok, nothing in `not_in_place`, every runtime file present as shipped."""
        runtime_ok = all(f.status is RuntimeStatus.PRESENT for f in self.runtime_files)
        return self.error is None and self.verify.ok and not self.not_in_place and runtime_ok

    @property
    def instrumented(self) -> bool:
        """Does the checkout hold anything of the tool's (verify's answer)? An error says nothing: True."""
        return self.error is not None or self.verify.instrumented

    @property
    def validated(self) -> bool:
        """Is the checkout's verl a release the catalog was validated on (or unknown)?"""
        return not self.verl_version or self.verl_version in self.validated_on


def report(root: str | Path, catalog: Catalog) -> Report:
    """Check and verify the checkout and sum them up."""
    try:
        base = checkout_root(root)
    except CheckoutError as exc:
        return _failed(str(root), catalog, exc.as_run_error())
    checked = check(base, catalog)
    if checked.error is not None:  # a manifest no run can trust, say: verify would stop on it too
        return _failed(str(base), catalog, checked.error)
    proof = verify(base, catalog)
    return Report(
        root=str(base),
        verl_version=verl_version(base),
        validated_on=catalog.validated_on,
        runtime_files=checked.runtime_files,
        facilities=_facilities(checked, catalog),
        calls=proof.call_totals(),
        stages=_stages(base, catalog),
        not_in_place=(
            *(
                p
                for p in checked.points
                if p.status not in (Status.PRESENT, Status.NOT_APPLICABLE) and _is_core(p, catalog)
            ),
            *checked.unfinished,  # what a killed run left: not the tree the report vouches for
        ),
        verify=proof,
    )


def _failed(root: str, catalog: Catalog, error: RunError) -> Report:
    """The report of a run that could not look at the checkout."""
    empty = VerifyResult(root, ())
    return Report(root, "", catalog.validated_on, (), (), (), (), (), empty, error=error)


def _is_core(result: PointResult, catalog: Catalog) -> bool:
    if result.point_id == "unexpected":
        return True
    point = catalog.point(result.point_id)
    return point.extra is None or result.status is not Status.MISSING


def _facilities(checked: RunResult, catalog: Catalog) -> tuple[FacilityCount, ...]:
    counts: Counter[tuple[str, str]] = Counter()
    for result in checked.points:
        if result.point_id == "unexpected" or catalog.point(result.point_id).extra is not None:
            continue
        if result.status is not Status.NOT_APPLICABLE:
            counts[(result.facility, "applicable")] += 1
            counts[(result.facility, "in place")] += result.status is Status.PRESENT
    return tuple(
        FacilityCount(facility, counts[(facility, "in place")], counts[(facility, "applicable")])
        for facility in FACILITIES
        if counts[(facility, "applicable")]
    )


def _stages(root: Path, catalog: Catalog) -> tuple[StageCoverage, ...]:
    text = "\n".join(
        (root / path).read_text(encoding="utf-8", errors="replace") for path in catalog.files if (root / path).exists()
    )
    return tuple(StageCoverage(stage, marker in text) for stage, marker in PANEL_STAGES)
