"""The widetable benchmark harness: ``python -m bench`` or ``bench.main(argv)``.

See bench/README.md for what is measured, how, and the targets.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark with command-line ``argv``; returns the exit code."""
    from .cli import main as cli_main  # imported late: `import bench` stays cheap

    return cli_main(argv)


__all__ = ["main"]
