"""Command line: parses options, runs an operation, prints what render/ built, exits with its code.

Exit codes: 0 clean, 1 drift / not everything placed / something kept, 2 error,
130 / 143 interrupted by SIGINT / SIGTERM.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from enum import Enum
from pathlib import Path
from types import FrameType
from typing import Annotated, Any, NoReturn

if os.environ.get("NO_COLOR"):
    # the help pages too: Typer draws them with rich (bold, dim, boxes cut to the width) unless told not to
    os.environ.setdefault("TYPER_USE_RICH", "0")

import typer  # after the switch above, which Typer reads when it is imported
from rich.console import Console, RenderableType
from rich.text import Text
from typer.core import TyperCommand

from trace_instrument import __version__
from trace_instrument.engine.check import check as run_check
from trace_instrument.engine.files import STOP_SIGNALS, Interrupted, InterruptedAfterWrite
from trace_instrument.engine.patch import patch_bytes, unified_patch
from trace_instrument.model import EXTRAS, FACILITIES, Catalog, Confidence, RunResult, Selection, Status, VerifyResult
from trace_instrument.render import exits, text  # (ci and jsonout: where their formats are asked for)
from trace_instrument.render.items import REMOVE_WORDS, counts_line, remove_counts
from trace_instrument.spec import SpecError, load_catalog
from trace_instrument.spec.project import (
    NAME_KEYS,
    ConfigError,
    ProjectConfig,
    find_config,
    record_anchors,
    unknown_name,
)
from trace_instrument.traces.cli import register as register_trace_commands

app = typer.Typer(
    add_completion=True,
    no_args_is_help=True,
    # -h as well: every command inherits the help option's names from here (the trace reader's too)
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Instrument a verl checkout with sample-flow, progress and trajectory tracing, deterministically.",
)
register_trace_commands(app)


def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    plain = bool(os.environ.get("NO_COLOR")) or not tty
    # piped output (CI logs, files) gets a wide fixed width and no escape codes at all
    return Console(
        file=stream,
        soft_wrap=True,
        highlight=False,
        width=None if tty else 200,
        color_system=None if plain else "auto",
        no_color=plain,
        emoji=False,
    )


class _State:
    debug = False


def _out() -> Console:
    return _console(stderr=False)


def _err() -> Console:
    return _console(stderr=True)


def _print(renderables: Iterable[RenderableType]) -> None:
    console = _out()
    for item in renderables:
        console.print(item)


def _print_raw(body: str) -> None:
    """Machine-readable output, byte for byte (no markup, no wrapping)."""
    sys.stdout.write(body if body.endswith("\n") else body + "\n")
    sys.stdout.flush()


def _fail(message: str, code: int = exits.ERROR) -> NoReturn:
    _err().print(Text(f"error: {message}", style="bold red"))
    raise typer.Exit(code)


class Format(str, Enum):
    text = "text"
    json = "json"


class CheckFormat(str, Enum):
    text = "text"
    json = "json"
    github = "github"
    junit = "junit"


class ReportFormat(str, Enum):
    text = "text"
    markdown = "markdown"
    json = "json"


def _complete(choices: Iterable[str], incomplete: str) -> list[str]:
    """The choices a shell completes a word to: those it starts (after the last comma of a list)."""
    done, _, word = incomplete.rpartition(",")
    prefix = done + "," if done else ""
    return [prefix + c for c in choices if c.startswith(word)]


def _complete_facility(incomplete: str) -> list[str]:
    return _complete(FACILITIES, incomplete)


def _complete_extra(incomplete: str) -> list[str]:
    return _complete(EXTRAS, incomplete)


def _complete_point(incomplete: str) -> list[str]:
    """The shipped catalog's point ids (read from the tool's cache after the first time)."""
    try:
        ids = [p.id for p in load_catalog().points]
    except SpecError:
        return []
    return _complete(ids, incomplete)


REPEATS = "Repeatable; a comma list works too"
PathArg = Annotated[Path, typer.Argument(metavar="PATH", help="The verl checkout: the folder that holds verl/.")]
FacilityOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--facility",
        help=f"Only these facilities ({', '.join(FACILITIES)}). {REPEATS} (--facility progress,env).",
        autocompletion=_complete_facility,
    ),
]
OnlyOpt = Annotated[
    list[str] | None,
    typer.Option("--only", help=f"Only these point ids. {REPEATS} (--only A,B).", autocompletion=_complete_point),
]
SkipOpt = Annotated[
    list[str] | None,
    typer.Option("--skip", help=f"Leave these point ids out. {REPEATS} (--skip A,B).", autocompletion=_complete_point),
]
ExtrasOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--extras",
        help=f"Opt-in extras that change verl's behaviour ({', '.join(EXTRAS)}). {REPEATS}.",
        autocompletion=_complete_extra,
    ),
]
VerboseOpt = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="Every detail: on a checkout never instrumented, each point; with --quiet, every problem.",
    ),
]
QuietOpt = Annotated[
    bool,
    typer.Option("--quiet", "-q", help="At most 5 lines: the first problems, one line each, and the summary."),
]
AnchorsOpt = Annotated[
    list[Path] | None,
    typer.Option("--anchors", help="A folder of your own anchor specs (YAML), added to the catalog."),
]

FullOpt = Annotated[
    bool,
    typer.Option(
        "--full",
        help="With --dry-run: the diff of the runtime package's files and the manifest too "
        "(without it: one line each, with its lines and digest).",
    ),
]


def main(early: list[int] | None = None) -> None:
    """The command line: Ctrl-C, SIGTERM and SIGHUP end a run cleanly, with one line and 130 / 143 / 129.

    `early`: the stop signals that came while the command line loaded (see __main__)."""
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:  # a background job's ignored SIGINT stays ignored
            signal.signal(signum, _on_signal)
    if early:
        _interrupted(Interrupted(signal.Signals(early[0]).name))
    # LibCST's trees are millions of short-lived objects with few cycles: the cyclic collector's
    # default pace costs an edit about a tenth of its time and frees little (a run lasts seconds)
    gc.set_threshold(100_000, 50, 100)
    try:
        app(prog_name="trace-instrument")
    except (Interrupted, InterruptedAfterWrite, KeyboardInterrupt) as exc:
        _interrupted(exc)
    except SystemExit as exc:  # how the command-line library ends every run, errors and help included
        _end_process(exc.code)


def _end_process(code: int | str | None) -> NoReturn:
    """Exit with the run's code once its output is flushed, without tearing the interpreter down.

    Everything a command writes is complete by now (files are written, renamed and closed, trace
    databases closed, worker processes joined): what an ordinary exit would add is freeing every
    parsed tree and cached object one by one, a fifth of a `check`'s time. (mypy ends the same way.)
    """
    if isinstance(code, str):  # SystemExit("message"): printed, and exit status 1, as Python does
        sys.stderr.write(code + "\n")
        code = 1
    status = 0 if code is None else code
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`) or stream: nothing more can reach it
            status = status or 120  # what Python itself returns when its final flush fails
    os._exit(status)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    # not KeyboardInterrupt: the command-line library would swallow that one without a word
    raise Interrupted(signal.Signals(signum).name)


def _interrupted(exc: BaseException) -> NoReturn:
    written = isinstance(exc, InterruptedAfterWrite)
    cause = exc.interruption if isinstance(exc, InterruptedAfterWrite) else exc
    name = cause.signal_name if isinstance(cause, Interrupted) else "SIGINT"
    state = "the changes had been written completely" if written else "nothing was written"
    with suppress(OSError, ValueError):  # a closed terminal (SIGHUP) takes stderr with it
        sys.stderr.write(f"trace-instrument: interrupted ({name}); {state}\n")
    # no interpreter teardown: the workers are dead already, and nothing may wait on the threads
    # that served them (an interrupted run ends within moments, whatever it was doing)
    _end_process(exits.INTERRUPTED[name])


# -- shared helpers --------------------------------------------------------------------------------


def _catalog(anchors: list[Path] | None, *, quiet: bool = False) -> Catalog:
    """The catalog, or exit 2 listing the specs' problems (`quiet`: the first, within QUIET_LINES)."""
    try:
        return load_catalog(anchors_dirs=anchors or [])
    except SpecError as exc:
        problems: list[RenderableType] = [Text(f"  {problem}") for problem in exc.problems]
        if quiet:
            problems = text.at_most(problems, text.QUIET_LINES - 1)
        err = _err()
        for line in [Text("anchor specs are invalid:", style="bold red"), *problems]:
            err.print(line)
        raise typer.Exit(exits.ERROR) from None


