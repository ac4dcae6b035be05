"""Package shape: public API, relative imports, standard library only, Python 3.10 syntax."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from trace_instrument.model import RUNTIME_EXPORTS

RUNTIME_SRC = Path(__file__).resolve().parents[2] / "templates" / "runtime"
SOURCES = sorted(RUNTIME_SRC.glob("*.py"))
PUBLIC_NAMES = set(RUNTIME_EXPORTS)  # the one definition of the runtime's public names


def test_expected_source_files():
    assert [path.name for path in SOURCES] == [
        "__init__.py",
        "files.py",
        "formats.py",
        "losses.py",
        "process.py",
        "progress.py",
        "safety.py",
        "settings.py",
        "streams.py",
        "trace.py",
        "trajectory_store.py",
        "trajectory_tracker.py",
        "trajectory_types.py",
        "writer.py",
    ]


def test_public_api(traced):
    assert set(traced.__all__) == PUBLIC_NAMES and len(traced.__all__) == len(PUBLIC_NAMES)
    for name in PUBLIC_NAMES:
        assert getattr(traced, name) is not None


def test_works_under_any_parent_package(load_runtime, tmp_path):
    runtime = load_runtime(trace_dir=tmp_path / "trace", package="somewhere.else.tracing_rt")
    assert runtime.__name__ == "somewhere.else.tracing_rt"
    runtime.trace_flow("u", "0", "A", "B", "S")
    assert load_runtime.read_csv(runtime, tmp_path / "trace").count(b"\r\n") == 1


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_imports_are_stdlib_or_relative(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level > 0:  # relative: stays inside the package
                continue
            names = [node.module]
        else:
            continue
        for name in names:
            top_level = name.split(".")[0]
            assert top_level in sys.stdlib_module_names or top_level == "__future__", f"{path.name}: {name}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_parses_as_python_3_10(path):
    ast.parse(path.read_text(), feature_version=(3, 10))


def test_runs_without_numpy(script, tmp_path):
    code = """
        import sys
        sys.modules["numpy"] = None  # any import of numpy now fails
        import verl.utils.tracing as tracing
        tracing.trace_flow(["a", "b"], "1", "A", "B", "S")
        store = tracing.TrajectoryStore(tracing.get_trace_dir() + "/trajectory", 1)
        tracker = tracing.TrajectoryTracker()
        item = type("Item", (), {"non_tensor_batch": {"uid": "a", "traj_uid": "1"}, "meta_info": {}})()
        key, traj_uid = tracker.register_trajectory(item)
        tracker.append_turn_record(key, tracing.TurnRecord([1, 2]))
        store.write(tracker.build_trajectory(item, key, traj_uid, 0.0, None, 1, None))
        assert store.close(10) and tracing.flush(10)
        assert "numpy" not in [m for m in sys.modules if sys.modules[m] is not None]
    """
    proc, _ = script.run(code, VERL_TRACE_DIR=tmp_path / "trace")
    assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "trace" / "trajectory").iterdir())) == 1
