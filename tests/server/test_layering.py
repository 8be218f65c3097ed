"""The server's packages, read with ``ast``: the core imports no protocol, and two
protocols never import each other, so a third (Bigtable's gRPC) plugs in beside them
through ``server/app.py`` alone."""

from __future__ import annotations

from tests.importgraph import PACKAGE, imports, offenders

PROTOCOLS = ("tablestore", "native", "bigtable")


def test_the_core_imports_no_protocol() -> None:
    assert offenders("server/core", *(f"widetable.server.{p}" for p in PROTOCOLS)) == {}


def test_protocols_never_import_each_other() -> None:
    for protocol in PROTOCOLS:
        others = [f"widetable.server.{p}" for p in PROTOCOLS if p != protocol]
        assert offenders(f"server/{protocol}", *others) == {}, protocol


def test_only_app_knows_every_protocol() -> None:
    """app.py puts the core and the protocols together (the check can see an import)."""
    names = imports(PACKAGE / "server" / "app.py")
    for protocol in PROTOCOLS:
        assert any(n.startswith(f"widetable.server.{protocol}") for n in names), protocol
