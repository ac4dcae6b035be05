"""Problems in anchor specs and templates (no YAML needed to name them)."""

from __future__ import annotations

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
