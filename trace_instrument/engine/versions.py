"""Which verl release a checkout holds."""

from __future__ import annotations

import re
from pathlib import Path

_VERSION_FILE = Path("verl") / "version" / "version"


def verl_version(root: Path) -> str:
    """The release verl/version/version names ("" when the checkout does not say)."""
    try:
        text = (root / _VERSION_FILE).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return text if re.fullmatch(r"[0-9A-Za-z.+\-]{1,40}", text) else ""
