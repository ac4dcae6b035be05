"""The command line: exit codes, formats, and what the summaries say."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest
from support import tree_bytes
from typer.testing import CliRunner

from trace_instrument.cli import app

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_apply_check_remove_exit_codes(checkout_090, verl_090):
    assert _run("check", checkout_090).exit_code == 1  # pristine: every point missing
    first = _run("apply", checkout_090)
    assert first.exit_code == 0
    assert first.output.strip().splitlines()[-1] == "apply: 94 applied — written"
    assert _run("apply", checkout_090).output.strip().splitlines()[-1] == "apply: 94 present — nothing to write"
    assert _run("check", checkout_090).exit_code == 0
    assert _run("verify", checkout_090).exit_code == 0
    removed = _run("remove", checkout_090)
    assert removed.exit_code == 0
    assert tree_bytes(checkout_090) == tree_bytes(verl_090)


def test_dry_run_prints_a_diff_and_writes_nothing(checkout_090, verl_090):
    result = _run("apply", "--dry-run", checkout_090)
    assert result.exit_code == 0
    assert (
        "+from verl.utils.tracing import log_gen_throughput, log_progress, log_step_window, trace_flow" in result.output
    )
    assert result.output.strip().endswith("dry run, nothing written")
    assert tree_bytes(checkout_090) == tree_bytes(verl_090)


def test_json_output(checkout_090):
    trainer = (checkout_090 / "verl/trainer/ppo/ray_trainer.py").read_text(encoding="utf-8").splitlines()
    anchor_line = next(
        i for i, line in enumerate(trainer, 1) if line.lstrip().startswith('batch.non_tensor_batch["uid"] =')
    )
    body = json.loads(_run("apply", "--format", "json", "--only", "flow.v0.uid-generated", checkout_090).output)
    assert body["summary"]["by_status"] == {"applied": 1}
    assert [(p["id"], p["line"]) for p in body["points"]] == [("flow.v0.uid-generated", anchor_line)]
    check = json.loads(_run("check", "--format", "json", "--only", "flow.v0.uid-generated", checkout_090).output)
    assert [p["status"] for p in check["points"] if p["id"] != "runtime"] == ["present"]
    assert set(check["points"][0]) >= {"id", "facility", "status", "file", "line", "message"}


def test_bad_arguments_and_bad_checkouts_exit_2(tmp_path, checkout_090):
    assert _run("apply", tmp_path).exit_code == 2  # no verl/ inside
    assert "not a verl checkout" in _run("apply", tmp_path).output
    assert _run("apply", "--only", "no.such.point", checkout_090).exit_code == 2
    assert _run("apply", "--facility", "telemetry", checkout_090).exit_code == 2
    assert _run("check", tmp_path / "missing").exit_code == 2


def test_points_lists_the_catalog_and_marks_extras():
    result = _run("points")
    assert result.exit_code == 0
    assert "extra.sglang-timing" in result.output and "changes verl's behaviour" in result.output
    body = json.loads(_run("points", "--format", "json").output)
    assert len(body["points"]) == 98 and body["validated_on"]
    assert {p["id"] for p in body["points"] if not p["default"]} == {
        "extra.sglang-timing",
        "extra.reward-score.field",
        "extra.reward-score.carry",
        "extra.reward-score.aggregate",
    }


@pytest.mark.slow
def test_python_dash_m_runs_the_cli():
    done = subprocess.run(
        [sys.executable, "-m", "trace_instrument", "--version"], check=False, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.startswith("trace-instrument ")


def test_keep_going_writes_every_other_file_when_one_is_read_only(checkout_090, verl_090):
    locked = checkout_090 / "verl/trainer/ppo/v1/trainer_sync.py"
    locked.chmod(0o444)
    stopped = _run("apply", checkout_090)
    assert stopped.exit_code == 2 and "read-only" in stopped.output
    assert tree_bytes(checkout_090) == tree_bytes(verl_090), "without --keep-going nothing is written"
    going = _run("apply", "--keep-going", checkout_090)
    assert going.exit_code == 2
    changed = {path for path, data in tree_bytes(checkout_090).items() if tree_bytes(verl_090).get(path) != data}
    assert "verl/trainer/ppo/v1/trainer_sync.py" not in changed
    assert "verl/trainer/ppo/v1/trainer_base.py" in changed and "verl/utils/tracing/trace.py" in changed


@pytest.mark.slow
def test_patch_to_stdout_and_to_an_unwritable_path(checkout_090, verl_090, tmp_path):
    to_stdout = _run("apply", "--patch", "-", checkout_090)
    assert to_stdout.exit_code == 0 and to_stdout.output.startswith("diff --git a/")
    assert tree_bytes(checkout_090) == tree_bytes(verl_090), "--patch writes nothing else"
    # the patch applies with git on the pristine tree and gives what apply writes
    subprocess.run(["git", "init", "-q", str(checkout_090)], check=True)
    patch = tmp_path / "change.patch"
    patch.write_text(to_stdout.output, encoding="utf-8")
    subprocess.run(["git", "-C", str(checkout_090), "apply", str(patch)], check=True)
    reference = tmp_path / "reference"
    from support import copy_tree

    copy_tree(verl_090, reference)
    assert _run("apply", reference).exit_code == 0
    assert tree_bytes(checkout_090) == tree_bytes(reference)
    unwritable = _run("apply", "--patch", tmp_path / "no-such-folder" / "x.patch", checkout_090)
    assert unwritable.exit_code == 2
    assert "cannot write the patch" in unwritable.output and "Traceback" not in unwritable.output


def test_unknown_names_get_a_did_you_mean_and_skip_works_with_only(checkout_090):
    wrong_id = _run("apply", "--only", "flow.v0.uid-generatd", checkout_090)
    assert wrong_id.exit_code == 2 and "did you mean 'flow.v0.uid-generated'?" in wrong_id.output
    wrong_facility = _run("check", "--facility", "progres", checkout_090)
    assert wrong_facility.exit_code == 2 and "did you mean 'progress'?" in wrong_facility.output
    wrong_extra = _run("apply", "--extras", "sglang-timin", checkout_090)
    assert wrong_extra.exit_code == 2 and "did you mean 'sglang-timing'?" in wrong_extra.output
    both = json.loads(
        _run(
            "apply", "--format", "json", "--only", "flow.v0.uid-generated", "--only", "flow.v0.traj-uid-repeat",
            "--skip", "flow.v0.traj-uid-repeat", checkout_090,
        ).output
    )  # fmt: skip
    assert [p["id"] for p in both["points"]] == ["flow.v0.uid-generated"]


def _in_a_terminal(args: list[str], columns: int, **env: str) -> str:
    """Run the CLI under a pseudo-terminal `columns` wide; what it printed."""
    import os
    import pty

    leader, follower = pty.openpty()
    import fcntl
    import struct
    import termios

    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    environment = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES", "TERM")}
    environment.update(TERM="xterm-256color", **env)
    process = subprocess.Popen(
        [sys.executable, "-m", "trace_instrument", *args], stdout=follower, stderr=follower, env=environment
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    process.wait(timeout=300)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", errors="replace")


def test_no_color_removes_every_escape_code(checkout_090):
    coloured = _in_a_terminal(["check", str(checkout_090)], 120)
    assert "\x1b[" in coloured, "a terminal gets colours (else this test proves nothing)"
    plain = _in_a_terminal(["check", str(checkout_090)], 120, NO_COLOR="1")
    assert "\x1b" not in plain and "missing" in plain


def test_no_color_help_is_plain_and_never_cut():
    coloured = _in_a_terminal(["check", "--help"], 40)
    assert "\x1b[" in coloured, "a terminal gets styles (else this test proves nothing)"
    plain = _in_a_terminal(["check", "--help"], 40, NO_COLOR="1")
    assert "\x1b" not in plain and "…" not in plain
    assert "--quiet" in plain and "--format" in plain


def test_report_never_cuts_lines_in_a_narrow_terminal(checkout_090):
    _run("apply", "--facility", "sample_flow", "--facility", "runtime", checkout_090)
    markdown = _run("report", "--format", "markdown", checkout_090).output
    narrow = _in_a_terminal(["report", str(checkout_090)], 40, NO_COLOR="1")
    assert "…" not in narrow
    joined = "".join(line.strip() for line in narrow.replace("\r", "").splitlines())
    words = {w.strip("`*-•,;()#") for w in markdown.split()} - {""}
    missing = sorted(w for w in words if w not in joined)
    assert missing == [], missing[:10]
    piped = _run("report", checkout_090).output
    assert piped == markdown, "a pipe gets the Markdown text itself, never wrapped"


@pytest.mark.slow
def test_shell_completion_is_available():
    # Typer finds the shell among the process's parents (a word after the flag is ignored): started
    # from bash, as a user's terminal does, not from whatever runs the tests; `; exit $?` keeps bash
    # from replacing itself with the command, so it stays the parent
    command = f"{shlex.quote(sys.executable)} -m trace_instrument --show-completion; exit $?"
    shown = subprocess.run(["bash", "-c", command], check=False, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert "_TRACE_INSTRUMENT_COMPLETE=complete_bash" in shown.stdout and "trace-instrument" in shown.stdout


# -- the process ends without tearing the interpreter down: nothing it wrote may be lost ---------


def _ending(code: str) -> subprocess.CompletedProcess[str]:
    program = f"import sys\nfrom trace_instrument.cli import _end_process\nsys.stdout.write('x' * 300_000)\n{code}"
    return subprocess.run([sys.executable, "-c", program], check=False, capture_output=True, text=True, timeout=60)


def test_the_end_of_a_run_flushes_its_output_and_keeps_its_exit_code():
    ended = _ending("_end_process(3)")
    assert (ended.returncode, len(ended.stdout)) == (3, 300_000)
    assert _ending("_end_process(None)").returncode == 0


def test_an_exit_with_a_message_prints_it_and_exits_1_as_python_does():
    ended = _ending("_end_process('no such tree')")
    assert ended.returncode == 1 and ended.stderr == "no such tree\n" and len(ended.stdout) == 300_000


@pytest.mark.slow
def test_a_whole_process_run_writes_its_complete_report(checkout_090, tmp_path):
    assert _run("apply", checkout_090).exit_code == 0
    in_process = json.loads(_run("check", "--format", "json", checkout_090).output)
    report = tmp_path / "check.json"
    with report.open("w") as out:
        done = subprocess.run(
            [sys.executable, "-m", "trace_instrument", "check", "--format", "json", str(checkout_090)],
            stdout=out,
            check=False,
            timeout=300,
        )
    assert done.returncode == 0
    assert json.loads(report.read_text()) == in_process


@pytest.mark.slow
def test_a_reader_that_stops_early_does_not_hang_the_run(checkout_090):
    command = shlex.join([sys.executable, "-m", "trace_instrument", "check", str(checkout_090)])
    done = subprocess.run(["sh", "-c", f"{command} | head -c 10"], check=False, capture_output=True, timeout=300)
    assert done.returncode == 0 and len(done.stdout) == 10
