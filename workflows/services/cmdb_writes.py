"""CMDB writes the workflows need that no cmdb service offers (yet). Each is a small transaction on cmdb models
that goes through ordinary saves, so the change history (signals on TrackedModel) records it under the
caller's change context - the ticket's correlation id when a step calls it.

Candidates to move into cmdb.services once the CMDB owners agree: node_cluster_clear, node_unrack,
accelerator_receive, health_events_resolve.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from cmdb.models import (
    Accelerator,
    AcceleratorLifecycle,
    AcceleratorModel,
    HealthEvent,
    MovementKind,
    Node,
    Site,
    StockLocation,
    StockLocationKind,
)
from cmdb.services.stock import accelerator_to_stock

from ..models import ProcurementNeed, Ticket


def warehouse_for(site: Site) -> StockLocation | None:
    """The site's main warehouse (a top-level warehouse location), where returned cards go."""
    return (StockLocation.objects.filter(site=site, kind=StockLocationKind.WAREHOUSE, parent__isnull=True)
            .order_by("id").first())


@transaction.atomic
def node_cluster_clear(*, node: Node) -> Node:
    """Take a node out of its cluster in the CMDB (the scheduler side is the adapter's)."""
    locked = Node.objects.select_for_update().get(pk=node.pk)
    if locked.cluster_id is not None:
        locked.cluster = None
        locked.save(update_fields=["cluster", "updated_at", "version"])
    return locked


@transaction.atomic
def node_unrack(*, node: Node) -> Node:
    """Clear a node's rack and position; its RackUnit rows follow (cmdb signal), freeing the U space."""
    locked = Node.objects.select_for_update().get(pk=node.pk)
    if locked.rack_id is not None or locked.position is not None:
        locked.rack, locked.position = None, None
        locked.save(update_fields=["rack", "position", "updated_at", "version"])
    return locked


@transaction.atomic
def accelerator_receive(*, model: AcceleratorModel, serial: str, location: StockLocation, reason: str,
                        ticket_ref: str, key: str, template: Accelerator | None = None) -> Accelerator:
    """A card we never had arrives (an RMA replacement): create it in transit, then put it into stock with a
    ledger row of kind rma_back. Idempotent by `key` and by serial (a retry finds the card it created)."""
    existing = Accelerator.objects.filter(serial=serial).first()
    if existing is not None:
        if existing.lifecycle == AcceleratorLifecycle.IN_STOCK and existing.stock_location_id == location.pk:
            return existing
        raise ValidationError({"serial": f"Serial {serial} is already in the CMDB ({existing.lifecycle})."})
    card = Accelerator.objects.create(
        model=model, serial=serial, lifecycle=AcceleratorLifecycle.IN_TRANSIT, health="unknown", site=location.site,
        supplier=template.supplier if template else "", po_number=template.po_number if template else "",
        warranty_end=template.warranty_end if template else None)
    return accelerator_to_stock(accelerator=card, location=location, kind=MovementKind.RMA_BACK, reason=reason,
                                ticket_ref=ticket_ref, key=key)


def health_events_resolve(*, accelerator_id: int) -> int:
    """Resolve a card's open health events (its repair is done). Returns how many were resolved."""
    return HealthEvent.objects.filter(accelerator_id=accelerator_id, resolved_at__isnull=True).update(
        resolved_at=timezone.now())


def procurement_need_open(*, ticket: Ticket, site: Site, model: AcceleratorModel, reason: str) -> ProcurementNeed:
    """Record (once per ticket) that a spare is needed and none is in stock."""
    need = ProcurementNeed.objects.filter(ticket=ticket, status=ProcurementNeed.Status.OPEN).first()
    if need is None:
        need = ProcurementNeed.objects.create(ticket=ticket, site=site, accelerator_model=model, reason=reason[:300])
    return need


def procurement_needs_close(*, ticket: Ticket, status: str) -> int:
    return ProcurementNeed.objects.filter(ticket=ticket, status=ProcurementNeed.Status.OPEN).update(
        status=status, closed_at=timezone.now())
