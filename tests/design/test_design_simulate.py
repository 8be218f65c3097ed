"""The simulator: real stores, seed verdicts of the monitoring case, determinism."""

from __future__ import annotations

import pytest

from widetable.design import SimConfig, get_workload, simulate

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def monitoring():
    return simulate(get_workload("monitoring"), config=SimConfig(seed=3, ops=24_000))


def test_same_seed_same_report() -> None:
    w = get_workload("student-card")
    cfg = SimConfig(seed=11, ops=3000, engine="memory")
    a = simulate(w, ["SellerID", "CardID"], cfg).to_dict(keyviz=True)
    b = simulate(w, ["SellerID", "CardID"], cfg).to_dict(keyviz=True)
    assert a == b
    c = simulate(w, ["SellerID", "CardID"], SimConfig(seed=12, ops=3000, engine="memory")).to_dict()
    assert c != {k: v for k, v in a.items()}


def test_timestamp_first_is_a_tail_hot_spot(monitoring) -> None:
    ts, ip, md5 = (monitoring.result(n) for n in ("timestamp-first", "ip-first", "md5-prefix"))
    assert ts.steady_throttled_share > 0.2
    assert ip.steady_throttled_share < 0.05 and md5.steady_throttled_share < 0.05
    assert ts.busiest_node_ratio > 2 * ip.busiest_node_ratio / 1.5
    assert ts.splits >= 3  # load splits happen, but cannot help
    assert all(e["reason"] == "load" for e in ts.split_events)


def test_fanout_per_design(monitoring) -> None:
    assert monitoring.result("ip-first").fanout_max == 1
    assert monitoring.result("md5-prefix").fanout_max == 1
    assert monitoring.result("bucketed-16").fanout_mean == 16  # seed 000 方法三: query every bucket


def test_node_and_partition_shares_add_up(monitoring) -> None:
    for r in monitoring.results:
        assert sum(r.node_shares) == pytest.approx(1, abs=0.01)
        assert sum(s for _, s in r.partition_shares) == pytest.approx(1, abs=0.01)
        assert len(r.node_shares) == 4
        assert r.partitions >= len(r.partition_shares) >= 1


def test_seller_id_is_worse_than_card_id() -> None:
    r = simulate(get_workload("student-card"), ["CardID", "SellerID"], SimConfig(seed=2, ops=24_000))
    card, seller = r.result("CardID"), r.result("SellerID")
    assert seller.steady_throttled_share > card.steady_throttled_share
    assert seller.hot_keys  # one seller's value cannot be split
