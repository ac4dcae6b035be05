"""Command line for reading traces back: ``analyze`` and ``export`` (registered on the main app).

Exit codes: 0 done, 2 nothing usable found (or bad arguments). Problems with part of
the input are reported with counts and examples, never as a traceback.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from trace_instrument.traces.model import Analysis, MultipleRunsError, Run, Skipped
    from trace_instrument.traces.options import Options
    from trace_instrument.traces.render.trackers import Exported, Tracker

out = Console(soft_wrap=False, highlight=False, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, soft_wrap=True, highlight=False, width=None if sys.stderr.isatty() else 200)
ERROR = 2
T = TypeVar("T")
OPENED_ON_PAGE = 5  # slowest rollouts the HTML report shows turn by turn
# the extra (pyproject.toml's optional-dependencies) that installs each engine the reader imports, and
# each experiment tracker's library that `export --to` writes with
ENGINE_EXTRAS = {
    "duckdb": "analyze",
    "pyspark": "spark",
    "tensorboardX": "tensorboard",
    "mlflow": "mlflow",
    "wandb": "wandb",
}


class AnalyzeFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    html = "html"  # the page --html writes, on stdout


class Engine(str, Enum):
    duckdb = "duckdb"
    spark = "spark"


class ExportKind(str, Enum):
    """What ``export --to KIND DEST`` writes: a timeline, the tables, or an experiment tracker's run."""

    perfetto = "perfetto"
    parquet = "parquet"
    tensorboard = "tensorboard"
    mlflow = "mlflow"
    wandb = "wandb"


