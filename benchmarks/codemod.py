"""How fast the codemod is on verl 0.9.0, against the floor for a LibCST tool.

    python benchmarks/codemod.py [--repeat 7] [--version 0.9.0]

For apply, check, verify and remove it prints the median wall time (each run in
a fresh process, timed after imports and catalog load) divided by the time
LibCST needs just to parse the touched files once (measured the same way,
interleaved with the operations), and the peak resident memory (workers included). Targets:
apply <= 1.5, check <= 1.2.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = {"apply": 1.5, "check": 1.2}


def _one(operation: str, root: str) -> None:
    """Child mode: run one operation, print its timing and memory as JSON."""
    from trace_instrument.engine.apply import apply
    from trace_instrument.engine.check import check
    from trace_instrument.engine.remove import remove
    from trace_instrument.engine.verify import verify
    from trace_instrument.spec import load_catalog

    catalog = load_catalog()
    if operation == "parse":
        import libcst

        sources = [(Path(root) / f).read_bytes() for f in _touched(catalog, Path(root))]
        start = time.perf_counter()
        for data in sources:
            libcst.parse_module(data)
        elapsed = time.perf_counter() - start
    else:
        run = {"apply": apply, "check": check, "verify": verify, "remove": remove}[operation]
        start = time.perf_counter()
        run(root, catalog)
        elapsed = time.perf_counter() - start
    peak_kib = max(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    )
    print(json.dumps({"seconds": elapsed, "peak_mib": peak_kib / 1024}))


def _touched(catalog, root: Path) -> list[str]:
    """The files a default apply touches (the opt-in extras' file is left alone)."""
    return [
        f for f in catalog.files if (root / f).exists() and any(p.file == f and p.extra is None for p in catalog.points)
    ]


def _child(operation: str, root: Path) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--one", operation, str(root)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--version", default="0.9.0")
    parser.add_argument("--one", nargs=2, metavar=("OPERATION", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        _one(*args.one)
        return 0

    from trace_instrument.engine.apply import apply
    from trace_instrument.spec import load_catalog
    from trace_instrument.wheels import verl_tree

    catalog = load_catalog()
    pristine = verl_tree(args.version)
    files = _touched(catalog, pristine)
    scratch = Path(tempfile.mkdtemp(prefix="codemod-bench-"))
    floors: list[float] = []
    results: dict[str, list[dict]] = {op: [] for op in ("apply", "check", "verify", "remove")}
    try:
        instrumented = scratch / "instrumented"
        shutil.copytree(pristine / "verl", instrumented / "verl")
        apply(instrumented, catalog)
        for round_ in range(args.repeat):
            # the floor is measured the same way as the operations, interleaved with them
            floors.append(_child("parse", pristine)["seconds"])
            fresh = scratch / f"fresh{round_}"
            shutil.copytree(pristine / "verl", fresh / "verl")
            results["apply"].append(_child("apply", fresh))
            results["check"].append(_child("check", instrumented))
            results["verify"].append(_child("verify", instrumented))
            again = scratch / f"again{round_}"
            shutil.copytree(instrumented, again)
            results["remove"].append(_child("remove", again))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    floor = statistics.median(floors)
    lines = sum(len((pristine / f).read_text(encoding="utf-8").splitlines()) for f in files)
    print(
        f"verl {args.version}: {len(files)} touched files, {lines} lines; medians of {args.repeat} runs, each in a fresh process"
    )
    print(
        f"floor: LibCST parses the touched files once in {floor * 1000:.0f} ms (median, fresh processes like the rest)"
    )
    print(f"{'operation':<10}{'median':>10}{'/ parse':>10}{'target':>10}{'peak RSS':>12}  result")
    failed = False
    for operation, runs in results.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        peak = max(r["peak_mib"] for r in runs)
        ratio = seconds / floor
        target = TARGETS.get(operation)
        verdict = "-" if target is None else ("PASS" if ratio <= target else "FAIL")
        failed |= verdict == "FAIL"
        target_text = f"<= {target}" if target else "-"
        print(f"{operation:<10}{seconds * 1000:>8.0f}ms{ratio:>9.2f}x{target_text:>10}{peak:>9.0f} MiB  {verdict}")
    print("overall: " + ("FAIL" if failed else "PASS"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
