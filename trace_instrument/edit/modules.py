"""A whole file as LibCST's module, printing back exactly what was read."""

from __future__ import annotations

import libcst as cst


def parse_file(source: bytes | str) -> cst.Module:
    """The module of a file's bytes (or text). LibCST drops the last line break of a file whose
    breaks are all `\\r` (old Mac style: `x = 1\\r` prints as `x = 1`); it is put back, so a file
    apply and remove leave alone prints as it was read."""
    module = cst.parse_module(source)
    last = source[-1:]
    if last in (b"\r", "\r") and module.default_newline == "\r" and not module.has_trailing_newline:
        fixed = module.with_changes(has_trailing_newline=True)
        text = source.decode(module.encoding) if isinstance(source, bytes) else source
        if fixed.code == text:  # (the one case known: anything else is left as LibCST reads it)
            return fixed
    return module
