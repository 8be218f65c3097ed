"""SQL over widetable: Tablestore's SQL dialect, planned with sqlglot, run by DuckDB.

``db.sql(statement, params=None, **options)`` is the entry (``session.py``).
The package splits by responsibility:

* ``statements.py`` -- the pre-pass and sqlglot's MySQL parse: what a statement is;
* ``mapping.py``    -- mapping tables (the SQL view of a data table), persisted;
* ``planner.py``    -- a query -> its scans (projection, predicates, LIMIT) and DuckDB's SQL;
* ``access.py``     -- a scan's bound predicates -> key ranges and the index chosen;
* ``scan.py``       -- an access path -> Arrow record batches (parallel per partition);
* ``duck.py``       -- the DuckDB adapter (the only ``duckdb`` import);
* ``result.py``     -- results: SQL types, rows, Arrow, pandas;
* ``session.py``    -- the plan cache, DDL, EXPLAIN, running a statement.

Planning (statements, mapping, planner, access) is pure: it reads no rows.
"""

from .result import SQLResult
from .session import MAX_SCAN_BYTES, MAX_SCAN_ROWS, TIMEOUT, SQLSession

__all__ = ["MAX_SCAN_BYTES", "MAX_SCAN_ROWS", "TIMEOUT", "SQLResult", "SQLSession"]
