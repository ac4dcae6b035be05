"""trace_flow(): the switch, CSV rows and stdout lines byte for byte, broadcasting, suppression."""

from __future__ import annotations

import asyncio
import collections.abc
import csv
import io
import logging
import os
import pathlib
import time

import numpy as np  # a test dependency: pip install -e '.[test]'
import pytest

from trace_instrument import formats  # the files' format, as the runtime defines it

FIXED_NOW = 1787215029.123456  # any instant works; expectations derive from it
FIXED_MS = 1787215029123


def fix_clock(runtime, now=FIXED_NOW):
    runtime.settings.clock = lambda: now


# -- independent reference implementation of the formats ----------------------


def expected_rows(pairs, stage, content, job="ENV_NOTFOUND_DLC_JOB_ID", ms=FIXED_MS) -> bytes:
    """What Python's csv.writer (default dialect) produces for these samples."""
    status = formats.STATUS_COMPLETE if stage in formats.COMPLETE_STAGES else formats.STATUS_RUNNING
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    for uid, traj_uid in pairs:
        sample_id = f"{uid}/{traj_uid}" if str(traj_uid).isdigit() else f"{uid}/sample"
        writer.writerow([job, "sample", sample_id, status, ms, content])
    return buffer.getvalue().encode("utf-8")


def expected_echo(pairs, tail, now=FIXED_NOW) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now))
    return "".join(f"[FLOW_TRACE] {stamp} | uid={u} | traj_uid={t}{tail}\n" for u, t in pairs)


# -- the switch ------------------------------------------------------------------


def test_disabled_prints_and_writes_nothing(load_runtime, tmp_path, capsys):
    runtime = load_runtime()
    assert runtime.get_trace_dir() is None
    runtime.trace_flow(["u1", "u2"], ["0", "1"], "A", "B", "TRAIN_UPDATE", detail="x", global_step=1)
    runtime.trace_flow("u", "0", "A", "B", "S")
    assert runtime.flush(5)
    assert capsys.readouterr().out == ""
    assert load_runtime.writer(runtime) is None
    assert list(load_runtime.discovery_dir.iterdir()) == []
    assert not (tmp_path / "trace").exists()


def test_env_var_enables_and_is_read_only_at_import(load_runtime, trace_dir, monkeypatch, tmp_path, capsys):
    runtime = load_runtime(trace_dir=trace_dir)
    monkeypatch.setenv("VERL_TRACE_DIR", str(tmp_path / "elsewhere"))
    assert runtime.get_trace_dir() == str(trace_dir)
    monkeypatch.delenv("VERL_TRACE_DIR")
    runtime.trace_flow("u", "0", "A", "B", "S")
    assert load_runtime.read_csv(runtime, trace_dir).count(b"\r\n") == 1
    assert "[FLOW_TRACE]" in capsys.readouterr().out
    assert not (tmp_path / "elsewhere").exists()


def test_set_trace_dir_turns_tracing_on_and_off(load_runtime, trace_dir, capsys):
    runtime = load_runtime()
    runtime.set_trace_dir(pathlib.Path(trace_dir))
    assert runtime.get_trace_dir() == str(trace_dir)
    runtime.trace_flow("on", "0", "A", "B", "S")
    for off in (None, ""):
        runtime.set_trace_dir(off)
        assert runtime.get_trace_dir() is None
        runtime.trace_flow("off", "0", "A", "B", "S")
    runtime.set_trace_dir(str(trace_dir))
    runtime.trace_flow("on-again", "1", "A", "B", "S")
    rows = load_runtime.read_csv(runtime, trace_dir)
    assert b"on/0" in rows and b"on-again/1" in rows and b"off" not in rows
    assert "off" not in capsys.readouterr().out


def test_switching_trace_dir_sends_rows_to_the_new_dir(load_runtime, tmp_path):
    runtime = load_runtime()
    first, second = tmp_path / "first", tmp_path / "second"
    runtime.set_trace_dir(first)
    runtime.trace_flow("a", "0", "A", "B", "S")
    runtime.set_trace_dir(second)
    runtime.trace_flow("b", "0", "A", "B", "S")
    assert runtime.flush(10)
    assert b"a/0" in load_runtime.csv_path(first).read_bytes()
    assert load_runtime.csv_path(second).read_bytes().count(b"\r\n") == 1
    assert b"b/0" in load_runtime.csv_path(second).read_bytes()


def test_no_environment_lookups_per_call(load_runtime, trace_dir, monkeypatch):
    class CountingEnviron(collections.abc.MutableMapping):
        def __init__(self, data):
            self.data, self.lookups = dict(data), 0

        def __getitem__(self, key):
            self.lookups += 1
            return self.data[key]

        def __setitem__(self, key, value):
            self.data[key] = value

        def __delitem__(self, key):
            del self.data[key]

        def __iter__(self):
            self.lookups += 1
            return iter(self.data)

        def __len__(self):
            return len(self.data)

    runtime = load_runtime()
    runtime.set_trace_dir(trace_dir)
    runtime.trace_flow("warm", "0", "A", "B", "S")  # starts the writer before counting
    assert runtime.flush(10)
    spy = CountingEnviron(os.environ)
    monkeypatch.setattr(os, "environ", spy)
    runtime.trace_flow(["u"] * 3, ["0", "1", "2"], "A", "B", "S", detail="d", global_step=2)
    assert spy.lookups == 0
    runtime.set_trace_dir(None)  # reads $VERL_TRACE_DIR (unset here): tracing off
    spy.lookups = 0
    runtime.trace_flow("u", "0", "A", "B", "S")
    assert spy.lookups == 0 and runtime.get_trace_dir() is None


