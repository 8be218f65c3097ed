"""The SQL layer's imports, read with ``ast``: only ``sql/duck.py`` imports duckdb, pyarrow
stays where batches are built and answers converted, planning reads no rows, and nothing
below ``sql`` imports it."""

from __future__ import annotations

from tests.importgraph import PACKAGE, imports, offenders, under


def test_only_the_adapter_imports_duckdb() -> None:
    assert offenders("", "duckdb") == {"sql/duck.py": ["duckdb"]}


def test_pyarrow_only_where_batches_are_built() -> None:
    users = {f for f in offenders("", "pyarrow") if not f.startswith("cli/")}
    # client/sql.py: to_arrow() of a remote answer, imported when called; googlesql/scan.py
    # builds a Bigtable table's batches, googlesql/direct.py answers from them, googlesql/types.py
    # maps GoogleSQL types to Arrow's
    assert users == {"sql/scan.py", "sql/result.py", "sql/duck.py", "sql/interchange.py",
                     "client/sql.py", "sql/googlesql/scan.py", "sql/googlesql/direct.py",
                     "sql/googlesql/types.py"}


def test_planning_reads_no_rows() -> None:
    for name in ("statements", "mapping", "planner", "access"):
        found = [n for n in imports(PACKAGE / "sql" / f"{name}.py")
                 if under(n, "widetable.sql.scan", "widetable.sql.duck", "widetable.sql.session",
                          "widetable.storage", "pyarrow", "duckdb")]
        assert found == [], name


def test_googlesql_planning_reads_no_rows() -> None:
    for name in ("googlesql/text", "googlesql/plan", "googlesql/rowranges", "googlesql/types"):
        found = [n for n in imports(PACKAGE / "sql" / f"{name}.py")
                 if under(n, "widetable.sql.scan", "widetable.sql.duck",
                          "widetable.sql.googlesql.scan", "widetable.storage", "duckdb")]
        assert found == [], name


def test_nothing_below_sql_imports_it() -> None:
    for folder in ("keys", "storage", "partition", "stream", "index", "search"):
        assert offenders(folder, "widetable.sql") == {}, folder
    # Table.to_arrow is the table's verb; its Arrow code lives in sql/interchange.py
    # (imported when called), so pyarrow stays out of the row layer.
    assert offenders("table", "widetable.sql") == {
        "table/table.py": ["widetable.sql.interchange", "widetable.sql.interchange.table_to_arrow"]}