def _config(path: Path) -> ProjectConfig | None:
    """The checkout's project configuration (pyproject.toml or .trace-instrument.toml), or None."""
    try:
        return find_config(path)
    except ConfigError as exc:
        _fail(str(exc))


def _anchors(flag: list[Path] | None, config: ProjectConfig | None) -> list[Path]:
    """--anchors replaces the configured folders; without it, the configuration's are read."""
    if flag is not None or config is None:
        return flag or []
    return list(config.anchors or ())


def _selection(
    catalog: Catalog,
    config: ProjectConfig | None,
    facility: list[str] | None,
    only: list[str] | None,
    skip: list[str] | None,
    extras: list[str] | None,
) -> Selection:
    """The flags, each key the command line does not give taken from the configuration; every name checked."""
    flags = {"facility": _names(facility), "extras": _names(extras), "only": _names(only), "skip": _names(skip)}
    known_ids = [p.id for p in catalog.points]
    chosen: dict[str, list[str]] = {}
    for key in NAME_KEYS:
        source = config if flags[key] is None and config is not None and config.names(key) is not None else None
        chosen[key] = list(source.names(key) or ()) if source is not None else list(flags[key] or [])
        problem = unknown_name(key, chosen[key], known_ids)
        if problem:
            _fail(problem if source is None else f"{source.where(key)}: {problem}")
    return Selection(
        facilities=frozenset(chosen["facility"]) if chosen["facility"] else frozenset(FACILITIES),
        only=frozenset(chosen["only"]),
        skip=frozenset(chosen["skip"]),
        extras=frozenset(chosen["extras"]),
    )


