"""Terminal output: the header and one rich table per view; markdown for pasting into issues."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from trace_instrument.traces.model import Analysis
from trace_instrument.traces.render.tables import Section, header_lines, sections


def print_text(analysis: Analysis, console: Console, extra: Sequence[Section] = ()) -> None:
    """Rich tables for a terminal (or a wide plain layout when piped); ``extra`` after the views."""
    title = "Run" + (" (cached)" if analysis.cached else "")
    console.print(f"[bold]{title}[/bold]")
    for line in header_lines(analysis.header):
        console.print("  " + line, markup=False)
    for note in analysis.notes:
        console.print(f"  note: {note}", markup=False, style="yellow")
    for section in [*sections(analysis), *extra]:
        console.print()
        print_section(section, console)


def print_section(section: Section, console: Console) -> None:
    """One table; its cells are text, never markup (a host or tool name may hold brackets)."""
    table = Table(title=Text(section.title), title_justify="left", show_edge=False, pad_edge=False)
    for i, column in enumerate(section.columns):
        table.add_column(Text(column), justify="left" if i == 0 else "right", overflow="fold")
    for row in section.rows:
        table.add_row(*(Text(cell) for cell in row))
    if not section.rows:
        table.add_row("(none)", *([""] * (len(section.columns) - 1)))
    console.print(table)


def markdown(analysis: Analysis, extra: Sequence[Section] = ()) -> str:
    """The same report as GitHub-flavoured markdown; ``extra`` after the views."""
    out = ["# Trace analysis", ""]
    out += [f"- {line}" for line in header_lines(analysis.header)]
    out += [f"- note: {note}" for note in analysis.notes]
    for section in [*sections(analysis), *extra]:
        out += ["", f"## {section.title}", ""]
        out.append("| " + " | ".join(section.columns) + " |")
        out.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(section.columns))) + "|")
        for row in section.rows or (("(none)",) + ("",) * (len(section.columns) - 1),):
            out.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return "\n".join(out) + "\n"
