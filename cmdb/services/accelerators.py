"""Moving accelerator cards: every move closes the open placement and opens the next one, in one transaction."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from gpuops.context import ChangeSource, current_context

from ..holds import holds_check
from ..models.accelerators import Accelerator, AcceleratorLifecycle, AcceleratorPlacement, PlacementKind
from ..models.nodes import Node
from ..models.stock import StockLocation

_LIFECYCLE_FOR = {
    PlacementKind.NODE: AcceleratorLifecycle.INSTALLED,
    PlacementKind.STOCK: AcceleratorLifecycle.IN_STOCK,
    PlacementKind.IN_TRANSIT: AcceleratorLifecycle.IN_TRANSIT,
    PlacementKind.AT_VENDOR: AcceleratorLifecycle.RMA,
    PlacementKind.SCRAPPED: AcceleratorLifecycle.SCRAPPED,
}


def placement_build(*, accelerator: Accelerator, note: str = "", at=None) -> AcceleratorPlacement:
    """An unsaved placement row describing where `accelerator` is now (used by bulk paths too)."""
    ctx = current_context()
    if accelerator.node_id:
        kind = PlacementKind.NODE
    elif accelerator.stock_location_id:
        kind = PlacementKind.STOCK
    else:
        kind = {
            AcceleratorLifecycle.RMA: PlacementKind.AT_VENDOR,
            AcceleratorLifecycle.SCRAPPED: PlacementKind.SCRAPPED,
        }.get(accelerator.lifecycle, PlacementKind.IN_TRANSIT)
    node = accelerator.node if accelerator.node_id else None
    return AcceleratorPlacement(
        accelerator=accelerator,
        serial=accelerator.serial or "",
        kind=kind,
        node_id=accelerator.node_id,
        node_hostname=node.hostname if node else "",
        slot_index=accelerator.slot_index if node else None,
        stock_location_id=accelerator.stock_location_id,
        note=note[:300],
        started_at=at or timezone.now(),
        actor_id=ctx.actor_id,
        source=ctx.source,
        correlation_id=ctx.correlation_id,
    )


@transaction.atomic
def accelerator_place(
    *,
    accelerator: Accelerator,
    kind: str,
    node: Node | None = None,
    slot_index: int | None = None,
    pci_bus_id: str = "",
    stock_location: StockLocation | None = None,
    note: str = "",
    override_hold: bool = False,
) -> Accelerator:
    """Put a card somewhere: in a node slot, in a stock location, in transit, at the vendor, or scrapped.

    Locks the card, closes its open placement and opens the new one; the card's site follows the node or the
    stock location. Raises ValidationError when the target slot is taken or the target is incomplete, and
    HeldError when the card leaves or enters a node held by another open change (cmdb.holds).
    """
    card = Accelerator.objects.select_for_update().get(pk=accelerator.pk)
    # The agent reports where a card *is*; a hold is about changes people and other tickets make.
    if current_context().source != ChangeSource.AGENT:
        touched = [n for n in (card.node_id, node.pk if node is not None else None) if n is not None]
        holds_check(touched, what=f"move card {card.serial} in or out of", override=override_hold)
    now = timezone.now()
    if kind == PlacementKind.NODE:
        if node is None or slot_index is None:
            raise ValidationError({"node": "A node and a slot are needed to install a card."})
        occupant = Accelerator.objects.filter(node=node, slot_index=slot_index).exclude(pk=card.pk).first()
        if occupant is not None:
            raise ValidationError({"slot_index": f"Slot {slot_index} of {node} holds {occupant} already."})
        card.node, card.slot_index, card.stock_location, card.site_id = node, slot_index, None, node.site_id
        card.pci_bus_id = pci_bus_id or card.pci_bus_id
    elif kind == PlacementKind.STOCK:
        if stock_location is None:
            raise ValidationError({"stock_location": "A stock location is needed."})
        card.node, card.slot_index, card.pci_bus_id = None, None, ""
        card.stock_location, card.site_id = stock_location, stock_location.site_id
    else:
        card.node, card.slot_index, card.pci_bus_id, card.stock_location = None, None, "", None
        if kind in (PlacementKind.AT_VENDOR, PlacementKind.SCRAPPED, PlacementKind.IN_TRANSIT):
            card.site_id = None if kind != PlacementKind.IN_TRANSIT else card.site_id
    card.lifecycle = _LIFECYCLE_FOR[PlacementKind(kind)]
    card.is_missing = False
    card.save()
    placements_write(close_ids=[card.pk], opened=[placement_build(accelerator=card, note=note, at=now)], at=now)
    return card


def placements_write(
    *,
    close_ids: Iterable[int] = (),
    opened: Sequence[AcceleratorPlacement] = (),
    at=None,
    batch_size: int | None = None,
) -> None:
    """The one writer of placement history, for one card or a bulk path (API batches, imports, ingestion, the
    warehouse): close the open placement of the cards in `close_ids` at `at`, then open the `opened` rows (built
    with placement_build). Two statements whatever the count; the cards themselves are written by the caller.
    """
    ids = list(close_ids)
    if ids:
        AcceleratorPlacement.objects.filter(accelerator_id__in=ids, ended_at__isnull=True).update(
            ended_at=at or timezone.now()
        )
    if opened:
        AcceleratorPlacement.objects.bulk_create(list(opened), batch_size=batch_size)


def placements_backdate(*, opened_since, to) -> int:
    """Move the start of the open node placements opened since `opened_since` back to `to`: for demo loads, whose
    cards (loaded now) stand for cards in service for months. Returns the rows moved."""
    return AcceleratorPlacement.objects.filter(
        kind=PlacementKind.NODE, ended_at__isnull=True, started_at__gte=opened_since
    ).update(started_at=to)


def accelerator_history(accelerator: Accelerator):
    """The card's placements, oldest first (a selector)."""
    return accelerator.placements.select_related("node", "stock_location").order_by("started_at", "id")
