"""Command line: the only place that prints, colours and exits.

Exit codes: 0 clean, 1 drift / would change / not everything placed, 2 error.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import asdict
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from trace_instrument import __version__, formats
from trace_instrument.cli_traces import register as register_trace_commands
from trace_instrument.engine.apply import apply as run_apply
from trace_instrument.engine.check import check as run_check
from trace_instrument.engine.patch import unified_patch
from trace_instrument.engine.remove import remove as run_remove
from trace_instrument.engine.report import OUTPUTS as REPORT_OUTPUTS
from trace_instrument.engine.verify import verify as run_verify
from trace_instrument.model import EXTRAS, FACILITIES, Catalog, PointResult, RunResult, Selection, Status
from trace_instrument.spec import SpecError, load_catalog

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Instrument a verl checkout with sample-flow, progress and trajectory tracing, deterministically.",
)
register_trace_commands(app)
# piped output (CI logs) gets a wide fixed width instead of rich's 80 columns
out = Console(soft_wrap=True, highlight=False, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, soft_wrap=True, highlight=False, width=None if sys.stderr.isatty() else 200)

OK, DRIFT, ERROR = 0, 1, 2


class Format(str, Enum):
    text = "text"
    json = "json"


class CheckFormat(str, Enum):
    text = "text"
    json = "json"
    github = "github"
    junit = "junit"


PathArg = Annotated[Path, typer.Argument(help="The verl checkout: the folder that holds verl/.")]
FacilityOpt = Annotated[
    list[str] | None, typer.Option("--facility", help=f"Only these facilities ({', '.join(FACILITIES)}).")
]
OnlyOpt = Annotated[list[str] | None, typer.Option("--only", help="Only these point ids.")]
SkipOpt = Annotated[list[str] | None, typer.Option("--skip", help="Leave these point ids out.")]
ExtrasOpt = Annotated[
    list[str] | None,
    typer.Option("--extras", help=f"Opt-in extras that change verl's behaviour ({', '.join(EXTRAS)})."),
]
AnchorsOpt = Annotated[
    list[Path] | None,
    typer.Option("--anchors", help="A folder of your own anchor specs (YAML), added to the catalog."),
]


def main() -> None:
    app()


# -- shared helpers --------------------------------------------------------------------------------


def _catalog(anchors: list[Path] | None) -> Catalog:
    try:
        return load_catalog(anchors_dirs=anchors or [])
    except SpecError as exc:
        err.print(Text("anchor specs are invalid:", style="bold red"))
        for problem in exc.problems:
            err.print(f"  {problem}")
        raise typer.Exit(ERROR) from None


def _selection(catalog: Catalog, facility, only, skip, extras) -> Selection:
    known_ids = {p.id for p in catalog.points}
    for name in facility or []:
        if name not in FACILITIES:
            _usage(f"unknown facility {name!r}; choose from {', '.join(FACILITIES)}")
    for name in extras or []:
        if name not in EXTRAS:
            _usage(f"unknown extra {name!r}; choose from {', '.join(EXTRAS)}")
    for point_id in [*(only or []), *(skip or [])]:
        if point_id not in known_ids:
            _usage(f"unknown point id {point_id!r}; `trace-instrument points` lists them")
    return Selection(
        facilities=frozenset(facility) if facility else frozenset(FACILITIES),
        only=frozenset(only or []),
        skip=frozenset(skip or []),
        extras=frozenset(extras or []),
    )


def _usage(message: str) -> None:
    err.print(Text(f"error: {message}", style="red"))
    raise typer.Exit(ERROR)


def _point_json(p: PointResult) -> dict:
    data = asdict(p)
    data["id"] = data.pop("point_id")
    data["status"] = p.status.value
    data["candidates"] = [asdict(c) for c in p.candidates]
    return data


def _summary(result: RunResult) -> dict[str, int]:
    return dict(Counter(p.status.value for p in result.points))


def _json(command: str, result: RunResult, **extra) -> str:
    body = {
        "command": command,
        "root": result.root,
        "error": result.error,
        "written": result.written,
        "points": [_point_json(p) for p in result.points],
        "files": [{"path": f.path, "changed": f.changed, "error": f.error} for f in result.files],
        "runtime": [{"path": path, "status": status} for path, status in result.runtime_files],
        "summary": _summary(result),
        **extra,
    }
    return json.dumps(body, indent=2)


STATUS_STYLE = {
    Status.APPLIED: "green",
    Status.PRESENT: "green",
    Status.REMOVED: "green",
    Status.MISSING: "yellow",
    Status.DRIFTED: "yellow",
    Status.STALE: "yellow",
    Status.NOT_APPLICABLE: "dim",
    Status.SKIPPED: "yellow",
    Status.ANCHOR_LOST: "red",
    Status.AMBIGUOUS: "red",
    Status.UNEXPECTED: "red",
    Status.ERROR: "bold red",
}


def _print_point(p: PointResult, *, show_ok: bool, planned_only: bool = False) -> None:
    """One point; with planned_only (a dry run, or a run that wrote nothing) "applied" reads "would apply"."""
    if not show_ok and p.status in (Status.APPLIED, Status.PRESENT, Status.REMOVED):
        return
    where = f"{p.file}:{p.line}" if p.line else p.file
    label = p.status.value
    if planned_only and p.status in (Status.APPLIED, Status.REMOVED):
        label = "would " + ("apply" if p.status is Status.APPLIED else "remove")
    line = Text("  ")
    line.append(f"{label:<15}", style=STATUS_STYLE.get(p.status, ""))
    line.append(f"{p.point_id:<42} ", style="bold")
    line.append(where, style="cyan")
    out.print(line)
    if p.message:
        out.print(Text(f"      {p.message}"))
    for candidate in p.candidates:
        out.print(
            Text(f"      nearest: line {candidate.line}: {candidate.code}  (similarity {candidate.score})", style="dim")
        )
    if p.diff:
        _print_diff(p.diff, indent="      ")


def _print_files(result: RunResult, verb: str) -> None:
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("file")
    table.add_column("points", justify="right")
    table.add_column("result")
    for f in result.files:
        counts = Counter(p.status.value for p in f.points)
        detail = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        state = f"[red]{f.error}[/red]" if f.error else (verb if f.changed else "unchanged")
        table.add_row(f.path, str(len(f.points)), f"{detail} — {state}" if detail else state)
    out.print(table)


def _print_runtime(result: RunResult, planned_only: bool = False) -> None:
    if not result.runtime_files:
        return
    would = {"created": "to create", "removed": "to remove"} if planned_only else {}
    counts = Counter(would.get(status, status) for _, status in result.runtime_files)
    folder = result.runtime_files[0][0].rsplit("/", 1)[0]
    out.print(f"runtime package {folder}/: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))


def _print_diff(patch: str, indent: str = "") -> None:
    for line in patch.splitlines():
        style = ""
        if line.startswith(("diff --git", "---", "+++", "new file", "deleted file")):
            style = "bold"
        elif line.startswith("@@"):
            style = "cyan"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        out.print(Text(indent + line, style=style))


def _counts_line(result: RunResult, order: list[Status]) -> str:
    counts = Counter(p.status for p in result.points)
    parts = [f"{counts[s]} {s.value}" for s in order if counts[s]]
    parts += [f"{n} {s.value}" for s, n in counts.items() if s not in order and n]
    return ", ".join(parts) if parts else "no points selected"


# -- commands -------------------------------------------------------------------------------------------


@app.command()
def apply(
    path: PathArg,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the diff, write nothing.")] = False,
    patch: Annotated[
        Path | None,
        typer.Option("--patch", help="Write the change as a patch `git apply` accepts; write nothing else."),
    ] = None,
    facility: FacilityOpt = None,
    only: OnlyOpt = None,
    skip: SkipOpt = None,
    extras: ExtrasOpt = None,
    keep_going: Annotated[
        bool, typer.Option("--keep-going", help="Write the files that worked even if others failed.")
    ] = False,
    anchors: AnchorsOpt = None,
    fmt: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
) -> None:
    """Instrument the checkout: put every selected point in place."""
    catalog = _catalog(anchors)
    selection = _selection(catalog, facility, only, skip, extras)
    write = not dry_run and patch is None
    result = run_apply(path, catalog, selection, write=write, keep_going=keep_going)
    text = unified_patch(result)
    code = _apply_exit(result)
    complete = not result.error and (keep_going or not any(f.error for f in result.files))
    if patch is not None and complete:
        patch.write_text(text, encoding="utf-8")
    if fmt is Format.json:
        out.print(_json("apply", result, dry_run=not write), soft_wrap=True)
        raise typer.Exit(code)
    if result.error:
        err.print(Text(f"error: {result.error}", style="bold red"))
        raise typer.Exit(ERROR)
    if dry_run:
        _print_diff(text)
    _print_files(result, "written" if result.written else "would change")
    for p in result.points:
        _print_point(p, show_ok=True, planned_only=not result.written)
    _print_runtime(result, planned_only=not result.written)
    if patch is not None:
        written = f"patch written to {patch} ({text.count(chr(10))} lines)"
        out.print(written if complete else "no patch written: a file failed (--keep-going makes a patch of the rest)")
    state = "written" if result.written else ("dry run, nothing written" if not write else "nothing to write")
    if any(f.error for f in result.files) and not keep_going:
        state = "nothing written (a file failed; --keep-going writes the others)"
    order = [Status.APPLIED, Status.PRESENT, Status.NOT_APPLICABLE, Status.DRIFTED, Status.SKIPPED]
    out.print(f"apply: {_counts_line(result, order)} — {state}")
    raise typer.Exit(code)


def _apply_exit(result: RunResult) -> int:
    if result.error or any(f.error for f in result.files):
        return ERROR
    placed = (Status.APPLIED, Status.PRESENT, Status.NOT_APPLICABLE)
    return OK if all(p.status in placed for p in result.points) else DRIFT


@app.command()
def check(
    path: PathArg,
    facility: FacilityOpt = None,
    only: OnlyOpt = None,
    skip: SkipOpt = None,
    extras: ExtrasOpt = None,
    anchors: AnchorsOpt = None,
    fmt: Annotated[
        CheckFormat, typer.Option("--format", help="text, json, github (annotations) or junit (XML).")
    ] = CheckFormat.text,
) -> None:
    """CI drift check: is every point in place as the catalog says? Writes nothing."""
    catalog = _catalog(anchors)
    selection = _selection(catalog, facility, only, skip, extras)
    result = run_check(path, catalog, selection)
    code = _check_exit(result)
    if fmt is CheckFormat.json:
        out.print(formats.check_json(result), soft_wrap=True)
    elif fmt is CheckFormat.github:
        out.print(formats.github_annotations(result), soft_wrap=True)
    elif fmt is CheckFormat.junit:
        out.print(formats.junit_xml(result), soft_wrap=True)
    else:
        if result.error:
            err.print(Text(f"error: {result.error}", style="bold red"))
            raise typer.Exit(ERROR)
        for p in result.points:
            _print_point(p, show_ok=True)
        _print_runtime(result)
        order = [Status.PRESENT, Status.NOT_APPLICABLE, Status.MISSING, Status.DRIFTED, Status.STALE]
        verdict = "clean" if code == OK else "drift"
        out.print(f"check: {_counts_line(result, order)} — {verdict}")
    raise typer.Exit(code)


def _check_exit(result: RunResult) -> int:
    if result.error or any(f.error for f in result.files):
        return ERROR
    clean = (Status.PRESENT, Status.NOT_APPLICABLE)
    runtime_ok = all(status == "present" for _, status in result.runtime_files)
    return OK if runtime_ok and all(p.status in clean for p in result.points) else DRIFT


@app.command()
def verify(
    path: PathArg,
    baseline: Annotated[
        Path | None,
        typer.Option("--baseline", help="A pristine tree to prove zero intrusion against (default: the manifest)."),
    ] = None,
    anchors: AnchorsOpt = None,
    fmt: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
) -> None:
    """Prove the result: counts, imports, compilation, zero intrusion, and a runtime self-check."""
    catalog = _catalog(anchors)
    result = run_verify(path, catalog, baseline=baseline)
    code = ERROR if result.error else (OK if result.ok else DRIFT)
    if fmt is Format.json:
        body = {
            "root": result.root,
            "ok": result.ok,
            "error": result.error,
            "findings": [asdict(f) for f in result.findings],
            "counts": [{"file": f, "call": c, "expected": e, "actual": a} for f, c, e, a in result.counts],
        }
        out.print(json.dumps(body, indent=2), soft_wrap=True)
        raise typer.Exit(code)
    if result.error:
        err.print(Text(f"error: {result.error}", style="bold red"))
        raise typer.Exit(ERROR)
    _print_verify(result)
    raise typer.Exit(code)


def _print_verify(result) -> None:
    table = Table(show_header=True, header_style="bold", box=None)
    for column in ("file", "trace_flow", "log_progress"):
        table.add_column(column, justify="left" if column == "file" else "right")
    per_file: dict[str, dict[str, tuple[int, int]]] = {}
    for file, call, expected, actual in result.counts:
        per_file.setdefault(file, {})[call] = (expected, actual)
    totals = {"trace_flow": [0, 0], "log_progress": [0, 0]}
    for file, calls in per_file.items():
        cells = []
        for call in ("trace_flow", "log_progress"):
            expected, actual = calls.get(call, (0, 0))
            totals[call][0] += expected
            totals[call][1] += actual
            style = "" if expected == actual else "red"
            cells.append(Text(f"{actual}/{expected}", style=style) if expected or actual else Text("-", style="dim"))
        table.add_row(file, *cells)
    table.add_row(Text("total", style="bold"), *(Text(f"{a}/{e}", style="bold") for e, a in totals.values()))
    out.print(Text("call sites found / expected by the catalog for this checkout:", style="bold"))
    out.print(table)
    by_check = Counter((f.check, f.ok) for f in result.findings)
    checks = dict.fromkeys(f.check for f in result.findings)
    for check in checks:
        passed, failed = by_check[(check, True)], by_check[(check, False)]
        style = "green" if not failed else "red"
        out.print(Text(f"  {check:<15} {passed} passed" + (f", {failed} failed" if failed else ""), style=style))
    for finding in result.findings:
        if finding.check == "runtime" and finding.ok:
            out.print(Text(f"      runtime: {finding.subject}: {finding.message}", style="dim"))
    for finding in result.findings:
        if not finding.ok:
            where = f"{finding.subject}:{finding.line}" if finding.line else finding.subject
            out.print(Text(f"  FAIL {finding.check}: {where}: {finding.message}", style="red"))
    failed = sum(1 for f in result.findings if not f.ok)
    out.print(
        f"verify: {len(result.findings) - failed} checks passed, {failed} failed — {'ok' if result.ok else 'not ok'}"
    )


@app.command()
def remove(
    path: PathArg,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the diff, write nothing.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Also remove points edited by hand, as far as they are recognised.")
    ] = False,
    facility: FacilityOpt = None,
    only: OnlyOpt = None,
    skip: SkipOpt = None,
    anchors: AnchorsOpt = None,
    fmt: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
) -> None:
    """Take the instrumentation out again, restoring the original code."""
    catalog = _catalog(anchors)
    selection = _selection(catalog, facility, only, skip, [])
    result = run_remove(path, catalog, selection, write=not dry_run, force=force)
    kept = any(p.status is Status.DRIFTED for p in result.points) or any(
        status.startswith("kept: ") and "edited by hand" in status for _, status in result.runtime_files
    )
    code = ERROR if result.error or any(f.error for f in result.files) else (DRIFT if kept else OK)
    if fmt is Format.json:
        out.print(_json("remove", result, dry_run=dry_run), soft_wrap=True)
        raise typer.Exit(code)
    if result.error:
        err.print(Text(f"error: {result.error}", style="bold red"))
        raise typer.Exit(ERROR)
    if dry_run:
        _print_diff(unified_patch(result))
    _print_files(result, "written" if result.written else "would change")
    for p in result.points:
        if p.status is not Status.MISSING:
            _print_point(p, show_ok=False, planned_only=not result.written)
    _print_runtime(result, planned_only=not result.written)
    state = "written" if result.written else ("dry run, nothing written" if dry_run else "nothing to write")
    out.print(f"remove: {_counts_line(result, [Status.REMOVED, Status.MISSING, Status.DRIFTED])} — {state}")
    raise typer.Exit(code)


class ReportFormat(str, Enum):
    text = "text"
    markdown = "markdown"
    json = "json"


@app.command()
def report(
    path: PathArg,
    anchors: AnchorsOpt = None,
    fmt: Annotated[ReportFormat, typer.Option("--format", help="text, markdown or json.")] = ReportFormat.text,
) -> None:
    """The final report: what is in place, what was skipped and why, the proofs, how to switch it on."""
    from trace_instrument.engine.report import as_dict, as_markdown
    from trace_instrument.engine.report import report as run_report

    catalog = _catalog(anchors)
    rep = run_report(path, catalog)
    code = ERROR if rep.error else (OK if rep.ok else DRIFT)
    if fmt is ReportFormat.json:
        out.print(json.dumps(as_dict(rep), indent=2), soft_wrap=True)
    elif fmt is ReportFormat.markdown or rep.error:
        out.print(as_markdown(rep), soft_wrap=True, markup=False)
    else:
        from rich.markdown import Markdown

        out.print(Markdown(as_markdown(rep)))
    raise typer.Exit(code)


@app.command()
def points(
    anchors: AnchorsOpt = None,
    fmt: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
) -> None:
    """List the catalog: every point, where it goes and what it does."""
    catalog = _catalog(anchors)
    if fmt is Format.json:
        body = {
            "validated_on": list(catalog.validated_on),
            "points": [
                {
                    "id": p.id,
                    "facility": p.facility,
                    "file": p.file,
                    "scope": p.scope,
                    "title": p.title,
                    "edits": len(p.edits),
                    "extra": p.extra,
                    "default": p.extra is None,
                    "changes_behaviour": " ".join(p.changes_behaviour.split()),
                    "requires": list(p.requires),
                    "spec": str(p.source),
                }
                for p in catalog.points
            ],
        }
        out.print(json.dumps(body, indent=2), soft_wrap=True)
        return
    table = Table(show_header=True, header_style="bold", box=None)
    for column in ("id", "facility", "file", "scope", "what"):
        table.add_column(column)
    for p in catalog.points:
        what = p.title
        if p.extra:
            what += f" [yellow](opt-in extra {p.extra}: changes verl's behaviour)[/yellow]"
        elif p.changes_behaviour:
            what += " [dim](declared rewrite)[/dim]"
        table.add_row(p.id, p.facility, p.file.removeprefix("verl/"), p.scope, what)
    out.print(table)
    counts = Counter(p.facility for p in catalog.points if p.extra is None)
    out.print(
        f"{len(catalog.points)} points ({', '.join(f'{n} {f}' for f, n in counts.items())}, "
        f"{sum(1 for p in catalog.points if p.extra)} opt-in); validated on verl {', '.join(catalog.validated_on)}"
    )


@app.command()
def demo(
    version: Annotated[str, typer.Option("--version", help="verl release to fetch from PyPI.")] = "0.9.0",
    keep: Annotated[Path | None, typer.Option("--keep", help="Leave the instrumented copy in this folder.")] = None,
    excerpt: Annotated[int, typer.Option("--excerpt", help="Lines of diff to show.")] = 40,
) -> None:
    """Fetch verl from PyPI, instrument a copy, verify it, and show what changed."""
    import shutil
    import tempfile

    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from trace_instrument.engine.wheels import WheelError, verl_tree

    catalog = _catalog(None)
    workdir = Path(tempfile.mkdtemp(prefix="trace-instrument-demo-")) if keep is None else keep
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    try:
        with Progress(*columns, console=err, transient=False) as progress:
            step = progress.add_task(f"fetching verl {version} from PyPI (cached after the first time)", total=None)
            try:
                pristine = verl_tree(version)
            except WheelError as exc:
                progress.stop()
                err.print(Text(f"error: {exc}", style="bold red"))
                raise typer.Exit(ERROR) from None
            progress.update(step, description=f"verl {version}: {pristine}", completed=1, total=1)
            step = progress.add_task("copying it to a scratch checkout", total=None)
            if (workdir / "verl").exists():
                shutil.rmtree(workdir / "verl")
            shutil.copytree(pristine / "verl", workdir / "verl")
            progress.update(step, description=f"scratch checkout: {workdir}", completed=1, total=1)
            step = progress.add_task("instrumenting", total=None)
            applied = run_apply(workdir, catalog)
            progress.update(step, description="instrumented", completed=1, total=1)
            step = progress.add_task("checking every point", total=None)
            checked = run_check(workdir, catalog)
            progress.update(step, description="checked", completed=1, total=1)
            step = progress.add_task(
                "verifying (counts, imports, compile, zero intrusion, runtime self-check)", total=None
            )
            verified = run_verify(workdir, catalog)
            progress.update(step, description="verified", completed=1, total=1)
        _demo_report(applied, checked, excerpt)
        _print_verify(verified)
        ok = _apply_exit(applied) == OK and _check_exit(checked) == OK and verified.ok
        placed = _counts_line(applied, [Status.APPLIED, Status.PRESENT, Status.NOT_APPLICABLE])
        out.print(f"demo: verl {version} instrumented ({placed}), " + ("verified" if ok else "NOT verified"))
        code = OK if ok else DRIFT
        raise typer.Exit(code)
    finally:
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


def _demo_report(applied: RunResult, checked: RunResult, excerpt: int) -> None:
    patch = unified_patch(applied)
    lines = patch.splitlines()
    start = next(
        (i for i, line in enumerate(lines) if line.startswith("diff --git a/verl/trainer/ppo/ray_trainer.py")), 0
    )
    out.print(Text("\nan excerpt of the change:", style="bold"))
    _print_diff("\n".join(lines[start : start + excerpt]))
    out.print(
        Text(f"... {len(lines)} diff lines in all (`trace-instrument apply --dry-run` shows them)\n", style="dim")
    )
    _print_files(applied, "instrumented")
    by_facility = Counter((p.facility, p.status.value) for p in applied.points)
    out.print(Text("\npoints per facility:", style="bold"))
    for facility in FACILITIES:
        counts = {s: n for (f, s), n in by_facility.items() if f == facility}
        if counts:
            out.print(f"  {facility:<12} " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    _print_runtime(applied)
    order = [Status.PRESENT, Status.NOT_APPLICABLE, Status.MISSING, Status.DRIFTED]
    out.print(f"check after apply: {_counts_line(checked, order)}")
    out.print(Text("\nswitch it on with `export VERL_TRACE_DIR=/path/to/traces`; the outputs land in:", style="bold"))
    for what, where in REPORT_OUTPUTS:
        out.print(f"  {what:<38} {where}")
    out.print(f"instrumented: {_counts_line(applied, [Status.APPLIED, Status.PRESENT, Status.NOT_APPLICABLE])}")


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Show the version and exit.")] = False,
) -> None:
    if version:
        out.print(f"trace-instrument {__version__}")
        raise typer.Exit(OK)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
