"""Anchor specs and templates are validated at load; every problem names file, line and key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from trace_instrument.spec import SpecError, load_catalog

GOOD_POINT = """
  - id: user.point
    facility: progress
    title: a user point
    scope: f
    after: |
      x = 1
    code: |
      log_progress('x')
"""


def _load(tmp_path: Path, body: str, *, files: dict[str, str] | None = None):
    folder = tmp_path / "anchors"
    folder.mkdir(exist_ok=True)
    (folder / "user.yaml").write_text(textwrap.dedent(body).lstrip("\n"), encoding="utf-8")
    templates = tmp_path / "templates"
    for name, text in (files or {}).items():
        (templates / name).parent.mkdir(parents=True, exist_ok=True)
        (templates / name).write_text(text, encoding="utf-8")
    return load_catalog([folder], templates_dir=templates if files else None, shipped=False)


def _problems(tmp_path: Path, body: str, **kwargs) -> list[str]:
    with pytest.raises(SpecError) as caught:
        _load(tmp_path, body, **kwargs)
    return [str(p) for p in caught.value.problems]


def test_a_good_spec_loads(tmp_path):
    catalog = _load(tmp_path, "file: verl/target.py\npoints:" + GOOD_POINT)
    assert [p.id for p in catalog.points] == ["user.point"]


def test_unknown_key_is_named_with_file_and_line(tmp_path):
    problems = _problems(tmp_path, "file: verl/target.py\npoints:" + GOOD_POINT + "    colour: red\n")
    assert any("user.yaml:11 (colour): unknown key 'colour'" in p for p in problems), problems


def test_missing_required_key(tmp_path):
    body = "file: verl/target.py\npoints:" + GOOD_POINT.replace("    scope: f\n", "")
    assert any("missing required key 'scope'" in p and "user.yaml:3" in p for p in _problems(tmp_path, body))


def test_code_that_does_not_parse_names_its_line(tmp_path):
    body = "file: verl/target.py\npoints:" + GOOD_POINT.replace("log_progress('x')", "log_progress('x'")
    problems = _problems(tmp_path, body)
    assert any("user.yaml:10 (code)" in p and "does not parse" in p for p in problems), problems


def test_template_file_that_does_not_parse(tmp_path):
    body = "file: verl/target.py\npoints:" + GOOD_POINT.replace(
        "    code: |\n      log_progress('x')\n", "    template: points/bad.py\n"
    )
    problems = _problems(tmp_path, body, files={"points/bad.py": "log_progress(\n"})
    assert any("templates/points/bad.py" in p and "does not parse" in p for p in problems), problems


@pytest.mark.parametrize("target", ["../outside.py", "/etc/passwd.py", "verl/../../x.py", "verl/notes.txt"])
def test_target_files_outside_the_checkout_are_refused(tmp_path, target):
    problems = _problems(tmp_path, f"file: {target}\npoints:" + GOOD_POINT)
    assert any("user.yaml:1 (file)" in p and "inside the checkout" in p for p in problems), problems


def test_template_path_traversal_is_refused(tmp_path):
    body = "file: verl/target.py\npoints:" + GOOD_POINT.replace(
        "    code: |\n      log_progress('x')\n", "    template: ../../etc/passwd\n"
    )
    assert any("(template)" in p and "inside templates/" in p for p in _problems(tmp_path, body))


def test_duplicate_ids_name_both_places(tmp_path):
    problems = _problems(tmp_path, "file: verl/target.py\npoints:" + GOOD_POINT + GOOD_POINT)
    assert any("duplicate id 'user.point' (first declared at" in p for p in problems), problems


def test_unknown_facility_extra_and_requires(tmp_path):
    body = (
        "file: verl/target.py\npoints:"
        + GOOD_POINT.replace("facility: progress", "facility: telemetry")
        + ("    requires: [no.such.point]\n    extra: turbo\n")
    )
    problems = "\n".join(_problems(tmp_path, body))
    assert "unknown facility 'telemetry'" in problems
    assert "unknown extra 'turbo'" in problems
    assert "requires unknown point 'no.such.point'" in problems


def test_an_anchor_needs_exactly_one_place(tmp_path):
    body = "file: verl/target.py\npoints:" + GOOD_POINT.replace("    after: |\n      x = 1\n", "")
    assert any("needs exactly one of" in p for p in _problems(tmp_path, body))


def test_a_point_nothing_recognises_is_refused(tmp_path):
    body = "file: verl/target.py\npoints:" + GOOD_POINT.replace("log_progress('x')", "y = 2")
    assert any("declare a 'marker'" in p for p in _problems(tmp_path, body))


def test_rewrites_must_say_how_they_change_behaviour(tmp_path):
    body = """
    file: verl/target.py
    points:
      - id: user.rewrite
        facility: trajectory
        title: wraps a call
        scope: f
        rewrite: |
          run()
        code: |
          try:
              __anchor_0__
          finally:
              log_progress('done')
    """
    assert any("changes_behaviour" in p for p in _problems(tmp_path, body))


def test_not_yaml_at_all(tmp_path):
    problems = _problems(tmp_path, "file: [unclosed\n")
    assert any("user.yaml" in p and "not valid YAML" in p for p in problems)


def test_the_shipped_catalog_loads_and_is_complete():
    catalog = load_catalog()
    core = [p for p in catalog.points if p.extra is None]
    assert len(core) == 94 and len(catalog.points) == 98
    assert {p.facility for p in core} == {"sample_flow", "progress", "trajectory", "env"}
    assert {p.extra for p in catalog.points if p.extra} == {"sglang-timing", "reward-score-metric"}
    assert [name for name, _ in catalog.runtime.files] == [
        "__init__.py",
        "files.py",
        "formats.py",
        "losses.py",
        "process.py",
        "progress.py",
        "safety.py",
        "settings.py",
        "streams.py",
        "trace.py",
        "trajectory_store.py",
        "trajectory_tracker.py",
        "trajectory_types.py",
        "writer.py",
    ]
    assert catalog.validated_on


# -- the runtime's templates are compiled at load, unless this Python compiled them unchanged before


def _source(tmp_path: Path, text: str, age: float = 10.0) -> Path:
    import os
    import time

    path = tmp_path / "module.py"
    path.write_text(text, encoding="utf-8")
    then = time.time() - age
    os.utime(path, (then, then))
    return path


def test_a_template_compiled_before_and_unchanged_since_is_not_compiled_again(tmp_path):
    import py_compile

    from trace_instrument.spec.loader import compiled_before

    path = _source(tmp_path, "x = 1\n")
    assert not compiled_before(path, path.read_bytes()), "no byte-code cache: compile it"
    py_compile.compile(str(path), doraise=True)
    assert compiled_before(path, path.read_bytes())
    path.write_text("x = (\n", encoding="utf-8")  # edited since: same size, a new time
    assert not compiled_before(path, path.read_bytes())


def test_a_cache_written_in_the_second_its_source_was_is_not_trusted(tmp_path):
    import py_compile

    from trace_instrument.spec.loader import compiled_before

    path = _source(tmp_path, "x = 1\n", age=0.0)
    py_compile.compile(str(path), doraise=True)
    # an edit of the same size in this same second would keep the time the cache records
    assert not compiled_before(path, path.read_bytes())


def test_a_hash_based_cache_is_trusted_for_its_own_source_only(tmp_path):
    import py_compile

    from trace_instrument.spec.loader import compiled_before

    path = _source(tmp_path, "x = 1\n", age=0.0)
    py_compile.compile(str(path), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    assert compiled_before(path, path.read_bytes())
    assert not compiled_before(path, b"x = (\n")
