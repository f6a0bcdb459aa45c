"""Opening balances: ledger rows for stock that existed before the ledger (imports, the demo fleet).

A card or part item in stock with no ledger movement at all gets one `adjust` +1 at its location ("opening
balance"), idempotent by key, so on-hand derived from the ledger then matches what the CMDB holds.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Exists, OuterRef

from cmdb.models import Accelerator, AcceleratorLifecycle, MovementKind, PartItem, PartItemStatus, Site, StockMovement

from .ledger import movement_build

REASON = "opening balance: in stock before the ledger existed"


@transaction.atomic
def opening_balance_write(*, site: Site | None = None, dry_run: bool = False) -> dict[str, int]:
    """Write `adjust` rows for in-stock items the ledger has never seen. Returns counts per item kind."""
    scope = {"stock_location__site": site} if site else {}
    cards = (
        Accelerator.objects.filter(lifecycle=AcceleratorLifecycle.IN_STOCK, stock_location__isnull=False, **scope)
        .exclude(Exists(StockMovement.objects.filter(accelerator=OuterRef("pk"))))
        .select_related("stock_location")
    )
    parts = (
        PartItem.objects.filter(status=PartItemStatus.IN_STOCK, stock_location__isnull=False, **scope)
        .exclude(Exists(StockMovement.objects.filter(part_item=OuterRef("pk"))))
        .select_related("part_model")
    )
    rows = [
        movement_build(
            kind=MovementKind.ADJUST,
            quantity=1,
            location=c.stock_location,
            accelerator=c,
            reason=REASON,
            idempotency_key=f"opening:accelerator:{c.pk}",
        )
        for c in cards
    ]
    count_cards = len(rows)
    rows += [
        movement_build(
            kind=MovementKind.ADJUST,
            quantity=1,
            location=p.stock_location,
            part_item=p,
            reason=REASON,
            idempotency_key=f"opening:part_item:{p.pk}",
        )
        for p in parts
    ]
    if not dry_run:
        StockMovement.objects.bulk_create(rows, batch_size=2000, ignore_conflicts=True)
    return {"accelerators": count_cards, "part_items": len(rows) - count_cards}


__all__ = ["opening_balance_write"]
