"""TrajectoryTracker: keys, record lifecycle, thread safety and trajectory assembly."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace

import numpy as np  # a test dependency: pip install -e '.[test]'
import pytest


def make_item(uid="u1", traj_uid="2", global_step=5, **extra):
    non_tensor = {"uid": uid, "traj_uid": traj_uid, **extra}
    non_tensor = {key: value for key, value in non_tensor.items() if value is not None}
    return SimpleNamespace(non_tensor_batch=non_tensor, meta_info={"global_step": global_step})


class FakeTokenizer:
    def decode(self, ids, skip_special_tokens=True):
        assert skip_special_tokens is False
        return "".join(f"<{int(i)}>" for i in ids)


class BrokenTokenizer:
    def decode(self, *args, **kwargs):
        raise ValueError("cannot decode")


def make_config(**rollout):
    return SimpleNamespace(actor_rollout_ref=SimpleNamespace(rollout=rollout))


def test_register_returns_key_and_traj_uid(traced):
    tracker = traced.TrajectoryTracker()
    assert tracker.register_trajectory(make_item()) == ("prompt-u1/sample-2", "2")
    assert tracker.get_turn_records("prompt-u1/sample-2") == []


def test_register_unwraps_one_element_arrays(traced):
    tracker = traced.TrajectoryTracker()
    item = make_item(uid=np.array(["uu"], dtype=object), traj_uid=np.array([3]))
    assert tracker.register_trajectory(item) == ("prompt-uu/sample-3", "3")


def test_register_without_traj_uid_falls_back_to_id(traced, caplog):
    tracker = traced.TrajectoryTracker()
    item = make_item(uid=None, traj_uid=None)
    with caplog.at_level(logging.WARNING):
        key, traj_uid = tracker.register_trajectory(item)
    assert traj_uid == str(id(item)) and key == f"prompt-/sample-{id(item)}"
    assert any("traj_uid" in record.getMessage() for record in caplog.records)


def test_reregistering_warns_and_resets(traced, caplog):
    tracker = traced.TrajectoryTracker()
    key, _ = tracker.register_trajectory(make_item())
    tracker.append_turn_record(key, traced.TurnRecord([1]))
    with caplog.at_level(logging.WARNING):
        tracker.register_trajectory(make_item())
    assert tracker.get_turn_records(key) == []
    assert any(key in record.getMessage() for record in caplog.records)


def test_append_get_unregister(traced, caplog):
    tracker = traced.TrajectoryTracker()
    key, _ = tracker.register_trajectory(make_item())
    first, second = traced.TurnRecord([1]), traced.TurnRecord([2])
    tracker.append_turn_record(key, first)
    tracker.append_turn_record("prompt-unknown/sample-0", second)  # dropped silently
    with caplog.at_level(logging.WARNING):
        tracker.append_turn_record(None, second)
    assert any("traj_key" in record.getMessage() for record in caplog.records)
    snapshot = tracker.get_turn_records(key)
    assert snapshot == [first]
    snapshot.append(second)  # a snapshot: the tracker is unaffected
    assert tracker.get_turn_records(key) == [first]
    tracker.unregister_trajectory(key)
    tracker.unregister_trajectory(key)
    assert tracker.get_turn_records(key) == []


def test_concurrent_appends_are_all_kept(traced):
    tracker = traced.TrajectoryTracker()
    keys = [tracker.register_trajectory(make_item(traj_uid=str(i)))[0] for i in range(4)]

    def append_many(key):
        for _ in range(500):
            tracker.append_turn_record(key, traced.TurnRecord([1]))

    threads = [threading.Thread(target=append_many, args=(key,)) for key in keys for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [len(tracker.get_turn_records(key)) for key in keys] == [1000] * 4


def record(runtime, prompt_ids, completion_count, observation_ids=None):
    rec = runtime.TurnRecord(prompt_ids)
    rec.turn.completion_token_count = completion_count
    rec.turn.observation_token_ids = observation_ids
    return rec


def three_turn_tracker(runtime):
    tracker = runtime.TrajectoryTracker()
    item = make_item(uid="u1", traj_uid="2", global_step=5)
    key, traj_uid = tracker.register_trajectory(item)
    # turn 1 prompt = turn 0 prompt (3) + completion (2) + observation (1) + 2 template tokens
    tracker.append_turn_record(key, record(runtime, [10, 11, 12], 2, observation_ids=[40]))
    tracker.append_turn_record(key, record(runtime, [10, 11, 12, 20, 21, 40, 90, 91], 1))
    # turn 2 prompt lost tokens: negative overhead, no text
    tracker.append_turn_record(key, record(runtime, [1, 2], 1))
    return tracker, item, key, traj_uid


def test_build_trajectory(traced):
    traced.settings.clock = lambda: 1010.0
    tracker, item, key, traj_uid = three_turn_tracker(traced)
    metrics = {"generate_sequences": 1.2}
    trajectory = tracker.build_trajectory(
        item, key, traj_uid, 1000.0, FakeTokenizer(), 4242, make_config(n=4), agent_metrics=metrics
    )
    assert [turn.turn_index for turn in trajectory.turns] == [0, 1, 2]
    assert [turn.template_overhead_tokens for turn in trajectory.turns] == [None, 2, -7]
    # the overhead starts right after turn 0's prompt + completion, i.e. at index 5
    assert [turn.template_overhead_text for turn in trajectory.turns] == [None, "<40><90>", None]
    assert trajectory.initial_prompt_token_ids == [10, 11, 12]
    assert trajectory.initial_prompt_text == "<10><11><12>"
    assert (trajectory.request_id, trajectory.prompt_uid, trajectory.sample_index) == ("2", "u1", 2)
    assert (trajectory.n_samples, trajectory.replica_id, trajectory.global_step) == (4, 4242, 5)
    assert (trajectory.created_at_ts, trajectory.completed_at_ts, trajectory.total_time_ms) == (1000.0, 1010.0, 10000.0)
    assert trajectory.agent_metrics is metrics


def test_build_with_failing_tokenizer_keeps_counts(traced):
    tracker, item, key, traj_uid = three_turn_tracker(traced)
    trajectory = tracker.build_trajectory(item, key, traj_uid, 0.0, BrokenTokenizer(), 1, None)
    assert trajectory.turns[1].template_overhead_tokens == 2
    assert trajectory.turns[1].template_overhead_text is None
    assert trajectory.initial_prompt_text is None and trajectory.initial_prompt_token_ids == [10, 11, 12]
    assert tracker.build_trajectory(item, key, traj_uid, 0.0, None, 1, None).initial_prompt_text is None


def test_build_skips_overhead_when_counts_are_unknown(traced):
    tracker = traced.TrajectoryTracker()
    item = make_item()
    key, traj_uid = tracker.register_trajectory(item)
    tracker.append_turn_record(key, record(traced, [1, 2], None))
    tracker.append_turn_record(key, record(traced, [1, 2, 3, 4], 1))
    trajectory = tracker.build_trajectory(item, key, traj_uid, 0.0, FakeTokenizer(), 1, None)
    assert trajectory.turns[1].template_overhead_tokens is None


def test_build_with_numpy_prompt_ids_gives_plain_ints(traced):
    tracker = traced.TrajectoryTracker()
    item = make_item(traj_uid="uuid-like")
    key, traj_uid = tracker.register_trajectory(item)
    tracker.append_turn_record(key, traced.TurnRecord(np.array([3, 4], dtype=np.int64)))
    trajectory = tracker.build_trajectory(item, key, traj_uid, 0.0, FakeTokenizer(), 1, None)
    assert trajectory.initial_prompt_token_ids == [3, 4]
    assert all(type(i) is int for i in trajectory.initial_prompt_token_ids)
    assert trajectory.sample_index is None and trajectory.request_id == "uuid-like"
    assert trajectory.turns[0].prompt_token_count == 2


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (make_config(n=8), 8),
        (make_config(n="8"), 8),
        (make_config(n=8, over_sampling={"n": 12}), 12),
        (make_config(n=8, over_sampling=None), 8),
        (make_config(n=8, over_sampling={}), 8),
        (make_config(), None),
        (make_config(n="many"), None),
        (None, None),
        (SimpleNamespace(), None),
    ],
)
def test_n_samples_from_config(traced, config, expected):
    tracker = traced.TrajectoryTracker()
    item = make_item()
    key, traj_uid = tracker.register_trajectory(item)
    assert tracker.build_trajectory(item, key, traj_uid, 0.0, None, 1, config).n_samples == expected


def test_build_for_unregistered_key_and_bare_item(traced):
    tracker = traced.TrajectoryTracker()
    trajectory = tracker.build_trajectory(object(), "missing", 7, None, None, 1, None)
    assert trajectory.request_id == "7" and trajectory.turns == []
    assert trajectory.prompt_uid is None and trajectory.global_step is None


class FakeAgentLoop:
    """What trace_agent_stop reads of verl's agent loop: the tracker the templates put on it."""

    def __init__(self, tracker):
        self._traj_tracker = tracker


