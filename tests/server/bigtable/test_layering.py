"""Only the adapters import their libraries: grpc only client/bigtable.py (the server's
gRPC transport is server/http2, which needs no grpc), hpack only server/http2;
wire/bigtable/ (the codecs both sides use) imports neither, and nothing imports the
official client or grpcio-tools at run time."""

from __future__ import annotations

from tests.importgraph import PACKAGE, imports, offenders

ALLOWED = {"client/bigtable.py"}


def test_only_the_adapters_import_grpc():
    bad = {f: names for f, names in offenders(".", "grpc").items()
           if not any(f.startswith(a) for a in ALLOWED)}
    assert bad == {}


def test_only_the_http2_transport_imports_hpack_or_h2():
    bad = {f: names for f, names in offenders(".", "hpack", "h2").items()
           if not f.startswith("server/http2")}
    assert bad == {}


def test_the_check_sees_grpc_and_hpack_where_they_are():
    assert any(n == "grpc" for n in imports(PACKAGE / "client" / "bigtable.py"))
    assert any(n.startswith("hpack") for n in imports(PACKAGE / "server" / "http2" / "headers.py"))


def test_nothing_needs_the_official_client_or_protoc_at_run_time():
    bad = {f: n for f, n in offenders(".", "google.cloud", "grpc_tools").items()
           if f != "wire/bigtable/regenerate.py"}  # the development-time tool
    assert bad == {}


def test_relative_imports_of_a_package_file_resolve_from_its_folder():
    # server/bigtable/__init__.py's ``from ..http2 import`` is widetable.server.http2
    names = imports(PACKAGE / "server" / "bigtable" / "__init__.py")
    assert "widetable.server.http2" in names
    assert not any(".__init__" in n or n.startswith("widetable.server.bigtable.http2") for n in names)
