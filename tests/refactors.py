"""Refactors of a verl tree written as text edits that apply alike to a pristine tree and to the tree apply made of it,
so the refactor applied to the instrumented tree is what `port` + `apply --anchors` must give on the refactored
pristine one (the oracle). Shared by tests/test_port.py and benchmarks/port.py (the corpus)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

RAY_TRAINER = "verl/trainer/ppo/ray_trainer.py"
AGENT_LOOP = "verl/experimental/agent_loop/agent_loop.py"
V1_TRAINER = "verl/trainer/ppo/v1/trainer_base.py"
Refactor = Callable[[Path], None]


def _sub(relative: str, pattern: str, replacement: str) -> Refactor:
    """A regular-expression edit of one file (it must match at least once)."""

    def edit(tree: Path) -> None:
        path = tree / relative
        text = path.read_text(encoding="utf-8")
        new, count = re.subn(pattern, replacement, text, flags=re.MULTILINE)
        if not count:
            raise SystemExit(f"{relative}: {pattern!r} matches nothing in {tree}")
        path.write_text(new, encoding="utf-8")

    return edit


def _both(*edits: Refactor) -> Refactor:
    """Several edits, in turn."""

    def edit(tree: Path) -> None:
        for each in edits:
            each(tree)

    return edit


def _method_lines(text: str, cls: str, method: str) -> tuple[ast.ClassDef, int, int]:
    """The class, and the first and last line (1-based) of one of its methods, decorators included."""
    module = ast.parse(text)
    owner = next(n for n in module.body if isinstance(n, ast.ClassDef) and n.name == cls)
    node = next(n for n in owner.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == method)
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    assert node.end_lineno is not None
    return owner, first, node.end_lineno


def _cut_method(text: str, cls: str, method: str, mixin: str) -> tuple[list[str], list[str], int]:
    """The file's lines without one method of a class that now also derives from `mixin`, the method's
    lines, and the index of the class's first line (where a new definition above it goes)."""
    owner, first, last = _method_lines(text, cls, method)
    lines = text.splitlines(keepends=True)
    body = lines[first - 1 : last]
    del lines[first - 1 : last]
    header = owner.lineno - 1 + len(owner.decorator_list)
    lines[header] = lines[header].replace(f"class {cls}:", f"class {cls}({mixin}):", 1)
    return lines, body, owner.lineno - 1


def _to_mixin(relative: str, cls: str, method: str, mixin: str) -> Refactor:
    """Move a method out of its class into a new base class defined just above it."""

    def edit(tree: Path) -> None:
        path = tree / relative
        lines, body, above = _cut_method(path.read_text(encoding="utf-8"), cls, method, mixin)
        lines[above:above] = [f"class {mixin}:\n", *body, "\n\n"]
        path.write_text("".join(lines), encoding="utf-8")

    return edit


def _to_module(relative: str, cls: str, method: str, module: str, mixin: str) -> Refactor:
    """Move a method into a mixin class of a new module (with the source module's imports, which
    the method's code reads), imported by the source module just above the class."""

    def edit(tree: Path) -> None:
        path = tree / relative
        text = path.read_text(encoding="utf-8")
        original = text.splitlines(keepends=True)
        imports = [
            "".join(original[n.lineno - 1 : n.end_lineno])
            for n in ast.parse(text).body
            if isinstance(n, ast.Import) or (isinstance(n, ast.ImportFrom) and n.module != "__future__")
        ]
        lines, body, above = _cut_method(text, cls, method, mixin)
        new = ["from __future__ import annotations\n\n", *imports, f"\n\nclass {mixin}:\n", *body]
        (tree / module.replace(".", "/")).with_suffix(".py").write_text("".join(new), encoding="utf-8")
        lines[above:above] = [f"from {module} import {mixin}\n\n\n"]
        path.write_text("".join(lines), encoding="utf-8")

    return edit


def _to_end(relative: str, cls: str, method: str) -> Refactor:
    """Move a method to the end of its class (nothing else changes)."""

    def edit(tree: Path) -> None:
        path = tree / relative
        text = path.read_text(encoding="utf-8")
        owner, first, last = _method_lines(text, cls, method)
        lines = text.splitlines(keepends=True)
        assert owner.end_lineno is not None
        body = ["\n", *lines[first - 1 : last]]
        end = owner.end_lineno
        lines[end:end] = body
        del lines[first - 1 : last]
        path.write_text("".join(lines), encoding="utf-8")

    return edit


