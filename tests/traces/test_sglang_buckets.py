"""The sglang times computed from the buckets of their values (sglang_values.sql, sglang.sql) are the
ones of every value, whether the buckets were built at once or merged refresh by refresh.

Turns are written straight into ``turns_all``: random values over many decades, heavy ties, zeros of
both signs, negatives, tiny and huge values, inf, -inf and NaN, a field with one value, one with
none, and one whose values crowd into a single bucket. Each quantile is checked against the
definition computed here (the sorted values, NaN above every number, linear interpolation in the
same double arithmetic), exactly; the count, min and max exactly; the mean against exact decimal
arithmetic.
"""

from __future__ import annotations

import itertools
import math
import random
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from trace_instrument.traces.backend import SGLANG_FIELDS
from trace_instrument.traces.duckdb_backend import DuckDBBackend
from trace_instrument.traces.views import _sglang_breakdown, _sglang_fields

COLUMNS = [column for _, column in SGLANG_FIELDS]
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


def _values() -> dict[str, list[float | None]]:
    """Each field's value per turn (None: sglang did not report it)."""
    rng = random.Random(11)
    n = 6_000
    wide = [rng.choice([-1, 1]) * 10 ** rng.uniform(-6, 7) for _ in range(n)]
    ties = [rng.choice([0.0, -0.0, 1.5, 1.5, 2.25, -3.0, 1e-300, 5e-324]) for _ in range(n)]
    special = [rng.choice([math.inf, -math.inf, math.nan, 1e20, -1e20, 7.0, None]) for _ in range(n)]
    crowded = [1000.0 + rng.random() * 1e-9 for _ in range(n)]
    single = [None] * n
    single[17] = 42.125
    return {"queue": wide, "ttft": ties, "prefill": special, "decode": crowded, "total": single}


def _write_turns(backend: DuckDBBackend, values: dict[str, list[float | None]], first: int, last: int) -> None:
    """Turns ``first`` to ``last - 1`` (one a trajectory) into ``turns_all``."""
    names = [name for name, _ in SGLANG_FIELDS]
    rows = [[t, *(values[name][t] for name in names)] for t in range(first, last)]
    select = ", ".join(f"unnest(${i + 1}) AS {c}" for i, c in enumerate(["traj_id", *COLUMNS]))
    backend.con.execute(f"INSERT INTO turns_all SELECT {select}", [list(col) for col in zip(*rows, strict=True)])


def _backend(tmp_path: Path, name: str) -> DuckDBBackend:
    backend = DuckDBBackend(None, tmp_path / name)
    backend.run(f"CREATE TABLE turns_all (traj_id BIGINT, {', '.join(f'{c} DOUBLE' for c in COLUMNS)})")
    return backend


def _views(backend: DuckDBBackend) -> None:
    backend.run("CREATE OR REPLACE TEMP VIEW sglang_values AS SELECT * FROM sglang_values_all")
    backend.run("CREATE OR REPLACE TEMP VIEW sglang_buckets AS SELECT * FROM sglang_buckets_all")


def _sorted(values: list[float]) -> list[float]:
    return sorted(values, key=lambda v: (math.isnan(v), v))


def _linear(ordered: list[float], q: float) -> float:
    h = (len(ordered) - 1) * q
    lo, hi = ordered[math.floor(h)], ordered[math.ceil(h)]
    return lo + (hi - lo) * (h - math.floor(h))


def _exact_mean(values: list[float]) -> float:
    if not all(abs(v) < 1e18 for v in values):
        return math.nan  # the float mean: compared apart
    total = sum(Decimal(v).quantize(Decimal("1e-9"), rounding=ROUND_HALF_UP) for v in values)
    return float(total) / len(values)


def _sglang(backend: DuckDBBackend, turns: int):
    """The sglang times of the ``turns`` turns, from the buckets of their values (sglang.sql): the
    two parts the analysis computes apart (views.py), together."""
    return _sglang_breakdown(_sglang_fields(backend), turns)


def _same_float(a: float | None, b: float) -> bool:
    return a is not None and (a == b or (math.isnan(a) and math.isnan(b)))


