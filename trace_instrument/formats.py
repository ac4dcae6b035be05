"""The trace files' format, as the runtime defines it: loaded from templates/runtime/formats.py.

The runtime package writes the files; the trace reader, the runtime self-check and the tests read
them by the same names. The definition lives in the runtime (standard library only, it never
imports this package), so this module executes that one file, which holds literals only, and
gives its names types.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from trace_instrument.data import data_dir

SOURCE: Path = data_dir("templates") / "runtime" / "formats.py"


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("trace_instrument._runtime_formats", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the trace format from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_FORMAT = _load(SOURCE)

# the sample-flow CSV (see the runtime's file for what each means)
SAMPLE_COLUMNS: tuple[str, ...] = _FORMAT.SAMPLE_COLUMNS
CONTENT_KEYS: tuple[str, ...] = _FORMAT.CONTENT_KEYS
STATUS_COMPLETE: str = _FORMAT.STATUS_COMPLETE
STATUS_RUNNING: str = _FORMAT.STATUS_RUNNING
COMPLETE_STAGES: tuple[str, ...] = _FORMAT.COMPLETE_STAGES
# name -> (stage, detail, detail as written: as is, "text*" its start, "*" any)
EVENTS: dict[str, tuple[str, str, str]] = _FORMAT.EVENTS
# a trajectory line
TRAJECTORY_LINE_KEYS: tuple[str, ...] = _FORMAT.TRAJECTORY_LINE_KEYS
RAW_MESSAGE_KEYS: tuple[str, ...] = _FORMAT.RAW_MESSAGE_KEYS
TURN_KEYS: tuple[str, ...] = _FORMAT.TURN_KEYS
AGENT_STOP_REASONS: tuple[str, ...] = _FORMAT.AGENT_STOP_REASONS
# the status file: its facilities, and why a record did not reach its file
STATUS_FACILITIES: tuple[str, ...] = _FORMAT.STATUS_FACILITIES
LOSS_REASONS: tuple[str, ...] = _FORMAT.LOSS_REASONS