DirsArg = Annotated[
    list[Path],
    typer.Argument(metavar="TRACE_DIR...", help="Trace folders ($VERL_TRACE_DIR), one per node if copied apart."),
]
StepsOpt = Annotated[str | None, typer.Option("--steps", help="Only samples generated in these steps: A-B or N.")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the cache next to the traces.")]
IntervalOpt = Annotated[
    float, typer.Option("--interval", min=0.0, help="Seconds between two refreshes of --follow (default 10).")
]
RefreshesOpt = Annotated[
    int, typer.Option("--refreshes", min=0, help="Stop --follow after this many refreshes (0: until Ctrl-C).")
]


def _complete_run(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion of --run: the run ids and job ids of the trace folders given before it (the
    cache next to them makes a second completion quick); none when they cannot be read."""
    # `--run` with no value yet stops Click's parse before the arguments are bound: they are left in ctx.args
    given = ctx.params.get("trace_dirs") or ctx.args
    folders = [Path(p) for p in given if Path(p).is_dir()]
    if not folders:
        return []
    try:
        from trace_instrument.traces.options import Options
        from trace_instrument.traces.runs import partition_runs
        from trace_instrument.traces.store import open_engine, trace_folders

        with open_engine(trace_folders(folders), Options()) as (backend, inputs, _report, _cached):
            runs = partition_runs(backend, inputs).runs
    except Exception:  # noqa: BLE001 - a completion offers nothing rather than a traceback in the shell
        return []
    names = dict.fromkeys(name for r in runs for name in (r.run_id, *r.job_ids))
    return [name for name in names if name.startswith(incomplete)]


RunOpt = Annotated[
    str | None,
    typer.Option(
        "--run",
        help="The run to read when the folders hold several: its run id, or its job id.",
        autocompletion=_complete_run,
    ),
]
MemoryOpt = Annotated[
    str | None,
    typer.Option("--memory-limit", help="DuckDB's memory limit (default 1GB); beyond it, it spills to disk."),
]


def _steps(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not match:
        raise typer.BadParameter("expected A-B or N, e.g. --steps 10-20", param_hint="--steps")
    lo = int(match.group(1))
    hi = int(match.group(2) or lo)
    if hi < lo:
        raise typer.BadParameter("the range ends before it starts", param_hint="--steps")
    return lo, hi


def _output_parent(path: Path | None, option: str) -> None:
    """An output path whose folder does not exist is a mistyped path: refuse it rather than create folders."""
    if path is not None and not path.parent.is_dir():
        raise typer.BadParameter(f"the folder {path.parent} does not exist", param_hint=option)


def _internal(exc: Exception) -> NoReturn:
    """An engine failure (a full disk, a bug): one clear line, exit 2, no traceback."""
    _fail(f"could not read the traces ({type(exc).__name__}: {exc}); try --no-cache, or report this")


def _fail(message: str) -> NoReturn:
    err.print(Text("error: ", style="red") + Text(message))
    raise typer.Exit(ERROR)


def _refuse_runs(exc: MultipleRunsError, option: str = "--run", whose: str = "the inputs") -> NoReturn:
    """Several runs and no (valid) ``option``: list them and say how to pick one; exit 2."""
    from trace_instrument.traces.render.tables import runs_section
    from trace_instrument.traces.render.text import print_section

    if exc.chosen:
        what = f"{option} {exc.chosen} names {exc.named or 'none'} of the {len(exc.runs)} runs found in {whose}"
    else:
        what = f"{whose} hold {len(exc.runs)} runs; their figures are never added up"
    err.print(Text("error: ", style="red") + Text(what))
    print_section(runs_section(exc.runs), err)
    err.print(
        Text(
            f"pick one with {option} RUN (a run id above, or a job id only one run has), "
            "or give the folders of one run alone"
        )
    )
    raise typer.Exit(ERROR)


def _read(call: Callable[[], T], option: str = "--run", whose: str = "the inputs", prefix: str = "") -> T:
    """``call()``, a read of traces; what stops it becomes one line (several runs: their list) and exit 2."""
    from trace_instrument.traces.model import MultipleRunsError, TraceInputError

    try:
        return call()
    except MultipleRunsError as exc:
        _refuse_runs(exc, option, whose)
    except TraceInputError as exc:
        _fail(f"{prefix}{exc}")
    except ImportError as exc:
        _missing_engine(exc)
    except Exception as exc:  # noqa: BLE001 - the engine's errors become one line and exit 2
        _internal(exc)


def _missing_engine(exc: ImportError) -> NoReturn:
    """An engine not installed (the package alone is the codemod): the exact command that adds it; exit 2."""
    module = (exc.name or "").split(".")[0]
    if module not in ENGINE_EXTRAS:
        _internal(exc)
    _fail(f"{module} is not installed: pip install 'trace-instrument[{ENGINE_EXTRAS[module]}]'")


def _require_engine(module: str) -> None:
    """Before any reading: exit 2 with the pip command when the engine's library is missing (found, not
    imported: the read imports it)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or blocked installation counts as missing
        found = False
    if not found:
        _missing_engine(ModuleNotFoundError(f"No module named {module!r}", name=module))


def analyze_command(
    trace_dirs: DirsArg,
    steps: StepsOpt = None,
    fmt: Annotated[
        AnalyzeFormat, typer.Option("--format", help="text, json, markdown or html (the --html page, on stdout).")
    ] = AnalyzeFormat.text,
    html: Annotated[Path | None, typer.Option("--html", help="Also write a self-contained HTML report.")] = None,
    csv_dir: Annotated[
        Path | None, typer.Option("--csv", help="Also write every view as a CSV file into this folder.")
    ] = None,
    engine: Annotated[Engine, typer.Option("--engine", help="duckdb (default) or spark (the spark extra).")] = (
        Engine.duckdb
    ),
    spark_master: Annotated[str | None, typer.Option("--spark-master", help="Spark master URL (default local[2]).")] = (
        None
    ),
    run: RunOpt = None,
    trajectory: Annotated[
        list[str] | None,
        typer.Option(
            "--trajectory", help="Open this trajectory (uid/N, as the tables list it) turn by turn instead; repeatable."
        ),
    ] = None,
    baseline: Annotated[
        list[Path] | None,
        typer.Option(
            "--baseline",
            help="Another run's trace folder: every figure side by side, with the difference and the change in "
            "percent; repeatable (one run's folders, or several runs: each its own columns).",
        ),
    ] = None,
    baseline_run: Annotated[
        str | None, typer.Option("--baseline-run", help="The baseline's run when its folders hold several.")
    ] = None,
    follow: Annotated[
        bool,
        typer.Option("--follow", help="Keep reading a run being written: refresh every --interval seconds."),
    ] = False,
    interval: IntervalOpt = 10.0,
    refreshes: RefreshesOpt = 0,
    no_cache: NoCacheOpt = False,
    memory_limit: MemoryOpt = None,
) -> None:
    """Step windows, stage latencies, funnel, rollouts, staleness and throughput of a traced run."""
    # the trace reader (and DuckDB) is loaded by the commands that read traces only
    from trace_instrument.traces.analyze import Options, analyze
    from trace_instrument.traces.model import DEFAULT_MEMORY_LIMIT

    # --follow reads with DuckDB whatever the engine (and refuses another one, saying so)
    if fmt is AnalyzeFormat.html and (follow or trajectory):
        # one page per refresh on stdout would be pages end to end; a trajectory has no page
        with_what = "--follow (use --html FILE: the page reloads itself)" if follow else "--trajectory"
        raise typer.BadParameter(f"--format html writes the whole analysis once, not with {with_what}")
    _require_engine("pyspark" if engine is Engine.spark and not follow else "duckdb")
    _output_parent(html, "--html")
    _output_parent(csv_dir, "--csv")
    if csv_dir is not None and csv_dir.exists() and not csv_dir.is_dir():
        raise typer.BadParameter(f"{csv_dir} is not a folder", param_hint="--csv")
    options = Options(
        steps=_steps(steps),
        run=run,
        engine=engine.value,
        cache=not no_cache,
        memory_limit=memory_limit or DEFAULT_MEMORY_LIMIT,
        spark_master=spark_master,
        # the page opens the slowest rollouts turn by turn
        open_slowest=OPENED_ON_PAGE if html is not None or fmt is AnalyzeFormat.html else 0,
    )
    if follow:
        if trajectory or baseline:
            raise typer.BadParameter(
                "--follow goes with the whole analysis of one run, not with --trajectory or --baseline"
            )
        _follow(trace_dirs, options, fmt, html, csv_dir, interval, refreshes)
        return
    if trajectory:
        if html is not None or csv_dir is not None or baseline:
            raise typer.BadParameter("--html, --csv and --baseline go with the whole analysis, not with --trajectory")
        _show_trajectories(trace_dirs, trajectory, options, fmt)
        return
    from trace_instrument.traces.render.progress import ReadProgress

    def read() -> Analysis:
        with ReadProgress(err) as progress:
            return analyze(trace_dirs, options, progress)

    result = _read(read)
    others = _baselines(baseline, replace(options, run=baseline_run, open_slowest=0)) if baseline else []
    _emit(result, fmt, html, csv_dir, others)


def _emit(
    result: Analysis,
    fmt: AnalyzeFormat,
    html: Path | None,
    csv_dir: Path | None,
    baselines: Sequence[Analysis] = (),
    reload_seconds: float | None = None,
) -> None:
    """One analysis in the asked format on stdout, and the page and CSV files when asked for;
    ``baselines``: the runs it is compared with, each on its own."""
    from trace_instrument.traces.render.compare import compare, comparison_json, comparison_sections

    comparisons = [compare(result, other) for other in baselines]
    extra = comparison_sections(comparisons) if comparisons else []
    if fmt is AnalyzeFormat.json:
        from trace_instrument.traces.render.metrics import to_json

        sys.stdout.write(to_json(result, [comparison_json(c) for c in comparisons]) + "\n")
    elif fmt is AnalyzeFormat.markdown:
        from trace_instrument.traces.render.text import markdown

        sys.stdout.write(markdown(result, extra))
    elif fmt is AnalyzeFormat.html:
        from trace_instrument.traces.render.html import page

        sys.stdout.write(page(result, extra, reload_seconds, baselines))
    else:
        from trace_instrument.traces.render.text import print_text

        print_text(result, out, extra)
    if html is not None:
        from trace_instrument.traces.render.html import write_html

        write_html(result, html, extra, reload_seconds, baselines)
        err.print(f"wrote {html}", markup=False)
    if csv_dir is not None:
        from trace_instrument.traces.render.csvs import write_csvs

        written = write_csvs(result, csv_dir)
        err.print(f"wrote {len(written)} CSV files into {csv_dir}", markup=False)


def _follow(
    trace_dirs: list[Path],
    options: Options,
    fmt: AnalyzeFormat,
    html: Path | None,
    csv_dir: Path | None,
    interval: float,
    refreshes: int,
) -> None:
    """``--follow``: refresh every ``interval`` seconds, reading only what was appended; the page
    reloads itself as often. Ends after ``refreshes`` refreshes, or at Ctrl-C (exit 0)."""
    import time

    from trace_instrument.traces.follow import Follower

    done = 0
    follower = _read(lambda: Follower(trace_dirs, options))
    try:
        with follower:
            while True:
                started = time.monotonic()
                refresh = _read(follower.refresh)
                if fmt is AnalyzeFormat.text and out.is_terminal:
                    out.clear()
                _emit(refresh.analysis, fmt, html, csv_dir, (), interval if interval > 0 else None)
                how = (
                    "loaded everything" + (f" ({refresh.reason})" if refresh.reason else "")
                    if refresh.full
                    else "appended"
                )
                err.print(
                    f"refreshed at {time.strftime('%H:%M:%S')}: read {refresh.bytes_read:,} bytes, {how}, "
                    f"in {time.monotonic() - started:.2f} s",
                    markup=False,
                )
                done += 1
                if refreshes and done >= refreshes:
                    return
                time.sleep(interval)
    except KeyboardInterrupt:
        return


def _baselines(folders: list[Path], options: Options) -> list[Analysis]:
    """The baseline runs, each analysed alone with the same options (exit 2 when one cannot be read).

    The folders are one run's (one per node) or several runs' each in folders of its own: then each
    run is a baseline of its own, never added up with another. A folder that holds files of several
    runs is refused (pick one with --baseline-run), as is a choice that names none of them."""
    from trace_instrument.traces.analyze import analyze
    from trace_instrument.traces.model import MultipleRunsError
    from trace_instrument.traces.render.progress import ReadProgress

    def read(chosen: Options) -> Callable[[], Analysis]:
        def call() -> Analysis:
            with ReadProgress(err) as progress:
                return analyze(folders, chosen, progress)

        return call

    def split(chosen: Options) -> Analysis | list[Run]:
        """The baseline read; several runs each in folders of their own come back as those runs."""
        try:
            return read(chosen)()
        except MultipleRunsError as exc:
            runs = _runs_by_folder(folders, exc) if chosen.run is None else None
            if runs is None:
                raise
            return runs

    whose, prefix = "the baseline's folders", "the baseline: "
    found = _read(lambda: split(options), "--baseline-run", whose, prefix)
    if not isinstance(found, list):
        return [found]
    return [_read(read(replace(options, run=r.run_id)), "--baseline-run", whose, prefix) for r in found]


def _runs_by_folder(folders: list[Path], exc: MultipleRunsError) -> list[Run] | None:
    """The runs in the order of the folders that hold them (baseline 1 is the first --baseline's), or
    None when a folder holds files of several runs (or a single folder was given)."""
    from trace_instrument.traces.discover import discover

    roots = {f.file_id: f.root for f in discover(folders).files}
    owners: dict[str, set[str]] = {}
    for run in exc.runs:
        for file_id in run.file_ids:
            owners.setdefault(roots.get(file_id, ""), set()).add(run.run_id)
    if len(folders) < 2 or any(len(runs) > 1 for runs in owners.values()):
        return None
    position = {str(folder): i for i, folder in enumerate(folders)}
    first = {
        r: min(position.get(root, len(folders)) for root, ids in owners.items() if r in ids)
        for r in {run.run_id for run in exc.runs}
    }
    return sorted(exc.runs, key=lambda run: first[run.run_id])


def _show_trajectories(trace_dirs: list[Path], ids: list[str], options: Options, fmt: AnalyzeFormat) -> None:
    """``analyze --trajectory ID``: each trajectory turn by turn; exit 2 when one is not in the run."""
    from trace_instrument.traces.render.trajectory import print_trajectory, trajectories_json
    from trace_instrument.traces.trajectory import open_trajectories

    details = _read(lambda: open_trajectories(trace_dirs, ids, options))
    if fmt is AnalyzeFormat.json:
        sys.stdout.write(trajectories_json(details) + "\n")
        return
    for index, detail in enumerate(details):
        if index:
            out.print()
        print_trajectory(detail, out)


def export_command(
    trace_dirs: DirsArg,
    to: Annotated[
        tuple[ExportKind, str] | None,
        typer.Option(
            "--to",
            metavar="KIND DEST",
            help="perfetto FILE, parquet DIR, tensorboard DIR, mlflow URI or wandb DIR (docs/analyze.md).",
        ),
    ] = None,
    perfetto: Annotated[Path | None, typer.Option("--perfetto", help="Same as --to perfetto FILE.")] = None,
    parquet: Annotated[Path | None, typer.Option("--parquet", help="Same as --to parquet DIR.")] = None,
    steps: StepsOpt = None,
    max_trajectories: Annotated[
        int | None,
        typer.Option(
            "--max-trajectories", min=0, help="Trajectories in the timeline (a uniform sample plus the slowest)."
        ),
    ] = None,
    prefix: Annotated[
        str, typer.Option("--prefix", help="Trackers: before each figure's name, apart from verl's own (trace/).")
    ] = "trace/",
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="MLflow, W&B: the run verl logged into, to add the figures to.")
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", help="Trackers: keep reading a run being written, log each step once complete.")
    ] = False,
    interval: IntervalOpt = 10.0,
    refreshes: RefreshesOpt = 0,
    run: RunOpt = None,
    no_cache: NoCacheOpt = False,
    memory_limit: MemoryOpt = None,
) -> None:
    """Write a Perfetto timeline, the normalised Parquet tables, or the figures into TensorBoard, MLflow or W&B."""
    kind, dest = _export_target(to, perfetto, parquet)
    _require_engine("duckdb")
    from trace_instrument.traces.analyze import Options
    from trace_instrument.traces.model import DEFAULT_MEMORY_LIMIT

    options = Options(
        steps=_steps(steps), run=run, cache=not no_cache, memory_limit=memory_limit or DEFAULT_MEMORY_LIMIT
    )
    if kind in (ExportKind.perfetto, ExportKind.parquet):
        if follow or run_id is not None:
            raise typer.BadParameter(f"--follow and --run-id go with the trackers, not with --to {kind.value}")
        _export_file(trace_dirs, kind, Path(dest), options, max_trajectories)
        return
    from trace_instrument.traces.render.trackers import Tracker

    tracker = Tracker(kind.value)
    # the arguments first: a mistake in them is said the same with the tracker's library installed or not
    if kind is not ExportKind.mlflow:  # MLflow's is a tracking URI, not a path
        _output_parent(Path(dest), "--to")
    if kind is ExportKind.tensorboard and run_id is not None:
        raise typer.BadParameter("TensorBoard runs are folders: give verl's run folder as DIR, without --run-id")
    _require_engine(tracker.library)
    if follow:
        _follow_export(trace_dirs, options, tracker, dest, run_id, prefix, interval, refreshes)
        return
    _export_tracker(trace_dirs, options, tracker, dest, run_id, prefix)


