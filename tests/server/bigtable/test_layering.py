"""Only the gRPC adapters import grpc: server/bigtable/ on the server side and
client/bigtable.py on the client side; wire/bigtable/ (the codecs both use) does not, and
nothing imports the official client or grpcio-tools at run time."""

from __future__ import annotations

from tests.importgraph import PACKAGE, imports, offenders

ALLOWED = {"server/bigtable", "client/bigtable.py"}


def test_only_the_adapters_import_grpc():
    bad = {f: names for f, names in offenders(".", "grpc").items()
           if not any(f.startswith(a) for a in ALLOWED)}
    assert bad == {}


def test_the_check_sees_grpc_where_it_is():
    assert any(n == "grpc" for n in imports(PACKAGE / "server" / "bigtable" / "service.py"))


def test_nothing_needs_the_official_client_or_protoc_at_run_time():
    bad = {f: n for f, n in offenders(".", "google.cloud", "grpc_tools").items()
           if f != "wire/bigtable/regenerate.py"}  # the development-time tool
    assert bad == {}
