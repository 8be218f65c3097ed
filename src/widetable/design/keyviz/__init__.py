"""Key Visualizer: a heatmap of load over the key space and time (Bigtable's and TiDB's design).

``matrix`` builds it from partition statistics or a simulator run;
``render_png`` draws a PNG; ``render_html`` writes one self-contained HTML page.
"""

from .matrix import METRICS, KeyRow, KeyvizMatrix, from_simulation, from_stats, hot_row
from .render_html import render_html
from .render_png import render_png

__all__ = [
    "METRICS", "KeyRow", "KeyvizMatrix", "from_simulation", "from_stats", "hot_row",
    "render_html", "render_png",
]
