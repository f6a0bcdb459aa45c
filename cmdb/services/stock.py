"""Spare stock: reservations and the movement ledger for serialised cards.

Every movement is a StockMovement row; a card's lifecycle/location change and its ledger row are written in
the same transaction. Idempotency keys make retried steps (a Celery retry of "reserve a spare") no-ops.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from gpuops.context import current_context

from ..models import (
    Accelerator,
    AcceleratorLifecycle,
    AcceleratorModel,
    MovementKind,
    Node,
    PlacementKind,
    ReservationStatus,
    Site,
    StockLocation,
    StockMovement,
    StockReservation,
)
from .accelerators import accelerator_place

DEFAULT_RESERVATION_TTL = dt.timedelta(hours=72)


class NoSpareError(Exception):
    """No compatible spare is free at the site."""


def movement_record(
    *,
    kind: str,
    accelerator: Accelerator | None = None,
    location: StockLocation | None = None,
    quantity: int = 1,
    node: Node | None = None,
    reason: str = "",
    ticket_ref: str = "",
    idempotency_key: str | None = None,
    to_location: StockLocation | None = None,
) -> StockMovement:
    ctx = current_context()
    return StockMovement.objects.create(
        at=timezone.now(),
        kind=kind,
        accelerator=accelerator,
        accelerator_model_id=accelerator.model_id if accelerator else None,
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


# --- the rules every stock movement of a card follows (the warehouse ledger uses the same ones) ------------------


def reason_require(reason: str) -> None:
    """A movement says why: the reason is kept on the ledger."""
    if not reason.strip():
        raise ValidationError({"reason": "Say why (it is kept on the ledger)."})


def card_lock(card: Accelerator) -> Accelerator:
    """The card, locked for the movement (two movements of one card serialize)."""
    return Accelerator.objects.select_for_update().get(pk=card.pk)


def card_not_reserved(card: Accelerator, allow_reserved_for: str = "") -> None:
    """Refuse to move a card an active reservation holds for someone else than `allow_reserved_for`."""
    active = card.reservations.filter(status=ReservationStatus.ACTIVE).exclude(reserved_for=allow_reserved_for or "-")
    holder = active.values_list("reserved_for", flat=True).first()
    if holder:
        raise ValidationError({"accelerator": f"{card} is reserved for {holder}; release the reservation first."})


def compatible_models(model: AcceleratorModel) -> list[int]:
    """Models that may replace `model` in a slot: the same model (a data table of substitutes can come later)."""
    return [model.pk]


@transaction.atomic
def spare_reserve(
    *, site: Site, model: AcceleratorModel, reserved_for: str, key: str, ttl: dt.timedelta = DEFAULT_RESERVATION_TTL
) -> StockReservation:
    """Reserve one in-stock spare of a compatible model at `site` for `reserved_for` (e.g. 'ticket:42').

    Idempotent by `key`: a retried call returns the reservation made the first time. Concurrent callers
    racing for the last spare: rows are locked with SKIP LOCKED where the database has it, and the partial
    unique constraint (one active reservation per card) is the final arbiter - the loser gets NoSpareError.
    """
    existing = StockReservation.objects.filter(reserved_for=reserved_for, status=ReservationStatus.ACTIVE).first()
    if existing is not None:
        return existing
    done = StockMovement.objects.filter(idempotency_key=key).select_related("accelerator").first()
    if done is not None:
        res = StockReservation.objects.filter(accelerator=done.accelerator, reserved_for=reserved_for).first()
        if res is not None:
            return res
    from django.db import connection

    tried: list[int] = []
    # One candidate at a time: locking several would make concurrent callers skip spares that are free.
    for _ in range(20):
        candidates = (
            Accelerator.objects.filter(
                site=site,
                model_id__in=compatible_models(model),
                lifecycle=AcceleratorLifecycle.IN_STOCK,
                health__in=["ok", "unknown"],
            )
            .exclude(reservations__status=ReservationStatus.ACTIVE)
            .exclude(pk__in=tried)
            .order_by("id")
        )
        if connection.features.has_select_for_update_skip_locked:
            candidates = candidates.select_for_update(skip_locked=True, of=("self",))
        card = candidates.first()
        if card is None:
            break
        tried.append(card.pk)
        now = timezone.now()
        try:
            with transaction.atomic():
                reservation = StockReservation.objects.create(
                    accelerator=card,
                    site=site,
                    reserved_for=reserved_for,
                    reserved_at=now,
                    expires_at=now + ttl,
                    actor_id=current_context().actor_id,
                )
                movement_record(
                    kind=MovementKind.RESERVE,
                    accelerator=card,
                    location=card.stock_location,
                    quantity=0,
                    reason=f"reserved for {reserved_for}",
                    ticket_ref=reserved_for,
                    idempotency_key=key,
                )
        except IntegrityError:
            continue  # another transaction reserved this card between our read and our insert
        return reservation
    raise NoSpareError(f"No free {model} spare in stock at {site}.")


@transaction.atomic
def reservation_release(*, reservation: StockReservation, reason: str = "", expired: bool = False) -> None:
    res = StockReservation.objects.select_for_update().get(pk=reservation.pk)
    if res.status != ReservationStatus.ACTIVE:
        return
    res.status = ReservationStatus.EXPIRED if expired else ReservationStatus.RELEASED
    res.closed_at = timezone.now()
    res.save(update_fields=["status", "closed_at"])
    card = res.accelerator
    movement_record(
        kind=MovementKind.RELEASE,
        accelerator=card,
        location=card.stock_location,
        quantity=0,
        reason=reason or ("expired" if expired else "released"),
        ticket_ref=res.reserved_for,
    )


@transaction.atomic
def reservation_issue(*, reservation: StockReservation, node: Node, slot_index: int, key: str) -> Accelerator:
    """Issue a reserved spare into a node slot: ledger row, placement history, lifecycle installed."""
    if StockMovement.objects.filter(idempotency_key=key).exists():
        return Accelerator.objects.get(pk=reservation.accelerator_id)
    res = StockReservation.objects.select_for_update().get(pk=reservation.pk)
    if res.status != ReservationStatus.ACTIVE:
        raise ValidationError({"reservation": f"Reservation is {res.status}, not active."})
    card = Accelerator.objects.select_for_update().get(pk=res.accelerator_id)
    location = card.stock_location
    card = accelerator_place(
        accelerator=card,
        kind=PlacementKind.NODE,
        node=node,
        slot_index=slot_index,
        note=f"issued for {res.reserved_for}",
    )
    res.status, res.closed_at = ReservationStatus.ISSUED, timezone.now()
    res.save(update_fields=["status", "closed_at"])
    movement_record(
        kind=MovementKind.ISSUE,
        accelerator=card,
        location=location,
        quantity=-1,
        node=node,
        reason=f"issued for {res.reserved_for}",
        ticket_ref=res.reserved_for,
        idempotency_key=key,
    )
    return card


@transaction.atomic
def accelerator_to_stock(
    *,
    accelerator: Accelerator,
    location: StockLocation,
    kind: str = MovementKind.RETURN,
    reason: str = "",
    ticket_ref: str = "",
    key: str | None = None,
) -> Accelerator:
    """Put a card into stock (a return, a receipt, or an RMA replacement back from the vendor).

    Needs a reason; locks the card; refuses a card reserved for someone else than `ticket_ref`.
    """
    reason_require(reason)
    if key and StockMovement.objects.filter(idempotency_key=key).exists():
        return Accelerator.objects.get(pk=accelerator.pk)
    card = card_lock(accelerator)
    card_not_reserved(card, ticket_ref)
    card = accelerator_place(accelerator=card, kind=PlacementKind.STOCK, stock_location=location, note=reason or kind)
    movement_record(
        kind=kind,
        accelerator=card,
        location=location,
        quantity=1,
        reason=reason,
        ticket_ref=ticket_ref,
        idempotency_key=key,
    )
    return card


@transaction.atomic
def accelerator_out_of_stock(
    *, accelerator: Accelerator, kind: str, reason: str = "", ticket_ref: str = "", key: str | None = None
) -> Accelerator:
    """Send a card out: to the vendor (RMA out) or to scrap. From a node or from stock.

    Needs a reason; locks the card; refuses a card reserved for someone else than `ticket_ref`.
    """
    reason_require(reason)
    if key and StockMovement.objects.filter(idempotency_key=key).exists():
        return Accelerator.objects.get(pk=accelerator.pk)
    accelerator = card_lock(accelerator)
    card_not_reserved(accelerator, ticket_ref)
    location = accelerator.stock_location
    placement = PlacementKind.AT_VENDOR if kind == MovementKind.RMA_OUT else PlacementKind.SCRAPPED
    card = accelerator_place(accelerator=accelerator, kind=placement, note=reason or kind)
    movement_record(
        kind=kind,
        accelerator=card,
        location=location,
        quantity=-1 if location else 0,
        reason=reason,
        ticket_ref=ticket_ref,
        idempotency_key=key,
    )
    return card


def reservations_expire(*, now: dt.datetime | None = None) -> int:
    """Expire active reservations past their time (a beat task calls this). Returns how many expired."""
    now = now or timezone.now()
    count = 0
    for res in StockReservation.objects.filter(status=ReservationStatus.ACTIVE, expires_at__lt=now):
        reservation_release(reservation=res, expired=True)
        count += 1
    return count


def receipts_write(*, cards: Sequence[Accelerator], reason: str, at: dt.datetime | None = None) -> int:
    """The ledger rows of cards created straight into stock by a bulk path (the demo fleet, an import): one
    `receive` +1 per card at its stock location, in one statement. Spares are counted from the ledger
    (integrations.warehouse.services.stock.stock_lines), so a card put into stock without its row would be
    invisible to the stock overview and the minimum-stock check. Returns the rows written."""
    ctx = current_context()
    at = at or timezone.now()
    rows = [
        StockMovement(
            at=at,
            kind=MovementKind.RECEIVE,
            accelerator=card,
            accelerator_model_id=card.model_id,
            quantity=1,
            location_id=card.stock_location_id,
            actor_id=ctx.actor_id,
            reason=reason[:300],
            correlation_id=ctx.correlation_id,
        )
        for card in cards
        if card.stock_location_id and card.lifecycle == AcceleratorLifecycle.IN_STOCK
    ]
    StockMovement.objects.bulk_create(rows, batch_size=5000)
    return len(rows)


@transaction.atomic
def accelerator_receive(
    *,
    model: AcceleratorModel,
    serial: str,
    location: StockLocation,
    reason: str,
    ticket_ref: str,
    key: str,
    template: Accelerator | None = None,
) -> Accelerator:
    """A card we never had arrives (an RMA replacement): create it in transit, then put it into stock with a
    ledger row of kind rma_back. Idempotent by `key` and by serial (a retry finds the card it created)."""
    existing = Accelerator.objects.filter(serial=serial).first()
    if existing is not None:
        if existing.lifecycle == AcceleratorLifecycle.IN_STOCK and existing.stock_location_id == location.pk:
            return existing
        raise ValidationError({"serial": f"Serial {serial} is already in the CMDB ({existing.lifecycle})."})
    card = Accelerator.objects.create(
        model=model,
        serial=serial,
        lifecycle=AcceleratorLifecycle.IN_TRANSIT,
        health="unknown",
        site=location.site,
        supplier=template.supplier if template else "",
        po_number=template.po_number if template else "",
        warranty_end=template.warranty_end if template else None,
    )
    return accelerator_to_stock(
        accelerator=card, location=location, kind=MovementKind.RMA_BACK, reason=reason, ticket_ref=ticket_ref, key=key
    )