def _export_target(
    to: tuple[ExportKind, str] | None, perfetto: Path | None, parquet: Path | None
) -> tuple[ExportKind, str]:
    """The one destination of an export: ``--to KIND DEST``, or one of its aliases ``--perfetto`` and ``--parquet``."""
    aliases = ((ExportKind.perfetto, perfetto), (ExportKind.parquet, parquet))
    chosen = [(kind, str(dest)) for kind, dest in aliases if dest is not None]
    if to is not None:
        chosen.append(to)
    if len(chosen) != 1:
        _fail("give exactly one of --to KIND DEST, --perfetto FILE or --parquet DIR")
    return chosen[0]


def _export_file(
    trace_dirs: list[Path], kind: ExportKind, dest: Path, options: Options, max_trajectories: int | None
) -> None:
    """``--to perfetto FILE`` and ``--to parquet DIR``."""
    option = "--perfetto" if kind is ExportKind.perfetto else "--parquet"
    _output_parent(dest, option)
    if kind is ExportKind.perfetto:
        from trace_instrument.traces.perfetto import export_perfetto

        summary = _read(lambda: export_perfetto(trace_dirs, dest, options, max_trajectories))
        err.print(
            f"wrote {dest}: {summary.events:,} events, {summary.trajectories:,} of "
            f"{summary.trajectories_total:,} trajectories, {summary.processes} processes",
            markup=False,
        )
        _print_left_out(summary.left_out)
        return
    from trace_instrument.traces.parquet import export_parquet

    written = _read(lambda: export_parquet(trace_dirs, dest, options))
    for table, rows in written.tables.items():
        err.print(f"wrote {dest / (table + '.parquet')}: {rows:,} rows", markup=False)
    _print_left_out(written.left_out)