def _blocks(node: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list under a node (bodies, else branches, handlers), outermost first."""
    found: list[list[ast.stmt]] = []
    for child in ast.walk(node):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(child, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                found.append(block)
    return found


_SCOPES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)


def _uses(node: ast.AST, skip: list[ast.stmt]) -> list[tuple[tuple[int, int], str, bool]]:
    """The function-scope names under a node, outside the statements skipped, in text order: (position, name, is a
    store). A comprehension's or lambda's own names are its own; the names it reads from outside are reads."""
    found: list[tuple[tuple[int, int], str, bool]] = []

    def visit(current: ast.AST, own: frozenset[str]) -> None:
        if any(current is s for s in skip):
            return
        if isinstance(current, _SCOPES):
            targets = (
                ast.walk(current.args) if isinstance(current, ast.Lambda) else (g.target for g in current.generators)
            )
            own = own | {
                n.id if isinstance(n, ast.Name) else n.arg
                for t in targets
                for n in ast.walk(t)
                if isinstance(n, (ast.Name, ast.arg))
            }
        if isinstance(current, ast.AnnAssign) and current.value is None:
            visit(current.annotation, own)  # `x: T` alone binds nothing
            return
        if isinstance(current, ast.Name) and current.id not in own:
            found.append(((current.lineno, current.col_offset), current.id, not isinstance(current.ctx, ast.Load)))
        for child in ast.iter_child_nodes(current):
            visit(child, own)

    visit(node, frozenset())
    return sorted(found)


def _read_first(uses: list[tuple[tuple[int, int], str, bool]]) -> set[str]:
    """The names whose first use is a read (a store before it makes the value the statements' own)."""
    first: dict[str, bool] = {}
    for _, name, store in uses:
        first.setdefault(name, store)
    return {name for name, store in first.items() if not store}


def extract(relative: str, cls: str, method: str, first: str, last: str | None, helper: str) -> Refactor:
    """Move the statements of one block of a method, from the one starting `first` to the one starting `last`, into a
    new method of the class defined after it, called where they were. `last=None`: to the end of the method's body
    (the method split in two; the call is its return). The helper's parameters are the method's locals the statements
    read; it returns the locals they bind that the method reads later. Both are computed from the text edited, so the
    refactor applies alike to the pristine and the instrumented tree."""

    def edit(tree: Path) -> None:
        path = tree / relative
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
        owner = next(n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == cls)
        node = next(n for n in owner.body if isinstance(n, ast.FunctionDef) and n.name == method)
        block, start, stop = _statement_range(node, lines, first, last)
        moved = block[start : stop + 1]
        inside = [u for s in moved for u in _uses(s, [])]
        outside = _uses(node, moved)
        end_of_moved = (moved[-1].end_lineno or 0, 0)
        arguments = {a.arg for a in [*node.args.args, *node.args.kwonlyargs]} - {"self"}
        bound_elsewhere = {name for _, name, store in outside if store} | arguments
        params = sorted(_read_first(inside) & bound_elsewhere)
        later = [u for u in outside if u[0] > end_of_moved]
        stored_inside = {name for _, name, store in inside if store}
        results = sorted(_read_first(later) & stored_inside) if last is not None else []
        indent = " " * moved[0].col_offset
        call = f"self.{helper}({', '.join(params)})"
        if last is None:
            replacement = f"{indent}return {call}\n"
        elif results:
            replacement = f"{indent}{', '.join(results)} = {call}\n"
        else:
            replacement = f"{indent}{call}\n"
        first_line, last_line = moved[0].lineno, moved[-1].end_lineno or moved[-1].lineno
        shift = moved[0].col_offset - 8
        body = [line[shift:] if line.strip() else line for line in lines[first_line - 1 : last_line]]
        returned = [f"        return {', '.join(results)}\n"] if results else []
        definition = ["\n", f"    def {helper}(self, {', '.join(params)}):\n", *body, *returned]
        end = node.end_lineno or node.lineno
        lines[end:end] = definition
        lines[first_line - 1 : last_line] = [replacement]
        path.write_text("".join(lines), encoding="utf-8")

    return edit


def _statement_range(
    node: ast.FunctionDef, lines: list[str], first: str, last: str | None
) -> tuple[list[ast.stmt], int, int]:
    """The block holding the statement whose text starts with `first`, its index, and the index of the statement
    starting with `last` after it (None: the block's last statement)."""

    def starts(statement: ast.stmt, prefix: str) -> bool:
        return lines[statement.lineno - 1].strip().startswith(prefix)

    for block in _blocks(node):
        heads = [i for i, s in enumerate(block) if starts(s, first)]
        if heads:
            start = heads[0]
            if last is None:
                return block, start, len(block) - 1
            stop = next(i for i in range(start, len(block)) if starts(block[i], last))
            return block, start, stop
    raise SystemExit(f"{node.name}: no statement starts with {first!r}")


DEBUG_REWARD = """\
    def _debug_reward(self, batch, timing_raw):
        \"\"\"The reward of a batch again, to debug a reward function (nothing in the loop calls it).\"\"\"
        with marked_timer("reward", timing_raw, color="yellow"):
            if self.use_rm and "rm_scores" not in batch.batch.keys():
                batch_reward = self._compute_reward_colocate(batch)
                batch = batch.union(batch_reward)
            reward_tensor, reward_extra_infos_dict = extract_reward(batch)
        return reward_tensor, reward_extra_infos_dict

"""

CORPUS: dict[str, Refactor] = {
    "rename a method (RayPPOTrainer.fit)": _sub(RAY_TRAINER, r"^    def fit\(self", "    def fit_loop(self"),
    # as verl did in June 2026 (`_step_once` -> `step`, a parameter dropped): here one is added, so the body stays
    # valid; the point anchored at the header (its body start) follows, and the 8 that require it in the same run
    "rename a method and change its parameters (PPOTrainer._step_once)": _both(
        _sub(V1_TRAINER, r"\b_step_once\b", "sample_and_train"),
        _sub(
            V1_TRAINER,
            r"sample_batch_size: int\) -> KVBatchMeta:",
            'sample_batch_size: int, label: str = "") -> KVBatchMeta:',
        ),
    ),
    # the uid trace's anchor is in the renamed method and in `_validate` alike: the runtime silences validation, so
    # the training one is the place
    "rename a method whose anchor validation repeats (PPOTrainer._fetch_one_gen_batch)": _sub(
        V1_TRAINER, r"\b_fetch_one_gen_batch\b", "_draw_prompts"
    ),
    # as verl 0.6-0.7 have it: the eval lines' anchor statements are there word for word, only their `if` differs
    "a condition added to an enclosing if (fit's test_freq check)": _sub(
        RAY_TRAINER,
        r"if self\.config\.trainer\.test_freq > 0 and \(",
        "if self.val_reward_fn is not None and self.config.trainer.test_freq > 0 and (",
    ),
    # as verl 0.6-0.7 have them: the reward call named otherwise in the same timer; the epoch loop without its start
    "rename a call (fit's extract_reward)": _sub(
        RAY_TRAINER, r"= extract_reward\(batch\)", "= compute_reward(batch, self.reward_fn)"
    ),
    "change a loop's header (fit's epoch loop from 0)": _sub(
        RAY_TRAINER,
        r"for epoch in range\(current_epoch, self\.config\.trainer\.total_epochs\)",
        "for epoch in range(self.config.trainer.total_epochs)",
    ),
    # as verl before 0.8 has it: no combined batch to slice after the rollout; what was anchored on the slice goes
    # where its neighbours (the gen timer, the REMAX check) are together now
    "delete an anchor's statements (fit's slice of the combined batch)": _sub(
        RAY_TRAINER,
        r"^ +gen_batch_output = combined_gen_output\.slice\(0, num_sampled_prompts\)\n"
        r" +if \"__do_sample__\" in gen_batch_output\.non_tensor_batch:\n +gen_batch_output\.pop\(.*\)\n",
        "",
    ),
    # issue 38's class 8, a decoy: fit renamed, and a debug helper before it repeating the reward timer's statements;
    # the reward points fit both, and fit's other points (gone to fit_loop) say where they go: never the helper
    "rename a method beside a decoy repeating its reward timer (fit_loop, _debug_reward)": _both(
        _sub(RAY_TRAINER, r"^    def fit\(self", "    def fit_loop(self"),
        _sub(RAY_TRAINER, r"^    def _compute_values\(self", DEBUG_REWARD + "    def _compute_values(self"),
    ),
    "rename a class (AgentLoopWorker)": _sub(
        AGENT_LOOP, r"(?<=^class )AgentLoopWorker\b|(?<=ray\.remote\()AgentLoopWorker\b", "RolloutWorker"
    ),
    "rename a local a template reads (rollout_n)": _sub(RAY_TRAINER, r"(?<!['\"])\brollout_n\b", "n_samples"),
    "rename a local an anchor names (final_output)": _sub(AGENT_LOOP, r"\bfinal_output\b", "last_output"),
    "move a method into a mixin (_compute_score)": _to_mixin(
        AGENT_LOOP, "AgentLoopWorker", "_compute_score", "_ScoringMixin"
    ),
    "move a method into another module (_compute_score)": _to_module(
        AGENT_LOOP, "AgentLoopWorker", "_compute_score", "verl.experimental.agent_loop.scoring", "ScoringMixin"
    ),
    "reorder methods (_compute_score last)": _to_end(AGENT_LOOP, "AgentLoopWorker", "_compute_score"),
    "requote (reward_extra_info)": _sub(AGENT_LOOP, r'"reward_extra_info"', "'reward_extra_info'"),
    "split a method (RayPPOTrainer.fit's loop into _fit_epochs)": extract(
        RAY_TRAINER, "RayPPOTrainer", "fit", "progress_bar = tqdm(", None, "_fit_epochs"
    ),
    "extract statements into a helper (ref, values, adv of fit)": extract(
        RAY_TRAINER,
        "RayPPOTrainer",
        "fit",
        "if self.use_reference_policy:",
        'with marked_timer("adv"',
        "_ref_values_adv",
    ),
}