def _names(values: list[str] | None) -> list[str] | None:
    """A repeatable flag's names, each value a name or a comma list of them (`--only a,b --only c`)."""
    if values is None:
        return None
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def _label(config: ProjectConfig | None) -> str | None:
    return config.label if config is not None else None


def _tracebacks(result: RunResult) -> dict[str, str]:
    """File path -> the tool's own traceback, for --debug."""
    if not _State.debug:
        return {}
    return {f.path: f.error.traceback for f in result.files if f.error is not None and f.error.traceback}


def _full_needs_dry_run(full: bool, dry_run: bool) -> None:
    if full and not dry_run:
        _fail("--full goes with --dry-run (it says how much of the diff to show)")


def _write_patch(destination: Path, patch: bytes) -> str:
    if str(destination) == "-":
        sys.stdout.flush()
        sys.stdout.buffer.write(patch)
        sys.stdout.buffer.flush()
        return "patch written to standard output"
    try:
        destination.write_bytes(patch)
    except OSError as exc:
        _fail(f"cannot write the patch to {destination}: {exc.strerror or exc}")
    lines = patch.count(b"\n")
    return f"patch written to {destination} ({lines} lines)"


# -- commands -------------------------------------------------------------------------------------------


@app.command()
def apply(
    path: PathArg,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the diff, write nothing.")] = False,
    full: FullOpt = False,
    patch: Annotated[
        Path | None,
        typer.Option(
            "--patch", help="Write the change as a patch `git apply` accepts (- for stdout); write nothing else."
        ),
    ] = None,
    update: Annotated[
        bool, typer.Option("--update", help="Refresh points applied with an older template, in place.")
    ] = False,
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
    """Instrument the checkout: put every selected point in place, repair what present points need."""
    from trace_instrument.engine.apply import apply as run_apply  # LibCST: only the commands that edit load it

    _full_needs_dry_run(full, dry_run)
    config = _config(path)
    catalog = _catalog(_anchors(anchors, config))
    selection = _selection(catalog, config, facility, only, skip, extras)
    write = not dry_run and patch is None
    result = run_apply(path, catalog, selection, write=write, keep_going=keep_going, update=update)
    code = exits.apply_exit(result)
    failed_file = any(f.error for f in result.files)
    patch_note = ""
    if patch is not None and result.error is None:
        if failed_file and not keep_going:
            patch_note = "no patch written: a file failed (--keep-going makes a patch of the rest)"
        else:
            patch_note = _write_patch(patch, patch_bytes(result))
    if fmt is Format.json:
        if str(patch) != "-":
            from trace_instrument.render import jsonout

            _print_raw(jsonout.dumps(jsonout.run("apply", result, dry_run=not write, config=_label(config))))
        raise typer.Exit(code)
    if result.error is not None:
        _fail(result.error.message)
    if str(patch) == "-":
        raise typer.Exit(code)  # stdout holds the patch alone
    _print_apply(result, dry_run, full, write, keep_going, patch_note, _label(config), str(path))
    raise typer.Exit(code)


def _print_apply(
    result: RunResult,
    dry_run: bool,
    full: bool,
    write: bool,
    keep_going: bool,
    patch_note: str,
    config: str | None,
    target: str,
) -> None:
    lines: list[RenderableType] = [*text.config_lines(config), *text.style_lines(result), *text.note_lines(result)]
    if dry_run:
        lines += text.dry_run_lines(result, full=full)
    read_only = text.read_only_files(result)  # said once, in one line, not once per file and per point
    lines += text.files_table(result, "written" if result.written else "would change", leave_out=read_only)
    shown = [p for p in result.points if p.file not in read_only]
    lines += text.points_lines(shown, show_ok=True, planned_only=not result.written, debug=_tracebacks(result))
    lines += text.runtime_lines(result, planned_only=not result.written)
    lines += text.read_only_lines(result, target)
    if patch_note:
        lines.append(Text(patch_note))
    state = "written" if result.written else ("dry run, nothing written" if not write else "nothing to write")
    if any(f.error for f in result.files) and not keep_going:
        state = "nothing written (a file failed; --keep-going writes the others)"
    order = [Status.APPLIED, Status.REPAIRED, Status.UPDATED, Status.PRESENT, Status.NOT_APPLICABLE]
    lines.append(Text(f"apply: {counts_line(list(result.points), order)} — {state}"))
    _print(lines)


@app.command()
def check(
    path: PathArg,
    facility: FacilityOpt = None,
    only: OnlyOpt = None,
    skip: SkipOpt = None,
    extras: ExtrasOpt = None,
    anchors: AnchorsOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    fmt: Annotated[
        CheckFormat, typer.Option("--format", help="text, json, github (annotations) or junit (XML).")
    ] = CheckFormat.text,
) -> None:
    """The CI gate: is every point in place, where it belongs, and able to run? Writes nothing."""
    config = _config(path)
    catalog = _catalog(_anchors(anchors, config), quiet=quiet and not verbose)
    selection = _selection(catalog, config, facility, only, skip, extras)
    result = run_check(path, catalog, selection)
    code = exits.check_exit(result)
    if fmt is CheckFormat.json:
        from trace_instrument.render import jsonout

        _print_raw(jsonout.dumps(jsonout.check(result, config=_label(config))))
    elif fmt is CheckFormat.github:
        from trace_instrument.render import ci

        prefix = ci.repository_prefix(result.root)
        _print_raw(ci.github_annotations(result, prefix, target=str(path), verbose=verbose))
    elif fmt is CheckFormat.junit:
        from trace_instrument.render import ci

        _print_raw(ci.junit_xml(result, target=str(path), verbose=verbose))
    else:
        if result.error is not None:
            _fail(result.error.message)
        verdict = {exits.OK: "clean", exits.FAILED: "drift"}.get(code, "error")
        shown = [] if quiet else text.config_lines(_label(config))  # --quiet: problems and the summary only
        _print([*shown, *text.check_lines(result, quiet=quiet, verdict=verdict, verbose=verbose, target=str(path))])
    raise typer.Exit(code)


@app.command()
def verify(
    path: PathArg,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            help="Prove zero intrusion against this folder (a pristine tree) or git ref (v0.9.1, upstream/main) "
            "instead of the business code as of the last apply.",
        ),
    ] = None,
    facility: FacilityOpt = None,
    only: OnlyOpt = None,
    skip: SkipOpt = None,
    extras: ExtrasOpt = None,
    anchors: AnchorsOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    fmt: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
) -> None:
    """Prove the result: counts, imports, names, compilation, zero intrusion, and a runtime self-check."""
    from trace_instrument.engine.verify import verify as run_verify

    config = _config(path)
    catalog = _catalog(_anchors(anchors, config), quiet=quiet and not verbose)
    selection = _selection(catalog, config, facility, only, skip, extras)
    result = run_verify(path, catalog, selection, baseline=baseline)
    code = exits.verify_exit(result)
    if fmt is Format.json:
        from trace_instrument.render import jsonout

        _print_raw(jsonout.dumps(jsonout.verify(result, config=_label(config))))
        raise typer.Exit(code)
    if result.error is not None:
        _fail(result.error.message)
    shown = [] if quiet else text.config_lines(_label(config))  # --quiet: problems and the verdict only
    _print([*shown, *text.verify_lines(result, verbose=verbose, target=str(path), quiet=quiet)])
    raise typer.Exit(code)


