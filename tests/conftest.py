"""Shared fixtures: the catalog, and pristine verl trees from the PyPI wheels.

The wheels are downloaded once (pip download --no-deps) into the
trace-instrument cache; TRACE_INSTRUMENT_WHEELS may name a folder that already
holds them. When neither works the tests fail with the reason; they never skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import copy_tree

from trace_instrument.wheels import WheelError, verl_tree
from trace_instrument.spec import load_catalog


@pytest.fixture(scope="session")
def catalog():
    return load_catalog()


def _pristine(version: str) -> Path:
    try:
        return verl_tree(version)
    except WheelError as exc:
        pytest.fail(f"verl {version} is needed for this test and could not be had: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def verl_090() -> Path:
    return _pristine("0.9.0")


@pytest.fixture(scope="session")
def verl_091() -> Path:
    return _pristine("0.9.1")


@pytest.fixture(scope="session")
def verl_080() -> Path:
    return _pristine("0.8.0")


@pytest.fixture
def checkout_090(verl_090: Path, tmp_path: Path) -> Path:
    return copy_tree(verl_090, tmp_path / "checkout")
