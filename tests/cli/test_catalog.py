"""create-table, tables, describe, drop-table, and how --data is chosen."""

from __future__ import annotations

from typer.testing import CliRunner

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
    assert err.startswith("Error [OTSObjectAlreadyExist]: table 't' already exists")
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
    assert err.startswith("Error [OTSObjectNotExist]: table 't' does not exist")


def test_missing_store_is_not_created(cli):
    err = cli("tables", code=1).stderr
    assert err.startswith("Error: no store at")
    assert not cli.data.exists()


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
