"""Decompressing a gzip trace file that may be cut short or damaged: every byte that decompresses.

Python's ``gzip`` module raises at the damage and drops what it had decompressed of the last
block it read (``shutil.copyfileobj`` of a cut 48-trajectory file wrote nothing at all). Here the
stream is decompressed block by block and each block's output written before the next is read, so
a cut file yields every line before the cut; the engines read those and count the file as damaged.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

BLOCK = 1 << 20
_GZIP = 16 + zlib.MAX_WBITS  # a gzip header and trailer around the deflate stream


@dataclass(frozen=True)
class Gunzipped:
    """What decompressing one file gave: its bytes written, and whether the stream ended as it should."""

    size: int
    complete: bool
    problem: str | None = None  # why it stopped early ("cut short", zlib's message)


def gunzip(source: str, target: Path) -> Gunzipped:
    """Decompress ``source`` into ``target`` (every member of it), as far as it decompresses."""
    with open(source, "rb") as raw, open(target, "wb") as out:
        return gunzip_into(raw, out)


def gunzip_into(raw: BinaryIO, out: BinaryIO) -> Gunzipped:
    """Decompress the gzip stream ``raw`` into ``out`` as far as it decompresses."""
    written = 0
    decompressor: Any = None  # the member being decompressed (None: between members)
    try:
        while True:
            chunk = raw.read(BLOCK) if decompressor is None or not decompressor.eof else decompressor.unused_data
            if decompressor is not None and decompressor.eof:
                decompressor = None
                if not chunk:
                    continue
            if not chunk:
                # the input ended: between members it is whole, inside one it was cut short
                return Gunzipped(written, True) if decompressor is None else Gunzipped(written, False, "cut short")
            if decompressor is None:
                chunk = chunk.lstrip(b"\0")  # gzip's zero padding after the last member
                if not chunk:
                    continue
                decompressor = zlib.decompressobj(_GZIP)
            data = decompressor.decompress(chunk)
            out.write(data)
            written += len(data)
    except zlib.error as error:
        return Gunzipped(written, False, str(error))
