"""create-table, tables, describe, drop-table, and how --data is chosen."""

from __future__ import annotations

from typer.testing import CliRunner

import widetable
from widetable.cli import app


def test_create_list_describe(cli):
    out = cli(
        "create-table",
        "consumption",
        "--pk",
        "CardID:STRING",
        "--pk",
        "DeviceID:string",
        "--pk",
        "OrderNumber:INTEGER",
        "--max-versions",
        "3",
        "--ttl",
        "600",
        "--max-time-deviation",
        "120",
    ).stdout
    assert "Created table consumption" in out
    assert (
        "consumption\tCardID STRING, DeviceID STRING, OrderNumber INTEGER" in cli("tables").stdout
    )
    desc = cli("describe", "consumption").stdout
    for text in ("CardID", "DeviceID", "OrderNumber", "partition key", "INTEGER", "600 s", "120 s"):
        assert text in desc
    with cli.open() as db:
        d = db.describe_table("consumption")
        assert d.primary_key == [
            ("CardID", "STRING"),
            ("DeviceID", "STRING"),
            ("OrderNumber", "INTEGER"),
        ]
        assert (d.options.max_versions, d.options.ttl, d.options.max_time_deviation) == (
            3,
            600,
            120,
        )


def test_tables_on_empty_store(cli):
    cli("create-table", "t", "--pk", "k:STRING")
    cli("drop-table", "t", "--yes")
    result = cli("tables")
    assert result.stdout == ""
    assert "No tables." in result.stderr


def test_create_table_errors(cli):
    cli("create-table", "t", "--pk", "k:STRING")
    err = cli("create-table", "t", "--pk", "k:STRING", code=1).stderr
    assert err.startswith("Error [OTSObjectAlreadyExist]: Requested table already exists.")
    assert "'t'" in err
    assert (
        "Error [OTSParameterInvalid]" in cli("create-table", "u", "--pk", "k:FLOAT", code=1).stderr
    )
    assert (
        "Error [OTSParameterInvalid]"
        in cli("create-table", "u", "--pk", "k:STRING", "--ttl", "0", code=1).stderr
    )
    assert "NAME:TYPE" in cli("create-table", "u", "--pk", "k", code=2).stderr
    cli("create-table", "u", code=2)  # --pk is required


def test_drop_table_confirms(cli):
    cli("create-table", "t", "--pk", "k:STRING")
    cli("drop-table", "t", input="n\n", code=1)
    assert "t\t" in cli("tables").stdout
    assert "Dropped table t" in cli("drop-table", "t", input="y\n").stdout
    err = cli("drop-table", "t", "--yes", code=1).stderr
    assert err.startswith("Error [OTSObjectNotExist]: Requested table does not exist.")
    assert "'t'" in err


def test_missing_store_is_not_created(cli):
    err = cli("tables", code=1).stderr
    assert err.startswith("Error: no store at")
    assert not cli.data.exists()


def test_a_directory_that_is_not_a_store_is_left_as_it_is(cli):
    cli.data.mkdir()
    err = cli("tables", code=1).stderr
    assert err.startswith("Error: not a widetable store at")
    (cli.data / "notes.txt").write_text("mine")
    for args in (("tables",), ("describe", "t"), ("scan", "t"), ("stream", "tail", "t")):
        assert "not a widetable store" in cli(*args, code=1).stderr
    assert sorted(p.name for p in cli.data.iterdir()) == ["notes.txt"]


def test_a_create_table_that_fails_leaves_no_new_store(cli, tmp_path):
    cli("create-table", "u", "--pk", "k:FLOAT", code=1)
    assert not cli.data.exists()  # the directory it would have made
    cli.data.mkdir()
    cli("create-table", "u", "--pk", "k:STRING", "--ttl", "0", code=1)
    assert list(cli.data.iterdir()) == []  # an empty directory stays empty
    cli("create-table", "u", "--pk", "k:STRING")
    cli("create-table", "v", "--pk", "k:FLOAT", code=1)  # an existing store keeps its tables
    assert cli("tables").stdout.startswith("u\t")


def test_a_new_store_goes_only_into_a_new_or_empty_directory(cli, tmp_path):
    nested = tmp_path / "x" / "y" / "z"
    args = ["create-table", "u", "--pk", "k:FLOAT", "--data", str(nested)]
    assert CliRunner().invoke(app, args).exit_code == 1
    assert not (tmp_path / "x").exists()  # every directory made for it is gone again
    cli.data.mkdir()
    (cli.data / "notes.txt").write_text("mine")
    err = cli("create-table", "u", "--pk", "k:STRING", code=1).stderr
    assert "holds files but no widetable store" in err
    assert sorted(p.name for p in cli.data.iterdir()) == ["notes.txt"]
    afile = tmp_path / "afile"
    afile.write_text("mine")
    err = CliRunner().invoke(app, ["demo", "--data", str(afile)]).stderr
    assert "is not a directory" in err and afile.read_text() == "mine"


