"""Minimum stock: when free spares of a model at a site fall below the minimum, open (or update) the single
open refill request for that site and model in procurement - one request per site and model, not one per event.

Free = on hand (ledger) - actively reserved. The refill orders up to the level's `target` (or its minimum).
Runs from beat every 15 minutes and, on commit, after warehouse moves that take stock out (API), so a drop is
seen within seconds without making every movement wait for procurement.
"""

from __future__ import annotations

from dataclasses import dataclass

from cmdb.models import Site
from integrations.procurement.models import ProcurementRequest
from integrations.procurement.services.requests import refill_request_upsert

from ..conf import warehouse_setting
from ..models import MinimumStock
from .stock import stock_lines


@dataclass(frozen=True)
class MinimumStockOutcome:
    level: MinimumStock
    free: int
    request: ProcurementRequest | None
    created: bool


def minimum_stock_check(*, site: Site | None = None) -> list[MinimumStockOutcome]:
    """Check every active minimum (of one site, or all) and open/update refill requests where below.

    Returns the levels found below their minimum with the request each opened or updated.
    Each refill is its own transaction (refill_request_upsert), so one failing level does not hold the rest.
    """
    levels = MinimumStock.objects.filter(is_active=True).select_related("site", "accelerator_model", "part_model")
    if site is not None:
        levels = levels.filter(site=site)
    levels = list(levels)
    if not levels:
        return []
    lines = {(ln.kind, ln.site_id, ln.model_id): ln for ln in stock_lines(site_ids={lv.site_id for lv in levels})}
    outcomes: list[MinimumStockOutcome] = []
    for level in levels:
        kind, model_id = (
            ("accelerator", level.accelerator_model_id) if level.accelerator_model_id else ("part", level.part_model_id)
        )
        line = lines.get((kind, level.site_id, model_id))
        free = line.free if line else 0
        if free >= level.minimum:
            continue
        wanted = max(level.order_up_to - free, 1)
        outcome = refill_request_upsert(
            site=level.site,
            quantity=wanted,
            budget_code=warehouse_setting("REFILL_BUDGET_CODE"),
            accelerator_model=level.accelerator_model,
            part_model=level.part_model,
            reason=f"Free {level.item} spares at {level.site.code}: {free}, below the minimum of {level.minimum}; "
            f"ordering {wanted} to reach {level.order_up_to}.",
        )
        outcomes.append(MinimumStockOutcome(level=level, free=free, request=outcome.request, created=outcome.created))
    return outcomes


__all__ = ["MinimumStockOutcome", "minimum_stock_check"]
