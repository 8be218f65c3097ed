"""The threads that search shards in parallel (tantivy releases the GIL while it works)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="widetable-search")
