"""The Key Visualizer HTML in a real browser: headless Chromium, checked from a screenshot."""

from __future__ import annotations

import os
import shutil
import subprocess

import matplotlib.image as mpimg
import numpy as np
import pytest

from widetable.design import SimConfig, get_workload, simulate
from widetable.design.keyviz import from_simulation, render_html
from widetable.design.keyviz.render_html import BOTTOM, HEADER, LEFT, RIGHT, TOP

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
W, H = 1200, 800


def _ensure_chromium() -> str | None:
    global CHROMIUM
    if CHROMIUM is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run("apt-get update && apt-get install -y chromium", shell=True, check=False,
                       capture_output=True, timeout=900)
        CHROMIUM = shutil.which("chromium")
    return CHROMIUM


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_heatmap_renders_in_chromium_with_the_hot_band_on_top(tmp_path) -> None:
    browser = _ensure_chromium()
    if browser is None:
        pytest.skip("chromium is absent and cannot be installed here (run `make chromium` as root)")
    result = simulate(get_workload("ycsb-zipfian"), ["ordered"], SimConfig(seed=1, ops=12_000)).results[0]
    page = render_html(from_simulation(result.keyviz, "reads"), tmp_path / "kv.html")
    shot = tmp_path / "shot.png"
    cmd = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={W},{H}",
        f"--screenshot={shot}", page.as_uri(),
    ]
    subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    assert shot.exists(), "chromium wrote no screenshot"
    img = mpimg.imread(shot)[..., :3]
    assert img.shape[:2] == (H, W)
    top, bottom = HEADER + TOP, H - BOTTOM
    left, right = LEFT, W - RIGHT
    plot = img[top:bottom, left:right]
    brightness = plot.mean(axis=(1, 2))  # per screen row
    n = len(brightness)
    head, tail = brightness[: n // 10].mean(), brightness[-n // 2 :].mean()
    assert head > 2 * tail, (head, tail)  # the hot band sits at the top, where the zipf head is
    assert plot.std() > 0.02  # a heatmap was drawn, not a blank page
    label_area = img[top:bottom, 10:LEFT - 10]
    assert np.count_nonzero(label_area.mean(axis=2) > 0.5) > 100  # row labels are drawn