@app.command()
def remove(
    path: PathArg,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the diff, write nothing.")] = False,
    full: FullOpt = False,
    force: Annotated[
        bool, typer.Option("--force", help="Also remove points edited by hand: each hand-edited block whole.")
    ] = False,
    facility: FacilityOpt = None,
    only: OnlyOpt = None,
    skip: SkipOpt = None,
    anchors: AnchorsOpt = None,
    keep_going: Annotated[
        bool, typer.Option("--keep-going", help="Write the files that worked even if others failed.")
    ] = False,
    fmt: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
) -> None:
    """Take the instrumentation out again, restoring the original code."""
    from trace_instrument.engine.remove import remove as run_remove

    _full_needs_dry_run(full, dry_run)
    config = _config(path)
    catalog = _catalog(_anchors(anchors, config))
    selection = _selection(catalog, config, facility, only, skip, [])  # removal covers every extra itself
    result = run_remove(path, catalog, selection, write=not dry_run, force=force, keep_going=keep_going)
    code = exits.remove_exit(result)
    if fmt is Format.json:
        from trace_instrument.render import jsonout

        _print_raw(jsonout.dumps(jsonout.run("remove", result, dry_run=dry_run, config=_label(config))))
        raise typer.Exit(code)
    if result.error is not None:
        _fail(result.error.message)
    lines: list[RenderableType] = text.config_lines(_label(config))
    if dry_run:
        lines += text.dry_run_lines(result, full=full)
    lines += text.files_table(result, "written" if result.written else "would change", words=REMOVE_WORDS)
    shown = [p for p in result.points if p.status is not Status.MISSING]
    lines += text.points_lines(shown, show_ok=False, planned_only=not result.written, debug=_tracebacks(result))
    lines += text.runtime_lines(result, planned_only=not result.written)
    state = "written" if result.written else ("dry run, nothing written" if dry_run else "nothing to write")
    if any(f.error for f in result.files) and not keep_going and not dry_run:
        state = "nothing written (a file failed; --keep-going writes the others)"
    lines.append(Text(f"remove: {remove_counts(list(result.points))} — {state}"))
    _print(lines)
    raise typer.Exit(code)


