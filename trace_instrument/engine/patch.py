"""A run's changes as a git-style unified diff (`git apply` takes it on the pristine tree)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from trace_instrument.engine.manifest import parse
from trace_instrument.engine.runtime import digest
from trace_instrument.model import ChangeKind, ChangeState, ChangeSummary, FileChange, RunResult

EVERY_KIND = frozenset(ChangeKind) - {ChangeKind.LEFTOVER}  # what a patch on the pristine tree holds


def changes(result: RunResult) -> Iterator[FileChange]:
    """Every file the run changes or would change: the catalog's files first, then the runtime
    package's and the manifest."""
    for file in result.files:
        if file.changed and not file.error:
            yield FileChange(file.path, file.original, file.updated, ChangeKind.SOURCE)
    yield from result.other_changes


def unified_patch(result: RunResult, context: int = 3, kinds: frozenset[ChangeKind] = EVERY_KIND) -> str:
    """The patch as text (to show it), of the changes of these kinds (all of them unless told)."""
    return "".join(file_patch(c.path, c.before, c.after, context) for c in changes(result) if c.kind in kinds)


def patch_bytes(result: RunResult, context: int = 3) -> bytes:
    """The patch as `git apply` needs it: each file's lines in that file's own encoding."""
    return b"".join(
        file_patch(c.path, c.before, c.after, context).encode(_encoding(c.before if c.before is not None else c.after))
        for c in changes(result)
        if c.kind in EVERY_KIND
    )


def summary(change: FileChange) -> ChangeSummary:
    """The change in one line: the lines and digest of the text the file ends with (of the text that
    goes, for a removal) and, for the manifest, the points that text records."""
    text = (change.before if change.state is ChangeState.REMOVED else change.after) or ""
    # the manifest's text is one a run wrote (this one or an earlier): always one a run can read
    points = len(parse(text.encode()).points) if change.kind is ChangeKind.MANIFEST else None
    return ChangeSummary(change.path, change.kind, change.state, len(_lines(text)), digest(text.encode()), points)


def _encoding(text: str | None) -> str:
    """The encoding the file declares (a coding cookie), UTF-8 otherwise."""
    if not text:
        return "utf-8"
    from trace_instrument.engine.analysis import encoding_of  # the analysis code loads for a patch only

    try:
        declared = encoding_of(text.encode("utf-8", "surrogateescape"))
    except (SyntaxError, LookupError):
        return "utf-8"
    return "utf-8" if declared == "utf-8-sig" else declared


def file_patch(path: str, before: str | None, after: str | None, context: int = 3) -> str:
    old = _lines(before or "")
    new = _lines(after or "")
    header = [f"diff --git a/{path} b/{path}\n"]
    if before is None:
        header.append("new file mode 100644\n")
    elif after is None:
        header.append("deleted file mode 100644\n")
    body = list(
        difflib.unified_diff(
            old,
            new,
            "/dev/null" if before is None else f"a/{path}",
            "/dev/null" if after is None else f"b/{path}",
            n=context,
        )
    )
    if not body:
        return ""
    return "".join(header) + "".join(_mark_missing_newlines(body))


def _lines(text: str) -> list[str]:
    """Lines as git sees them: split at \n only (str.splitlines also splits at form feeds)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    return lines + [parts[-1]] if parts[-1] else lines


def _mark_missing_newlines(lines: list[str]) -> Iterator[str]:
    for line in lines:
        if line.endswith("\n"):
            yield line
        else:
            yield line + "\n\\ No newline at end of file\n"
