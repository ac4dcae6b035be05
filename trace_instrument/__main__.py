"""`python -m trace_instrument`.

Run from a source checkout by an interpreter that lacks the dependencies (say a
bare `python3` with PYTHONPATH pointing here), it hands over to the checkout's
own .venv when there is one, instead of failing on the first import.
"""

import os
import sys
from pathlib import Path


def _venv_python() -> Path | None:
    venv = Path(__file__).resolve().parent.parent / ".venv"
    candidate = venv / "bin" / "python"
    if candidate.exists() and Path(sys.prefix).resolve() != venv.resolve():
        return candidate
    return None


try:
    from trace_instrument.cli import main
except ModuleNotFoundError as exc:
    fallback = _venv_python()
    if fallback is None or exc.name not in {"typer", "rich", "yaml", "libcst", "click"}:
        raise
    os.execv(str(fallback), [str(fallback), "-m", "trace_instrument", *sys.argv[1:]])
else:
    main()
