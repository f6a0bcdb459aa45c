"""One entry point for a manual stock move (API, admin): find the item by serial or SKU, call the ledger service.

The rules stay in services/ledger.py; this module only decides which one applies to what was named, so the API
and the admin cannot disagree about what "return GPU 1654…" means.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction

from cmdb.models import Accelerator, AcceleratorModel, MovementKind, Node, PartItem, PartModel, StockLocation

from . import ledger


@dataclass(frozen=True)
class MoveRequest:
    kind: str
    reason: str
    serial: str = ""
    model: str = ""  # accelerator model name (receiving a new card)
    sku: str = ""  # part model SKU
    quantity: int | None = None
    counted: int | None = None
    location: StockLocation | None = None
    to_location: StockLocation | None = None
    node: Node | None = None
    slot_index: int | None = None
    ticket_ref: str = ""
    key: str | None = None

    @property
    def touched_sites(self) -> set[int]:
        """Sites whose stock the move changes (for permission checks and the minimum-stock check)."""
        return {loc.site_id for loc in (self.location, self.to_location) if loc is not None} | (
            {self.node.site_id} if self.node is not None else set()
        )


def _need(value: object, field: str, message: str) -> None:
    if value is None or value == "":
        raise ValidationError({field: message})


@transaction.atomic
def movement_apply(move: MoveRequest) -> None:
    """Apply a manual move. Raises ValidationError naming the field at fault."""
    k = move.kind
    if move.serial:
        card = Accelerator.objects.filter(serial=move.serial).first()
        part = None
        if card is None:
            part = PartItem.objects.filter(serial=move.serial).select_related("part_model").first()
        if k == MovementKind.RECEIVE:
            if card or part:
                raise ValidationError({"serial": f"{move.serial} exists already; receive is for new items."})
            _need(move.location, "location", "Receive into which location?")
            if move.model:
                model = AcceleratorModel.objects.filter(name=move.model).first()
                _need(model, "model", f"No accelerator model {move.model!r}.")
                ledger.accelerators_receive(
                    cards=[ledger.CardReceipt(serial=move.serial, model=model)],
                    location=move.location,
                    reason=move.reason,
                    ticket_ref=move.ticket_ref,
                    key_prefix=move.key or f"manual-receive:{move.serial}",
                )
                return
            part_model = PartModel.objects.filter(sku=move.sku).first()
            _need(part_model, "sku", "Receiving a new serial needs `model` (a card) or `sku` (a part).")
            ledger.part_items_receive(
                part_model=part_model,
                serials=[move.serial],
                location=move.location,
                reason=move.reason,
                ticket_ref=move.ticket_ref,
                key_prefix=move.key or f"manual-receive:{move.serial}",
            )
            return
        if card is not None:
            _card_move(card, move)
            return
        _need(part, "serial", f"No card or part with serial {move.serial!r}.")
        ledger.part_item_move(
            item=part,
            kind=k,
            reason=move.reason,
            location=move.to_location or move.location,
            node=move.node,
            ticket_ref=move.ticket_ref,
            key=move.key,
        )
        return
    part_model = PartModel.objects.filter(sku=move.sku).first()
    _need(part_model, "sku", f"No part model {move.sku!r}.")
    _need(move.location, "location", "Which location?")
    if k == MovementKind.ADJUST:
        _need(move.counted, "counted", "An adjustment of a consumable gives the units counted.")
        ledger.consumable_adjust(
            part_model=part_model,
            location=move.location,
            counted=move.counted,
            reason=move.reason,
            ticket_ref=move.ticket_ref,
            key=move.key,
        )
        return
    _need(move.quantity, "quantity", "How many units?")
    ledger.consumable_move(
        part_model=part_model,
        kind=k,
        quantity=move.quantity,
        location=move.location,
        to_location=move.to_location,
        node=move.node,
        reason=move.reason,
        ticket_ref=move.ticket_ref,
        key=move.key,
    )


def _card_move(card: Accelerator, move: MoveRequest) -> None:
    k = move.kind
    if k == MovementKind.ISSUE:
        _need(move.node, "node", "Issue to which node?")
        _need(move.slot_index, "slot_index", "Into which slot?")
        ledger.accelerator_issue(
            accelerator=card,
            node=move.node,
            slot_index=move.slot_index,
            reason=move.reason,
            ticket_ref=move.ticket_ref,
            key=move.key,
        )
    elif k in (MovementKind.RETURN, MovementKind.RMA_BACK):
        _need(move.location, "location", "Return into which location?")
        ledger.accelerator_return(
            accelerator=card,
            location=move.location,
            kind=k,
            reason=move.reason,
            ticket_ref=move.ticket_ref,
            key=move.key,
        )
    elif k in (MovementKind.RMA_OUT, MovementKind.SCRAP, MovementKind.ADJUST):
        ledger.accelerator_send_out(
            accelerator=card, kind=k, reason=move.reason, ticket_ref=move.ticket_ref, key=move.key
        )
    elif k == MovementKind.TRANSFER:
        _need(move.to_location, "to_location", "Transfer to which location?")
        ledger.accelerator_transfer(
            accelerator=card, to_location=move.to_location, reason=move.reason, ticket_ref=move.ticket_ref, key=move.key
        )
    else:
        raise ValidationError({"kind": f"{k!r} does not apply to a card."})


__all__ = ["MoveRequest", "movement_apply"]
