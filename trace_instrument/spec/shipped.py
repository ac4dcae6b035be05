"""Every template text a release of trace-instrument has shipped, by digest (shipped_templates.json).

The manifest names a point's templates by their digest alone when the text is here, and keeps
the text itself only for templates no release shipped (a user's own specs): a later release
still knows the text an older one placed, so it tells `stale` code from hand-edited code and
takes it out. Entries are only ever added (`python tools/shipped_templates.py`); a test holds
that every template of the shipped catalog is here.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

SHIPPED_TEMPLATES = Path(__file__).resolve().parent / "shipped_templates.json"


@cache
def shipped_templates() -> dict[str, str]:
    """Template text by digest (engine.manifest.digest of the text), for every text ever shipped."""
    body = json.loads(SHIPPED_TEMPLATES.read_text(encoding="utf-8"))
    return {key: "\n".join(lines) for key, lines in body["templates"].items()}
