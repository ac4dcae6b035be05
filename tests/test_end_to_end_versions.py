"""The same catalog on verl 0.9.1 (newer: context moved) and 0.8.0 (older: no v1 trainer)."""

from __future__ import annotations

import pytest
from support import copy_tree, tree_bytes

from trace_instrument.engine.apply import apply
from trace_instrument.engine.check import check
from trace_instrument.engine.remove import remove
from trace_instrument.engine.verify import verify
from trace_instrument.model import Status


@pytest.fixture(params=["0.9.1", "0.8.0"])
def release(request, verl_release):
    return request.param, verl_release(request.param)


def test_apply_check_verify_remove(release, tmp_path, catalog):
    version, pristine = release
    root = copy_tree(pristine, tmp_path / version)
    result = apply(root, catalog)
    assert result.written and not result.error
    statuses = {p.point_id: p.status for p in result.points}
    v1 = {p.id for p in catalog.points if p.extra is None and "/ppo/v1/" in p.file}
    if version == "0.8.0":
        assert {i for i, s in statuses.items() if s is Status.NOT_APPLICABLE} == v1
        assert {s for i, s in statuses.items() if i not in v1} == {Status.APPLIED}
    else:
        assert set(statuses.values()) == {Status.APPLIED}
    once, original = tree_bytes(root), tree_bytes(pristine)
    changed = [path for path, data in once.items() if original.get(path) != data]
    assert changed
    for path in changed:
        compile((root / path).read_bytes(), path, "exec")
    assert not apply(root, catalog).written and tree_bytes(root) == once
    checked = {p.point_id: p.status for p in check(root, catalog).points}
    in_place = {point_id: Status.PRESENT if s is Status.APPLIED else s for point_id, s in statuses.items()}
    assert checked == in_place
    proof = verify(root, catalog)
    assert proof.ok, [f for f in proof.findings if not f.ok]
    assert remove(root, catalog).written
    assert tree_bytes(root) == original


def test_v1_helper_moved_on_091_is_placed_by_its_anchor(verl_091, tmp_path, catalog):
    root = copy_tree(verl_091, tmp_path / "c")
    apply(root, catalog)
    text = (root / "verl/trainer/ppo/v1/trainer_base.py").read_text()
    helper = text.index("def _trace_ids_from_batch(")
    assert (
        text.index('logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))')
        < helper
        < text.index("def _count_tq_prompt_groups(")
    )


def test_alternative_anchors_on_080(verl_080, tmp_path, catalog):
    root = copy_tree(verl_080, tmp_path / "c")
    apply(root, catalog)
    constants = (root / "verl/trainer/constants_ppo.py").read_text()
    assert constants.index('for _trace_env_key in ("VERL_TRACE_DIR",):') < constants.index("    return runtime_env")
    tools = (root / "verl/experimental/agent_loop/tool_agent_loop.py").read_text()
    assert tools.index("new_images_this_turn: list[Any] = []") < tools.index(
        "_trace_pre_msg_len = len(agent_data.messages)"
    )
    assert tools.index("_trace_pre_msg_len = len(agent_data.messages)") < tools.index(
        "agent_data.messages.extend(add_messages)"
    )
