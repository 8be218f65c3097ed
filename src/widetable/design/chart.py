"""A chart of a simulation report: designs side by side (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path

from .simulate import SimulationReport


def render_report_chart(report: SimulationReport, path: str | Path) -> Path:
    """Three panels: load share per node, throttled share, partitions over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    results = report.results
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(15, 4.6), dpi=100)
    nodes = len(results[0].node_shares) if results else 0
    width = 0.8 / max(nodes, 1)
    for k in range(nodes):
        a.bar([i + (k - (nodes - 1) / 2) * width for i in range(len(results))],
              [r.node_shares[k] * 100 for r in results], width, label=f"node {k}")
    a.axhline(100 / max(nodes, 1), color="grey", lw=0.8, ls="--")
    a.set_xticks(range(len(results)), [r.design for r in results], rotation=15)
    a.set_ylabel("share of operations (%)")
    a.set_title("load per node (dashed: even)")
    a.legend(fontsize=7)
    b.bar(range(len(results)), [r.throttled_share * 100 for r in results], color="#d9534f", label="whole run")
    b.bar(range(len(results)), [r.steady_throttled_share * 100 for r in results], color="#7a1f1c",
          width=0.4, label="second half")
    b.set_xticks(range(len(results)), [r.design for r in results], rotation=15)
    b.set_ylabel("throttled requests (%)")
    b.set_title("throttled (OTSServerBusy)")
    b.legend(fontsize=7)
    for r in results:
        c.step([e["t"] for e in r.timeline], [e["partitions"] for e in r.timeline], where="post", label=r.design)
    c.set_xlabel("simulated time (s)")
    c.set_ylabel("partitions")
    c.set_title("automatic splits")
    c.legend(fontsize=7)
    fig.suptitle(f"widetable simulate: {report.workload} (seed {report.seed}, capacity "
                 f"{report.config.capacity}/s per partition, {report.config.nodes} nodes)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
