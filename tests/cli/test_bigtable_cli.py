"""widetable bt: the cbt-like verbs on a store (the --endpoint path is in
tests/server/bigtable/test_cli_endpoint.py)."""

from __future__ import annotations

import widetable
from widetable.bigtable import gc as G


def test_create_set_read_lookup_count_and_drop(cli):
    cli("bt", "createtable", "events", "families=stats:maxage=10d||maxversions=1,raw", "splits=g,p")
    assert cli("bt", "ls").stdout.split() == ["events"]
    listing = cli("bt", "ls", "events").stdout
    assert "stats" in listing and "raw" in listing
    cli("bt", "set", "events", "tenant1#a", "stats:clicks=5", "raw:body=hello@2000")
    cli("bt", "set", "events", "tenant1#b", "stats:clicks=7")
    cli("bt", "set", "events", "tenant2#a", "stats:clicks=9")
    out = cli("bt", "lookup", "events", "tenant1#a").stdout
    assert "tenant1#a" in out and "stats:clicks" in out and "'5'" in out and "'hello'" in out
    assert "1970/01/01-00:00:00.002000" in out
    out = cli("bt", "read", "events", "prefix=tenant1#").stdout
    assert "tenant1#a" in out and "tenant1#b" in out and "tenant2" not in out
    out = cli("bt", "read", "events", "count=1", "reversed=true").stdout
    assert "tenant2#a" in out and "tenant1" not in out
    out = cli("bt", "read", "events", "columns=raw").stdout
    assert "raw:body" in out and "stats:" not in out
    out = cli("bt", "read", "events", "regex=tenant.#b").stdout
    assert "tenant1#b" in out and "tenant1#a" not in out
    assert cli("bt", "count", "events").stdout.strip() == "3"
    cli("bt", "deleterow", "events", "tenant2#a")
    assert cli("bt", "count", "events").stdout.strip() == "2"
    cli("bt", "droprange", "events", "tenant1#")
    assert cli("bt", "count", "events").stdout.strip() == "0"
    with cli.open() as db:
        info = db.bigtable.get_table("events")
        assert info.families["stats"].gc == G.Union((G.MaxAge(10 * 86400 * 10**6), G.MaxVersions(1)))
        assert info.split_keys == (b"g", b"p")


def test_families_and_gc_policies(cli):
    cli("bt", "createtable", "t", "families=a")
    cli("bt", "createfamily", "t", "b:maxversions=2")
    cli("bt", "setgcpolicy", "t", "a", "maxversions=3", "and", "maxage=30m")
    cli("bt", "setgcpolicy", "t", "b", "never")
    with cli.open() as db:
        fams = db.bigtable.get_table("t").families
    assert fams["a"].gc == G.Intersection((G.MaxVersions(3), G.MaxAge(30 * 60 * 10**6)))
    assert fams["b"].gc is None
    cli("bt", "set", "t", "r", "a:q=1")
    cli("bt", "droprange", "t", "--all")
    assert cli("bt", "count", "t").stdout.strip() == "0"


def test_errors_name_what_is_wrong(cli):
    cli("bt", "createtable", "t", "families=a")
    res = cli("bt", "lookup", "nosuch", "r", code=1)
    assert "nosuch" in res.stderr
    res = cli("bt", "set", "t", "r", "zz:q=1", code=1)
    assert "zz" in res.stderr
    res = cli("bt", "setgcpolicy", "t", "a", "maxversions=x", code=2)
    assert "maxversions=x" in res.stderr
    res = cli("bt", "read", "t", "bogus=1", code=2)
    assert "bogus" in res.stderr
    res = cli("bt", "lookup", "t", "missing-row", code=1)
    assert "missing-row" in res.stderr
    cli("bt", "droprange", "t", code=2)


def test_createtable_on_a_new_store_and_a_failed_one_leaves_none(tmp_path):
    from typer.testing import CliRunner

    from widetable.cli import app

    data = tmp_path / "fresh"
    res = CliRunner().invoke(app, ["--data", str(data), "bt", "createtable", "t", "families=bad family"])
    assert res.exit_code == 1 and not data.exists()
    res = CliRunner().invoke(app, ["--data", str(data), "bt", "createtable", "t", "families=ok"])
    assert res.exit_code == 0, res.output
    with widetable.open(str(data), purge_interval=None) as db:
        assert db.bigtable.list_tables() == ["t"]