def test_agent_stop_reason_reaches_the_trajectory(traced):
    tracker = traced.TrajectoryTracker()
    item = make_item()
    key, traj_uid = tracker.register_trajectory(item)
    agent_data = SimpleNamespace(trace_traj_key=key)
    traced.trace_agent_stop(FakeAgentLoop(tracker), agent_data, "max_assistant_turns")
    # a later reason (the caller's catch-all) never replaces the first
    traced.trace_agent_stop(FakeAgentLoop(tracker), agent_data, "tool_response_length")
    output = SimpleNamespace(
        response_ids=[5] * 37, extra_fields={"min_global_steps": np.int64(3), "max_global_steps": 4}
    )
    config = make_config(n=2, response_length=64)
    trajectory = tracker.build_trajectory(item, key, traj_uid, 0.0, None, 1, config, agent_output=output)
    assert (trajectory.agent_stop_reason, trajectory.response_length, trajectory.max_response_length) == (
        "max_assistant_turns",
        37,
        64,
    )
    assert (trajectory.min_global_steps, trajectory.max_global_steps) == (3, 4)
    assert type(trajectory.min_global_steps) is int
    tracker.unregister_trajectory(key)
    key_again, _ = tracker.register_trajectory(item)
    assert key_again == key
    assert tracker.build_trajectory(item, key, traj_uid, 0.0, None, 1, None).agent_stop_reason is None


