"""Turn / Trajectory schema and serialization; TurnRecord timing and observation logic."""

from __future__ import annotations

import dataclasses
import json

import pytest

TURN_FIELDS = [
    ("turn_index", dataclasses.MISSING),
    ("prompt_token_count", None),
    ("prompt_text", None),
    ("completion_text", ""),
    ("completion_token_ids", []),
    ("completion_token_count", None),
    ("finish_reason", ""),
    ("observation_text", None),
    ("observation_token_ids", None),
    ("start_ts", 0.0),
    ("end_ts", 0.0),
    ("observation_start_ts", None),
    ("observation_end_ts", None),
    ("turn_total_time_ms", None),
    ("completion_time_ms", 0.0),
    ("observation_time_ms", None),
    ("sglang_rid", ""),
    ("sglang_time_ms", None),
    ("sglang_queue_time_ms", None),
    ("sglang_ttft_ms", None),
    ("sglang_prefill_ms", None),
    ("sglang_decode_time_ms", None),
    ("template_overhead_tokens", None),
    ("template_overhead_text", None),
]
TRAJECTORY_FIELDS = [
    ("request_id", dataclasses.MISSING),
    ("prompt_uid", None),
    ("sample_index", None),
    ("n_samples", None),
    ("replica_id", -1),
    ("global_step", None),
    ("created_at_ts", 0.0),
    ("completed_at_ts", 0.0),
    ("total_time_ms", 0.0),
    ("turns", []),
    ("initial_prompt_text", None),
    ("initial_prompt_token_ids", None),
    ("agent_metrics", None),
    # additions to the seed's format
    ("agent_stop_reason", None),
    ("response_length", None),
    ("max_response_length", None),
    ("min_global_steps", None),
    ("max_global_steps", None),
]


def defaults(cls):
    result = []
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING:
            result.append((f.name, f.default_factory()))
        else:
            result.append((f.name, f.default))
    return result


def test_turn_fields_in_order_with_defaults(traced):
    assert defaults(traced.Turn) == TURN_FIELDS


def test_trajectory_fields_in_order_with_defaults(traced):
    assert defaults(traced.Trajectory) == TRAJECTORY_FIELDS


def sample_trajectory(runtime):
    turns = [
        runtime.Turn(turn_index=0, prompt_token_count=5, completion_text="héllo", completion_token_ids=[1, 2]),
        runtime.Turn(turn_index=1, observation_text="工具", observation_token_ids=[7], turn_total_time_ms=3.5),
    ]
    return runtime.Trajectory(
        request_id="3",
        prompt_uid="u",
        sample_index=3,
        n_samples=4,
        global_step=2,
        turns=turns,
        initial_prompt_token_ids=[1, 2, 3],
        agent_metrics={"generate_sequences": 1.5, "nested": {"a": [1, 2]}},
    )


def test_to_dict_matches_dataclasses_asdict_and_is_a_copy(traced):
    trajectory = sample_trajectory(traced)
    as_dict = trajectory.to_dict()
    assert as_dict == dataclasses.asdict(trajectory)
    assert list(as_dict) == [name for name, _ in TRAJECTORY_FIELDS]
    as_dict["agent_metrics"]["nested"]["a"].append(3)
    as_dict["turns"][0]["completion_token_ids"].append(99)
    assert trajectory.agent_metrics["nested"]["a"] == [1, 2]
    assert trajectory.turns[0].completion_token_ids == [1, 2]


def test_to_json_is_compact_and_keeps_unicode(traced):
    trajectory = sample_trajectory(traced)
    expected = json.dumps(dataclasses.asdict(trajectory), ensure_ascii=False, separators=(",", ":"))
    assert trajectory.to_json() == expected
    assert "héllo" in expected and "工具" in expected and ", " not in expected
    turn = trajectory.turns[1]
    assert turn.to_json() == json.dumps(dataclasses.asdict(turn), ensure_ascii=False, separators=(",", ":"))


def test_to_json_converts_non_json_values(traced):
    import numpy as np  # a test dependency: pip install -e '.[test]'

    trajectory = traced.Trajectory(request_id="0", global_step=np.int64(3), agent_metrics={"t": np.float32(1.5)})
    assert '"global_step":3' in trajectory.to_json() and '"agent_metrics":{"t":1.5}' in trajectory.to_json()
    assert traced.Turn(turn_index=0, completion_token_ids=np.arange(2)).to_json().count('"completion_token_ids":[0,1]')


def test_json_round_trip(traced):
    trajectory = sample_trajectory(traced)
    restored = traced.Trajectory.from_json(trajectory.to_json())
    assert restored == trajectory
    assert all(isinstance(turn, traced.Turn) for turn in restored.turns)
    assert traced.Turn.from_json(trajectory.turns[0].to_json()) == trajectory.turns[0]


def test_from_dict_ignores_unknown_keys_and_does_not_mutate_input(traced):
    data = {
        "request_id": "1",
        "rank_id": 1234,
        "future_field": True,
        "turns": [{"turn_index": 0, "old_turn_field": "x", "finish_reason": "stop"}],
    }
    snapshot = json.loads(json.dumps(data))
    trajectory = traced.Trajectory.from_dict(data)
    assert trajectory.request_id == "1"
    assert trajectory.turns == [traced.Turn(turn_index=0, finish_reason="stop")]
    assert data == snapshot
    assert traced.Turn.from_dict({"turn_index": 2, "bogus": 1}) == traced.Turn(turn_index=2)


