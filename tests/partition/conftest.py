"""The ``store`` fixture of the partition tests: each engine, partition maintenance manual."""

from __future__ import annotations

import pytest

from tests.conftest import ENGINES, open_store


@pytest.fixture(params=ENGINES)
def store(request, tmp_path):
    db = open_store(tmp_path / "store", request.param, maintenance_interval=None)
    try:
        yield db
    finally:
        db.close()
