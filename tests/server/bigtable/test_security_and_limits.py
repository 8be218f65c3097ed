"""The Bigtable port's TLS and shared token, throttling answered RESOURCE_EXHAUSTED, and
malformed requests answered INVALID_ARGUMENT (a real ``widetable serve`` each time)."""

from __future__ import annotations

import subprocess

import grpc
import pytest

from widetable.client.bigtable import connect_bigtable
from widetable.errors import ObjectNotExist, WidetableError
from widetable.wire.bigtable import v2

from .conftest import BigtableServed, table_path


def _cert(tmp_path):
    import shutil

    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def test_tls_and_a_shared_token(tmp_path):
    cert, key = _cert(tmp_path)
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    served = BigtableServed(tmp_path / "data", "--bigtable-tls-cert", str(cert),
                            "--bigtable-tls-key", str(key), "--bigtable-token-file", str(token))
    try:
        roots = cert.read_bytes()
        with connect_bigtable(served.host, token="s3cret-token", root_certificates=roots) as bt:
            bt.create_table("t", [])
            assert "t" in bt.list_tables()
        with connect_bigtable(served.host, token="wrong", root_certificates=roots) as bt:
            with pytest.raises(WidetableError, match="bearer token"):
                bt.list_tables()
        with connect_bigtable(served.host, root_certificates=roots) as bt:  # no token at all
            with pytest.raises(WidetableError, match="bearer token"):
                bt.table("t").read_row(b"k")
        plain = grpc.insecure_channel(served.host)  # TLS is required
        call = plain.unary_unary("/google.bigtable.v2.Bigtable/PingAndWarm",
                                 request_serializer=lambda b: b, response_deserializer=lambda b: b)
        with pytest.raises(grpc.RpcError) as info:
            call(v2.PingAndWarmRequest(name="projects/p/instances/i").SerializeToString(), timeout=5)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        plain.close()
    finally:
        served.stop()


def test_the_official_client_with_credentials_over_tls(tmp_path, monkeypatch):
    """Beyond loopback a user points the official client at the host (not
    BIGTABLE_EMULATOR_HOST) with credentials holding the token, trusting the certificate."""
    import warnings

    from google.api_core.client_options import ClientOptions
    from google.oauth2.credentials import Credentials

    cert, key = _cert(tmp_path)
    token = tmp_path / "token"
    token.write_text("tok\n")
    served = BigtableServed(tmp_path / "data", "--bigtable-tls-cert", str(cert),
                            "--bigtable-tls-key", str(key), "--bigtable-token-file", str(token))
    monkeypatch.delenv("BIGTABLE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", str(cert))
    warnings.filterwarnings("ignore")
    try:
        from google.cloud import bigtable
        from google.cloud.bigtable.data import SetCell

        opts = ClientOptions(api_endpoint=f"localhost:{served.bt_port}")
        admin = bigtable.Client(project="p", admin=True, credentials=Credentials("tok"),
                                client_options=opts, admin_client_options=opts)
        admin.instance("i").table("t").create(column_families={"cf": None})
        from google.cloud.bigtable.data import BigtableDataClient

        client = BigtableDataClient(project="p", credentials=Credentials("tok"), client_options=opts)
        t = client.get_table("i", "t")
        t.mutate_row(b"k", SetCell("cf", b"q", b"v", 1000))
        assert t.read_row(b"k").cells[0].value == b"v"
        client.close()
    finally:
        served.stop()


def test_throttling_is_resource_exhausted(tmp_path):
    served = BigtableServed(tmp_path / "data", "--capacity", "5")
    try:
        with connect_bigtable(served.host) as bt:
            bt.create_table("hot", [])
        from widetable.bigtable.types import FamilySpec

        with connect_bigtable(served.host) as bt:
            bt.modify_families("hot", create=[FamilySpec("cf")])
        channel = grpc.insecure_channel(served.host)
        call = channel.unary_unary("/google.bigtable.v2.Bigtable/MutateRow",
                                   request_serializer=lambda b: b, response_deserializer=lambda b: b)
        req = v2.MutateRowRequest(table_name=table_path("hot"), row_key=b"k", mutations=[
            v2.Mutation(set_cell=v2.Mutation.SetCell(family_name="cf", column_qualifier=b"q",
                                                     timestamp_micros=1000, value=b"v"))])
        codes = []
        for _ in range(60):
            try:
                call(req.SerializeToString(), timeout=5)
                codes.append("OK")
            except grpc.RpcError as exc:
                codes.append(exc.code().name)
        assert "RESOURCE_EXHAUSTED" in codes and "OK" in codes, codes
        assert set(codes) <= {"OK", "RESOURCE_EXHAUSTED"}
        channel.close()
    finally:
        served.stop()


def test_malformed_requests_are_invalid_argument_and_unknown_methods_unimplemented(bt_server):
    channel = grpc.insecure_channel(bt_server.host)
    ident = lambda b: b  # noqa: E731
    mutate = channel.unary_unary("/google.bigtable.v2.Bigtable/MutateRow", ident, ident)
    with pytest.raises(grpc.RpcError) as info:
        mutate(b"\x0a\xff\xff\xff", timeout=5)  # a length past the end
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "MutateRowRequest" in info.value.details()
    with pytest.raises(grpc.RpcError) as info:
        mutate(v2.MutateRowRequest(table_name="nonsense").SerializeToString(), timeout=5)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "nonsense" in info.value.details()
    stream = channel.unary_stream("/google.bigtable.v2.Bigtable/ReadChangeStream", ident, ident)
    with pytest.raises(grpc.RpcError) as info:
        list(stream(b"", timeout=5))
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "ReadChangeStream" in info.value.details()
    with connect_bigtable(bt_server.host) as bt:  # and it keeps serving
        with pytest.raises(ObjectNotExist):
            bt.get_table("nope")
    channel.close()
