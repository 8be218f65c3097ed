"""The tantivy shard adapter (storage/tantivy_index.py) on a real directory."""

from __future__ import annotations

import os
import threading
import time

from widetable.storage.tantivy_index import Shard


def test_size_bytes_ignores_files_removed_while_it_counts(tmp_path) -> None:
    """tantivy writes and removes temporary and merged files in a shard's directory at any
    time. size_bytes listed the directory, then stat'ed each file: one removed in between
    raised FileNotFoundError, which describe_search_index answered 500 (found by
    bench.fuzz with several senders). Files that vanish are not counted."""
    path = tmp_path / "shard"
    path.mkdir()
    shard = Shard(str(path), [("k", "raw")])
    stop = threading.Event()

    def churn() -> None:  # what tantivy does to its temporary files, as fast as it can
        i = 0
        while not stop.is_set():
            name = path / f".tmp{i % 8}"
            name.write_bytes(b"x" * 100)
            os.unlink(name)
            i += 1

    worker = threading.Thread(target=churn, daemon=True)
    worker.start()
    try:
        deadline = time.monotonic() + 2
        calls = 0
        while time.monotonic() < deadline:
            assert shard.size_bytes() >= 0
            calls += 1
    finally:
        stop.set()
        worker.join()
    assert calls > 100


def test_q_beyond_on_keywords_matches_code_point_order() -> None:
    """Search-after on a keyword sort asks tantivy for the terms after (or before) a value:
    a nested regex for short values, the term dictionary for long ones. Both agree with
    Python's string order, for empty, Chinese, regex-special and long values."""
    import random

    rnd = random.Random(5)
    alphabet = ["a", "b", "0", "杭", ".", "*", "\\", "(", "é", "\U0001f600", " "]
    words = {"".join(rnd.choice(alphabet) for _ in range(rnd.randrange(0, 5))) for _ in range(300)}
    words |= {"x" * 150, "x" * 149 + "y", "x" * 151, "", "杭" * 20, "杭" * 19 + "a", "杭" * 21}
    shard = Shard(None, [("k", "rawfast")], pk_levels=1)
    with shard.lock:
        for i, w in enumerate(sorted(words)):
            shard.add(f"o{i}", "row", [], 1, w.encode(), [("k", w)], [i])
        shard.commit(b"{}")
    se = shard.searcher()
    probes = sorted(words)[::7] + ["", "x" * 150, "zzz", "\U0010ffff", "杭" * 20, "杭" * 21]
    for v in probes:
        for desc in (False, True):
            q = shard.q_beyond("k", v, desc)
            got = {src.decode() for _, src in shard.run(se, q, 1000)}
            assert got == {w for w in words if (w < v if desc else w > v)}, (v, desc)
