"""The JSON Schemas editors use and the loader users see agree on what a spec file is.

Every shipped spec is valid under both. Every fixture in tests/fixtures/spec/<case>/
(anchors/user.yaml plus verdict.yaml) is rejected by the loader with the problem its
verdict names (file:line (key): message) and by the schema at the place it names; the
few that only the loader can tell (ids across files, Python that does not parse, ...)
are marked `schema: valid` with the reason, so that list is explicit and checked too.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from support import TESTS

from trace_instrument.model import EXTRAS, FACILITIES
from trace_instrument.spec import SpecError, load_catalog, loader, overrides, paths, reading

ROOT = TESTS.parent
SPEC_DIR = ROOT / "trace_instrument" / "spec"
ANCHORS_SCHEMA = SPEC_DIR / "anchors.schema.json"
CATALOG_SCHEMA = SPEC_DIR / "catalog.schema.json"
FIXTURES = TESTS / "fixtures" / "spec"
SHIPPED_YAML = sorted((ROOT / "anchors").glob("*.yaml")) + sorted((ROOT / "examples").rglob("*.yaml"))
MODELINE = re.compile(r"^# yaml-language-server: \$schema=(\S+)$")


def _schema(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _validator(spec_file: Path) -> jsonschema.Draft7Validator:
    schema = CATALOG_SCHEMA if spec_file.name == "_catalog.yaml" else ANCHORS_SCHEMA
    return jsonschema.Draft7Validator(_schema(schema))


def _schema_errors(spec_file: Path) -> list[jsonschema.ValidationError]:
    data = yaml.safe_load(spec_file.read_text(encoding="utf-8"))
    return list(_validator(spec_file).iter_errors(data))


def _error_paths(errors: list[jsonschema.ValidationError]) -> set[str]:
    """The data path of every error, with those inside oneOf/anyOf branches."""
    paths: set[str] = set()
    pending = list(errors)
    while pending:
        error = pending.pop()
        paths.add("/".join(str(part) for part in error.absolute_path))
        pending.extend(error.context or [])
    return paths


# -- the schemas themselves ------------------------------------------------------------


@pytest.mark.parametrize("path", [ANCHORS_SCHEMA, CATALOG_SCHEMA], ids=lambda p: p.name)
def test_the_schemas_are_valid_draft_7(path: Path) -> None:
    jsonschema.Draft7Validator.check_schema(_schema(path))


def test_the_schemas_ship_inside_the_package() -> None:
    # the wheel takes the whole trace_instrument/ folder, so files inside it are installed
    assert paths.schema_path() == ANCHORS_SCHEMA and paths.schema_path("catalog") == CATALOG_SCHEMA
    assert ANCHORS_SCHEMA.parent == ROOT / "trace_instrument" / "spec"


def _properties(definition: dict[str, Any]) -> set[str]:
    return set(definition["properties"])


def test_the_schema_knows_exactly_the_loaders_keys() -> None:
    schema = _schema(ANCHORS_SCHEMA)
    defs = schema["definitions"]
    assert _properties(schema) == loader.FILE_KEYS
    assert _properties(defs["point"]) == loader.POINT_KEYS
    assert set(defs["point"]["required"]) == set(loader.REQUIRED_POINT_KEYS)
    assert _properties(defs["edit"]) == reading.EDIT_KEYS
    assert _properties(defs["anchor"]) == reading.ANCHOR_KEYS
    assert _properties(defs["placedEdit"]) == reading.PLACE_KEYS
    assert _properties(defs["override"]) == overrides.OVERRIDE_KEYS
    catalog = _schema(CATALOG_SCHEMA)
    assert _properties(catalog) == loader.CATALOG_KEYS
    assert _properties(catalog["properties"]["runtime"]) == loader.RUNTIME_KEYS


def test_the_schema_names_the_models_facilities_and_extras() -> None:
    point = _schema(ANCHORS_SCHEMA)["definitions"]["point"]["properties"]
    assert point["facility"]["enum"] == list(FACILITIES)
    assert point["extra"]["enum"] == list(EXTRAS)


def test_the_schema_uses_the_loaders_id_and_scope_patterns() -> None:
    defs = _schema(ANCHORS_SCHEMA)["definitions"]
    assert defs["pointId"]["pattern"] == reading.POINT_ID.pattern
    assert defs["scope"]["pattern"] == reading.SCOPE.pattern


@pytest.mark.parametrize(
    "path",
    [
        "verl/trainer/ppo/ray_trainer.py",
        "x.py",
        "./verl/x.py",
        "verl/..x/y.py",
        "../outside.py",
        "verl/../../x.py",
        "verl/..",
        "/etc/passwd.py",
        "verl\\x.py",
        "verl/notes.txt",
        "",
    ],
)
def test_schema_and_loader_agree_on_target_paths(path: str) -> None:
    pattern = _schema(ANCHORS_SCHEMA)["properties"]["file"]["pattern"]
    loader_accepts = reading.is_safe_relative(path) and path.endswith(".py")
    assert (re.search(pattern, path) is not None) == loader_accepts


# -- shipped files ----------------------------------------------------------------------------


def test_every_shipped_spec_is_listed() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in SHIPPED_YAML}
    assert "anchors/_catalog.yaml" in names and "anchors/env.yaml" in names
    assert "examples/anchors/my_agent_loop.yaml" in names and "examples/overrides/renamed_reward_extras.yaml" in names
    assert len([n for n in names if n.startswith("anchors/")]) == 14


@pytest.mark.parametrize("spec_file", SHIPPED_YAML, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_shipped_spec_is_valid_under_the_schema(spec_file: Path) -> None:
    errors = _schema_errors(spec_file)
    assert not errors, [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors]


@pytest.mark.parametrize("folder", [None, ROOT / "examples" / "anchors", ROOT / "examples" / "overrides"])
def test_every_shipped_spec_loads(folder: Path | None) -> None:
    catalog = load_catalog([folder] if folder else None)
    assert len(catalog.points) == 98 + (3 if folder == ROOT / "examples" / "anchors" else 0)


@pytest.mark.parametrize("spec_file", SHIPPED_YAML, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_shipped_spec_names_its_schema_on_line_one(spec_file: Path) -> None:
    first = spec_file.read_text(encoding="utf-8").splitlines()[0]
    match = MODELINE.match(first)
    assert match, f"{spec_file}: line 1 is not the yaml-language-server modeline"
    expected = CATALOG_SCHEMA if spec_file.name == "_catalog.yaml" else ANCHORS_SCHEMA
    assert (spec_file.parent / match.group(1)).resolve() == expected


# -- invalid fixtures ---------------------------------------------------------------------------


def _cases() -> list[Any]:
    return [pytest.param(case, id=case.name) for case in sorted(FIXTURES.iterdir()) if case.is_dir()]


def _verdict(case: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((case / "verdict.yaml").read_text(encoding="utf-8"))
    return data


def test_there_are_fixtures_of_both_kinds() -> None:
    verdicts = [_verdict(param.values[0]) for param in _cases()]
    assert len([v for v in verdicts if v["schema"] != "valid"]) >= 30
    assert len([v for v in verdicts if v["schema"] == "valid"]) >= 10
    assert all(v.get("why") for v in verdicts if v["schema"] == "valid")


@pytest.mark.parametrize("case", _cases())
def test_the_loader_rejects_the_fixture_naming_file_line_and_key(case: Path) -> None:
    verdict = _verdict(case)
    folder = case / "anchors"
    with pytest.raises(SpecError) as caught:
        load_catalog([folder], shipped=bool(verdict.get("shipped")))
    problems = [str(p).replace(f"{folder}/", "") for p in caught.value.problems]
    assert any(p.startswith(verdict["loader"]) for p in problems), problems


@pytest.mark.parametrize("case", _cases())
def test_the_schema_rejects_the_fixture_where_the_verdict_says(case: Path) -> None:
    verdict = _verdict(case)
    errors = _schema_errors(case / "anchors" / "user.yaml")
    if verdict["schema"] == "valid":
        assert not errors, f"the schema now rejects it too: make the verdict say where ({_error_paths(errors)})"
    else:
        assert errors, "the schema accepts a file the loader rejects"
        assert verdict["schema"] in _error_paths(errors)


# -- the modeline and the loader's line numbers ------------------------------------------------------


def _line_of(text: str, needle: str) -> int:
    """1-based number of the only line containing needle."""
    hits = [number for number, line in enumerate(text.splitlines(), start=1) if needle in line]
    assert len(hits) == 1, hits
    return hits[0]


def test_the_modeline_does_not_shift_the_loaders_line_numbers(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    shipped = (ROOT / "anchors" / "env.yaml").read_text(encoding="utf-8")
    assert MODELINE.match(shipped.splitlines()[0])
    broken = shipped.replace(
        "    scope: RayWorkerGroup._create_worker\n",
        "    scope: RayWorkerGroup._create_worker\n    colour: red\n",
    ).replace('env_vars["VERL_TRACE_DIR"] = os.environ["VERL_TRACE_DIR"]', 'env_vars["VERL_TRACE_DIR"] = (')
    (folder / "env.yaml").write_text(broken, encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_catalog([folder], shipped=False)
    problems = [str(p) for p in caught.value.problems]
    key_line = _line_of(broken, "colour: red")
    code_line = _line_of(broken, 'env_vars["VERL_TRACE_DIR"] = (')
    assert f"env.yaml:{key_line} (colour): unknown key 'colour'" in "\n".join(problems)
    assert any(f"env.yaml:{code_line} (code)" in p and "does not parse" in p for p in problems), problems


def test_a_shipped_file_copied_as_a_user_spec_loads_as_it_is(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(ROOT / "anchors" / "env.yaml", folder / "env.yaml")
    catalog = load_catalog([folder], shipped=False)
    point = catalog.point("env.worker-group")
    text = (folder / "env.yaml").read_text(encoding="utf-8")
    assert point.source.line == _line_of(text, "- id: env.worker-group")


# -- docs/anchors.md ------------------------------------------------------------------------------------

DOCS = ROOT / "docs" / "anchors.md"
WORKED_EXAMPLE = re.compile(r"<!-- worked-example: (\S+) -->\n```yaml\n(.*?)```", re.DOTALL)


def _yaml_blocks(text: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)


def test_every_yaml_example_in_the_docs_is_yaml() -> None:
    blocks = _yaml_blocks(DOCS.read_text(encoding="utf-8"))
    assert len(blocks) >= 30
    for block in blocks:
        yaml.safe_load(block)


def _shipped_entry(file: str, point_id: str) -> dict[str, Any]:
    for spec_file in sorted((ROOT / "anchors").glob("*.yaml")):
        data = yaml.safe_load(spec_file.read_text(encoding="utf-8"))
        if data.get("file") == file:
            for entry in data["points"]:
                if entry.get("id") == point_id:
                    result: dict[str, Any] = entry
                    return result
    raise AssertionError(f"{point_id} is not declared for {file} in anchors/")


def test_the_worked_examples_are_the_shipped_points() -> None:
    examples = WORKED_EXAMPLE.findall(DOCS.read_text(encoding="utf-8"))
    assert [point_id for point_id, _ in examples] == ["env.worker-group", "traj.c1.central-dump"]
    for point_id, block in examples:
        data = yaml.safe_load(block)
        assert [entry["id"] for entry in data["points"]] == [point_id]
        assert data["points"][0] == _shipped_entry(data["file"], point_id), f"docs/anchors.md: {point_id} differs"
        errors = list(jsonschema.Draft7Validator(_schema(ANCHORS_SCHEMA)).iter_errors(data))
        assert not errors, [e.message for e in errors]


def test_the_readme_links_the_docs() -> None:
    assert "(docs/anchors.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