# -- TurnRecord --------------------------------------------------------------------


@pytest.fixture
def clock(traced):
    now = [1000.0]
    traced.settings.clock = lambda: now[0]
    return now


def test_turn_record_start_and_end(traced, clock):
    record = traced.TurnRecord([5, 6, 7], rid="rid-1")
    assert record._prompt_ids == [5, 6, 7]
    assert record.turn == traced.Turn(turn_index=-1, prompt_token_count=3, start_ts=1000.0, sglang_rid="rid-1")
    clock[0] = 1000.25
    record.stamp_end()
    assert record.turn.end_ts == 1000.25 and record.turn.completion_time_ms == 250.0
    assert traced.TurnRecord(None).turn.prompt_token_count == 0
    assert traced.TurnRecord([]).turn.prompt_token_count == 0


def test_mark_skipped(traced, clock):
    record = traced.TurnRecord([1])
    clock[0] = 1000.5
    record.mark_skipped()
    assert (record.turn.finish_reason, record.turn.end_ts, record.turn.completion_time_ms) == ("length", 1000.5, 500.0)
    record.mark_skipped("abort")
    assert record.turn.finish_reason == "abort"


def test_fill_sglang_response_with_full_metrics(traced):
    record = traced.TurnRecord([1, 2])
    meta = {
        "completion_tokens": 3,
        "e2e_latency": 2.0,
        "request_received_ts": 100.0,
        "prefill_finished_ts": 100.25,
        "queue_time": 0.5,
        "prefill_launch_latency": 0.125,
    }
    record.fill_sglang_response("out", [7, 8, 9], "stop", meta)
    turn = record.turn
    assert (turn.completion_text, turn.completion_token_ids, turn.finish_reason) == ("out", [7, 8, 9], "stop")
    assert turn.completion_token_count == 3
    assert turn.sglang_time_ms == 2000.0
    assert turn.sglang_ttft_ms == 250.0
    assert turn.sglang_queue_time_ms == 500.0
    assert turn.sglang_prefill_ms == 125.0
    assert turn.sglang_decode_time_ms == 1250.0


def test_fill_sglang_response_without_metrics(traced):
    record = traced.TurnRecord([1])
    record.fill_sglang_response("out", [7], "length", {"e2e_latency": 1.5})
    turn = record.turn
    assert turn.completion_token_count is None
    assert (turn.sglang_time_ms, turn.sglang_decode_time_ms) == (1500.0, 1500.0)
    assert turn.sglang_ttft_ms is turn.sglang_queue_time_ms is turn.sglang_prefill_ms is None
    record.fill_sglang_response("out", [7], "stop", {})
    assert record.turn.sglang_time_ms is None and record.turn.sglang_decode_time_ms == 1500.0  # left as it was


def test_decode_time_is_clamped_at_zero(traced):
    record = traced.TurnRecord([1])
    record.fill_sglang_response("", [], "stop", {"e2e_latency": 0.1, "queue_time": 0.2})
    assert record.turn.sglang_decode_time_ms == 0


class FakeTokenizer:
    def encode(self, text, add_special_tokens=True):
        assert add_special_tokens is False
        return [ord(ch) for ch in text]

    def decode(self, ids, skip_special_tokens=True):
        assert skip_special_tokens is False
        return "".join(f"<{i}>" for i in ids)


def test_patch_observation_collects_tool_messages(traced, clock):
    record = traced.TurnRecord([1, 2])
    clock[0] = 1000.5
    record.stamp_end()
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "call"},
        {"role": "tool", "content": "r1"},
        {"role": "function", "content": [{"type": "text", "text": "a"}, "b", {"type": "image"}]},
        {"role": "tool", "content": None},
        {"role": "assistant", "content": "ignored"},
    ]
    clock[0] = 1001.0
    record.patch_observation(messages, 1, len(messages), tokenizer=FakeTokenizer())
    turn = record.turn
    assert turn.observation_text == "r1\na\nb\n\n"
    assert turn.observation_token_ids == [ord(ch) for ch in "r1\na\nb\n\n"]
    assert (turn.observation_start_ts, turn.observation_end_ts) == (1000.5, 1001.0)
    assert turn.observation_time_ms == 500.0
    assert turn.turn_total_time_ms == 1000.0  # 500 completion + 500 observation


def test_patch_observation_edge_cases(traced, clock):
    record = traced.TurnRecord([1])
    record.patch_observation([{"role": "tool", "content": "x"}], 1, 1)
    assert record.turn.observation_text is None  # nothing new
    record.patch_observation([{"role": "assistant", "content": "x"}], 0, 1)
    assert record.turn.observation_text is None  # no tool message
    record.patch_observation([{"role": "tool", "content": "x"}], 0, 1)  # end_ts never stamped
    turn = record.turn
    assert (turn.observation_text, turn.observation_token_ids) == ("x", None)
    assert turn.observation_start_ts is None and turn.observation_time_ms is None
    assert turn.turn_total_time_ms == turn.completion_time_ms == 0.0


def test_patch_observation_survives_a_failing_tokenizer(traced, clock):
    class BrokenTokenizer:
        def encode(self, *args, **kwargs):
            raise RuntimeError("boom")

    record = traced.TurnRecord([1])
    record.patch_observation([{"role": "tool", "content": "x"}], 0, 1, tokenizer=BrokenTokenizer())
    assert record.turn.observation_text == "x" and record.turn.observation_token_ids is None
