"""The README's API tour runs as written, so the quick start stays true."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_api_tour_runs(tmp_path, monkeypatch):
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    assert blocks, "the README has no Python example"
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    assert (tmp_path / "data").is_dir()


def test_architecture_names_existing_modules():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    src = ROOT / "src" / "widetable"
    for name in re.findall(r"^\s+(\w+\.py)\s", text, re.MULTILINE):
        assert list(src.rglob(name)), f"docs/ARCHITECTURE.md names {name}, which does not exist"
