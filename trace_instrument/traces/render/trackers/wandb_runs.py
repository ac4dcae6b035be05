"""``export --to wandb DIR``: the trace figures in a W&B run, written offline into DIR.

The run's files go to ``DIR/wandb/offline-run-*`` (``wandb sync`` uploads them), unless
``$WANDB_MODE`` says otherwise (``online`` logs straight into W&B). With ``--run-id`` they go into the
run verl logged into (``trainer.logger=wandb``): a resumed run refuses steps before its last one, so
the per-step figures have a step metric of their own, ``{prefix}step`` (``define_metric``), which
holds verl's ``global_step``: W&B draws every ``{prefix}*`` chart against it. The run-wide figures
are the run's summary values. The project is ``$WANDB_PROJECT``'s, as for verl.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


class WandbWriter:
    """One W&B run: a history row per step (``{prefix}step`` and the step's figures), the summary
    updated with the run-wide figures."""

    def __init__(self, folder: str, run_id: str | None, run_name: str | None, prefix: str) -> None:
        import wandb

        Path(folder).mkdir(parents=True, exist_ok=True)
        self._run: Any = wandb.init(
            dir=folder,
            id=run_id,
            resume="allow" if run_id else None,
            name=None if run_id else run_name,
            settings=wandb.Settings(silent=True),
            mode=None if os.environ.get("WANDB_MODE") else "offline",  # None: $WANDB_MODE's
        )
        self.run_id: str | None = str(self._run.id)
        self._step = prefix + "step"
        self._run.define_metric(self._step)
        self._run.define_metric(prefix + "*", step_metric=self._step)

    def log_step(self, step: int, values: dict[str, float]) -> None:
        self._run.log({self._step: step, **values})

    def set_summary(self, values: dict[str, float], step: int) -> None:
        self._run.summary.update(values)

    def close(self) -> None:
        self._run.finish()
