"""Key Visualizer: the matrix puts the hot band where the workload put it; PNG and HTML render."""

from __future__ import annotations

import matplotlib.image as mpimg
import pytest

import widetable
from widetable.design import SimConfig, get_workload, simulate
from widetable.design.keyviz import from_simulation, from_stats, hot_row, render_html, render_png
from widetable.design.keyviz.matrix import build

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def ycsb_ordered():
    return simulate(get_workload("ycsb-zipfian"), ["ordered"], SimConfig(seed=1, ops=12_000)).results[0]


@pytest.fixture(scope="module")
def ts_first():
    return simulate(get_workload("monitoring"), ["timestamp-first"], SimConfig(seed=1, ops=12_000)).results[0]


def test_zipfian_hot_band_is_at_the_head(ycsb_ordered) -> None:
    m = from_simulation(ycsb_ordered.keyviz, "reads")
    assert len(m.rows) <= 1000
    assert hot_row(m) == 0  # the most popular ids sort first
    heat = m.row_heat()
    third = len(heat) // 3
    assert sum(heat[:third]) > 1.5 * sum(heat[-third:])
    assert heat[0] >= 3 * sorted(heat)[len(heat) // 2]


def test_timestamp_first_hot_spot_walks_down_the_key_space(ts_first) -> None:
    m = from_simulation(ts_first.keyviz, "writes")
    cols = len(m.times)
    hot = [hot_row(m, c) for c in range(0, cols, cols // 6)]
    assert hot == sorted(hot) and hot[-1] > hot[0]  # newest keys are always the last ones


def test_cold_ranges_are_merged() -> None:
    cells = [(0, bytes([i]), None, 1.0) for i in range(200)] + [(0, bytes([100]), None, 500.0)]
    m = build(cells, 1, 1.0, "t", "writes", rows=1000, cold=0.05)
    assert len(m.rows) == 3  # cold, the hot key, cold
    assert m.rows[1].buckets == 1 and m.rows[0].buckets == 100
    unmerged = build(cells, 1, 1.0, "t", "writes", rows=1000, cold=0.0)
    assert len(unmerged.rows) == 200
    assert len(build(cells, 1, 1.0, "t", "writes", rows=50, cold=0.0).rows) == 50


def test_from_partition_statistics(tmp_path) -> None:
    db = widetable.open(":memory:", engine="memory", purge_interval=None, maintenance_interval=None)
    t = db.create_table("t", [("k", "STRING")], split_points=["m"])
    for i in range(300):
        t.put_row((f"z{i}",), {"v": 1})  # all load on the second partition
    t.put_row(("a",), {"v": 1})
    m = from_stats(db.table_stats("t"), "writes", cold=0.0)
    db.close()
    assert [r.start for r in m.rows][:1] == ["-inf"]
    assert hot_row(m) == len(m.rows) - 1
    assert m.rows[-1].label.startswith("m")


@pytest.mark.parametrize("metric", ["reads", "writes", "bytes", "throttled"])
def test_png_renders(ts_first, tmp_path, metric) -> None:
    m = from_simulation(ts_first.keyviz, metric)
    path = render_png(m, tmp_path / f"{metric}.png")
    img = mpimg.imread(path)
    assert img.shape[0] > 400 and img.shape[1] > 800


def test_html_is_self_contained(ycsb_ordered, tmp_path) -> None:
    path = render_html(from_simulation(ycsb_ordered.keyviz, "reads"), tmp_path / "kv.html")
    text = path.read_text()
    assert "<canvas" in text and "kv-data" in text and "mousemove" in text and "wheel" in text
    for ref in ("http://", "https://", "src=", "<link"):
        assert ref not in text, ref
