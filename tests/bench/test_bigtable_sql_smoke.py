"""bench.bigtable_sql end to end on a small table: every figure runs and reports."""

from __future__ import annotations


def test_bigtable_sql_smoke(capsys) -> None:
    import warnings

    from bench import bigtable_sql

    warnings.filterwarnings("ignore")
    report = bigtable_sql.run(seconds=0.3, rows=300)
    assert set(report) == {"point", "range of 100", "count of 300"}
    for sql, api in report.values():
        assert sql["ops"] > 0 and api["ops"] > 0
    bigtable_sql.print_report(report)
    assert "SQL / API" in capsys.readouterr().out
