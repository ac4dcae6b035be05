"""The stage latencies computed from the count of each latency are the ones of every transition.

Transitions are written straight into the tables the latency views read: kinds with one, two,
three and four transitions, heavy ties (the top three cut through a tie), negative latencies,
duplicate rows, and a large kind of random values. Each quantile is checked against the
definition computed here in the same double arithmetic (exactly), DuckDB's own ``quantile_cont``
and numpy (to rounding: each rounds its last bit its own way), and the slowest ids against a sort.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest

from trace_instrument.traces.duckdb_backend import DuckDBBackend
from trace_instrument.traces.events import Event, event_name
from trace_instrument.traces.views import _latency_views

E = list(Event)


def _kinds() -> dict[tuple[int, int], list[int]]:
    rng = random.Random(5)
    return {
        (E[0], E[1]): [7],
        (E[1], E[2]): [3, 9],
        (E[2], E[3]): [4, 4, 4],
        (E[3], E[4]): [-2, 5, 5, 1],
        (E[4], E[5]): [1] * 40 + [2] * 3,  # the top three cut through a tie of three
        (E[5], E[6]): [rng.randint(-50, 100_000) for _ in range(5_000)],
        (E[6], E[7]): [rng.choice([10, 20, 30, 10**9]) for _ in range(997)],
        (E[7], E[8]): [0, 0, 100, 1000],  # p90 730.0000000000001 here, quantile_cont's 730.0000000000002
    }


def _linear(values: list[int], q: float) -> float:
    """The q-quantile by linear interpolation between the sorted values around (n - 1) q."""
    ordered = sorted(values)
    h = (len(ordered) - 1) * q
    lo, hi = float(ordered[math.floor(h)]), float(ordered[math.ceil(h)])
    return lo + (hi - lo) * (h - math.floor(h))


def _table(backend: DuckDBBackend, name: str, columns: str, rows: list[tuple]) -> None:
    """A table of ``rows`` in one statement (one INSERT per row takes seconds)."""
    names = [c.split()[0] for c in columns.split(", ")]
    backend.run(f"CREATE TABLE {name} ({columns})")
    select = ", ".join(f"unnest(${i + 1}) AS {n}" for i, n in enumerate(names))
    backend.con.execute(f"INSERT INTO {name} SELECT {select}", [list(col) for col in zip(*rows, strict=True)])


@pytest.fixture
def backend(tmp_path: Path):
    backend = DuckDBBackend(None, tmp_path / "spill")
    rows, ids = [], []
    kinds = _kinds()
    skey = 0
    for (prev, code), values in kinds.items():
        for dt in values:
            skey += 1
            ids.append((skey, f"uid{skey % 97}/{skey}"))
            rows.append((skey, int(prev), int(code), dt, False, 1))
            if skey % 11 == 0:  # a duplicate row: left out of the latencies
                rows.append((skey, int(prev), int(code), 10**12, True, 1))
    columns = "skey UBIGINT, prev_code INTEGER, code INTEGER, dt BIGINT, dup BOOLEAN, cid BIGINT"
    _table(backend, "transitions_all", columns, rows)
    _table(backend, "entities_all", "skey UBIGINT, sample_id VARCHAR", ids)
    backend.run("CREATE TEMP VIEW transitions AS SELECT * FROM transitions_all")
    # the summary a load builds (transition_summaries.sql) and the view the latencies read
    backend.run(f"CREATE TABLE latency_counts_all AS {backend.dialect.latency_counts_of('transitions_all')}")
    backend.run("CREATE TEMP VIEW latency_counts AS SELECT * FROM latency_counts_all")
    # and the transitions the slowest are found among (slow_candidates.sql)
    backend.script("slow_candidates")
    backend.run("CREATE TEMP VIEW slow_candidates AS SELECT * FROM slow_candidates_all")
    yield backend, kinds, dict(ids)
    backend.close()


def test_quantiles_counts_and_slowest_are_those_of_every_transition(backend) -> None:
    engine, kinds, ids = backend
    latencies, histograms = _latency_views(engine)
    assert len(latencies) == len(kinds)
    by_kind = {(lat.from_event, lat.to_event): lat for lat in latencies}
    skey = 0
    for (prev, code), values in kinds.items():
        lat = by_kind[(event_name(prev), event_name(code))]
        keys = list(range(skey + 1, skey + len(values) + 1))
        skey += len(values)
        assert lat.count == len(values)
        assert lat.max == max(values)
        assert lat.negative == sum(1 for v in values if v < 0)
        (own,) = engine.con.execute(
            "SELECT quantile_cont(dt, [0.5, 0.9, 0.99]) FROM unnest(?) AS v(dt)", [values]
        ).fetchone()
        assert [lat.p50, lat.p90, lat.p99] == [_linear(values, q) for q in (0.5, 0.9, 0.99)]
        assert [lat.p50, lat.p90, lat.p99] == pytest.approx(own, rel=1e-15)
        assert [lat.p50, lat.p90, lat.p99] == pytest.approx(np.percentile(values, [50, 90, 99]), rel=1e-12)
        ranked = sorted(((dt, ids[k]) for dt, k in zip(values, keys, strict=True)), reverse=True)
        assert list(lat.slowest) == [sample_id for _, sample_id in ranked[:3]]
        bins: dict[int, int] = {}
        for v in values:
            b = int(np.floor(np.log10(max(v, 1)) * 10))
            bins[b] = bins.get(b, 0) + 1
        histogram = histograms[f"{lat.from_event} -> {lat.to_event}"]
        lo = min(bins)
        assert {lo + i: n for i, n in enumerate(histogram.counts) if n} == bins
