"""The Key Visualizer heatmap as a PNG, drawn with matplotlib (Agg, no display)."""

from __future__ import annotations

from pathlib import Path

from .matrix import KeyvizMatrix

MAX_LABELS = 28


def render_png(matrix: KeyvizMatrix, path: str | Path, width: float = 12.0, height: float = 7.0) -> Path:
    """Write ``matrix`` as a heatmap PNG at ``path``: time across, keys down, hot is bright.

    Colours use a square-root scale so moderate load stays visible next to a
    hot spot. Rows are labelled with their start key; at most ``MAX_LABELS``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import PowerNorm

    path = Path(path)
    fig, ax = plt.subplots(figsize=(width, height), dpi=100)
    values = [list(r) for r in matrix.values] or [[0.0]]
    columns = len(values[0])
    top = max(matrix.max, 1e-9)
    span = matrix.column_seconds * columns
    img = ax.imshow(
        values, aspect="auto", interpolation="nearest", cmap="inferno",
        norm=PowerNorm(0.5, vmin=0, vmax=top), extent=(0, span, len(values), 0),
    )
    n = len(matrix.rows)
    step = max(1, -(-n // MAX_LABELS))
    ticks = list(range(0, n, step))
    ax.set_yticks([t + 0.5 for t in ticks])
    ax.set_yticklabels([matrix.rows[t].label for t in ticks], fontsize=7, family="monospace")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("key space (row-key order)")
    ax.set_title(f"Key Visualizer: {matrix.title}  ({n} rows, cold ranges merged)")
    bar = fig.colorbar(img, ax=ax, fraction=0.03, pad=0.01)
    bar.set_label(f"{matrix.metric} per {matrix.column_seconds:g} s")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
