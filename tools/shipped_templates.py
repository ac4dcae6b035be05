"""Add the shipped catalog's template texts to trace_instrument/spec/shipped_templates.json.

Run it after changing a template (tests/test_manifest_format.py says when): the file keeps every
text a release shipped, so that a later release knows, from the digest a manifest names, the text
an older one placed. Entries are only added, never dropped.

    python tools/shipped_templates.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trace_instrument.edit.regions import digest
from trace_instrument.spec import load_catalog
from trace_instrument.spec.shipped import SHIPPED_TEMPLATES

NOTE = (
    "every template text a release of trace-instrument shipped, by digest (sha256, first 16 hex); "
    "only ever added to: python tools/shipped_templates.py"
)


def main() -> int:
    body = json.loads(SHIPPED_TEMPLATES.read_text(encoding="utf-8")) if SHIPPED_TEMPLATES.exists() else {}
    texts: dict[str, list[str]] = dict(body.get("templates", {}))
    before = len(texts)
    for point in load_catalog().points:
        for edit in point.edits:
            texts.setdefault(digest(edit.template.text), edit.template.text.split("\n"))
    out = {"note": NOTE, "templates": dict(sorted(texts.items()))}
    SHIPPED_TEMPLATES.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(texts) - before} template text(s) added; {len(texts)} in {SHIPPED_TEMPLATES.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