def _write(tracker: Tracker, dest: str, call: Callable[..., T], *args: Any) -> T:
    """``call(*args)``, a write into a tracker; its failure (an unknown run, a refused URI) is one line and exit 2."""
    try:
        return call(*args)
    except ImportError as exc:
        if (exc.name or "").split(".")[0] in ENGINE_EXTRAS:
            _missing_engine(exc)
        # a library of the tracker's own (SQLAlchemy for an MLflow sqlite:/// store): said as it is
        _fail(f"could not write into {tracker.value} {dest} ({type(exc).__name__}: {exc})")
    except Exception as exc:  # noqa: BLE001 - the tracker library's errors become one line and exit 2
        _fail(f"could not write into {tracker.value} {dest} ({type(exc).__name__}: {exc})")


def _export_tracker(
    trace_dirs: list[Path], options: Options, tracker: Tracker, dest: str, run_id: str | None, prefix: str
) -> None:
    """``--to tensorboard|mlflow|wandb``: every step of the run as it is now, and its run-wide figures."""
    from trace_instrument.traces.analyze import analyze
    from trace_instrument.traces.render.progress import ReadProgress
    from trace_instrument.traces.render.trackers import export_analysis

    def read() -> Analysis:
        with ReadProgress(err) as progress:
            return analyze(trace_dirs, options, progress)

    analysis = _read(read)
    _report_export(_write(tracker, dest, export_analysis, analysis, tracker, dest, run_id, prefix))


