"""The stock ledger beyond the CMDB's reservation services: receipts, issues, returns, RMA, scrap, transfers and
stock-take adjustments, for serialised cards, serialised parts and consumables.

Rules every function here keeps:
- every change of on-hand stock is one StockMovement row (who, when, why, ticket) in the same transaction as
  the item's own change (a card's placement, a part item's status); nothing is edited in place;
- on-hand is derived: sum(quantity) of the movements at a location, per model (`on_hand`);
- an outflow never takes a location below zero: serialised items must be in stock there, and consumable
  outflows lock the location row (select_for_update) so two concurrent issues cannot both see the last units;
- an `idempotency_key` makes a retried call a no-op (the unique key on StockMovement is the arbiter).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone

from cmdb.models import (
    Accelerator,
    AcceleratorLifecycle,
    AcceleratorModel,
    MovementKind,
    Node,
    PartItem,
    PartItemStatus,
    PartModel,
    PlacementKind,
    Site,
    StockLocation,
    StockLocationKind,
    StockMovement,
)
from cmdb.services.accelerators import accelerator_place, placement_build, placements_write
from cmdb.services.changelog import records_for_bulk, records_write
from cmdb.services.stock import card_lock, card_not_reserved, reason_require
from gpuops.context import current_context


def stock_location_default(site: Site) -> StockLocation:
    """Where receipts land at a site: its first top-level warehouse location, created ("warehouse") if none."""
    location = (
        StockLocation.objects.filter(site=site, kind=StockLocationKind.WAREHOUSE, parent__isnull=True)
        .order_by("name", "id")
        .first()
    )
    if location is None:
        location, _ = StockLocation.objects.get_or_create(
            site=site, name="warehouse", defaults={"kind": StockLocationKind.WAREHOUSE}
        )
    return location


def movement_build(
    *,
    kind: str,
    quantity: int,
    location: StockLocation | None,
    reason: str,
    ticket_ref: str = "",
    accelerator: Accelerator | None = None,
    part_item: PartItem | None = None,
    part_model: PartModel | None = None,
    accelerator_model_id: int | None = None,
    to_location: StockLocation | None = None,
    node: Node | None = None,
    idempotency_key: str | None = None,
) -> StockMovement:
    """An unsaved ledger row under the current change context (actor, correlation id)."""
    ctx = current_context()
    if accelerator is not None and accelerator_model_id is None:
        accelerator_model_id = accelerator.model_id
    if part_item is not None and part_model is None:
        part_model = part_item.part_model
    return StockMovement(
        at=timezone.now(),
        kind=kind,
        accelerator=accelerator,
        part_item=part_item,
        part_model=part_model,
        accelerator_model_id=accelerator_model_id,
        quantity=quantity,
        location=location,
        to_location=to_location,
        node=node,
        actor_id=ctx.actor_id,
        reason=reason[:300],
        ticket_ref=ticket_ref,
        correlation_id=ctx.correlation_id,
        idempotency_key=idempotency_key,
    )


def _done(key: str | None) -> bool:
    return bool(key) and StockMovement.objects.filter(idempotency_key=key).exists()


def _sub_key(key: str | None, suffix: str) -> str | None:
    return f"{key}:{suffix}" if key else None


# The movement rules (a reason, the card locked, no moving a card reserved for another) are cmdb's, shared.
_require_reason = reason_require


# --- derived quantities -------------------------------------------------------------------------------------


def on_hand(
    *, location: StockLocation, accelerator_model: AcceleratorModel | None = None, part_model: PartModel | None = None
) -> int:
    """Units of one model at one location, derived from the ledger."""
    qs = StockMovement.objects.filter(location=location)
    qs = qs.filter(accelerator_model=accelerator_model) if accelerator_model else qs.filter(part_model=part_model)
    return qs.aggregate(total=Sum("quantity"))["total"] or 0


def on_hand_rows(*, site: Site | None = None) -> list[dict]:
    """On-hand per (location, model) from the ledger, zero rows left out (a selector).

    Each row: {"location_id", "accelerator_model_id", "part_model_id", "quantity"}.
    """
    qs = StockMovement.objects.filter(location__isnull=False)
    if site is not None:
        qs = qs.filter(location__site=site)
    rows = (
        qs.values("location_id", "accelerator_model_id", "part_model_id")
        .annotate(quantity=Sum("quantity"))
        .order_by("location_id", "accelerator_model_id", "part_model_id")
    )
    return [r for r in rows if r["quantity"]]


def _lock_location(location: StockLocation) -> StockLocation:
    # Serialises quantity outflows of one location: the check "enough units?" and the write happen under it.
    return StockLocation.objects.select_for_update().get(pk=location.pk)


# --- serialised cards ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CardReceipt:
    """A card to create in stock. Purchase facts come from the PO."""

    serial: str
    model: AcceleratorModel
    po_number: str = ""
    supplier: str = ""
    purchase_date: dt.date | None = None
    warranty_end: dt.date | None = None


@transaction.atomic
def accelerators_receive(
    *, cards: Sequence[CardReceipt], location: StockLocation, reason: str, ticket_ref: str = "", key_prefix: str
) -> list[Accelerator]:
    """Create new cards in stock at `location`, each with its placement and a `receive` movement (bulk).

    Idempotent per serial by `key_prefix:<serial>`: serials received before under that prefix are skipped.
    Raises ValidationError when a serial already exists as another card.
    """
    wanted = {c.serial: c for c in cards}
    done = set(
        StockMovement.objects.filter(idempotency_key__in=[f"{key_prefix}:{s}" for s in wanted]).values_list(
            "idempotency_key", flat=True
        )
    )
    todo = [c for s, c in wanted.items() if f"{key_prefix}:{s}" not in done]
    clash = list(Accelerator.objects.filter(serial__in=[c.serial for c in todo]).values_list("serial", flat=True))
    if clash:
        raise ValidationError({"serial": f"Already known as other cards: {', '.join(sorted(clash)[:20])}."})
    new = [
        Accelerator(
            model=c.model,
            serial=c.serial,
            lifecycle=AcceleratorLifecycle.IN_STOCK,
            site_id=location.site_id,
            stock_location=location,
            po_number=c.po_number,
            supplier=c.supplier[:200],
            purchase_date=c.purchase_date,
            warranty_end=c.warranty_end,
        )
        for c in todo
    ]
    if not new:
        return []
    # bulk_create bypasses the change-history signals; write the records the documented bulk way.
    Accelerator.objects.bulk_create(new)
    now = timezone.now()
    placements_write(opened=[placement_build(accelerator=c, note=reason, at=now) for c in new], at=now)
    StockMovement.objects.bulk_create(
        [
            movement_build(
                kind=MovementKind.RECEIVE,
                quantity=1,
                location=location,
                accelerator=c,
                reason=reason,
                ticket_ref=ticket_ref,
                idempotency_key=f"{key_prefix}:{c.serial}",
            )
            for c in new
        ]
    )
    records_write(records_for_bulk(created=new, reason=reason))
    return new


_card_locked = card_lock
_not_reserved = card_not_reserved


@transaction.atomic
def accelerator_issue(
    *, accelerator: Accelerator, node: Node, slot_index: int, reason: str, ticket_ref: str = "", key: str | None = None
) -> Accelerator:
    """Issue an in-stock card into a node slot without a reservation (a manual move). Repairs use
    cmdb.services.stock.spare_reserve + reservation_issue instead."""
    _require_reason(reason)
    if _done(key):
        return Accelerator.objects.get(pk=accelerator.pk)
    card = _card_locked(accelerator)
    if card.lifecycle != AcceleratorLifecycle.IN_STOCK or card.stock_location_id is None:
        raise ValidationError({"accelerator": f"{card} is {card.get_lifecycle_display()}, not in stock."})
    _not_reserved(card, ticket_ref)
    location = card.stock_location
    card = accelerator_place(accelerator=card, kind=PlacementKind.NODE, node=node, slot_index=slot_index, note=reason)
    movement_build(
        kind=MovementKind.ISSUE,
        quantity=-1,
        location=location,
        accelerator=card,
        node=node,
        reason=reason,
        ticket_ref=ticket_ref,
        idempotency_key=key,
    ).save()
    return card


@transaction.atomic
def accelerator_return(
    *,
    accelerator: Accelerator,
    location: StockLocation,
    reason: str,
    ticket_ref: str = "",
    kind: str = MovementKind.RETURN,
    key: str | None = None,
) -> Accelerator:
    """Put a card that is not in stock (removed from a node, back from the vendor) into stock at `location`.

    `kind` is RETURN or RMA_BACK. A card already in stock is moved with `accelerator_transfer` instead, so the
    ledger never counts it twice.
    """
    _require_reason(reason)
    if kind not in (MovementKind.RETURN, MovementKind.RMA_BACK):
        raise ValidationError({"kind": "A return is 'return' or 'rma_back'."})
    if _done(key):
        return Accelerator.objects.get(pk=accelerator.pk)
    card = _card_locked(accelerator)
    if card.lifecycle == AcceleratorLifecycle.IN_STOCK:
        raise ValidationError({"accelerator": f"{card} is already in stock at {card.stock_location}; transfer it."})
    if card.lifecycle == AcceleratorLifecycle.SCRAPPED:
        raise ValidationError({"accelerator": f"{card} was scrapped."})
    card = accelerator_place(accelerator=card, kind=PlacementKind.STOCK, stock_location=location, note=reason)
    movement_build(
        kind=kind,
        quantity=1,
        location=location,
        accelerator=card,
        reason=reason,
        ticket_ref=ticket_ref,
        idempotency_key=key,
    ).save()
    return card


@transaction.atomic
def accelerator_send_out(
    *, accelerator: Accelerator, kind: str, reason: str, ticket_ref: str = "", key: str | None = None
) -> Accelerator:
    """RMA out to the vendor, scrap, or write off (an `adjust`: lost at a stock take). From stock or a node.

    From stock the location's on-hand drops by one; from a node nothing was on hand, so the row has 0.
    """
    _require_reason(reason)
    if kind not in (MovementKind.RMA_OUT, MovementKind.SCRAP, MovementKind.ADJUST):
        raise ValidationError({"kind": "Sending out is 'rma_out', 'scrap' or 'adjust' (write-off)."})
    if _done(key):
        return Accelerator.objects.get(pk=accelerator.pk)
    card = _card_locked(accelerator)
    if card.lifecycle in (AcceleratorLifecycle.RMA, AcceleratorLifecycle.SCRAPPED):
        raise ValidationError({"accelerator": f"{card} is {card.get_lifecycle_display()} already."})
    _not_reserved(card)
    location = card.stock_location if card.lifecycle == AcceleratorLifecycle.IN_STOCK else None
    placement = PlacementKind.AT_VENDOR if kind == MovementKind.RMA_OUT else PlacementKind.SCRAPPED
    card = accelerator_place(accelerator=card, kind=placement, note=reason)
    movement_build(
        kind=kind,
        quantity=-1 if location else 0,
        location=location,
        accelerator=card,
        reason=reason,
        ticket_ref=ticket_ref,
        idempotency_key=key,
    ).save()
    return card


@transaction.atomic
def accelerator_transfer(
    *, accelerator: Accelerator, to_location: StockLocation, reason: str, ticket_ref: str = "", key: str | None = None
) -> Accelerator:
    """Move an in-stock card to another stock location (another site, or a shelf of the same one).

    Two ledger rows, both kind `transfer`: -1 at the source (to_location set) and +1 at the destination, so
    on-hand per location stays a plain sum.
    """
    _require_reason(reason)
    if _done(_sub_key(key, "out")):
        return Accelerator.objects.get(pk=accelerator.pk)
    card = _card_locked(accelerator)
    if card.lifecycle != AcceleratorLifecycle.IN_STOCK or card.stock_location_id is None:
        raise ValidationError({"accelerator": f"{card} is {card.get_lifecycle_display()}, not in stock."})
    if card.stock_location_id == to_location.pk:
        raise ValidationError({"to_location": f"{card} is at {to_location} already."})
    _not_reserved(card)
    source = card.stock_location
    card = accelerator_place(accelerator=card, kind=PlacementKind.STOCK, stock_location=to_location, note=reason)
    StockMovement.objects.bulk_create(
        [
            movement_build(
                kind=MovementKind.TRANSFER,
                quantity=-1,
                location=source,
                to_location=to_location,
                accelerator=card,
                reason=reason,
                ticket_ref=ticket_ref,
                idempotency_key=_sub_key(key, "out"),
            ),
            movement_build(
                kind=MovementKind.TRANSFER,
                quantity=1,
                location=to_location,
                accelerator=card,
                reason=reason,
                ticket_ref=ticket_ref,
                idempotency_key=_sub_key(key, "in"),
            ),
        ]
    )
    return card


# --- serialised parts (NICs, optics, PSUs) ------------------------------------------------------------------


@transaction.atomic
def part_items_receive(
    *,
    part_model: PartModel,
    serials: Sequence[str],
    location: StockLocation,
    reason: str,
    ticket_ref: str = "",
    key_prefix: str,
) -> list[PartItem]:
    """Create serialised part items in stock, one `receive` movement each (idempotent per serial by prefix)."""
    if not part_model.is_serialised:
        raise ValidationError({"part_model": f"{part_model} is counted by quantity; use consumable_move."})
    done = set(
        StockMovement.objects.filter(idempotency_key__in=[f"{key_prefix}:{s}" for s in serials]).values_list(
            "idempotency_key", flat=True
        )
    )
    todo = [s for s in dict.fromkeys(serials) if f"{key_prefix}:{s}" not in done]
    clash = list(PartItem.objects.filter(serial__in=todo).values_list("serial", flat=True))
    if clash:
        raise ValidationError({"serial": f"Already known as other parts: {', '.join(sorted(clash)[:20])}."})
    items = PartItem.objects.bulk_create(
        [
            PartItem(part_model=part_model, serial=s, status=PartItemStatus.IN_STOCK, stock_location=location)
            for s in todo
        ]
    )
    StockMovement.objects.bulk_create(
        [
            movement_build(
                kind=MovementKind.RECEIVE,
                quantity=1,
                location=location,
                part_item=item,
                part_model=part_model,
                reason=reason,
                ticket_ref=ticket_ref,
                idempotency_key=f"{key_prefix}:{item.serial}",
            )
            for item in items
        ]
    )
    records_write(records_for_bulk(created=items, reason=reason))
    return items


_PART_STATUS_FOR = {
    MovementKind.ISSUE: PartItemStatus.INSTALLED,
    MovementKind.RETURN: PartItemStatus.IN_STOCK,
    MovementKind.RMA_BACK: PartItemStatus.IN_STOCK,
    MovementKind.RMA_OUT: PartItemStatus.RMA,
    MovementKind.SCRAP: PartItemStatus.SCRAPPED,
    MovementKind.ADJUST: PartItemStatus.SCRAPPED,
    MovementKind.TRANSFER: PartItemStatus.IN_STOCK,
}


@transaction.atomic
def part_item_move(
    *,
    item: PartItem,
    kind: str,
    reason: str,
    location: StockLocation | None = None,
    node: Node | None = None,
    ticket_ref: str = "",
    key: str | None = None,
) -> PartItem:
    """Move one serialised part: issue (to `node`), return / rma_back / transfer (to `location`), rma_out, scrap,
    adjust (write-off). The item's status and place change with its ledger row(s)."""
    _require_reason(reason)
    if kind not in _PART_STATUS_FOR:
        raise ValidationError({"kind": f"{kind!r} is not a move of a part item."})
    if _done(key) or _done(_sub_key(key, "out")):
        return PartItem.objects.get(pk=item.pk)
    part = PartItem.objects.select_for_update().get(pk=item.pk)
    in_stock = part.status == PartItemStatus.IN_STOCK and part.stock_location_id is not None
    source = part.stock_location if in_stock else None
    rows: list[StockMovement] = []
    if kind in (MovementKind.ISSUE, MovementKind.TRANSFER) and not in_stock:
        raise ValidationError({"part_item": f"{part} is {part.get_status_display()}, not in stock."})
    if kind in (MovementKind.RETURN, MovementKind.RMA_BACK) and in_stock:
        raise ValidationError({"part_item": f"{part} is in stock already; transfer it."})
    if kind in (MovementKind.RETURN, MovementKind.RMA_BACK, MovementKind.TRANSFER) and location is None:
        raise ValidationError({"location": "Where to?"})
    if kind == MovementKind.ISSUE and node is None:
        raise ValidationError({"node": "Which node?"})
    if kind == MovementKind.TRANSFER:
        rows = [
            movement_build(
                kind=kind,
                quantity=-1,
                location=source,
                to_location=location,
                part_item=part,
                reason=reason,
                ticket_ref=ticket_ref,
                idempotency_key=_sub_key(key, "out"),
            ),
            movement_build(
                kind=kind,
                quantity=1,
                location=location,
                part_item=part,
                reason=reason,
                ticket_ref=ticket_ref,
                idempotency_key=_sub_key(key, "in"),
            ),
        ]
    elif kind in (MovementKind.RETURN, MovementKind.RMA_BACK):
        rows = [
            movement_build(
                kind=kind,
                quantity=1,
                location=location,
                part_item=part,
                reason=reason,
                ticket_ref=ticket_ref,
                idempotency_key=key,
            )
        ]
    else:
        rows = [
            movement_build(
                kind=kind,
                quantity=-1 if source else 0,
                location=source,
                part_item=part,
                node=node,
                reason=reason,
                ticket_ref=ticket_ref,
                idempotency_key=key,
            )
        ]
    part.status = _PART_STATUS_FOR[kind]
    part.stock_location = location if part.status == PartItemStatus.IN_STOCK else None
    part.node = node if kind == MovementKind.ISSUE else None
    part.save()
    StockMovement.objects.bulk_create(rows)
    return part


