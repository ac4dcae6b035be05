"""The trace reader's one vocabulary of events: the SQL names events, never their bare codes, and
the stage/detail mapping of sql/events.sql (rendered from the runtime's format) agrees with the
names in traces/events.py."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from trace_instrument.traces.backend import Dialect
from trace_instrument.traces.events import EVENT_NAMES, Event, event_codes_in

SQL = resources.files("trace_instrument.traces") / "sql"
# a code column compared with, listed beside or ranged over a number literal
BARE_CODE = re.compile(r"\b\w*code\s*(?:=|<>|<=|>=|<|>|IN\s*\(|BETWEEN)\s*\d", re.IGNORECASE)


def _sql_files() -> dict[str, str]:
    found: dict[str, str] = {}
    for entry in SQL.iterdir():
        if entry.name.endswith(".sql"):
            found[entry.name] = entry.read_text(encoding="utf-8")
        elif entry.is_dir():
            for inner in entry.iterdir():
                if inner.name.endswith(".sql"):
                    found[f"{entry.name}/{inner.name}"] = inner.read_text(encoding="utf-8")
    return found


def test_no_sql_file_compares_a_code_with_a_number() -> None:
    offenders = {name: BARE_CODE.findall(text) for name, text in _sql_files().items() if BARE_CODE.search(text)}
    assert offenders == {}
    # and the check would see one
    assert BARE_CODE.search("WHERE code IN (5, 6)") and BARE_CODE.search("e.code <> 19")


def test_every_event_named_in_sql_exists_and_expands_to_its_code() -> None:
    for name, text in _sql_files().items():
        expanded = event_codes_in(text)
        assert "{{event(" not in expanded.replace(" ", ""), name
    assert event_codes_in("code IN ({{event(AGENT_TASK_STARTED, SESSION_STARTED)}})") == "code IN (5, 6)"
    with pytest.raises(KeyError):
        event_codes_in("{{event(AGENT_TASK_STRATED)}}")


def test_the_stage_detail_mapping_gives_each_event_its_own_name() -> None:
    """Each arm of events.sql's mapping (``{{event_of(p.stage, p.detail)}}``, rendered from the
    runtime's format) names an event whose stage is the arm's, and every event of the vocabulary
    is mapped exactly once; no arm is shadowed by another."""
    text = (SQL / "events.sql").read_text(encoding="utf-8")
    assert "{{event_of(p.stage, p.detail)}} AS code" in text
    mapping = Dialect().event_of("p.stage", "p.detail")
    arms = re.findall(r"WHEN p\.stage = '([A-Z_]+)'(?: AND p\.detail (=|LIKE) '([^']*)')? THEN (\d+)", mapping)
    assert len(arms) == mapping.count("WHEN ") and len({stage for stage, *_ in arms}) >= 10
    conditions = [(stage, how, written) for stage, how, written, _ in arms]
    assert len(set(conditions)) == len(conditions), "an arm as another never matches"
    for stage, how, _, _ in arms:
        alone = [c for c in conditions if c[0] == stage]
        assert how or alone == [(stage, "", "")], f"{stage}: a stage alone is one event, no other arm has it"
    mapped: list[Event] = []
    for stage, how, written, code in arms:
        event = Event(int(code))
        assert EVENT_NAMES[event].split(":", 1)[0] == stage, (stage, event.name)
        detail = EVENT_NAMES[event].partition(":")[2]
        # an arm that tells details apart names this event's (a stage alone: any detail is it)
        assert not how or detail.split("_computed")[0] in written, (stage, event.name)
        mapped.append(event)
    assert sorted(mapped) == sorted(Event)
    assert set(EVENT_NAMES) == set(Event)
