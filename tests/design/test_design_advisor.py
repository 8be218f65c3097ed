"""The advisor: the seeds' verdicts on real tables, and each rule on a crafted bad and good design."""

from __future__ import annotations

import pytest

import widetable
from widetable.design.advisor import advise, advise_evidence, read_keys_file
from widetable.design.findings import Evidence, RowShape
from widetable.design.generate import Generator, primary_key
from widetable.design.workloads import get_workload

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def seeded():
    """One store with every design of the monitoring and student-card cases, 3000 writes each."""
    db = widetable.open(":memory:", engine="memory", purge_interval=None, maintenance_interval=None)
    for wname in ("monitoring", "student-card"):
        w = get_workload(wname)
        for d in w.designs:
            t = db.create_table(f"{wname}_{d.name}".replace("-", "_"), d.primary_key, max_time_deviation=10**9)
            for op in Generator(w, 0).ops(3000):
                if op.kind == "write":
                    t.put_row(primary_key(d, op.record), {"v": 1})
    yield db
    db.close()


def rules_of(db, name, **kw) -> set[str]:
    return advise(db, name, simulate_fixes=False, **kw).rules


def test_seed_000_monitoring_verdicts(seeded) -> None:
    assert "monotonic-first-key" in rules_of(seeded, "monitoring_timestamp_first")
    assert rules_of(seeded, "monitoring_ip_first") == set()
    assert rules_of(seeded, "monitoring_md5_prefix") == set()


def test_seed_000_student_card_verdicts(seeded) -> None:
    seller = advise(seeded, "student_card_SellerID", simulate_fixes=False)
    assert "partition-key-skew" in seller.rules
    f = next(f for f in seller.findings if f.rule == "partition-key-skew")
    assert f.severity == "critical" and f.evidence["distinct_values"] == 20
    assert "CardID" in f.fix and "seed 000" in f.seed_rule
    assert rules_of(seeded, "student_card_CardID") == set()
    assert "monotonic-first-key" in rules_of(seeded, "student_card_OrderNumber")


def test_fix_is_simulated_before_and_after(seeded) -> None:
    a = advise(seeded, "monitoring_timestamp_first", simulate_fixes=True)
    f = next(f for f in a.findings if f.rule == "monotonic-first-key")
    assert f.simulation is not None
    assert f.simulation.after.startswith("MachineIp")
    assert f.simulation.after_metrics["steady_throttled_share"] < f.simulation.before_metrics["steady_throttled_share"]
    assert a.to_dict()["findings"][0]["simulation"]["before"]["design"] == f.simulation.before


# -- each rule: fires on a crafted bad design, silent on a good one --------------------------

PK2 = (("a", "STRING"), ("b", "INTEGER"))


def ev(keys, pk=PK2, **kw) -> Evidence:
    return Evidence("t", pk, keys=tuple(keys), **kw)


def fired(e: Evidence) -> set[str]:
    return advise_evidence(e).rules


GOOD = [(f"user{i:05d}", i) for i in range(500)]


def test_good_design_is_silent() -> None:
    assert fired(ev(GOOD)) == set()


def test_monotonic_first_key() -> None:
    bad = ev([(1718000000 + i, f"h{i % 9}") for i in range(500)], pk=(("ts", "INTEGER"), ("h", "STRING")))
    assert "monotonic-first-key" in fired(bad)
    seq = ev([(i, f"h{i}") for i in range(500)], pk=(("id", "INTEGER"), ("h", "STRING")))
    assert "monotonic-first-key" in fired(seq)