def _report_export(exported: Exported) -> None:
    """One line: what went into which tracker run."""
    steps = exported.steps
    span = f" ({steps[0]}-{steps[-1]})" if steps else ""
    into = f" (run {exported.run_id})" if exported.run_id else ""
    err.print(
        f"wrote {exported.values:,} figures of {len(steps)} steps{span} and {exported.summary} run-wide "
        f"figures into {exported.target}{into}",
        markup=False,
    )


def _follow_export(
    trace_dirs: list[Path],
    options: Options,
    tracker: Tracker,
    dest: str,
    run_id: str | None,
    prefix: str,
    interval: float,
    refreshes: int,
) -> None:
    """``export --to TRACKER --follow``: each refresh logs the steps that became complete (each once)
    and the run-wide figures when they changed; ends after ``refreshes`` refreshes, or at Ctrl-C."""
    import time

    from trace_instrument.traces.follow import Follower
    from trace_instrument.traces.render.trackers import Exporter, open_writer, run_name

    follower = _read(lambda: Follower(trace_dirs, options))
    done = 0
    exporter: Exporter | None = None
    try:
        with follower:
            while not refreshes or done < refreshes:
                if done:
                    time.sleep(interval)
                analysis = _read(follower.refresh).analysis
                if exporter is None:
                    writer = _write(tracker, dest, open_writer, tracker, dest, run_id, run_name(analysis), prefix)
                    exporter = Exporter(writer, prefix, complete_only=True)
                new = _write(tracker, dest, exporter.add, analysis)
                err.print(
                    f"refreshed at {time.strftime('%H:%M:%S')}: logged "
                    + (f"steps {', '.join(map(str, new))}" if new else "no new step")
                    + f" ({len(exporter.logged)} complete steps so far)",
                    markup=False,
                )
                done += 1
    except KeyboardInterrupt:
        pass
    finally:  # what was logged stays logged, whatever stopped the loop
        if exporter is not None:
            exporter.writer.close()
    if exporter is not None:
        _report_export(exporter.result(dest, exporter.writer.run_id))