@pytest.mark.parametrize(
    ("agent_loop", "agent_data"),
    [
        (SimpleNamespace(), SimpleNamespace(trace_traj_key="k")),  # no tracker on the loop
        (None, SimpleNamespace(trace_traj_key="k")),
        (SimpleNamespace(_traj_tracker=object()), SimpleNamespace(trace_traj_key="k")),  # not a tracker
        (SimpleNamespace(_traj_tracker=None), None),
    ],
)
def test_agent_stop_without_a_recording_never_raises(traced, agent_loop, agent_data):
    assert traced.trace_agent_stop(agent_loop, agent_data, "no_tool_call") is None


def test_agent_stop_for_an_unregistered_key_is_ignored(traced):
    tracker = traced.TrajectoryTracker()
    traced.trace_agent_stop(FakeAgentLoop(tracker), SimpleNamespace(trace_traj_key="gone"), "no_tool_call")
    item = make_item()
    key, traj_uid = tracker.register_trajectory(item)
    assert tracker.build_trajectory(item, key, traj_uid, 0.0, None, 1, None).agent_stop_reason is None


class Unsized:
    @property
    def response_ids(self):
        raise RuntimeError("no ids")


@pytest.mark.parametrize(
    "output",
    [
        None,
        SimpleNamespace(),
        Unsized(),
        SimpleNamespace(response_ids=7, extra_fields={"min_global_steps": "3", "max_global_steps": 2.5}),
        SimpleNamespace(extra_fields=None),
        SimpleNamespace(extra_fields={"min_global_steps": True, "max_global_steps": None}),
    ],
)
def test_response_length_unknown_without_a_usable_output(traced, output):
    tracker = traced.TrajectoryTracker()
    item = make_item()
    key, traj_uid = tracker.register_trajectory(item)
    trajectory = tracker.build_trajectory(item, key, traj_uid, 0.0, None, 1, make_config(), agent_output=output)
    assert trajectory.response_length is None and trajectory.max_response_length is None
    assert trajectory.min_global_steps is None and trajectory.max_global_steps is None
    assert trajectory.request_id == "2"


def test_agent_stop_reasons_are_the_readers(traced):
    from trace_instrument.formats import AGENT_STOP_REASONS

    assert traced.trajectory_tracker.AGENT_STOP_REASONS == frozenset(AGENT_STOP_REASONS)
