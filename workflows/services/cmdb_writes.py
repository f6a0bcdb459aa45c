"""Workflow-owned writes next to the CMDB: a site's warehouse lookup and the procurement needs of a ticket.

CMDB facts themselves are written by cmdb.services (node_cluster_clear and node_unrack in nodes,
accelerator_receive in stock, health_events_resolve in health), which check scope and holds.
"""

from __future__ import annotations

from django.utils import timezone

from cmdb.models import (
    AcceleratorModel,
    Site,
    StockLocation,
    StockLocationKind,
)

from ..models import ProcurementNeed, Ticket


def warehouse_for(site: Site) -> StockLocation | None:
    """The site's main warehouse (a top-level warehouse location), where returned cards go."""
    return (
        StockLocation.objects.filter(site=site, kind=StockLocationKind.WAREHOUSE, parent__isnull=True)
        .order_by("id")
        .first()
    )


def procurement_need_open(*, ticket: Ticket, site: Site, model: AcceleratorModel, reason: str) -> ProcurementNeed:
    """Record (once per ticket) that a spare is needed and none is in stock."""
    need = ProcurementNeed.objects.filter(ticket=ticket, status=ProcurementNeed.Status.OPEN).first()
    if need is None:
        need = ProcurementNeed.objects.create(ticket=ticket, site=site, accelerator_model=model, reason=reason[:300])
    return need


def procurement_needs_close(*, ticket: Ticket, status: str) -> int:
    return ProcurementNeed.objects.filter(ticket=ticket, status=ProcurementNeed.Status.OPEN).update(
        status=status, closed_at=timezone.now()
    )
