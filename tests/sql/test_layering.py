"""The SQL layer's imports, read with ``ast``: only ``sql/duck.py`` imports duckdb, pyarrow
stays where batches are built and answers converted, planning reads no rows, and nothing
below ``sql`` imports it."""

from __future__ import annotations

from tests.importgraph import PACKAGE, imports, offenders, under


def test_only_the_adapter_imports_duckdb() -> None:
    assert offenders("", "duckdb") == {"sql/duck.py": ["duckdb"]}


def test_pyarrow_only_where_batches_are_built() -> None:
    users = {f for f in offenders("", "pyarrow") if not f.startswith("cli/")}
    assert users == {"sql/scan.py", "sql/result.py", "sql/duck.py"}


def test_planning_reads_no_rows() -> None:
    for name in ("statements", "mapping", "planner", "access"):
        found = [n for n in imports(PACKAGE / "sql" / f"{name}.py")
                 if under(n, "widetable.sql.scan", "widetable.sql.duck", "widetable.sql.session",
                          "widetable.storage", "pyarrow", "duckdb")]
        assert found == [], name


def test_nothing_below_sql_imports_it() -> None:
    for folder in ("keys", "storage", "table", "partition", "stream", "index", "search"):
        assert offenders(folder, "widetable.sql") == {}, folder
