"""GoogleSQL over Bigtable tables (``db.bigtable.sql``): Bigtable's SQL, with ``_key`` and
one map column per family, planned with sqlglot and run on DuckDB (``sql/duck.py``).

* ``engine.py``: ``GoogleSQL``, prepare (plan cache, answer types) and execute;
* ``text.py``: the literal pre-pass (GoogleSQL's string and bytes literals);
* ``plan.py``: parse and check one SELECT over one table, bind typed parameters;
* ``rowranges.py``: the WHERE's ``_key`` predicates as the row ranges read;
* ``scan.py``: a Bigtable table as SQL rows, in Arrow batches;
* ``direct.py``: plain key reads answered from the batches without DuckDB;
* ``types.py``: GoogleSQL types <-> Arrow and DuckDB, parameter values checked.
"""

from .engine import GoogleSQL, GoogleSQLResult

__all__ = ["GoogleSQL", "GoogleSQLResult"]
