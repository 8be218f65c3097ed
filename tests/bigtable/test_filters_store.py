"""The differential filter test through the embedded store: hypothesis rows are written to
a real RocksDB store (and the memory engine) with ``mutate_row``, read back with
``read_rows`` / ``read_row`` / ``check_and_mutate_row`` and a generated filter, and must
equal the plain model's answer.

Another read path joins by adding a param to the ``bt`` fixture that yields an object with
the embedded instance's calls (``create_table``, ``table(name)``, ``delete_table``), e.g.
the gRPC client adapter over a served store.

RowSample is left out of the generated filters: a read draws from the process's
``random`` (a read has no RNG argument), so through a read it is checked statistically
(test_row_sample_through_a_read), and exactly against the model by
test_filters_differential.py with a seeded RNG.
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings

import widetable
from tests.bigtable.model import model_filter, model_read
from tests.bigtable.test_filters_differential import FAMILIES, rows_and_filters
from widetable.bigtable.filters import RowSample
from widetable.bigtable.types import FamilySpec, SetCell

_names = itertools.count()


@pytest.fixture(scope="module", params=["rocksdb", "memory", "grpc"])
def bt(request, tmp_path_factory):
    if request.param == "memory":
        db = widetable.open(":memory:", engine="memory", purge_interval=None)
    else:
        db = widetable.open(str(tmp_path_factory.mktemp("filters") / "store"), engine="rocksdb",
                            purge_interval=None)
    if request.param != "grpc":
        yield db.bigtable
        db.close()
        return
    # the gRPC path: Bigtable's API served on a loopback port, read through the client adapter
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from widetable.client.bigtable import connect_bigtable
    from widetable.server.bigtable import BigtableServer

    pool = ThreadPoolExecutor(2)
    server = BigtableServer(db, pool, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    remote = connect_bigtable(server.endpoint)
    yield remote
    remote.close()
    server.stop(1)
    pool.shutdown()
    db.close()


def _load(bt, rows):
    """A fresh table holding ``rows``; rows without cells are not written."""
    name = f"t{next(_names)}"
    bt.create_table(name, [FamilySpec(f) for f in FAMILIES])
    t = bt.table(name)
    for key, cells in rows:
        if cells:
            t.mutate_row(key, [SetCell(c.family, c.qualifier, c.timestamp, c.value)
                               for c in cells])
    return name, t


def _plain(rows):
    return [(r.key, list(r.cells)) for r in rows]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
@given(rows_and_filters(with_sample=False))
def test_store_reads_agree_with_the_model(bt, case):
    rows, f, _seed = case
    name, t = _load(bt, rows)
    try:
        expected = model_read(f, rows, random.Random(0))
        assert _plain(t.read_rows(filter=f)) == expected
        assert _plain(t.read_rows(filter=f, reverse=True)) == expected[::-1]
        for key, cells in rows:
            want = model_filter(f, key, cells, [])
            got = t.read_row(key, filter=f)
            assert (list(got.cells) if got is not None else []) == want
        for key, cells in rows:
            # the predicate path: true when the filter outputs any cell of the row
            want = bool(model_filter(f, key, cells, []))
            marker = [SetCell("a", b"marker", 1000, b"m")]
            assert t.check_and_mutate_row(key, predicate=f, true_mutations=marker,
                                          false_mutations=marker) is want
    finally:
        bt.delete_table(name)


def test_row_sample_through_a_read(bt):
    """RowSample through each read path: about p of the rows, each whole or absent."""
    name = f"t{next(_names)}"
    bt.create_table(name, [FamilySpec("a"), FamilySpec("b")])
    try:
        t = bt.table(name)
        for i in range(0, 1000, 100):
            t.mutate_rows([(b"r%04d" % j, [SetCell("a", b"q", 1000, b"x"),
                                           SetCell("b", b"q", 2000, b"y")])
                           for j in range(i, i + 100)])
        got = list(t.read_rows(filter=RowSample(0.3)))
        # binomial(1000, 0.3): standard deviation 14.5, so 300 +- 100 is beyond 6.8 of them
        assert 200 < len(got) < 400
        assert all(len(r.cells) == 2 for r in got)
        assert [r.key for r in got] == sorted(r.key for r in got)
    finally:
        bt.delete_table(name)
