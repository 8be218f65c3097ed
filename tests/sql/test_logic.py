"""SQL behaviour as data files, as DuckDB's sqllogictest: ``logic/<feature>/*.test``.

Each file runs on a fresh store (both engines), embedded (``db.sql``) and through the
official SDK's ``exe_sql_query`` on a server of the same store (the SDK's rows carry no
SQL types, so ``columns`` records are checked embedded only). Records, separated by
blank lines:

* ``load <dataset>``           -- write a data set of ``datasets.py`` (data tables and rows);
* ``statement ok`` + SQL       -- the statement succeeds;
* ``statement error CODE [text]`` + SQL -- it fails with that Tablestore code (and message text);
* ``query`` / ``query rowsort`` + SQL + ``----`` + rows -- the rows, tab-separated, in
  order (or sorted); NULL, true/false, floats as ``%g``, binaries as 0x...;
* ``columns`` + SQL + ``----`` + ``name TYPE`` lines -- the result's columns
  (``<instance>`` stands for the store's name);
* ``explain`` + SQL + ``----`` + lines -- each line appears in the EXPLAIN output.
"""

from __future__ import annotations

from pathlib import Path

import threading

import pytest

from widetable import WidetableError
from widetable.server import KeyStore, WidetableServer

from .datasets import DATASETS

LOGIC = Path(__file__).parent / "logic"
FILES = sorted(LOGIC.rglob("*.test"))


def render(v: object) -> str:
    if v is None:
        return "NULL"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, bytes):
        return "0x" + v.hex()
    return str(v)


def records(path: Path) -> list[tuple[int, list[str]]]:
    out: list[tuple[int, list[str]]] = []
    block: list[str] = []
    start = 0
    for n, line in enumerate(path.read_text().splitlines() + [""], 1):
        if line.startswith("#"):
            continue
        if line.strip() == "":
            if block:
                out.append((start, block))
                block = []
            continue
        if not block:
            start = n
        block.append(line)
    return out


def split(block: list[str]) -> tuple[str, list[str]]:
    if "----" in block:
        i = block.index("----")
        return "\n".join(block[1:i]), block[i + 1:]
    return "\n".join(block[1:]), []


class SDK:
    """``db.sql``'s shape over the official SDK: ``.sql(text).rows``; errors as WidetableError."""

    columns = None

    def __init__(self, client) -> None:
        self.client = client

    def sql(self, text: str) -> SDK:
        from tablestore import OTSServiceError
        try:
            rows, _, _ = self.client.exe_sql_query(text)
        except OTSServiceError as exc:
            raise WidetableError(exc.get_error_message(), exc.get_error_code()) from None
        self.rows = [tuple(v for _, v in r.attribute_columns) for r in rows]
        return self


@pytest.fixture(params=["embedded", "sdk"])
def runner(request, db):
    if request.param == "embedded":
        yield db
        return
    from tests.server import serving
    server = WidetableServer(db, KeyStore({serving.ACCESS_KEY_ID: serving.ACCESS_KEY_SECRET}),
                             port=0)
    threading.Thread(target=server.serve_forever, name="sql-logic-serve", daemon=True).start()
    try:
        yield SDK(serving.official_client(f"http://127.0.0.1:{server.port}", "v4", "sql-logic"))
    finally:
        server.drain(5)


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(LOGIC)) for p in FILES])
def test_logic(db, runner, engine_name: str, path: Path) -> None:
    instance = "store" if engine_name == "rocksdb" else "memory"  # the store's directory name
    for line, block in records(path):
        head = block[0].split()
        where = f"{path.name}:{line}"
        sql, expected = split(block)
        if head[0] == "load":
            DATASETS[head[1]](db)
        elif head[0] == "statement" and head[1] == "ok":
            runner.sql(sql).rows
        elif head[0] == "statement" and head[1] == "error":
            with pytest.raises(WidetableError) as info:
                runner.sql(sql).rows
            assert info.value.code == head[2], f"{where}: {info.value}"
            text = " ".join(block[0].split(None, 3)[3:])
            assert text in info.value.message, f"{where}: {info.value.message!r}"
        elif head[0] == "query":
            got = ["\t".join(render(v) for v in row) for row in runner.sql(sql).rows]
            if len(head) > 1 and head[1] == "rowsort":
                got, expected = sorted(got), sorted(expected)
            assert got == expected, f"{where}: {sql}"
        elif head[0] == "columns":
            if runner is not db:
                continue
            got = [f"{n} {t}" for n, t in db.sql(sql).columns]
            expected = [e.replace("<instance>", instance) for e in expected]
            assert got == expected, f"{where}: {sql}"
        elif head[0] == "explain":
            text = "\n".join(" | ".join(map(str, r)) for r in runner.sql("EXPLAIN " + sql).rows)
            for want in expected:
                assert want in text, f"{where}: {want!r} not in\n{text}"
        else:
            raise AssertionError(f"{where}: unknown record {block[0]!r}")
