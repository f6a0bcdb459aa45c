"""Recompute the monthly card-hours rollup (cmdb.CardHours) from the history, e.g. to fill past months."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from cmdb.services.capacity import capacity_rollup


class Command(BaseCommand):
    help = (
        "Rebuild the node state spans and the card-hours of the last N months (the current one included) from the "
        "placement and change history. The hourly beat task keeps the last two months current."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--months", type=int, default=12, help="months to recompute, counting this one")

    def handle(self, *args, months: int, **options) -> None:
        if not 1 <= months <= 120:
            raise CommandError("--months must be from 1 to 120")
        result = capacity_rollup(months=months)
        first, last = result.months[0], result.months[-1]
        self.stdout.write(
            f"Card-hours of {first:%Y-%m} to {last:%Y-%m}: {result.rows} rollup rows "
            f"from {result.spans} node state spans."
        )
