"""widetable.connect is a thin client: it loads no server, no engine and no Database.

Two checks: a process that imports ``widetable.client`` (and calls nothing) has no
module of ``widetable.server``, ``widetable.storage`` or ``widetable.db`` loaded, nor
RocksDB's binding; and, read with ``ast``, no module of ``client/`` or ``wire/``
imports one of them, at any depth of its code.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import widetable

PACKAGE = Path(widetable.__file__).parent
FORBIDDEN = ("widetable.server", "widetable.storage", "widetable.db", "rocksdict")


def _forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def test_importing_the_client_loads_no_server_engine_or_database() -> None:
    code = ("import json, sys, widetable.client; "
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    loaded = json.loads(out.stdout)
    assert "widetable.client" in loaded and "widetable.wire.native" in loaded
    assert [m for m in loaded if _forbidden(m)] == []


def test_the_package_still_opens_a_store_on_first_use() -> None:
    """The lazy names of ``widetable`` resolve to the real objects."""
    code = ("import sys, widetable; assert 'widetable.db' not in sys.modules; "
            "from widetable.db import Database, open; import widetable.table.table as t; "
            "assert widetable.open is open and widetable.Database is Database; "
            "assert widetable.Table is t.Table; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


def _imports(path: Path) -> list[str]:
    """Every module ``path`` imports, relative imports resolved; those under
    ``if TYPE_CHECKING:`` are left out (they never run)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for n in ast.walk(node))
    names = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            names.append(target)
            names += [f"{target}.{a.name}" for a in node.names]
    return names


def test_no_client_or_wire_module_imports_the_server_or_the_engine() -> None:
    bad = {}
    for folder in ("client", "wire"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            found = [name for name in _imports(path) if _forbidden(name)]
            if found:
                bad[str(path.relative_to(PACKAGE))] = found
    assert bad == {}


def test_the_import_check_can_fail() -> None:
    """The ast check sees a relative import of the server (a check that cannot fail
    guards nothing)."""
    assert any(_forbidden(n) for n in _imports(PACKAGE / "server" / "app.py"))
