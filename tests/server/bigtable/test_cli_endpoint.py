"""widetable bt --endpoint: the cbt-like verbs through a server's Bigtable port (our gRPC
client adapter), and what they wrote as the official client reads it."""

from __future__ import annotations

import uuid

from typer.testing import CliRunner

from widetable.cli import app

from .conftest import INSTANCE


def bt(host: str, *args: str, code: int = 0):
    res = CliRunner().invoke(app, ["bt", *args, "--endpoint", host, "--instance", INSTANCE])
    assert res.exit_code == code, res.output
    assert "Traceback" not in res.output
    return res


def test_the_verbs_through_the_endpoint(bt_server, data_client):
    host = bt_server.host
    name = f"cli{uuid.uuid4().hex[:8]}"
    bt(host, "createtable", name, "families=cf:maxversions=2,meta", "splits=m")
    assert name in bt(host, "ls").stdout.split()
    bt(host, "createfamily", name, "extra")
    bt(host, "setgcpolicy", name, "meta", "maxage=1h", "or", "maxversions=1")
    listing = {line.split(None, 1)[0]: line.split(None, 1)[1].strip()
               for line in bt(host, "ls", name).stdout.splitlines()[2:]}
    assert listing == {"cf": "maxversions=2", "meta": "(maxage=1h || maxversions=1)",
                       "extra": "(keep all)"}
    bt(host, "set", name, "r1", "cf:q=one@1000", "meta:m=x@1000")
    bt(host, "set", name, "r2", "cf:q=two@1000")
    out = bt(host, "lookup", name, "r1").stdout
    assert "cf:q" in out and "'one'" in out
    assert "r2" in bt(host, "read", name, "start=r2").stdout
    assert bt(host, "count", name).stdout.strip() == "2"
    row = data_client.get_table(INSTANCE, name).read_row(b"r1")  # the official client agrees
    assert [(c.family, c.value) for c in row.cells if c.family == "cf"] == [("cf", b"one")]
    bt(host, "deleterow", name, "r2")
    bt(host, "droprange", name, "r")
    assert bt(host, "count", name).stdout.strip() == "0"
    res = bt(host, "lookup", "nosuchtable", "r", code=1)
    assert "nosuchtable" in res.output
