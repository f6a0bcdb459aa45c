"""Check that the stock ledger agrees with the CMDB: on-hand per location and model (derived from movements)
against the cards and part items in stock there. Exits 1 when they disagree.

    manage.py warehouse_ledger_check [--site sh1] [--opening-balance [--dry-run]]

--opening-balance first writes `adjust` rows for in-stock items the ledger has never seen (imports, demo data).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cmdb.models import Site
from gpuops.context import ChangeSource, change_context

from ...services.opening import opening_balance_write
from ...services.stock import ledger_drift


class Command(BaseCommand):
    help = "Compare ledger-derived on-hand with the serialised items in stock; optionally write opening balances."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--site", help="Only this site (code).")
        parser.add_argument(
            "--opening-balance",
            action="store_true",
            help="Write opening-balance rows for in-stock items without any movement first.",
        )
        parser.add_argument("--dry-run", action="store_true", help="With --opening-balance: count, write nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        site = None
        if options["site"]:
            site = Site.objects.filter(code=options["site"]).first()
            if site is None:
                raise CommandError(f"No site {options['site']!r}.")
        if options["opening_balance"]:
            with change_context(source=ChangeSource.CLI):
                counts = opening_balance_write(site=site, dry_run=options["dry_run"])
            verb = "would write" if options["dry_run"] else "wrote"
            self.stdout.write(
                f"Opening balance: {verb} {counts['accelerators']} card and {counts['part_items']} part row(s)."
            )
        drift = ledger_drift(site=site)
        for d in drift:
            self.stdout.write(
                f"{d.location}: {d.kind} model {d.model_id}: ledger {d.ledger_quantity}, in stock {d.items_in_stock}"
            )
        if drift:
            raise CommandError(f"{len(drift)} location/model pair(s) disagree with the ledger.")
        self.stdout.write(self.style.SUCCESS("Ledger and stock agree."))
