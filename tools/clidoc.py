"""Write docs/cli.md, the command-line reference, from the typer application itself.

    python tools/clidoc.py           # rewrite docs/cli.md
    python tools/clidoc.py --check   # exit 1 when docs/cli.md differs from what the app gives

The page is rendered from click's parameters (never from a help screen), so it does not depend on
the terminal's width, on colours or on the shell: the same code gives the same bytes everywhere.
tests/test_docs.py fails when the committed page is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a clone: read this checkout's package
    sys.path.insert(0, str(ROOT))

PAGE = ROOT / "docs" / "cli.md"
PROG = "trace-instrument"
REGENERATE = "python tools/clidoc.py"
# the page's order: the jobs of the README, then anything added later (alphabetically)
ORDER = ("demo", "apply", "check", "verify", "report", "remove", "port", "points", "analyze", "export")
# typer's shell-completion options depend on the shell it detects; they get one fixed sentence
COMPLETION = {"install_completion", "show_completion"}
# where each command is explained in prose (a command missing here simply gets no link)
DETAILS = {
    "demo": ("instrumenting a checkout", "instrumenting.md#demo"),
    "apply": ("instrumenting a checkout", "instrumenting.md#apply"),
    "check": ("the CI gate", "ci.md#check"),
    "verify": ("instrumenting a checkout", "instrumenting.md#verify"),
    "report": ("instrumenting a checkout", "instrumenting.md#report"),
    "remove": ("instrumenting a checkout", "instrumenting.md#remove"),
    "port": ("porting to another verl", "porting.md"),
    "points": ("instrumenting a checkout", "instrumenting.md#points"),
    "analyze": ("reading the traces", "analyze.md"),
    "export": ("exporting", "analyze.md#exporting-export"),
}
TYPE_WORDS = {"path": "PATH", "str": "TEXT", "text": "TEXT", "integer": "INTEGER", "int range": "INTEGER"}
TYPE_WORDS |= {"float": "FLOAT", "float range": "FLOAT", "boolean": "", "int": "INTEGER"}

HEADER = f"""# Command-line reference

<!-- Generated from the typer application by `{REGENERATE}`; do not edit by hand.
     tests/test_docs.py fails when this page is stale. -->

Every command, as `{PROG} COMMAND --help` describes it: its usage, what it does and each
option with its default. The exit codes and what each command does in detail are in the
[README's table](../README.md#commands) and the job pages it links.
"""


def _root() -> Any:
    """The click group typer builds (typer 0.28 vendors its own click: the objects are read by duck typing)."""
    import typer

    from trace_instrument.cli import app

    group = typer.main.get_command(app)
    assert hasattr(group, "commands"), "the application is expected to be a group of commands"
    return group


def _is_argument(param: Any) -> bool:
    return bool(param.param_type_name == "argument")


def _ordered(group: Any) -> list[str]:
    names = list(group.commands)
    known = [name for name in ORDER if name in names]
    return known + sorted(name for name in names if name not in ORDER)


def _cell(text: str) -> str:
    """Text for one table cell: a single line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _value(param: Any) -> str:
    """What an option takes: its choices, or the kind of value ('' for a flag)."""
    if getattr(param, "is_flag", False):
        return ""
    if param.metavar:  # named by the option itself (`--to KIND DEST`: a tuple)
        return str(param.metavar)
    if hasattr(param.type, "choices"):
        return "|".join(str(getattr(choice, "value", choice)) for choice in param.type.choices)
    word = TYPE_WORDS.get(param.type.name, str(param.type.name).upper())
    if hasattr(param.type, "min") and hasattr(param.type, "max"):
        word += f" ({_range(param.type)})"
    return word


def _range(kind: Any) -> str:
    bounds = []
    if kind.min is not None:
        bounds.append(f"{'>' if kind.min_open else '>='} {kind.min}")
    if kind.max is not None:
        bounds.append(f"{'<' if kind.max_open else '<='} {kind.max}")
    return ", ".join(bounds)


def _default(param: Any) -> str:
    default = param.default
    if callable(default) or default is None or default is False or default == () or default == []:
        return ""
    if hasattr(default, "value"):  # an Enum choice
        default = default.value
    return f"`{default}`"


def _argument_metavar(param: Any) -> str:
    if param.metavar:  # as the usage line says it (`TRACE_DIR...`)
        return str(param.metavar)
    return (param.name or "").upper() + ("..." if param.nargs == -1 else "")


def _usage(name: str, command: Any) -> str:
    pieces = [PROG, name]
    if any(not _is_argument(p) for p in command.params):
        pieces.append("[OPTIONS]")
    for param in command.params:
        if _is_argument(param):
            metavar = _argument_metavar(param)
            pieces.append(metavar if param.required else f"[{metavar}]")
    return " ".join(pieces)


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def _rows(command: Any) -> list[str]:
    rows = [_row("option", "value", "default", "repeatable", "what it does"), "|---|---|---|---|---|"]
    for param in command.params:
        if param.name in COMPLETION or getattr(param, "hidden", False):
            continue
        if _is_argument(param):
            name = f"`{_argument_metavar(param)}` (argument)"
            many = "yes (several)" if param.nargs == -1 else ""
            rows.append(_row(name, _value(param), "", many, _cell(getattr(param, "help", None) or "")))
            continue
        names = ", ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
        repeat = "yes" if param.multiple else ""
        rows.append(_row(names, _cell(_value(param)), _default(param), repeat, _cell(param.help or "")))
    rows.append(_row("`-h`, `--help`", "", "", "", "Show the command's help and exit."))
    return rows


def _command(name: str, command: Any) -> list[str]:
    help_text = (command.help or "").strip()
    lines = [f"## `{name}`", "", "```", _usage(name, command), "```", "", help_text, ""]
    lines += _rows(command) + [""]
    if name in DETAILS:
        lines += [f"In detail, with the exit codes: [{DETAILS[name][0]}]({DETAILS[name][1]}).", ""]
    return lines


def _global(group: Any) -> list[str]:
    lines = ["## Options of `trace-instrument` itself", "", "```", f"{PROG} [OPTIONS] COMMAND [ARGS]...", "```", ""]
    lines += [(group.help or "").strip(), ""]
    lines += _rows(group)
    lines += [
        "",
        f"`{PROG} --install-completion` installs shell completion for the current shell (bash, zsh, fish,",
        "PowerShell); `--show-completion` prints the script instead. It completes the commands, their",
        "options, the facilities, extras and point ids, and the run ids of the trace folders given before `--run`.",
        "",
    ]
    return lines


def render() -> str:
    """The whole page, deterministically."""
    group = _root()
    names = _ordered(group)
    lines = HEADER.splitlines() + [""]
    lines.append(
        "Commands: "
        + " · ".join(f"[`{name}`](#{name})" for name in names)
        + " · [global options](#options-of-trace-instrument-itself)"
    )
    lines.append("")
    lines += _global(group)
    for name in names:
        lines += _command(name, group.commands[name])
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    page = render()
    if "--check" in argv:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current != page:
            sys.stderr.write(f"docs/cli.md is stale: run `{REGENERATE}` and commit it\n")
            return 1
        return 0
    PAGE.write_text(page, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
