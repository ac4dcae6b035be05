"""engine/patch.py's file patches, in the default tier: each patch, applied by this test's own reading
of the unified format, turns the old text into the new (the e2e tier applies whole-tree patches with
`git apply`: test_end_to_end_v090.py)."""

from __future__ import annotations

import re

import pytest

from trace_instrument.engine.patch import _encoding, file_patch

HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _lines(text: str) -> list[str]:
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def _apply(old: str, patch: str) -> str:
    """The new text: the old one with the patch's hunks applied (context and removals checked)."""
    source, out, at = _lines(old), [], 0
    side = ""
    for line in _lines(patch):
        hunk = HUNK.match(line)
        if hunk:
            start = int(hunk.group(1)) - (0 if hunk.group(2) == "0" else 1)
            out.extend(source[at:start])
            at = start
        elif line.startswith(("diff --git", "new file", "deleted file", "--- ", "+++ ")):
            continue
        elif line.startswith("\\"):  # the line before has no newline in the file it belongs to
            if side in " +":
                out[-1] = out[-1].removesuffix("\n")
            if side in " -":
                source[at - 1] = source[at - 1].removesuffix("\n")
        else:
            side, text = line[0], line[1:]
            if side in " -":
                assert source[at].removesuffix("\n") == text.removesuffix("\n"), (at, source[at], text)
                at += 1
            if side in " +":
                out.append(text)
    return "".join(out + source[at:])


CASES = {
    "one-line-changed": ("a\nb\nc\nd\ne\nf\ng\nh\n", "a\nb\nc\nD\ne\nf\ng\nh\n"),
    "far-apart": (
        "".join(f"{i}\n" for i in range(30)),
        "".join(f"{i if i not in (2, 25) else 'x'}\n" for i in range(30)),
    ),
    "no-newline-at-the-end-added": ("a\nb", "a\nb\n"),
    "no-newline-at-the-end-kept": ("a\nb", "a\nB"),
    "a-form-feed-is-not-a-line-break": ("p\x0cq\nr\n", "p\x0cq\nR\n"),
    "lines-added-at-the-top": ("x\n", "import os\n\nx\n"),
}


@pytest.mark.parametrize(("before", "after"), list(CASES.values()), ids=list(CASES))
def test_a_file_patch_turns_the_old_text_into_the_new(before: str, after: str) -> None:
    patch = file_patch("pkg/mod.py", before, after)
    assert patch.startswith("diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ ")
    assert _apply(before, patch) == after


def test_a_form_feed_stays_inside_its_line() -> None:
    patch = file_patch("m.py", "p\x0cq\nr\n", "p\x0cq\nR\n")
    assert " p\x0cq\n" in patch.split("@@")[-1]
    assert patch.count("\n") == 3 + 1 + 3  # header, hunk line, the 3 lines of the hunk


def test_new_and_deleted_files_and_no_change() -> None:
    created = file_patch("verl/new.py", None, "x = 1\ny = 2\n")
    assert created.splitlines()[:4] == [
        "diff --git a/verl/new.py b/verl/new.py",
        "new file mode 100644",
        "--- /dev/null",
        "+++ b/verl/new.py",
    ]
    assert _apply("", created) == "x = 1\ny = 2\n"
    deleted = file_patch("verl/old.py", "x = 1\n", None)
    assert deleted.splitlines()[1:4] == ["deleted file mode 100644", "--- a/verl/old.py", "+++ /dev/null"]
    assert _apply("x = 1\n", deleted) == ""
    assert file_patch("same.py", "a\n", "a\n") == ""


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        ("# -*- coding: latin-1 -*-\nx = 1\n", "iso-8859-1"),
        ("x = 1\n", "utf-8"),
        ("\ufeffx = 1\n", "utf-8"),  # a BOM: its bytes stay in the text, the patch is UTF-8
        ("# coding: no-such-codec\n", "utf-8"),
        ("", "utf-8"),
        (None, "utf-8"),
    ],
)
def test_a_patch_is_encoded_as_its_file_declares(text: str | None, encoding: str) -> None:
    assert _encoding(text) == encoding