@pytest.fixture(scope="module")
def values() -> dict[str, list[float | None]]:
    return _values()


def test_bucketed_quantiles_are_those_of_every_value(tmp_path: Path, values) -> None:
    backend = _backend(tmp_path, "whole")
    _write_turns(backend, values, 0, len(values["queue"]))
    backend.build_sglang_values()
    _views(backend)
    # the buckets are in order: the figures below come from them, not from the fallback
    assert all(row[-1] for row in backend.run(_query(backend)))
    result = _sglang(backend, turns=len(values["queue"]))
    for name, _ in SGLANG_FIELDS:
        reported = [v for v in values[name] if v is not None]
        field = result.fields[name]
        ordered = _sorted(reported)
        assert field.count == len(reported)
        assert _same_float(field.min, min(reported, key=lambda v: (math.isnan(v), v)))
        assert _same_float(field.max, ordered[-1])
        for label, q in QUANTILES.items():
            assert _same_float(field.quantiles[label], _linear(ordered, q)), (name, label)
        expected_mean = _exact_mean(reported)
        if math.isnan(expected_mean):  # inf, NaN: the engine's float mean of every value
            assert field.mean is not None and math.isnan(field.mean)
        else:
            assert field.mean == pytest.approx(expected_mean, rel=1e-15)
    assert result.turns_with_timing == 1 and result.turns == len(values["queue"])
    backend.close()


def test_buckets_merged_refresh_by_refresh_give_the_same_figures(tmp_path: Path, values) -> None:
    """What ``analyze --follow`` keeps: the values of each refresh's new turns merged in
    (merge_sglang_values.sql) give the figures a build over every value gives, bit for bit."""
    n = len(values["queue"])
    whole = _backend(tmp_path, "whole")
    _write_turns(whole, values, 0, n)
    whole.build_sglang_values()
    _views(whole)
    parts = _backend(tmp_path, "parts")
    cuts = [0, 1, 700, 2_500, n]
    _write_turns(parts, values, 0, cuts[1])
    parts.build_sglang_values()
    for first, last in itertools.pairwise(cuts[1:]):
        _write_turns(parts, values, first, last)
        parts.script("sglang_values", values="sglang_values_new", buckets="sglang_buckets_new", first_traj=first)
        parts.script("merge_sglang_values")
        for table in ("sglang_values_new", "sglang_buckets_new"):
            parts.run(f"DROP TABLE {table}")
    _views(parts)
    assert repr(_sglang(parts, n)) == repr(_sglang(whole, n))
    whole.close()
    parts.close()


def test_buckets_out_of_order_fall_back_to_one_bucket_a_field(tmp_path: Path, values) -> None:
    """Should a bucket ever hold a value below one of an earlier bucket (the buckets come from log2,
    whose rounding no standard fixes), each field's values are sorted whole: the same figures."""
    backend = _backend(tmp_path, "whole")
    _write_turns(backend, values, 0, len(values["queue"]))
    backend.build_sglang_values()
    _views(backend)
    expected = repr(_sglang(backend, 1))
    # the buckets as they would be were log2 to put a large value one bucket too low
    backend.run("UPDATE sglang_values_all SET bucket = bucket - 1 WHERE field = 0 AND value = (SELECT max(value) FROM sglang_values_all WHERE field = 0)")  # fmt: skip
    backend.run("DROP TABLE sglang_buckets_all")
    backend.run(f"CREATE TABLE sglang_buckets_all AS {backend.dialect.sglang_buckets_of('sglang_values_all')}")
    (ordered,) = backend.run("SELECT bool_and(ordered) FROM (" + _query(backend) + ")")[0]
    assert not ordered  # the damage is seen
    assert repr(_sglang(backend, 1)) == expected
    backend.close()


def _query(backend: DuckDBBackend) -> str:
    from trace_instrument.traces.backend import sql_text

    return backend.dialect.render(
        sql_text("sglang", "duckdb"), {"values": "sglang_values", "buckets": "sglang_buckets"}
    )
