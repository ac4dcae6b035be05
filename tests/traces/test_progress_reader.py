"""The progress reader kept by ``analyze --follow`` reads on from where each file's complete lines
ended, and what it gives equals a parse of the whole files, however the bytes were cut."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from trace_instrument.traces.model import FileKind, SourceFile
from trace_instrument.traces.progress import ProgressInfo, ProgressReader, _parse_line

HOUR_1 = (
    b"Total training steps: 40\n'train_batch_size': 8,\n"
    b"=============== Epoch 0, consumed 0 batches, Step 1 ===============\n"
    b"Step 1 rollout started\r\nTask 1f/0 is completed, score=0.5 status=Finished\n"
    b"Step 1 rollout finished\rgen throughput (token/s): 120.5\n"
    b"Task 1f/1 is completed, score=x status=Finished\n\xff\xfe broken\nStep 1 train started\n"
)
HOUR_2 = (
    b"Step 1 train finished\nStep 2 rollout started\nStep 2 rollout finished\n"
    b"gen throughput (token/s): 99\nTotal training steps: 41\n'train_batch_size': 16,\n"
    b"=============== Step 2 ===============\nStep 2 train started\r\nStep 2 train finished"
)


def _whole(paths: list[Path]) -> ProgressInfo:
    """The reference: every file read whole, in name order, each line parsed in turn."""
    info = ProgressInfo()
    seq = 0
    for path in sorted(paths, key=lambda p: p.name):
        last_finished = None
        for raw in path.read_bytes().splitlines():
            seq += 1
            try:
                line = raw.decode("utf-8").rstrip("\r")
            except UnicodeDecodeError:
                info.undecodable += 1
                continue
            info.lines += 1
            last_finished = _parse_line(info, line, seq, last_finished)
    return info


def _sources(paths: list[Path]) -> list[SourceFile]:
    return [SourceFile(i, str(p), FileKind.PROGRESS, str(p.parent)) for i, p in enumerate(paths)]


def test_every_cut_of_a_growing_file_reads_as_the_whole_file(tmp_path: Path) -> None:
    first, second = tmp_path / "20260801-10.log", tmp_path / "20260801-11.log"
    first.write_bytes(HOUR_1)
    reader = ProgressReader()
    # the second hour grows a byte at a time: mid-line, between a CR and its LF, inside a UTF-8 character
    for end in range(len(HOUR_2) + 1):
        second.write_bytes(HOUR_2[:end])
        paths = [first, second]
        assert asdict(reader.read(_sources(paths))) == asdict(_whole(paths)), end
    final = reader.read(_sources([first, second]))
    assert final.total_training_steps == 41 and final.config == {"train_batch_size": 16}
    assert final.throughput == {1: 120.5, 2: 99.0} and final.undecodable == 1 and final.completed == 2


def test_a_file_that_shrank_or_changed_is_read_again_and_an_earlier_hour_may_appear(tmp_path: Path) -> None:
    first, second = tmp_path / "20260801-10.log", tmp_path / "20260801-11.log"
    second.write_bytes(HOUR_2)
    reader = ProgressReader()
    reader.read(_sources([second]))
    first.write_bytes(HOUR_1)  # an earlier hour copied in late: every later seq moves
    assert asdict(reader.read(_sources([first, second]))) == asdict(_whole([first, second]))
    second.write_bytes(HOUR_2[:40])  # shrank
    assert asdict(reader.read(_sources([first, second]))) == asdict(_whole([first, second]))
    first.write_bytes(HOUR_1.replace(b"Step 1 rollout started", b"Step 7 rollout started"))  # same size
    assert asdict(reader.read(_sources([first, second]))) == asdict(_whole([first, second]))
    second.unlink()
    assert asdict(reader.read(_sources([first]))) == asdict(_whole([first]))
