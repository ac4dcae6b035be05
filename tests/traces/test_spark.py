"""`analyze --engine spark`: the same SQL files on Spark in local mode give the same numbers as DuckDB."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from trace_instrument.traces import Options, analyze


def _pyspark() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.fail("pyspark is needed for this test: pip install -e '.[test]' (or the spark extra)", pytrace=False)


def _rounded(value: object) -> object:
    """Floats to 9 significant digits: the engines may differ in the last bits of an interpolation."""
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def test_spark_matches_duckdb(tiny_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _pyspark()
    from trace_instrument.traces.spark_backend import SparkDialect

    spark = asdict(analyze([tiny_run], Options(cache=False, engine="spark")))
    duck = asdict(analyze([tiny_run], Options(cache=False)))
    assert spark.pop("engine") == "spark" and duck.pop("engine") == "duckdb"
    assert _rounded(spark) == _rounded(duck)
    # sample ids sharing a hash (forced: a key of two values) fall back to the ids' text on Spark too
    monkeypatch.setattr(SparkDialect, "sample_keys", lambda self, column: (f"pmod(xxhash64({column}), 2)", column))
    fallback = asdict(analyze([tiny_run], Options(cache=False, engine="spark")))
    fallback.pop("engine")
    assert _rounded(fallback) == _rounded(duck)
    # and the numbers are the hand-computed ones (test_analyze_tiny), not just equal to each other
    gen = next(x for x in spark["latencies"] if x["to_event"].endswith("received_generate_response"))
    assert (gen["count"], gen["p50"], gen["p90"]) == (4, 250.0, 300.0)
    assert spark["rollouts"]["turns"]["quantiles"]["p99"] == pytest.approx(1.98)
