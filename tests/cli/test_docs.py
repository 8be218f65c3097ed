"""docs/cli.md documents every command and every option."""

from __future__ import annotations

from pathlib import Path

import typer

from widetable.cli import app

DOC = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()


def commands() -> dict:
    return typer.main.get_command(app).commands  # type: ignore[attr-defined]


def test_every_command_has_a_section_with_an_example():
    for name in commands():
        heading = f"### `{name}`"
        assert heading in DOC, f"docs/cli.md lacks a section {heading}"
        section = DOC.split(heading, 1)[1].split("\n### ", 1)[0]
        assert (
            f"widetable {name}" in section or name in ("tables",) and "widetable tables" in section
        ), f"the section on {name} has no example"


def test_every_option_is_mentioned():
    for name, command in commands().items():
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("--") and opt not in ("--help", "--data"):
                    assert opt in DOC, f"docs/cli.md does not mention {name} {opt}"
