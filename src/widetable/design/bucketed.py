"""A bucketed table: seed 000 方法三 (分桶寫入), with the reads that go with it.

Rows are written under a bucket number, ``keys.bucket(first key value, N)``,
stored as an extra INTEGER key column in front of the logical primary key, so
a sequential first column (a timestamp) spreads its writes over N key ranges.
A range read asks every bucket for its part of the range at once (a thread
per bucket) and merges the answers back into logical key order — the seed's
"讀取時並行查詢 16 個桶後合并". More buckets spread writes wider and cost a
wider read fan-out.

Callers pass and receive *logical* primary keys; the bucket column is added
on the way in and removed on the way out.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor

from ..errors import ParameterInvalid, describe
from ..keys.builders import bucket
from ..keys.codec import INF_MAX, INF_MIN
from ..table.row import Row
from ..table.table import Table, _check_direction, full_range

BUCKET_COLUMN = "_bucket"
SAMPLE_BUCKETS = 32  # buckets whose first row a wrapper checks against its bucket count


def _check_buckets(buckets: object) -> None:
    if type(buckets) is not int or buckets < 1:
        raise ParameterInvalid(f"buckets must be a positive integer, got {describe(buckets)}")


def _bound(value: object) -> tuple:
    """A logical range bound as a tuple: lists as Table takes them, a scalar as one value."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


