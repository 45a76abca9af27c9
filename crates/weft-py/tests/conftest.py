"""Fixtures shared by the `weft` package's tests (run by scripts/test-python)."""

import os

import pytest
from hypothesis import settings

import weft

# CI runs the property tests with fixed seeds: a red run is reproducible,
# and the suite's time does not wander.
# No example database: nothing is written into the checkout.
settings.register_profile(
    "weft", derandomize=True, deadline=None, print_blob=True, database=None
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "weft"))


@pytest.fixture
def path(tmp_path):
    """A fresh database directory (not yet created)."""
    return str(tmp_path / "db")


@pytest.fixture
def db(path):
    """An open database with the default (bytes) codecs, closed after."""
    d = weft.open(path)
    yield d
    d.close()
