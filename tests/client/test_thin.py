"""widetable.connect is a thin client: it loads no server, no engine and no Database.

Two checks: a process that imports ``widetable.client`` (and calls nothing) has no
module of ``widetable.server``, ``widetable.storage`` or ``widetable.db`` loaded, nor
RocksDB's binding; and, read with ``ast``, no module of ``client/`` or ``wire/``
imports one of them, at any depth of its code.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.importgraph import PACKAGE, imports, offenders, under

FORBIDDEN = ("widetable.server", "widetable.storage", "widetable.db", "rocksdict")


def _forbidden(name: str) -> bool:
    return under(name, *FORBIDDEN)


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


def test_no_client_or_wire_module_imports_the_server_or_the_engine() -> None:
    assert offenders("client", *FORBIDDEN) == {}
    assert offenders("wire", *FORBIDDEN) == {}


def test_the_import_check_can_fail() -> None:
    """The ast check sees a relative import of the server (a check that cannot fail
    guards nothing)."""
    assert any(_forbidden(n) for n in imports(PACKAGE / "server" / "app.py"))
    assert offenders("server", *FORBIDDEN)
