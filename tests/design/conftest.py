"""Fixtures for CLI tests: each test gets its own store directory under tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

import widetable
from widetable.cli import app


class Cli:
    """Run ``widetable --data <dir> ARGS`` in-process and check the exit code."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.runner = CliRunner()

    def __call__(self, *args: str, code: int = 0, input: str | None = None, **kw) -> Result:
        result = self.runner.invoke(app, ["--data", str(self.data), *args], input=input, **kw)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        assert result.exit_code == code, (
            f"exit {result.exit_code} != {code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
        assert "Traceback" not in result.output
        return result

    def open(self) -> widetable.Database:
        """The store the CLI wrote, opened by the library (close it before the next command)."""
        return widetable.open(str(self.data), purge_interval=None)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "data")


@pytest.fixture
def orders(cli: Cli) -> Cli:
    """A store with table ``t`` keyed (CardID STRING, Seq INTEGER), keeping 3 versions."""
    cli("create-table", "t", "--pk", "CardID:STRING", "--pk", "Seq:INTEGER", "--max-versions", "3")
    return cli
