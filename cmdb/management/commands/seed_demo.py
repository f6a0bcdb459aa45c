"""Load a believable demo GPU datacenter (idempotent)."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand
from django.db import connection
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cmdb.services.demo import demo_load, demo_totals, planner_statistics_refresh


class Command(BaseCommand):
    help = "Load the demo fleet: --scale small (48 nodes, 3 vendors) or large (12,500 nodes, 100,000 cards)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--scale", choices=["small", "large"], default="small")

    def handle(self, *args, scale: str, **options) -> None:
        totals = demo_totals(scale)
        started = time.monotonic()
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=False,
            disable=options.get("verbosity", 1) == 0,
        ) as bar:
            nodes = bar.add_task("nodes", total=totals["nodes"])
            cards = bar.add_task("accelerators", total=totals["accelerators"])

            def progress(what: str, n: int) -> None:
                if what == "nodes":
                    bar.advance(nodes, n)
                elif what == "accelerators":
                    bar.advance(cards, n)

            result = demo_load(scale=scale, progress=progress)
        elapsed = time.monotonic() - started
        if result["groups_created"] == 0:
            self.stdout.write(f"Demo fleet ({scale}) already loaded; nothing to do.")
        else:
            if connection.vendor == "postgresql":
                planner_statistics_refresh()
            self.stdout.write(
                self.style.SUCCESS(f"Demo fleet ({scale}): {result['nodes_created']} nodes created in {elapsed:.1f} s.")
            )
