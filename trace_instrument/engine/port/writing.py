"""Writing the override files: one per verl file, stamped, a person's edits kept."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

import yaml

from trace_instrument.engine.files import CheckoutError
from trace_instrument.model import (
    Anchor,
    Catalog,
    Edit,
    Point,
    PortSuggestion,
    RunErrorKind,
)

PORT_HEADER = "# written by `trace-instrument port`: overrides that re-anchor points in this verl\n"


# -- writing ------------------------------------------------------------------------------------------


def override_file_name(verl_file: str) -> str:
    """The override file port writes for a verl file (`verl/trainer/x.py` -> `verl.trainer.x.yaml`)."""
    return verl_file.removesuffix(".py").replace("/", ".") + ".yaml"


def _override_files(folder: Path, catalog: Catalog, suggestions: Iterable[PortSuggestion]) -> dict[str, str]:
    """The text of each override file: the entries port wrote there before (for other points) kept."""
    by_file: dict[str, list[PortSuggestion]] = {}
    for suggestion in suggestions:
        by_file.setdefault(suggestion.file, []).append(suggestion)
    ported = {s.point_id for s in suggestions}
    # a file port wrote before that overrides a point now ported elsewhere (it moved file) loses it
    for earlier in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        if any(e.get("overrides") in ported for e in _earlier_entries(earlier)):
            target = yaml.safe_load(earlier.read_text(encoding="utf-8")).get("file")
            if isinstance(target, str):
                by_file.setdefault(target, [])
    files = {}
    for verl_file, entries in by_file.items():
        name = override_file_name(verl_file)
        new = {s.point_id: _entry(catalog.point(s.point_id), s) for s in entries}
        # an entry for a point now ported to another file goes; one written again keeps its place
        before = [e for e in _earlier_entries(folder / name) if e.get("overrides") not in ported - set(new)]
        body = {"file": verl_file, "points": _merged(before, new)}
        files[name] = _stamped(yaml.dump(body, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100))
    return files


_STAMP = "# port's checksum of what follows (a file edited since is kept as it is): "


def _stamped(body: str) -> str:
    """An override file's text: port's header, the checksum of its body, the body."""
    return f"{PORT_HEADER}{_STAMP}{_checksum(body)}\n{body}"


def _checksum(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def _edited(text: str) -> bool:
    """Was a file port wrote edited since (its body no longer has the checksum port wrote)? A file
    written before port stamped its files cannot tell: not edited."""
    rest = text.removeprefix(PORT_HEADER)
    first, _, body = rest.partition("\n")
    if not first.startswith(_STAMP):
        return False
    return first.removeprefix(_STAMP) != _checksum(body)


def _merged(earlier: list[dict[str, object]], new: dict[str, dict[str, object]]) -> list[dict[str, object]]:
    """The earlier entries with each point written again in its place (a second run changes no
    line), then the points new to the file."""
    merged = []
    for entry in earlier:
        point_id = entry.get("overrides")
        if point_id not in new:
            merged.append(entry)
        elif not any(e.get("overrides") == point_id for e in merged):
            merged.append(new[str(point_id)])
    return merged + [e for point_id, e in new.items() if not any(m.get("overrides") == point_id for m in merged)]


def _entry(point: Point, suggestion: PortSuggestion) -> dict[str, object]:
    """The override of one point: its new scope and, where an anchor changed, every edit's anchors."""
    entry: dict[str, object] = {"overrides": suggestion.point_id}
    if suggestion.new_scope != point.scope:
        entry["scope"] = suggestion.new_scope
    if suggestion.bindings:
        entry["bind"] = dict(suggestion.bindings)
    if any(suggestion.anchors) or any(suggestion.insides):
        insides = suggestion.insides or ("",) * len(point.edits)
        anchors = zip(point.edits, suggestion.anchors, insides)
        edits = [_anchors_entry(edit, text, inside) for edit, text, inside in anchors]
        if len(edits) == 1:
            entry.update(edits[0])
        else:
            entry["edits"] = edits
    if suggestion.confidence is not None:  # for the review: apply --dry-run shows it beside the hunk
        entry["ported"] = {"confidence": suggestion.confidence.value, "evidence": suggestion.evidence}
    return entry


def _anchors_entry(edit: Edit, text: str, inside: str = "") -> dict[str, object]:
    """An edit's anchors as the spec language writes them: the first (its text replaced by `text`
    when given, inside `inside` when given; its alternatives then go: they were not what matched)
    and its alternatives."""
    first, *others = edit.anchors
    entry = _anchor_keys(first, text or first.target.text)
    if inside:
        entry["inside"] = inside.rstrip("\n") + "\n"
    if not text and not inside and others:
        entry["alternatives"] = [_anchor_keys(a, a.target.text) for a in others]
    return entry


def _anchor_keys(anchor: Anchor, text: str) -> dict[str, object]:
    keys: dict[str, object] = {anchor.kind.value: text.rstrip("\n") + "\n"}
    if anchor.inside is not None:
        keys["inside"] = anchor.inside.text.rstrip("\n") + "\n"
    if anchor.expr is not None:
        keys["expr"] = anchor.expr.text
    return keys


class _Dumper(yaml.SafeDumper):
    """Code as literal blocks (`|`), as a person writes a spec."""


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_Dumper.add_representer(str, _represent_text)


def _earlier_entries(path: Path) -> list[dict[str, object]]:
    """The entries of an override file port wrote before (none from a file it did not write)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    if not text.startswith(PORT_HEADER):
        return []
    data = yaml.safe_load(text)
    points = data.get("points", []) if isinstance(data, dict) else []
    return [p for p in points if isinstance(p, dict)]


def _write(
    folder: Path, catalog: Catalog, suggestions: list[PortSuggestion]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Write the override files into `folder` (made when missing): the files written, and those port
    wrote before that a person edited since, kept as they are (a person's word beats port's)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    kept = []
    for name, text in _override_files(folder, catalog, suggestions).items():
        target = folder / name
        earlier = target.read_text(encoding="utf-8") if target.exists() else None
        if earlier is not None and not earlier.startswith(PORT_HEADER):
            raise CheckoutError(
                f"{target}: not written by port; move it away or choose another --out",
                run_kind=RunErrorKind.WRITE_FAILED,
            )
        if earlier is not None and _edited(earlier):
            kept.append(str(target))
            continue
        staging = target.with_name(f".{name}.{os.getpid()}.tmp")
        staging.write_text(text, encoding="utf-8")
        staging.replace(target)
        written.append(str(target))
    return tuple(written), tuple(kept)
