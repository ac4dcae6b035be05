"""``export --to mlflow URI``: the trace figures as MLflow metrics of a run, through ``MlflowClient``.

URI is a tracking URI (``http://host:5000``, ``sqlite:///mlflow.db``, ``file:./mlruns``, ``databricks``).
With ``--run-id`` the metrics go into the run verl logged into (``trainer.logger=mlflow``), beside
its own, at verl's ``global_step``; without it, into a new run of the experiment named by
``$MLFLOW_EXPERIMENT_NAME`` (else MLflow's default experiment), named after the traced run.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

BATCH = 1000  # MLflow takes at most 1,000 metrics in one log_batch call


class MlflowWriter:
    """Per-step figures as metric points at their step; the run-wide ones as ``{prefix}run/`` metrics,
    a point at the last step logged each time they change (MLflow shows a metric's latest value)."""

    def __init__(self, uri: str, run_id: str | None, run_name: str | None) -> None:
        from mlflow.tracking import MlflowClient

        # its INFO lines (creating a store's tables) would interleave with ours on stderr
        logging.getLogger("mlflow").setLevel(logging.WARNING)
        self._client: Any = MlflowClient(tracking_uri=uri)
        self._created = run_id is None
        if run_id is not None:
            self._client.get_run(run_id)  # an unknown run stops here, before anything is written
            self.run_id: str | None = run_id
        else:
            run = self._client.create_run(self._experiment_id(), run_name=run_name)
            self.run_id = str(run.info.run_id)

    def _experiment_id(self) -> str:
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME")
        if not name:
            return "0"  # MLflow's default experiment, in every store
        found = self._client.get_experiment_by_name(name)
        return str(found.experiment_id) if found is not None else str(self._client.create_experiment(name))

    def log_step(self, step: int, values: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(name, value, now, step) for name, value in values.items()]
        for start in range(0, len(metrics), BATCH):
            self._client.log_batch(self.run_id, metrics=metrics[start : start + BATCH])

    def set_summary(self, values: dict[str, float], step: int) -> None:
        self.log_step(step, values)

    def close(self) -> None:
        if self._created:
            self._client.set_terminated(self.run_id)