# --- consumables (by quantity) ------------------------------------------------------------------------------

_CONSUMABLE_SIGN = {
    MovementKind.RECEIVE: 1,
    MovementKind.RETURN: 1,
    MovementKind.RMA_BACK: 1,
    MovementKind.ISSUE: -1,
    MovementKind.RMA_OUT: -1,
    MovementKind.SCRAP: -1,
}


@transaction.atomic
def consumable_move(
    *,
    part_model: PartModel,
    kind: str,
    quantity: int,
    location: StockLocation,
    reason: str,
    to_location: StockLocation | None = None,
    node: Node | None = None,
    ticket_ref: str = "",
    key: str | None = None,
) -> list[StockMovement]:
    """Move `quantity` units of a consumable (cables, screws): receive / return / rma_back add at `location`;
    issue / rma_out / scrap take from it; transfer takes from `location` and adds at `to_location`.

    Raises:
        ValidationError: a serialised model, a quantity below 1, or fewer units on hand than taken.
    """
    _require_reason(reason)
    if part_model.is_serialised:
        raise ValidationError({"part_model": f"{part_model} is serialised; move its items by serial."})
    if quantity < 1:
        raise ValidationError({"quantity": "Move at least one unit."})
    if kind != MovementKind.TRANSFER and kind not in _CONSUMABLE_SIGN:
        raise ValidationError({"kind": f"{kind!r} is not a move of a consumable (use consumable_adjust)."})
    first_key = _sub_key(key, "out") if kind == MovementKind.TRANSFER else key
    if _done(first_key):
        return list(StockMovement.objects.filter(Q(idempotency_key=first_key) | Q(idempotency_key=_sub_key(key, "in"))))
    location = _lock_location(location)
    sign = -1 if kind == MovementKind.TRANSFER else _CONSUMABLE_SIGN[kind]
    if sign < 0:
        available = on_hand(location=location, part_model=part_model)
        if available < quantity:
            raise ValidationError({"quantity": f"Only {available} x {part_model.sku} on hand at {location}."})
    if kind == MovementKind.TRANSFER:
        if to_location is None or to_location.pk == location.pk:
            raise ValidationError({"to_location": "Transfer to another location."})
        rows = [
            movement_build(
                kind=kind,
                quantity=-quantity,
                location=location,
                to_location=to_location,
                part_model=part_model,
                reason=reason,
                ticket_ref=ticket_ref,
                idempotency_key=_sub_key(key, "out"),
            ),
            movement_build(
                kind=kind,
                quantity=quantity,
                location=to_location,
                part_model=part_model,
                reason=reason,
                ticket_ref=ticket_ref,
                idempotency_key=_sub_key(key, "in"),
            ),
        ]
    else:
        rows = [
            movement_build(
                kind=kind,
                quantity=sign * quantity,
                location=location,
                part_model=part_model,
                node=node,
                reason=reason,
                ticket_ref=ticket_ref,
                idempotency_key=key,
            )
        ]
    return StockMovement.objects.bulk_create(rows)


