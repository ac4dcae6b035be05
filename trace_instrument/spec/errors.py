"""Problems in anchor specs and templates (no YAML needed to name them)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from trace_instrument.model import SpecSource


@dataclass(frozen=True)
class SpecProblem:
    """One problem in a spec file or template, with where it is."""

    source: SpecSource
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.message}"


class SpecError(Exception):
    """One or more problems in the anchor specs or templates."""

    def __init__(self, problems: list[SpecProblem]):
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in problems))


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """The hint "; did you mean 'x'?" for the choice closest to a word that is none of them ("" when none is
    close): the one hint of unknown flags' values, configuration keys and spec keys."""
    import difflib  # only to suggest a name for a word that is not one

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
