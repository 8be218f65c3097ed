"""Fixtures for CLI tests; ``cli`` (tests/conftest.py) runs the command line on a fresh store."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.conftest import Cli


@pytest.fixture
def orders(cli: Cli) -> Cli:
    """A store with table ``t`` keyed (CardID STRING, Seq INTEGER), keeping 3 versions."""
    cli("create-table", "t", "--pk", "CardID:STRING", "--pk", "Seq:INTEGER", "--max-versions", "3")
    return cli