# -- formats -------------------------------------------------------------------------

TRICKY_IDS = [
    ("plain-uid", "0"),
    ("comma,uid", "1"),
    ('quote"uid', "2"),
    ("newline\nuid", "3"),
    ("cr\ruid", "x"),
    ("ünïcode-日本", "4"),
    (" spaced ", "not-a-digit"),
    ("", ""),
]


@pytest.mark.parametrize("detail", ["", "simple", 'with,comma and "quotes"', "multi\nline"])
@pytest.mark.parametrize("global_step", [-1, 0, 7])
def test_csv_rows_match_csv_writer_byte_for_byte(load_runtime, trace_dir, detail, global_step):
    runtime = load_runtime(trace_dir=trace_dir)
    fix_clock(runtime)
    uids, traj_uids = zip(*TRICKY_IDS)
    runtime.trace_flow(list(uids), list(traj_uids), "Mod,A", "ModB", "DATA_DISPATCH", detail, global_step)
    content = "from=Mod,A|to=ModB|stage=DATA_DISPATCH"
    content += f"|global_step={global_step}" if global_step != -1 else ""
    content += f"|detail={detail}" if detail else ""
    assert load_runtime.read_csv(runtime, trace_dir) == expected_rows(TRICKY_IDS, "DATA_DISPATCH", content)


def test_job_id_comes_from_dlc_job_id(load_runtime, trace_dir):
    runtime = load_runtime(trace_dir=trace_dir, job_id="dlc-42,x")
    fix_clock(runtime)
    runtime.trace_flow("u", "3", "A", "B", "TRAIN_UPDATE")
    expected = expected_rows([("u", "3")], "TRAIN_UPDATE", "from=A|to=B|stage=TRAIN_UPDATE", job="dlc-42,x")
    assert load_runtime.read_csv(runtime, trace_dir) == expected
    assert expected.startswith(b'"dlc-42,x",sample,u/3,COMPLETE,1787215029123,')


@pytest.mark.parametrize(
    ("stage", "status"),
    [
        ("TRAIN_UPDATE", b"COMPLETE"),
        ("FILTER_TRAJECTORIES", b"COMPLETE"),
        ("TRAIN_REWARD", b"RUNNING"),
        ("train_update", b"RUNNING"),
    ],
)
def test_sample_status_depends_on_stage(load_runtime, traced, trace_dir, stage, status):
    traced.trace_flow("u", "1", "A", "B", stage)
    assert load_runtime.read_csv(traced, trace_dir).split(b",")[3] == status


def test_sample_id_uses_traj_uid_only_when_it_is_digits(load_runtime, traced, trace_dir):
    traced.trace_flow(["a", "b", "c", "d"], ["12", "x1", 5, "-1"], "A", "B", "S")
    sample_ids = [row.split(b",")[2] for row in load_runtime.read_csv(traced, trace_dir).splitlines()]
    assert sample_ids == [b"a/12", b"b/sample", b"c/5", b"d/sample"]


def test_stdout_lines_are_exact(traced, capsys):
    fix_clock(traced)
    pairs = [("u1", "0"), ("u,2", "x")]
    traced.trace_flow(["u1", "u,2"], ["0", "x"], "Src", "Dst", "TRAIN_UPDATE", detail="d=1", global_step=3)
    traced.trace_flow("u3", "2", "Src", "Dst", "AGENT_LOOP")
    expected = expected_echo(pairs, " | from=Src | to=Dst | stage=TRAIN_UPDATE | global_step=3 | detail=d=1")
    expected += expected_echo([("u3", "2")], " | from=Src | to=Dst | stage=AGENT_LOOP")
    assert capsys.readouterr().out == expected


def test_optional_fields_follow_the_spec_rules(load_runtime, traced, trace_dir, capsys):
    traced.trace_flow("u", "0", "A", "B", "S", detail=None, global_step=0)
    traced.trace_flow("u", "1", "A", "B", "S", detail="", global_step=None)
    contents = [row.split(b",", 5)[5] for row in load_runtime.read_csv(traced, trace_dir).splitlines()]
    assert contents == [b"from=A|to=B|stage=S|global_step=0", b"from=A|to=B|stage=S|global_step=None"]
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("| stage=S | global_step=0") and out[1].endswith("| stage=S | global_step=None")