def test_a_sequence_written_scattered_is_no_hot_spot() -> None:
    """Reversed digits of sequential ids (the advisor's own fix, seed 004) fill the same
    span as the ids, but the rows' write times show they were not written in key order."""
    from widetable.keys import builders

    pk1 = (("k", "STRING"),)
    ids = range(10_000)
    t0 = 1_718_000_000_000

    def shaped(keys, times):
        return ev([(k,) for k in keys], pk=pk1,
                  rows=tuple(RowShape(1, 8, 8, t) for t in times))

    reversed_ids = [builders.reverse_digits(f"{i:04d}") for i in ids]
    scattered = shaped(reversed_ids, [t0 + i // 10 for i in ids])  # written in id order
    assert "monotonic-first-key" not in fired(scattered)
    padded = [f"{i:04d}" for i in ids]
    f = next(f for f in advise_evidence(shaped(padded, [t0 + i // 10 for i in ids])).findings
             if f.rule == "monotonic-first-key")
    assert f.evidence["write_order_correlation"] > 0.99
    falling = shaped(padded, [t0 - i // 10 for i in ids])  # written from the top down
    assert "monotonic-first-key" in fired(falling)
    # A bulk load in a few milliseconds does not tell the order: the density decides.
    assert "monotonic-first-key" in fired(shaped(reversed_ids, [t0 + i % 8 for i in ids]))


def test_reversed_sequential_ids_in_a_real_table_are_not_flagged(tmp_path) -> None:
    from widetable.keys import builders

    db = widetable.open(str(tmp_path / "s"), purge_interval=None, maintenance_interval=None)
    try:
        for name, key in (("plain", lambda i: f"{i:04d}"),  # every 4-digit id: a full span
                          ("reversed", lambda i: builders.reverse_digits(f"{i:04d}"))):
            t = db.create_table(name, [("id", "STRING")])
            for i in range(10_000):
                t.put_row((key(i),), {"v": i})
                if i % 200 == 0:
                    __import__("time").sleep(0.002)  # writes span many milliseconds
        assert "monotonic-first-key" in rules_of(db, "plain")
        assert "monotonic-first-key" not in rules_of(db, "reversed")
    finally:
        db.close()


def test_concatenated_keys_led_by_a_time_or_a_sequence() -> None:
    from widetable.keys import builders

    pk1 = (("k", "STRING"),)
    for keys in (
        [f"{1718000000123 + i}#dev{i % 7}" for i in range(500)],  # ms time, then a device
        [builders.concat(1718000000 + i, f"dev{i % 7}") for i in range(500)],  # zero-padded
    ):
        f = next(f for f in advise_evidence(ev([(k,) for k in keys], pk=pk1)).findings
                 if f.rule == "monotonic-first-key")
        assert "start with a timestamp" in f.title and f.evidence["timestamp_like_fraction"] == 1.0
    dated = [(f"{20240101 + i % 28}_{i}",) for i in range(500)]  # a date's digits lead
    assert "monotonic-first-key" in fired(ev(dated, pk=pk1))
    seq = advise_evidence(ev([(builders.concat(i, "x"),) for i in range(1, 501)], pk=pk1))
    f = next(f for f in seq.findings if f.rule == "monotonic-first-key")
    assert "start with an increasing sequence" in f.title
    assert f.evidence["sequential_density"] == 1.0
    quiet = (
        [builders.salted(1718000000 + i, 16) for i in range(500)],  # salt buckets lead
        [builders.hash_prefix(1718000000 + i) for i in range(500)],  # a hash leads
        [f"{i % 50:06d},{1718000000 + i}" for i in range(500)],  # 50 devices, then the time
        [f"{i % 400:06d},{i}" for i in range(2000)],  # 400 dense ids, 5 rows each
        [f"user{i}#{1718000000 + i}" for i in range(500)],  # the time comes second
    )
    for keys in quiet:
        assert "monotonic-first-key" not in fired(ev([(k,) for k in keys], pk=pk1)), keys[:3]
    rng = __import__("random").Random(7)
    many = (  # a big table's sample: more rows than the leading numbers can number
        [f"{rng.randrange(1000, 10000)}#{i}" for i in range(2000)],  # a random store id
        [builders.salted(1718000000 + i, 10000) for i in range(2000)],  # 10,000 buckets
    )
    for keys in many:
        assert "monotonic-first-key" not in fired(ev([(k,) for k in keys], pk=pk1, total_rows=60_000))
    phones = [f"{rng.randrange(2090000000, 4160000000)}#home" for _ in range(500)]
    assert "monotonic-first-key" not in fired(ev([(k,) for k in phones], pk=pk1))  # not times
    skewed = [f"{4155550100 + (0 if i % 2 else i % 19)}#home" for i in range(500)]
    assert "partition-key-skew" in fired(ev([(k,) for k in skewed], pk=pk1))


def test_reversed_timestamps_first_make_a_head_hot_spot() -> None:
    from widetable.keys import builders

    ms = [1718000000123 + 1000 * i for i in range(500)]
    cases = {
        "reversed timestamps": [(builders.reverse_timestamp_str(t),) for t in ms],
        "start with a reversed timestamp": [(f"{builders.reverse_timestamp_str(t)}#dev{t % 7}",)
                                            for t in ms],
    }
    for kind, keys in cases.items():
        f = next(f for f in advise_evidence(ev(keys, pk=(("k", "STRING"),))).findings
                 if f.rule == "monotonic-first-key")
        assert kind in f.title and "head hot spot" in f.title and f.severity == "critical"
        assert f.evidence["reversed_timestamp_fraction"] == 1.0 and "reverse it" not in f.fix
    ints = ev([(builders.reverse_timestamp(t), f"d{t % 9}") for t in ms],
              pk=(("rts", "INTEGER"), ("d", "STRING")))
    f = next(f for f in advise_evidence(ints).findings if f.rule == "monotonic-first-key")
    assert f.fix_design[0].name == "d"  # lead with the device, keep newest first within it
    dense = [(builders.reverse_timestamp_str(1718000000 + i),) for i in range(500)]  # 1 a second
    f = next(f for f in advise_evidence(ev(dense, pk=(("k", "STRING"),), total_rows=86_400)).findings
             if f.rule == "monotonic-first-key")
    assert "reversed timestamps" in f.title and "head hot spot" in f.title
    behind = [(f"dev{t % 7}#{builders.reverse_timestamp_str(t)}",) for t in ms]
    assert "monotonic-first-key" not in fired(ev(behind, pk=(("k", "STRING"),)))


def test_partition_key_skew() -> None:
    skew = ev([("hot" if i % 2 else f"v{i}", i) for i in range(500)])
    assert "partition-key-skew" in fired(skew)
    few = ev([(f"s{i % 5}", i) for i in range(500)])
    assert "partition-key-skew" in fired(few)


def test_partition_value_size() -> None:
    keys = [("big" if i < 400 else f"v{i}", i) for i in range(500)]
    assert "partition-value-size" in fired(ev(keys, total_bytes=20 << 30))
    assert "partition-value-size" not in fired(ev(GOOD, total_bytes=20 << 30))


def test_unpadded_integers() -> None:
    bad = ev([(str(i), i) for i in range(1, 300)])
    assert "unpadded-integers" in fired(bad)
    assert "unpadded-integers" not in fired(ev([(f"{i:08d}", i) for i in range(300)]))


def test_separator_order() -> None:
    # seed 000: SellerID a100 / a1001 joined with ':' sorts wrong; ',' sorts right
    bad = ev([(f"{i % 60:06d}:a{100 + i}", i) for i in range(300)] + [("000054:a100", 1), ("000054:a1001", 2)])
    assert "separator-order" in fired(bad)
    good = ev([(f"{i % 60:06d},a{100 + i}", i) for i in range(300)])
    assert "separator-order" not in fired(good)


def test_keys_concat_keys_with_hyphenated_data_are_not_misread() -> None:
    """'-' in every value ties with ','; the data's '-' is not the separator keys.concat used."""
    from widetable.design.rules.encoding import detect_separator
    from widetable.keys import builders

    values = [builders.concat(f"user-{i * 37 % 1000}", i) for i in range(300)]
    assert detect_separator(values) == ","
    assert "separator-order" not in fired(ev([(v, i) for i, v in enumerate(values)]))
    steady = [f"a-{i}~x{i % 3 * '-z'}" for i in range(300)]  # one '~' each, '-' varies
    assert detect_separator(steady) == "~"


def test_long_keys() -> None:
    assert "long-keys" in fired(ev([("x" * 150 + str(i), i) for i in range(100)]))
    assert "long-keys" not in fired(ev(GOOD))


def test_hash_prefix_with_range_scans() -> None:
    from widetable.keys import hash_prefix

    hashed = [(hash_prefix(str(1718000000 + i)), i) for i in range(300)]
    assert "hash-prefix-with-range-scans" in fired(ev(hashed, range_scans=True))
    assert "hash-prefix-with-range-scans" not in fired(ev(hashed, range_scans=False))
    assert "hash-prefix-with-range-scans" not in fired(ev(GOOD, range_scans=True))


def test_hashed_and_salted_keys_name_the_search_index_as_the_remedy() -> None:
    """Seed 000: a hash prefix loses range reads (如果需要範圍查詢，可以使用多元索引替代) and
    buckets lose the global order (通過多元索引實現按時間等欄位的有序查詢): both findings
    name the search index and the calls that build and query it."""
    from widetable.keys import builders, hash_prefix

    hashed = [(hash_prefix(str(1718000000 + i)), i) for i in range(300)]
    salted = [(builders.salted(1718000000 + i, 16), i) for i in range(300)]
    for keys in (hashed, salted):
        f = next(f for f in advise_evidence(ev(keys, range_scans=True)).findings
                 if f.rule == "hash-prefix-with-range-scans")
        assert "多元索引" in f.fix and "db.create_search_index" in f.fix and "db.search" in f.fix, f.fix


def test_hashed_binary_keys_report_their_hashed_fraction() -> None:
    import hashlib

    keys = [(hashlib.md5(str(i).encode()).digest(), i) for i in range(300)]
    f = next(f for f in advise_evidence(ev(keys, pk=(("h", "BINARY"), ("b", "INTEGER")), range_scans=True)).findings
             if f.rule == "hash-prefix-with-range-scans")
    assert f.evidence["hashed_fraction"] == 1.0


def test_reversed_timestamps_are_not_counted_as_timestamps() -> None:
    from widetable.keys import builders

    keys = [(builders.reverse_timestamp(1718000000123 + 1000 * i),) for i in range(500)]
    f = next(f for f in advise_evidence(ev(keys, pk=(("rts", "INTEGER"),))).findings
             if f.rule == "monotonic-first-key")
    assert f.evidence["timestamp_like_fraction"] == 0.0
    assert f.evidence["reversed_timestamp_fraction"] == 1.0 and f.severity == "critical"


def test_wide_rows_and_oversized_cells() -> None:
    wide = ev(GOOD, rows=(RowShape(12000, 10, 120000, 0),) * 5)
    assert {"wide-rows"} <= fired(wide)
    big = ev(GOOD, rows=(RowShape(3, 1_500_000, 1_500_100, 0),))
    assert "oversized-cells" in fired(big)
    assert fired(ev(GOOD, rows=(RowShape(20, 100, 2000, 0),) * 5)) == set()


def test_hot_cold_mix() -> None:
    now = 1_800_000_000_000
    day = 86_400_000
    rows = tuple(RowShape(3, 10, 30, now - (400 if i % 3 else 1) * day) for i in range(300))
    assert "hot-cold-mix" in fired(ev(GOOD, rows=rows, now_ms=now))
    fresh = tuple(RowShape(3, 10, 30, now - day) for _ in range(300))
    assert "hot-cold-mix" not in fired(ev(GOOD, rows=fresh, now_ms=now))


def test_pii_in_keys() -> None:
    emails = ev([(f"user{i}@example.com", i) for i in range(100)])
    assert "pii-in-keys" in fired(emails)
    phones = ev([(f"1380013{i:04d}", i) for i in range(100)], pk=(("phone", "STRING"), ("b", "INTEGER")))
    assert "pii-in-keys" in fired(phones)
    assert "pii-in-keys" not in fired(ev(GOOD))


def test_millisecond_timestamps_are_not_phone_numbers() -> None:
    """1713000123456 reads as country code 17 + 13000123456 unless times are set apart."""
    pk = (("k", "STRING"), ("b", "INTEGER"))
    for fmt in ("{t}", "{t}#dev{i}", "dev{i},{t}"):
        keys = [(fmt.format(t=1713000123456 + 997 * i, i=i % 7), i) for i in range(200)]
        assert "pii-in-keys" not in fired(ev(keys, pk=pk)), keys[0]
    for phone in ("8613800138000", "+8613800138000", "86 13800138000", "+1713000123456"):
        assert "pii-in-keys" in fired(ev([(phone, i) for i in range(100)], pk=pk)), phone


def test_keys_file(tmp_path) -> None:
    p = tmp_path / "keys.jsonl"
    p.write_text('["a", 1]\n["b", 2]\n')
    assert read_keys_file(p) == [("a", 1), ("b", 2)]


def test_keys_file_takes_binary_values_in_the_cli_form(tmp_path) -> None:
    p = tmp_path / "keys.jsonl"
    p.write_text('[{"$binary": "AP8="}, 1]\n{"$binary": "AAE="}\n')
    assert read_keys_file(p) == [(b"\x00\xff", 1), (b"\x00\x01",)]
    p.write_text('[{"$binary": "not base64!"}]\n')
    with pytest.raises(widetable.WidetableError, match="not valid base64") as info:
        read_keys_file(p)
    assert info.value.code == "OTSParameterInvalid"