@app.command()
def port(
    path: PathArg,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="A folder for a review copy, recorded nowhere (default: PATH/.trace-instrument/anchors/,"
            " named in the project configuration so every command reads it).",
        ),
    ] = None,
    min_confidence: Annotated[
        Confidence, typer.Option("--min-confidence", help="Write only the places found at least this sure.")
    ] = Confidence.LIKELY,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Find and prove the places, write nothing.")] = False,
    facility: FacilityOpt = None,
    only: OnlyOpt = None,
    skip: SkipOpt = None,
    extras: ExtrasOpt = None,
    anchors: AnchorsOpt = None,
    fmt: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
) -> None:
    """Find where the points that lost their anchors belong in this verl; write them as overrides.

    Writes no verl source. The default folder is named in the checkout's project configuration
    (`anchors`), so plain `apply --dry-run` reviews and `apply`, `check`, `verify`, `remove` read it;
    an override file edited by hand since port wrote it is kept.
    """
    from trace_instrument.engine.port import DEFAULT_OUT
    from trace_instrument.engine.port import port as run_port  # LibCST: apply proves each place

    config = _config(path)
    catalog = _catalog(_anchors(anchors, config))
    selection = _selection(catalog, config, facility, only, skip, extras)
    folder = (out if out is not None else path / DEFAULT_OUT).resolve()
    kept = [
        a for a in _anchors(anchors, config) if a.resolve() != folder
    ]  # its own earlier output is rewritten, not read twice

    def reload(overrides: Path) -> Catalog:
        return load_catalog(anchors_dirs=[*kept, overrides])

    result = run_port(path, catalog, selection, reload, out=out, min_confidence=min_confidence, write=not dry_run)
    code = exits.port_exit(result)
    # the default folder is the checkout's: named in its configuration, every command reads it unasked;
    # `--out DIR` is a copy for review, recorded nowhere
    recorded = (
        record_anchors(path, DEFAULT_OUT.as_posix()) if out is None and not dry_run and result.error is None else None
    )
    if fmt is Format.json:
        from trace_instrument.render import jsonout

        body = jsonout.port(result, dry_run=dry_run, config=_label(config), recorded=recorded)
        _print_raw(jsonout.dumps(body))
        raise typer.Exit(code)
    if result.error is not None:
        _fail(result.error.message)
    lines = [*text.config_lines(_label(config)), *text.port_lines(result, written=not dry_run)]
    _print([*lines, *text.recorded_lines(recorded)])
    raise typer.Exit(code)


