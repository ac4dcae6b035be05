"""Signatures of tracing calls: how a point recognises its own code.

A signature keeps the literal parts that identify a call site (trace_flow's
stage and detail, log_progress's message, log_step_window's phase and
boundary, trace_agent_stop's reason) and drops the rest, so a point is still recognised after someone
edits, say, its from_module argument.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from trace_instrument.model import TRACING_NAMES

# Methods of the tracing objects; calls to them are tracing code too.
TRACKER_METHODS = frozenset(
    {
        "register_trajectory",
        "build_trajectory",
        "unregister_trajectory",
        "append_turn_record",
        "get_turn_records",
        "patch_observation",
        "fill_sglang_response",
        "stamp_end",
        "mark_skipped",
        "set_stop_reason",
    }
)


def call_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _keyword_or_position(call: ast.Call, name: str, position: int) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if len(call.args) > position:
        return call.args[position]
    return None


def _text(node: ast.expr | None) -> str:
    return "?" if node is None else ast.unparse(node)


def call_signature(call: ast.Call, helper_names: frozenset[str] = frozenset()) -> str | None:
    """The signature of a tracing call, or None when the call is not tracing code."""
    name = call_name(call)
    if name is None:
        return None
    is_plain = isinstance(call.func, ast.Name)
    if is_plain and name == "trace_flow":
        stage = _keyword_or_position(call, "stage", 4)
        detail = _keyword_or_position(call, "detail", 5)
        return f"trace_flow stage={_text(stage)} detail={_text(detail)}"
    if is_plain and name == "log_progress":
        return f"log_progress {_text(call.args[0]) if call.args else '?'}"
    if is_plain and name == "log_step_window":
        phase = _keyword_or_position(call, "phase", 1)
        boundary = _keyword_or_position(call, "boundary", 2)
        return f"log_step_window {_text(phase)} {_text(boundary)}"
    if is_plain and name == "trace_agent_stop":
        return f"trace_agent_stop {_text(_keyword_or_position(call, 'reason', 2))}"
    if is_plain and (name in TRACING_NAMES or name in helper_names):
        return name
    if not is_plain and name in TRACKER_METHODS:
        return f".{name}"
    if not is_plain and name in helper_names:
        return f".{name}"
    return None


def loose_signature(call: ast.Call) -> str | None:
    """trace_flow by its stage alone: still recognised after someone edits its detail."""
    if isinstance(call.func, ast.Name) and call.func.id == "trace_flow":
        return f"trace_flow stage={_text(_keyword_or_position(call, 'stage', 4))}"
    return None


def signatures_in(
    nodes: Iterable[ast.AST], helper_names: frozenset[str] = frozenset(), *, loose: bool = False
) -> Iterator[tuple[str, ast.AST]]:
    """(signature, node) for every tracing call and helper definition below nodes.

    With loose=True a trace_flow call also yields its stage-only signature.
    """
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Call):
                sig = call_signature(node, helper_names)
                if sig is not None:
                    yield sig, node
                extra = loose_signature(node) if loose else None
                if extra is not None:
                    yield extra, node
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in helper_names:
                yield f"def {node.name}", node


def defined_helpers(stmts: Iterable[ast.stmt]) -> set[str]:
    """Names of functions a template defines (they count as tracing code)."""
    return {s.name for s in stmts if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