def _print_left_out(left_out: tuple[Skipped, ...]) -> None:
    """What an export left out of the run, a line each (the manifest and the header list it too)."""
    for item in left_out:
        examples = f": {', '.join(item.examples)}" if item.examples else ""
        err.print(f"left out {item.count} {item.reason}{examples}", markup=False)


def demo_traces(target: Path) -> None:
    """``demo --traces DIR``: a simulated multi-host run written into ``DIR`` by the real runtime
    (traces/demo.py), then analysed: the text report on stdout, the page as ``DIR/report.html``.
    A folder that already holds files is refused (two runs' files would be mixed); exit 2."""
    _require_engine("duckdb")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        _fail(f"{target} is not a new or empty folder: the demo writes a run of its own there")
    _output_parent(target, "--traces")
    from trace_instrument.traces.analyze import Options, analyze
    from trace_instrument.traces.demo import DemoConfig, write_demo_run

    config = DemoConfig()
    err.print(
        f"writing a simulated run into {target}: {config.hosts} hosts, {config.steps} steps, "
        f"{config.prompts_per_step} prompts x {config.rollout_n} rollouts a step, through the real tracing runtime",
        markup=False,
    )
    try:
        processes = write_demo_run(target, config)
    except RuntimeError as exc:
        _fail(str(exc))
    err.print(f"wrote the traces of {processes} processes; analysing them", markup=False)
    result = _read(lambda: analyze([target], Options(open_slowest=OPENED_ON_PAGE)))
    _emit(result, AnalyzeFormat.text, target / "report.html", None)
    err.print(
        f"open {target / 'report.html'} in a browser; your own run: trace-instrument analyze $VERL_TRACE_DIR "
        "--html report.html",
        markup=False,
    )


def register(app: typer.Typer) -> None:
    """Add ``analyze`` and ``export`` to the main command line."""
    app.command("analyze")(analyze_command)
    app.command("export")(export_command)
