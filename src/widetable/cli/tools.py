"""demo and bench: the guided tour of seed 000's design case, and the benchmark forwarder."""

from __future__ import annotations

from typing import Annotated

import typer

from .app import DataOpt, command, open_db
from .literals import CliError


@command("demo")
def demo(
    ctx: typer.Context,
    rows: Annotated[int, typer.Option(min=1, max=1_000_000, help="Records to generate.")] = 3000,
    seed: Annotated[int, typer.Option(help="Random seed of the synthetic data.")] = 42,
    data: DataOpt = None,
) -> None:
    """Build the student-card consumption table (seed 000's design case) and tour the API."""
    from . import demo as demo_module

    with open_db(ctx, data, create=True) as db:
        demo_module.run(db, rows=rows, seed=seed)


@command(
    "bench",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def bench(ctx: typer.Context) -> None:
    """Run the benchmarks of the repo's bench package; arguments go to bench.main."""
    try:
        import bench as bench_package  # type: ignore[import-not-found]
    except ImportError as exc:
        raise CliError(
            f"the bench package is not importable ({exc}); run from a checkout of the "
            "widetable repository with it installed (pip install -e '.[bench]')"
        ) from None
    entry = getattr(bench_package, "main", None)
    if not callable(entry):
        raise CliError("the bench package has no main(argv) function")
    code = entry(list(ctx.args))
    raise typer.Exit(code if isinstance(code, int) else 0)