@app.command()
def report(
    path: PathArg,
    anchors: AnchorsOpt = None,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="At most 5 lines: what is not in place or failed, one line each, and the counts (text only).",
        ),
    ] = False,
    verbose: VerboseOpt = False,
    fmt: Annotated[ReportFormat, typer.Option("--format", help="text, markdown or json.")] = ReportFormat.text,
) -> None:
    """The final report: what is in place, what was skipped and why, the proofs, how to switch it on."""
    from trace_instrument.engine.report import OUTPUTS as REPORT_OUTPUTS
    from trace_instrument.engine.report import report as run_report
    from trace_instrument.render import markdown

    config = _config(path)
    catalog = _catalog(_anchors(anchors, config), quiet=quiet and not verbose)
    rep = run_report(path, catalog)
    code = exits.report_exit(rep)
    if fmt is ReportFormat.json:
        from trace_instrument.render import jsonout

        _print_raw(jsonout.dumps(jsonout.report(rep, REPORT_OUTPUTS, config=_label(config))))
    elif quiet and fmt is ReportFormat.text and rep.error is None:
        _print(text.report_quiet_lines(rep, verbose=verbose, target=str(path)))
    else:
        body = markdown.report(rep, config=_label(config), verbose=verbose, target=str(path))
        if fmt is ReportFormat.markdown or rep.error is not None or not sys.stdout.isatty():
            _print_raw(body)  # never wrapped or cut: it is text for a pipe, a file or a PR
        else:
            from rich.markdown import Markdown

            _out().print(Markdown(body), soft_wrap=False)  # wrapped at the terminal's width, never cropped
    raise typer.Exit(code)


@app.command()
def points(
    anchors: AnchorsOpt = None,
    fmt: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
) -> None:
    """List the catalog: every point, where it goes and what it does."""
    catalog = _catalog(anchors)
    if fmt is Format.json:
        from trace_instrument.render import jsonout

        _print_raw(jsonout.dumps(jsonout.points(catalog)))
        return
    _print(text.points_table(catalog))


