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
