"""Run verl's own agent-loop code from an instrumented tree, with its heavy collaborators stubbed.

usage: python agent_loop_stubbed.py TREE SCRATCH [--processor]

Without torch, ray or hydra, verl cannot run; what can run is verl's own code of the three methods
the trajectory points go in, exactly as the tree holds them (extracted with ast and exec'd):
`AgentLoopBase.__init__` (the tracker), `AgentLoopWorker.__init__` (the store) and
`AgentLoopWorker._run_agent_loop` (C1). Every other name they use is a stub that is falsy, whose
attributes, calls and items are stubs again and whose `get(key, default)` gives the default (so
config lookups read verl's defaults: `trace.backend` is null). The runtime is the tree's own
`verl/utils/tracing`, imported as installed; tracing is on when VERL_TRACE_DIR is set.

Prints `ok` and exits 0 when a worker is built and one rollout runs through; otherwise prints the
exception's type and message and exits 1.
"""

from __future__ import annotations

import ast
import asyncio
import os
import shutil
import sys
import textwrap
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any

AGENT_LOOP = Path("verl/experimental/agent_loop/agent_loop.py")
METHODS = (("AgentLoopBase", "__init__"), ("AgentLoopWorker", "__init__"), ("AgentLoopWorker", "_run_agent_loop"))


class Stub:
    """Any collaborator: falsy; its attributes, calls and items are stubs; `get` gives the default."""

    def __getattr__(self, name: str) -> Stub:
        if name.startswith("__"):
            raise AttributeError(name)
        return Stub()

    def __call__(self, *args: object, **kwargs: object) -> Stub:
        return Stub()

    def __getitem__(self, key: object) -> Stub:
        return Stub()

    def __bool__(self) -> bool:
        return False

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(())

    def __enter__(self) -> Stub:  # noqa: PYI034 - Python 3.10 has no typing.Self
        return self

    def __exit__(self, *exc: object) -> bool:
        return False

    def get(self, key: object, default: object = None) -> object:
        return default


def method_source(source: str, cls: str, name: str) -> str:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                    segment = ast.get_source_segment(source, item)
                    assert segment is not None
                    return textwrap.dedent(" " * item.col_offset + segment)
    raise LookupError(f"{cls}.{name}")


def free_names(code: str) -> set[str]:
    tree = ast.parse(code)
    loads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loads - set(dir(__builtins__))


def runtime_namespace(tree: Path, scratch: Path) -> dict[str, Any]:
    """The tree's runtime package, imported on its own (its parents are empty packages here)."""
    root = scratch / "pkgroot"
    for parent in (root / "verl", root / "verl" / "utils"):
        parent.mkdir(parents=True, exist_ok=True)
        (parent / "__init__.py").touch()
    shutil.copytree(tree / "verl" / "utils" / "tracing", root / "verl" / "utils" / "tracing", dirs_exist_ok=True)
    sys.path.insert(0, str(root))
    from verl.utils import tracing  # the copy made above

    return {name: getattr(tracing, name) for name in tracing.__all__}


def main(tree: Path, scratch: Path, processor: bool) -> None:
    source = (tree / AGENT_LOOP).read_text(encoding="utf-8")
    codes = {f"{cls}.{name}": method_source(source, cls, name) for cls, name in METHODS}
    import logging
    import time

    namespace: dict[str, Any] = {"os": os, "time": time, "SimpleNamespace": SimpleNamespace}
    namespace["logger"] = logging.getLogger("agent_loop")
    if (tree / "verl" / "utils" / "tracing").is_dir():
        namespace.update(runtime_namespace(tree, scratch))
    for code in codes.values():
        for name in free_names(code) - set(namespace):
            namespace[name] = Stub()

    built: dict[str, Any] = {}
    for key, code in codes.items():
        local: dict[str, Any] = {}
        exec(compile(code, f"{AGENT_LOOP}:{key}", "exec"), namespace, local)  # noqa: S102 - verl's own code
        built[key] = next(iter(local.values()))

    class Output(SimpleNamespace):
        pass

    def make_agent_loop(**kwargs: Any) -> Any:
        loop = SimpleNamespace()
        trainer_config = SimpleNamespace(config=Stub())
        data_config = SimpleNamespace(config=Stub())
        built["AgentLoopBase.__init__"](
            loop, trainer_config, Stub(), Stub(), Stub() if processor else None, Stub(), data_config
        )

        async def run(sampling_params: Any, **kw: Any) -> Any:
            return Output(metrics=None, reward_score=1.0, prompt_ids=[1, 2], response_ids=[3])

        loop.run = run
        return loop

    namespace["hydra"] = SimpleNamespace(utils=SimpleNamespace(instantiate=make_agent_loop))
    namespace["_agent_loop_registry"] = {"single_turn_agent": {}}

    worker = SimpleNamespace()
    built["AgentLoopWorker.__init__"](worker, Stub(), Stub())

    async def postprocess(output: Any, validate: bool, **kwargs: Any) -> Any:
        return output

    worker._agent_loop_postprocess = postprocess
    worker.tokenizer = None
    trajectory = {"step": 1, "sample_index": 0, "rollout_n": 1, "validate": False}
    run = built["AgentLoopWorker._run_agent_loop"]
    asyncio.run(run(worker, {}, trajectory, agent_name="single_turn_agent", uid="u1", traj_uid="0"))
    print("ok")


if __name__ == "__main__":
    args = sys.argv[1:]
    try:
        main(Path(args[0]), Path(args[1]), "--processor" in args)
    except Exception as exc:  # noqa: BLE001 - what verl's code raised is the result
        print(f"{type(exc).__name__}: {exc}")
        traceback.print_exc(file=sys.stderr)
        sys.exit(1)