@transaction.atomic
def consumable_adjust(
    *,
    part_model: PartModel,
    location: StockLocation,
    counted: int,
    reason: str,
    ticket_ref: str = "",
    key: str | None = None,
) -> StockMovement | None:
    """Stock-take adjustment: one `adjust` row of (counted - on hand). None when the count agrees."""
    _require_reason(reason)
    if part_model.is_serialised:
        raise ValidationError({"part_model": f"{part_model} is serialised; a stock take reports its serials."})
    if counted < 0:
        raise ValidationError({"counted": "A count cannot be negative."})
    if _done(key):
        return StockMovement.objects.get(idempotency_key=key)
    location = _lock_location(location)
    delta = counted - on_hand(location=location, part_model=part_model)
    if delta == 0:
        return None
    row = movement_build(
        kind=MovementKind.ADJUST,
        quantity=delta,
        location=location,
        part_model=part_model,
        reason=reason,
        ticket_ref=ticket_ref,
        idempotency_key=key,
    )
    row.save()
    return row


__all__ = [
    "CardReceipt",
    "accelerator_issue",
    "accelerator_return",
    "accelerator_send_out",
    "accelerator_transfer",
    "accelerators_receive",
    "consumable_adjust",
    "consumable_move",
    "movement_build",
    "on_hand",
    "on_hand_rows",
    "part_item_move",
    "part_items_receive",
    "stock_location_default",
]