def test_discarding_a_new_store_keeps_files_that_are_not_its_own(tmp_path):
    from widetable.cli.app import NewStore

    path = tmp_path / "new" / "store"
    new = NewStore(str(path))
    db = widetable.open(str(path), purge_interval=None)
    (path / "notes.txt").write_text("written while the command ran")
    new.discard(db)
    assert [p.name for p in path.iterdir()] == ["notes.txt"]  # the store's files are gone
    empty = tmp_path / "empty"
    empty.mkdir()
    new = NewStore(str(empty))
    db = widetable.open(str(empty), purge_interval=None)
    db.create_table("t", [("k", "STRING")])  # a table now exists: the store stays
    new.discard(db)
    assert (empty / "CURRENT").exists()


def test_a_serve_that_cannot_listen_leaves_no_new_store(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        data = tmp_path / "fresh"
        result = CliRunner().invoke(app, ["serve", "--data", str(data), "--port", str(port)])
    assert result.exit_code == 1, result.output
    assert not data.exists()


def test_data_from_env_and_per_command(tmp_path):
    runner = CliRunner()
    env_dir, cmd_dir = tmp_path / "env", tmp_path / "cmd"
    env = {"WIDETABLE_DATA": str(env_dir)}
    assert runner.invoke(app, ["create-table", "a", "--pk", "k:STRING"], env=env).exit_code == 0
    args = ["create-table", "b", "--pk", "k:STRING", "--data", str(cmd_dir)]
    assert runner.invoke(app, args, env=env).exit_code == 0
    assert runner.invoke(app, ["tables"], env=env).stdout.startswith("a\t")
    assert runner.invoke(app, ["tables", "--data", str(cmd_dir)], env=env).stdout.startswith("b\t")
    assert runner.invoke(app, ["--data", str(cmd_dir), "tables"], env=env).stdout.startswith("b\t")


def test_create_table_with_split_points_capacity_and_auto_increment(cli):
    out = cli(
        "create-table", "ev", "--pk", "Host:STRING", "--pk", "Seq:INTEGER:AUTO_INCREMENT",
        "--split-point", "8", "--split-point", "c", "--capacity", "100",
    ).stdout
    assert "Seq INTEGER AUTO_INCREMENT" in out
    first = cli("put", "ev", "--pk", '["h1", "AUTO_INCREMENT"]', "--col", "v=1").stdout
    second = cli("put", "ev", "--pk", '["h1", "AUTO_INCREMENT"]', "--col", "v=2").stdout
    assert first != second and "Put row ['h1', " in first
    described = cli("describe", "ev").stdout
    assert "partitions (3)" in described and "pre-split" in described
    db = cli.open()
    try:
        desc = db.describe_table("ev")
        assert [p.start for p in desc.partitions] == [None, "8", "c"]
        assert desc.options.capacity == 100
        seqs = [r.primary_key[1] for r in db.table("ev").scan()]
        assert len(seqs) == 2 and seqs[0] < seqs[1]
    finally:
        db.close()


def test_create_table_rejects_bad_split_points_and_key_specs(cli):
    err = cli("create-table", "x", "--pk", "a:INTEGER", "--split-point", "zz", code=2).stderr
    assert "not a valid INTEGER" in err
    err = cli("create-table", "x", "--pk", "a:STRING:SERIAL", code=2).stderr
    assert "AUTO_INCREMENT" in err


def test_describe_prints_bounds_that_look_like_markup(cli):
    cli("create-table", "t", "--pk", "k:STRING", "--split-point", "[/x]", "--split-point", "m[b]")
    out = cli("describe", "t").stdout
    assert "'[/x]'" in out and "'m[b]'" in out


def test_describe_shows_background_loops_and_index_health(cli):
    cli("create-table", "t", "--pk", "k:STRING")
    with cli.open() as db:
        db.update_table("t", defined_columns=[("c", "STRING")])
        db.create_index("t", "by_c", ["c"])
        db.table("t").put_row(("a",), {"c": "x" * 2000})  # too long for the index's key
        assert db.wait_for_indexes(10)
    out = cli("describe", "t").stdout
    assert "background" in out and "too long" in out
    for loop in ("purge", "maintenance", "indexer"):
        assert loop in out
