"""``export --to tensorboard DIR``: the trace figures as TensorBoard scalars, written with tensorboardX.

tensorboardX, not TensorBoard's own writers: its ``FileWriter`` and protocol buffers are a small,
maintained, public API that needs neither TensorFlow nor torch (TensorBoard's tf-free event writer
is internal, and the ``SummaryWriter`` of ``torch.utils.tensorboard`` needs torch). Each figure is a
scalar summary of the ``scalars`` plugin holding a 64-bit float, as ``tf.summary.scalar`` writes
them: ``add_scalar``'s ``simple_value`` is a 32-bit float, which would round the counts and times
(TensorBoard draws both kinds on the same charts).

Give DIR the folder of verl's run (``trainer.logger=tensorboard`` writes into ``$TENSORBOARD_DIR``,
by default ``tensorboard_log/{project_name}/{experiment_name}``): TensorBoard then shows the
``trace/`` series, from an event file of their own, in the same run as verl's, on verl's step axis.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SUFFIX = ".trace-instrument"  # the event file's name ends so: the trace figures' file beside verl's
SCALARS_PLUGIN = "scalars"


class TensorBoardWriter:
    """An event file in ``folder`` (replacing the one an earlier export wrote there): an event per step
    holding its figures; the run-wide figures as scalars at the last step logged (TensorBoard has no
    summary values: its latest point reads so)."""

    run_id: str | None = None

    def __init__(self, folder: str) -> None:
        from tensorboardX import FileWriter

        Path(folder).mkdir(parents=True, exist_ok=True)
        # an earlier export's file is replaced, not added to: a step never gets a second point
        for earlier in Path(folder).glob(f"events.out.tfevents.*{SUFFIX}"):
            earlier.unlink()
        self._writer: Any = FileWriter(folder, flush_secs=10, filename_suffix=SUFFIX)

    def log_step(self, step: int, values: dict[str, float]) -> None:
        from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata
        from tensorboardX.proto.tensor_pb2 import TensorProto
        from tensorboardX.proto.types_pb2 import DT_DOUBLE

        metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=SCALARS_PLUGIN))
        summary = Summary(
            value=[
                Summary.Value(tag=name, tensor=TensorProto(dtype=DT_DOUBLE, double_val=[value]), metadata=metadata)
                for name, value in values.items()
            ]
        )
        self._writer.add_summary(summary, global_step=step)
        self._writer.flush()

    def set_summary(self, values: dict[str, float], step: int) -> None:
        self.log_step(step, values)

    def close(self) -> None:
        self._writer.close()
