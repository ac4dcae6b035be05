"""What the benchmark scripts share: timing a whole process, and byte-compiling the tool first."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import NamedTuple


class Measured(NamedTuple):
    seconds: float  # wall time, start to exit
    mib: float  # peak resident memory
    cpu: float  # user + system CPU seconds, every thread


def timed(command: list[str], env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,)) -> Measured:
    """One process, from start to exit; output discarded."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    errors = process.stderr.read()  # read while it runs: a full pipe would block the process
    _pid, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in ok:
        tail = errors.decode("utf-8", "replace")[-3000:]
        raise SystemExit(f"{' '.join(command)[:200]} failed with exit code {code}:\n{tail}")
    return Measured(elapsed, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime)


def byte_compile_the_tool() -> None:
    """Compile the tool's modules and the runtime's templates, as `pip install` does (a wheel holds
    the templates inside the package).

    An editable checkout run under PYTHONDONTWRITEBYTECODE would otherwise compile some sixty
    modules from source in every process, which no installed user pays.
    """
    import compileall

    import trace_instrument
    from trace_instrument.spec import paths

    compileall.compile_dir(Path(trace_instrument.__file__).parent, quiet=1)
    compileall.compile_dir(paths.templates_dir() / "runtime", quiet=1)
