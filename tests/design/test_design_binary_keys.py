"""BINARY key columns holding 8-byte big-endian integers: read as the times or sequences they are."""

from __future__ import annotations

import random

from widetable.design.advisor import advise_evidence
from widetable.design.findings import Evidence, as_int, sequential_density, timestamp_like
from widetable.design.generate import column_value
from widetable.design.record import record_workload
from widetable.design.workloads import KeyColumn

PK = (("k", "BINARY"),)
MS = [1718000000000 + 1000 * i for i in range(500)]


def monotonic(keys) -> object:
    ev = Evidence("t", PK, keys=tuple((k,) for k in keys))
    return next((f for f in advise_evidence(ev).findings if f.rule == "monotonic-first-key"), None)


def test_eight_bytes_read_as_unsigned_or_sign_flipped_int64() -> None:
    assert as_int((1718000000000).to_bytes(8, "big")) == 1718000000000
    assert as_int((2**63 + 1718000000).to_bytes(8, "big")) == 1718000000  # keys.INT64_OFFSET form
    assert timestamp_like((1718000000).to_bytes(8, "big"))
    assert as_int(b"\x00\x01") is None and as_int(bytes(16)) is None  # not an 8-byte integer
    assert sequential_density([i.to_bytes(8, "big") for i in range(500)]) == 1.0


def test_binary_timestamps_and_sequences_are_a_tail_hot_spot() -> None:
    f = monotonic(t.to_bytes(8, "big") for t in MS)
    assert f is not None and "timestamps" in f.title and f.severity == "critical"
    assert f.evidence["timestamp_like_fraction"] == 1.0
    f = monotonic(i.to_bytes(8, "big") for i in range(500))
    assert f is not None and "increasing sequence" in f.title
    rng = random.Random(3)
    assert monotonic(rng.randbytes(8) for _ in range(500)) is None  # random ids spread


def test_recorded_binary_times_and_sequences_stay_in_order() -> None:
    ev = Evidence("t", (("ts", "BINARY"), ("n", "BINARY")),
                  keys=tuple((t.to_bytes(8, "big"), i.to_bytes(8, "big")) for i, t in enumerate(MS)))
    ts, n = record_workload(ev).fields
    assert (ts.kind, ts.unit, n.kind) == ("clock", "ms", "sequence")
    col = KeyColumn("ts", "ts", "BINARY")
    assert column_value(col, {"ts": MS[0]}) == MS[0].to_bytes(8, "big")
    assert column_value(col, {"ts": 9}) < column_value(col, {"ts": 10})  # 8 bytes keep number order
