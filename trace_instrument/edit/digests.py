"""The short fingerprint of a text that apply records and remove, check and the manifest compare.

Apart from regions.py (which needs LibCST) so that reading a manifest never loads LibCST: a `check`
whose files are cached stays as light as tests/test_layering.py holds it.
"""

from __future__ import annotations

import hashlib


def digest(text: str) -> str:
    """A short fingerprint of a region's text (16 hex digits of its sha256)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