class BucketedTable:
    """Wraps a :class:`~widetable.Table` whose first key column is the bucket number."""

    def __init__(self, table: Table, buckets: int) -> None:
        pk = table.schema.primary_key
        if not pk or pk[0] != (BUCKET_COLUMN, "INTEGER") or len(pk) < 2:
            raise ParameterInvalid(
                f"table {table.name!r} is not bucketed: its key must start with ({BUCKET_COLUMN!r}, 'INTEGER')"
            )
        _check_buckets(buckets)
        top = table.get_range(*full_range(len(pk), True), "backward", limit=1).rows
        if top and top[0].primary_key[0] >= buckets:
            # Fewer buckets than the writer used would silently read a subset of the rows.
            raise ParameterInvalid(
                f"table {table.name!r} holds rows in bucket {top[0].primary_key[0]}, "
                f"so it has more than buckets={describe(buckets)} buckets"
            )
        self.table = table
        self.buckets = buckets
        self._check_sample()

    def _check_sample(self) -> None:
        """Refuse a bucket count other than the writer's, as far as the rows show it: the
        first row of each of up to SAMPLE_BUCKETS buckets must lie in the bucket this count
        gives its key. Too many buckets would look for most keys in the wrong bucket (each
        sampled row agrees by chance with odds of about writer's/ours, so a few rows tell)."""
        n = len(self.table.schema.primary_key)
        pad = (INF_MIN,) * (n - 1), (INF_MAX,) * (n - 1)
        for b in sorted(set(range(0, self.buckets, max(1, self.buckets // SAMPLE_BUCKETS)))):
            rows = self.table.get_range((b, *pad[0]), (b, *pad[1]), limit=1).rows
            if not rows:
                continue
            pk = tuple(rows[0].primary_key[1:])
            try:
                want = self.bucket_of(pk)
            except ParameterInvalid:
                continue  # a first value no count buckets: not evidence either way
            if want != b:
                raise ParameterInvalid(
                    f"table {self.table.name!r} holds key {describe(pk)} in bucket {b}, but "
                    f"buckets={self.buckets} puts it in bucket {want}: the table was written "
                    f"with another bucket count")

    @classmethod
    def create(cls, db, name: str, primary_key: list, buckets: int = 16, **options) -> BucketedTable:
        """Create table ``name`` keyed ``(_bucket, *primary_key)``, pre-split at every bucket."""
        _check_buckets(buckets)  # before the table exists, so a refusal creates nothing
        table = db.create_table(
            name, [(BUCKET_COLUMN, "INTEGER"), *primary_key],
            split_points=list(range(1, buckets)) or None, **options,
        )
        return cls(table, buckets)

    # -- keys ------------------------------------------------------------------------

    def bucket_of(self, pk: tuple) -> int:
        """The bucket of a logical key: the MD5 bucket of its first value."""
        first = pk[0] if pk else None
        if not isinstance(first, (str, bytes, int)) or isinstance(first, bool):
            raise ParameterInvalid(
                f"first key value {describe(first)} of {describe(pk)} must be a STRING, "
                f"BINARY or INTEGER value to pick a bucket"
            )
        return bucket(first, self.buckets)

    def normalize_pk(self, pk: object) -> tuple:
        """A logical key as a tuple, taking the forms a Table takes (list, dict, pairs, scalar).

        The wrapped table normalizes it behind a placeholder bucket, so both agree.
        """
        if type(pk) is tuple:
            return pk
        if isinstance(pk, Mapping):
            if BUCKET_COLUMN in pk:
                raise ParameterInvalid(f"primary key {describe(pk)} must not name {BUCKET_COLUMN!r}")
            stored: object = {BUCKET_COLUMN: 0, **pk}
        elif isinstance(pk, list) and pk and all(isinstance(p, tuple) and len(p) == 2 for p in pk):
            stored = [(BUCKET_COLUMN, 0), *pk]
        else:
            stored = [0, *pk] if isinstance(pk, list) else [0, pk]
        return self.table.normalize_pk(stored)[1:]

    def stored_key(self, pk: object) -> tuple:
        pk = self.normalize_pk(pk)
        return (self.bucket_of(pk), *pk)

    @staticmethod
    def _logical(row: Row | None) -> Row | None:
        if row is None:
            return None
        return Row(tuple(row.primary_key[1:]), row.columns, row._stamps, row._versions)

    # -- rows --------------------------------------------------------------------------

    def put_row(self, pk: tuple, columns: dict, **kwargs):
        return self.table.put_row(self.stored_key(pk), columns, **kwargs)

    def get_row(self, pk: tuple, **kwargs) -> Row | None:
        return self._logical(self.table.get_row(self.stored_key(pk), **kwargs))

    def update_row(self, pk: tuple, **kwargs):
        return self.table.update_row(self.stored_key(pk), **kwargs)

    def delete_row(self, pk: tuple, **kwargs):
        return self.table.delete_row(self.stored_key(pk), **kwargs)

    # -- ranges ------------------------------------------------------------------------

    def _bucket_rows(self, b: int, start: tuple, end: tuple, direction: str, limit: int | None,
                     kwargs: dict) -> list[Row]:
        rows: list[Row] = []
        for row in self.table.scan((b, *start), (b, *end), direction, **kwargs):
            rows.append(row)
            if limit is not None and len(rows) >= limit:
                break
        return rows

    def get_range(self, start: tuple, end: tuple, limit: int | None = None, direction: str = "forward",
                  **kwargs) -> list[Row]:
        """Rows with logical keys in ``[start, end)``, in key order, at most ``limit``.

        Every bucket is read in parallel (up to ``limit`` rows each, since any
        bucket may hold all of the first ``limit``) and the results are merged.
        ``direction`` is read as a Table reads it; ``kwargs`` (columns, filter,
        max_versions, time_range) go to each read.
        """
        if limit is not None and (type(limit) is not int or limit <= 0):
            raise ParameterInvalid(f"limit must be a positive integer, got {describe(limit)}")
        reverse = _check_direction(direction)
        start, end = _bound(start), _bound(end)
        with ThreadPoolExecutor(max_workers=min(self.buckets, 16), thread_name_prefix="widetable-bucket") as pool:
            parts = list(pool.map(
                lambda b: self._bucket_rows(b, start, end, direction, limit, kwargs), range(self.buckets),
            ))
        merged = heapq.merge(*parts, key=lambda r: r.primary_key[1:], reverse=reverse)
        out = []
        for row in merged:
            out.append(self._logical(row))
            if limit is not None and len(out) >= limit:
                break
        return out  # type: ignore[return-value]

    def scan(self, start: tuple = (), end: tuple = (), direction: str = "forward", limit: int | None = None,
             **kwargs) -> Iterator[Row]:
        """Every row in ``[start, end)`` (default: all), merged into logical key order, at most ``limit``."""
        # An omitted bound is the table's end; a short one is padded by each bucket's own
        # range read, as any table pads it (``end=("b",)`` stops before the "b" rows).
        whole = full_range(len(self.table.schema.primary_key) - 1, _check_direction(direction))
        start, end = _bound(start) or whole[0], _bound(end) or whole[1]
        yield from self.get_range(start, end, limit, direction, **kwargs)  # type: ignore[misc]

    @property
    def read_fanout(self) -> int:
        """Requests one range read makes: one per bucket."""
        return self.buckets
