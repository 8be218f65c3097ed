"""The HTTP/2 transport is protocol-neutral: it imports no protocol package and nothing of
the store, only the server's core (listeners) and itself; Bigtable's package uses it."""

from __future__ import annotations

from tests.importgraph import PACKAGE, imports


def test_the_transport_imports_only_the_core_and_itself():
    bad = {}
    for path in sorted((PACKAGE / "server" / "http2").rglob("*.py")):
        found = [n for n in imports(path) if n.startswith("widetable")
                 and not n.startswith(("widetable.server.http2", "widetable.server.core"))]
        if found:
            bad[path.name] = found
    assert bad == {}


def test_the_check_sees_the_transport_where_it_is_used():
    names = imports(PACKAGE / "server" / "bigtable" / "service.py")
    assert any(n.startswith("widetable.server.http2") for n in names)