@app.command()
def demo(
    version: Annotated[str, typer.Option("--version", help="verl release to fetch from PyPI.")] = "0.9.0",
    keep: Annotated[Path | None, typer.Option("--keep", help="Leave the instrumented copy in this folder.")] = None,
    excerpt: Annotated[int, typer.Option("--excerpt", help="Lines of diff to show.")] = 40,
    traces: Annotated[
        Path | None,
        typer.Option(
            "--traces",
            help="Instead: write a simulated 3-host run into this new folder through the real tracing runtime "
            "(no GPU, no verl) and analyse it: the text report, and the page as report.html in it.",
        ),
    ] = None,
) -> None:
    """Fetch verl from PyPI, instrument a copy, verify it, and show what changed (or, with --traces,
    see traces without a GPU)."""
    import shutil
    import tempfile

    if traces is not None:
        from trace_instrument.traces.cli import demo_traces

        demo_traces(traces)
        return

    catalog = _catalog(None)
    workdir = Path(tempfile.mkdtemp(prefix="trace-instrument-demo-")) if keep is None else keep
    try:
        applied, checked, verified = _demo_steps(catalog, version, workdir)
        _print(_demo_lines(applied, checked, excerpt))
        _print(text.verify_lines(verified))
        ok = exits.apply_exit(applied) == exits.OK and exits.check_exit(checked) == exits.OK and verified.ok
        placed = counts_line(list(applied.points), [Status.APPLIED, Status.PRESENT, Status.NOT_APPLICABLE])
        _print([Text(f"demo: verl {version} instrumented ({placed}), " + ("verified" if ok else "NOT verified"))])
        raise typer.Exit(exits.OK if ok else exits.FAILED)
    finally:
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


def _demo_steps(catalog: Catalog, version: str, workdir: Path) -> tuple[RunResult, RunResult, VerifyResult]:
    import shutil

    from trace_instrument.engine.apply import apply as run_apply
    from trace_instrument.engine.verify import verify as run_verify
    from trace_instrument.wheels import WheelError, verl_tree

    with _step(f"fetching verl {version} from PyPI (cached after the first time)"):
        try:
            pristine = verl_tree(version)
        except WheelError as exc:
            _fail(str(exc))
    with _step(f"copying it to a scratch checkout: {workdir}"):
        if (workdir / "verl").exists():
            shutil.rmtree(workdir / "verl")
        shutil.copytree(pristine / "verl", workdir / "verl")
    with _step("instrumenting"):
        applied = run_apply(workdir, catalog)
    with _step("checking every point"):
        checked = run_check(workdir, catalog)
    with _step("verifying (counts, imports, names, compile, zero intrusion, runtime self-check)"):
        verified = run_verify(workdir, catalog)
    return applied, checked, verified


@contextmanager
def _step(description: str) -> Iterator[None]:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=_err(), transient=False) as progress:
        task = progress.add_task(description, total=None)
        yield
        progress.update(task, completed=1, total=1)


def _demo_lines(applied: RunResult, checked: RunResult, excerpt: int) -> list[RenderableType]:
    from trace_instrument.engine.report import OUTPUTS as REPORT_OUTPUTS

    patch = unified_patch(applied)
    rows = patch.splitlines()
    start = next((i for i, row in enumerate(rows) if row.startswith("diff --git a/verl/trainer/ppo/ray_trainer.py")), 0)
    lines: list[RenderableType] = [Text("\nan excerpt of the change:", style="bold")]
    lines += text.diff("\n".join(rows[start : start + excerpt]))
    lines.append(
        Text(f"... {len(rows)} diff lines in all (`trace-instrument apply --dry-run --full` shows them)\n", style="dim")
    )
    lines += text.files_table(applied, "instrumented")
    lines += text.facility_lines(applied)
    lines += text.runtime_lines(applied)
    order = [Status.PRESENT, Status.NOT_APPLICABLE, Status.MISSING, Status.DRIFTED]
    lines.append(Text(f"check after apply: {counts_line(list(checked.points), order)}"))
    lines.append(
        Text("\nswitch it on with `export VERL_TRACE_DIR=/path/to/traces`; the outputs land in:", style="bold")
    )
    lines += [Text(f"  {what:<38} {where}") for what, where in REPORT_OUTPUTS]
    return lines


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Show the version and exit.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show the tool's own tracebacks of internal errors.")] = False,
) -> None:
    _State.debug = debug
    if version:
        _print([Text(f"trace-instrument {__version__}")])
        raise typer.Exit(exits.OK)


class _Command(TyperCommand):
    """A command whose usage line names its arguments as its help does (`PATH`, `TRACE_DIR...`),
    not in the braces Typer puts around required ones (`{PATH}`)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:  # Any: the Context of the Click Typer bundles
        pieces: list[str] = super().collect_usage_pieces(ctx)
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]


for _info in app.registered_commands:  # every command: the codemod's and the trace reader's
    if _info.cls is TyperCommand:
        _info.cls = _Command


if __name__ == "__main__":  # pragma: no cover
    main()