def test_one_stdout_write_and_one_queue_item_per_call(traced, monkeypatch):
    writes = []

    class CountingStdout:
        def write(self, text):
            writes.append(text)

        def flush(self):
            pass

    submits = []
    writer_class = traced.writer.BackgroundWriter
    original_submit = writer_class.submit

    def counting_submit(self, chunk):
        submits.append(chunk[1])
        return original_submit(self, chunk)

    monkeypatch.setattr(writer_class, "submit", counting_submit)
    monkeypatch.setattr("sys.stdout", CountingStdout())
    traced.trace_flow("u", [str(i) for i in range(5000)], "A", "B", "S")
    assert len(writes) == 1 and writes[0].count("\n") == 5000
    assert submits == [5000]


# -- id shapes ---------------------------------------------------------------------


def test_scalar_side_is_broadcast(load_runtime, traced, trace_dir):
    traced.trace_flow("u", ["0", "1", "2"], "A", "B", "S")
    traced.trace_flow(["v", "w"], ["9"], "A", "B", "S")
    traced.trace_flow(("x",), "5", "A", "B", "S")
    sample_ids = [row.split(b",")[2] for row in load_runtime.read_csv(traced, trace_dir).splitlines()]
    assert sample_ids == [b"u/0", b"u/1", b"u/2", b"v/9", b"w/9", b"x/5"]


def test_length_mismatch_warns_and_truncates(load_runtime, traced, trace_dir, caplog):
    with caplog.at_level(logging.WARNING):
        traced.trace_flow(["a", "b"], ["0", "1", "2"], "A", "B", "TRAIN_REWARD")
    sample_ids = [row.split(b",")[2] for row in load_runtime.read_csv(traced, trace_dir).splitlines()]
    assert sample_ids == [b"a/0", b"b/1"]
    assert any("TRAIN_REWARD" in record.getMessage() for record in caplog.records)


def test_empty_batch_writes_nothing(load_runtime, traced, trace_dir, capsys):
    traced.trace_flow([], [], "A", "B", "S")
    assert load_runtime.read_csv(traced, trace_dir) == b""
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(("uids", "traj_uids"), [("unknown", np.array([])), ([], "N/A"), (["a", "b"], [])])
def test_ids_over_an_empty_batch_write_nothing(load_runtime, traced, trace_dir, capsys, caplog, uids, traj_uids):
    """A placeholder uid next to the traj_uids of an empty batch is no sample: no row, no line, no warning."""
    with caplog.at_level(logging.WARNING):
        traced.trace_flow(uids, traj_uids, "A", "B", "S")
    assert load_runtime.read_csv(traced, trace_dir) == b""
    assert capsys.readouterr().out == ""
    assert not caplog.records


@pytest.mark.parametrize(
    ("uids", "traj_uids"),
    [
        (np.array(["p", "q,r"], dtype=object), np.array(["0", "1"], dtype=object)),
        (np.array(["p", "q"]), np.arange(2)),
        (np.array(["p"]), np.array([0.5, np.float32(0.1)], dtype=np.float32)),
        (np.array("scalar-in-0d"), np.array([True, False])),
        ([np.str_("p"), np.int64(3)], np.array([b"x", b"1"])),
    ],
)
def test_numpy_inputs_format_like_f_strings(load_runtime, traced, trace_dir, capsys, uids, traj_uids):
    fix_clock(traced)
    traced.trace_flow(uids, traj_uids, "A", "B", "S")
    uid_list = [uids.item()] if getattr(uids, "ndim", 1) == 0 else list(uids)
    pairs = list(zip(uid_list * len(traj_uids) if len(uid_list) == 1 else uid_list, list(traj_uids)))
    assert load_runtime.read_csv(traced, trace_dir) == expected_rows(pairs, "S", "from=A|to=B|stage=S")
    assert capsys.readouterr().out == expected_echo(pairs, " | from=A | to=B | stage=S")


# -- suppression ---------------------------------------------------------------------


def test_suppress_sample_trace_is_task_local(load_runtime, traced, trace_dir):
    async def sample(uid, validate):
        if validate:
            traced.suppress_sample_trace()
        await asyncio.sleep(0)
        traced.trace_flow(uid, "0", "Agent", "LLM", "LLM_GENERATE")

    async def main():
        await asyncio.gather(sample("val", True), sample("train", False), sample("val2", True))

    asyncio.run(main())
    traced.trace_flow("main", "1", "A", "B", "S")
    sample_ids = sorted(row.split(b",")[2] for row in load_runtime.read_csv(traced, trace_dir).splitlines())
    assert sample_ids == [b"main/1", b"train/0"]


def test_suppression_can_be_lifted(load_runtime, traced, trace_dir):
    traced.suppress_sample_trace()
    traced.trace_flow("hidden", "0", "A", "B", "S")
    traced.suppress_sample_trace(False)
    traced.trace_flow("shown", "0", "A", "B", "S")
    rows = load_runtime.read_csv(traced, trace_dir)
    assert b"shown/0" in rows and b"hidden" not in rows


def test_discovery_file_points_at_sample_dir(load_runtime, traced, trace_dir):
    traced.trace_flow("u", "0", "A", "B", "S")
    assert traced.flush(10)
    discovery = load_runtime.discovery_dir / "verl_trace_sample_path.txt"
    assert discovery.read_text() == str(trace_dir / "sample")
    assert not discovery.is_symlink()
