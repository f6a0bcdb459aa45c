"""Reconciling the accelerators of one report with the CMDB.

Matching: by serial, then by UUID; a card with neither (both masked) is matched by its slot on this node, since
a slot is location and not identity it only updates facts, never identities. Outcomes per reported card:
- same node: facts refreshed (slot, PCI address, firmware, driver), `is_missing` cleared;
- another node, in transit or removed-failed: moved here (placement closed and opened, a resolved `moved` event);
- in stock, at the vendor (RMA) or scrapped: a `conflict` event, the stock record is left alone: a serial that
  the warehouse says is on a shelf is a data problem an operator must settle, not something to move silently;
- unknown: created (installed) with its model matched through the catalog aliases.
Cards of this node absent from a complete report are flagged `is_missing` ("expected 8, saw 7"), never deleted:
graded as `missing` when their slot is empty now, as `replaced` when another card took the slot (a swap).
"""

from __future__ import annotations

import re

from django.db.models import Q

from cmdb.models import (
    Accelerator,
    AcceleratorLifecycle,
    AcceleratorModel,
    HealthAction,
    HealthEvent,
    Severity,
    Vendor,
)
from cmdb.services.accelerators import placement_build
from cmdb.services.accelerators import placements_write as cmdb_placements_write

from .normalize import CardObs, Signal
from .passes import Pass, PendingSignal

# Where the CMDB says a card is somewhere a node cannot be: reporting it from a node is a conflict.
CONFLICT_LIFECYCLES = {
    AcceleratorLifecycle.IN_STOCK: "serial_in_stock",
    AcceleratorLifecycle.RMA: "serial_at_vendor",
    AcceleratorLifecycle.SCRAPPED: "serial_scrapped",
}


def _alias_key(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower())


def collector_signal(run: Pass, code: str, message: str) -> None:
    """A node-level `collector` event: a collector failed or a section came back unusable."""
    run.signals.append(
        PendingSignal(signal=Signal("collector", code, message[:300], (f"collector:{code}",)), vendor_id=None)
    )


def conflict_signal(run: Pass, code: str, ident: str, message: str) -> None:
    """A node-level `conflict` event (graded by policy kind `conflict`), one open event per node and identity."""
    run.summary["conflicts"] += 1
    run.signals.append(
        PendingSignal(
            signal=Signal("conflict", code, message[:300], (f"conflict:{code}:{ident}",)),
            vendor_id=None,
            dedup_key=f"node:{run.node.pk}:conflict:{code}:{ident}"[:200],
        )
    )


class CardMatcher:
    """The CMDB cards one report can touch, loaded (and locked) in one query."""

    def __init__(self, run: Pass) -> None:
        cards = run.observed.cards
        serials = [c.serial for c in cards if c.serial]
        uuids = [c.uuid for c in cards if c.uuid]
        query = Q(node_id=run.node.pk)
        if serials:
            query |= Q(serial__in=serials)
        if uuids:
            query |= Q(uuid__in=uuids)
        # Locked in id order: two reports claiming the same card wait on each other instead of deadlocking.
        rows = list(
            Accelerator.objects.select_for_update(of=("self",))
            .filter(query)
            .select_related("node", "model")
            .order_by("pk")
        )
        self.rows = rows
        self.by_serial = {a.serial: a for a in rows if a.serial}
        self.by_uuid = {a.uuid: a for a in rows if a.uuid}
        self.on_node = [a for a in rows if a.node_id == run.node.pk]
        self.by_slot = {a.slot_index: a for a in self.on_node if a.slot_index is not None}


def _catalog(run: Pass, vendors: set[str]) -> tuple[dict[str, Vendor], dict[tuple[int, str], AcceleratorModel]]:
    """Vendors by slug and models by (vendor id, alias key): two queries, only when a card is new."""
    vendor_rows = {v.slug: v for v in Vendor.objects.filter(slug__in=vendors)}
    models: dict[tuple[int, str], AcceleratorModel] = {}
    for model in AcceleratorModel.objects.filter(vendor__in=vendor_rows.values()):
        for name in [model.name, *(model.aliases or [])]:
            models.setdefault((model.vendor_id, _alias_key(str(name))), model)
    return vendor_rows, models


def _model_for(run: Pass, obs: CardObs, vendor: Vendor, models: dict) -> AcceleratorModel:
    """The catalog model of a new card. An unknown product name becomes a new catalog entry (with the name as
    its alias, so the next card matches) and one fleet-wide conflict event asks an operator to review it; a
    masked name falls back to the server model's accelerator."""
    key = _alias_key(obs.model)
    if key and (vendor.pk, key) in models:
        return models[(vendor.pk, key)]
    fallback = run.node.server_model.accelerator_model if run.node.server_model_id else None
    if not key and fallback is not None and fallback.vendor_id == vendor.pk:
        return fallback
    name = (obs.model or f"Unidentified {vendor.name}")[:100]
    model, created = AcceleratorModel.objects.get_or_create(
        name=name, defaults={"vendor": vendor, "aliases": [obs.model] if obs.model else []}
    )
    models[(vendor.pk, key)] = model
    if created:
        run.summary["catalog_created"] += 1
        run.signals.append(
            PendingSignal(
                signal=Signal(
                    "conflict",
                    "unknown_model",
                    f"New accelerator model {name!r} ({vendor.slug}) was added "
                    f"to the catalog from {run.node.hostname}'s report; review it.",
                    (f"model:{name}",),
                ),
                vendor_id=None,
                dedup_key=f"catalog:unknown_model:{name}"[:200],
            )
        )
    return model


def _facts(card: Accelerator, obs: CardObs, run: Pass) -> None:
    """Refresh what the report says about a card it shows in this node."""
    card.pci_bus_id = obs.pci_bus_id or card.pci_bus_id
    card.firmware_version = obs.firmware_version or card.firmware_version
    card.driver_version = obs.driver_version or card.driver_version
    card.is_missing = False
    card.last_seen_at = run.now


def _place_here(card: Accelerator, obs: CardObs, run: Pass) -> None:
    node = run.node
    moved_from = card.node if card.node_id and card.node_id != node.pk else None
    if card.node_id != node.pk or card.slot_index != obs.index or card.lifecycle != AcceleratorLifecycle.INSTALLED:
        if card.pk:
            run.placements_close.append(card.pk)
        location_changed = True
    else:
        location_changed = False
    card.node, card.slot_index, card.site_id = node, obs.index, node.site_id
    card.stock_location = None
    card.lifecycle = AcceleratorLifecycle.INSTALLED
    if location_changed and card.pk:
        run.placements_new.append(placement_build(accelerator=card, at=run.now, note="seen by the inventory agent"))
    if moved_from is not None:
        run.summary["cards_moved"] += 1
        run.invalidate_nodes.add(moved_from.pk)
        message = (
            f"{card} moved from {moved_from.hostname} slot {_slot(card, moved_from)} to "
            f"{node.hostname} slot {obs.index}"
        )
        run.events_new.append(
            HealthEvent(
                node=node,
                accelerator=card,
                kind="moved",
                code="",
                severity=Severity.INFO,
                action=HealthAction.MONITOR,
                message=message[:500],
                dedup_key=f"acc:{card.pk}:moved:{run.now.timestamp()}"[:200],
                count=1,
                first_seen_at=run.now,
                last_seen_at=run.now,
                resolved_at=run.now,
            )
        )


def _slot(card: Accelerator, node) -> str:
    before = card.loaded_snapshot() or {}
    return str(before.get("slot_index"))


def cards_reconcile(run: Pass) -> list[Accelerator]:
    """Match, move, create and flag cards in memory; returns the new (unsaved) cards.

    The caller writes them: slots are cleared first, then one bulk_update and one bulk_create.
    """
    matcher = CardMatcher(run)
    claimed: set[int] = set()
    new_obs: list[CardObs] = []
    touched: list[tuple[Accelerator, CardObs]] = []
    for obs in run.observed.cards:
        card = _match(run, matcher, obs, claimed)
        if card is None:
            if obs.identity is not None or obs.index is not None:
                new_obs.append(obs)
            else:
                run.summary["cards_unidentified"] += 1
            continue
        if card is False:
            continue
        claimed.add(card.pk)
        touched.append((card, obs))
    new_cards = _create(run, new_obs)
    # Every reported index is physically occupied, also by a card left alone for a conflict.
    taken_slots = {obs.index for obs in run.observed.cards if obs.index is not None}
    for card, obs in touched:
        run.track(card)
        _facts(card, obs, run)
        _place_here(card, obs, run)
        _card_signals(run, card, obs)
    _flag_missing(run, matcher, claimed, taken_slots)
    run.node_cards = [c for c, _ in touched] + [c for c in matcher.on_node if c.pk not in claimed] + new_cards
    return new_cards


def _match(run: Pass, matcher: CardMatcher, obs: CardObs, claimed: set[int]) -> Accelerator | bool | None:
    """The CMDB card for `obs`; None: new card; False: not to be touched (a conflict was recorded)."""
    card = matcher.by_serial.get(obs.serial) if obs.serial else None
    if not _slot_exists(run, obs):
        # A slot the server model does not have: placed there, the card would be flagged missing (and the node
        # drained) by the next report. Nothing moves or is created; the rest of the report applies.
        card = card or (matcher.by_uuid.get(obs.uuid) if obs.uuid else None)
        if card is not None and card.node_id == run.node.pk:
            claimed.add(card.pk)  # it is in this node, wherever: not missing, and left where the CMDB has it
        conflict_signal(
            run,
            "slot_out_of_range",
            obs.identity or f"slot:{obs.index}",
            f"{obs.path}: {obs.identity or 'a card'} is reported in slot {obs.index} of "
            f"{run.node.hostname}, whose model has {run.node.server_model.accelerator_slots} "
            "accelerator slots; left unchanged.",
        )
        return False
    if card is None and obs.uuid:
        card = matcher.by_uuid.get(obs.uuid)
        if card is not None and card.serial and obs.serial and card.serial != obs.serial:
            conflict_signal(
                run,
                "identity_mismatch",
                obs.uuid,
                f"{obs.path}: UUID {obs.uuid} belongs to serial {card.serial}, the report says serial {obs.serial}.",
            )
            return False
    if card is None and obs.identity is None and obs.index is not None:
        slot_card = matcher.by_slot.get(obs.index)
        if slot_card is not None and slot_card.pk not in claimed:
            run.summary["cards_matched_by_slot"] += 1
            run.track(slot_card)
            return slot_card
        return None
    if card is None:
        return None
    if card.pk in claimed:
        return False
    run.track(card)
    if card.lifecycle in CONFLICT_LIFECYCLES:
        code = CONFLICT_LIFECYCLES[card.lifecycle]
        conflict_signal(
            run,
            code,
            obs.identity or "",
            f"{obs.path}: {obs.identity} is reported in {run.node.hostname} slot {obs.index} but the "
            f"CMDB has it {card.get_lifecycle_display().lower()} (card #{card.pk}); left unchanged.",
        )
        return False
    if card.node_id != run.node.pk and card.site_id and card.site_id != run.node.site_id:
        # Cards change sites through shipping (stock, warehouse), never by a node's word alone.
        conflict_signal(
            run,
            "serial_at_other_site",
            obs.identity or "",
            f"{obs.path}: {obs.identity} is reported in {run.node.hostname} slot {obs.index} but the "
            f"CMDB has it at another site (card #{card.pk}); left unchanged.",
        )
        return False
    if obs.serial and card.serial != obs.serial:
        card.serial = obs.serial  # matched by UUID: the serial became readable
    if obs.uuid and card.uuid != obs.uuid:
        holder = matcher.by_uuid.get(obs.uuid)
        if holder is not None and holder.pk != card.pk:
            conflict_signal(
                run,
                "uuid_in_use",
                obs.uuid,
                f"{obs.path}: UUID {obs.uuid} is recorded on card #{holder.pk}; not copied.",
            )
        else:
            card.uuid = obs.uuid
    return card


def _slot_exists(run: Pass, obs: CardObs) -> bool:
    """Is the reported index a slot of the node's server model (0 slots recorded: the model does not say)?"""
    slots = run.node.server_model.accelerator_slots if run.node.server_model_id else 0
    return obs.index is None or not slots or 0 <= obs.index < slots


def _create(run: Pass, new_obs: list[CardObs]) -> list[Accelerator]:
    if not new_obs:
        return []
    vendors, models = _catalog(run, {o.vendor for o in new_obs})
    cards = []
    for obs in new_obs:
        vendor = vendors.get(obs.vendor)
        if vendor is None:
            conflict_signal(
                run,
                "unknown_vendor",
                obs.vendor,
                f"{obs.path}: vendor {obs.vendor!r} is not in the catalog; card not recorded.",
            )
            continue
        card = Accelerator(
            model=_model_for(run, obs, vendor, models),
            serial=obs.serial,
            uuid=obs.uuid,
            lifecycle=AcceleratorLifecycle.INSTALLED,
            site_id=run.node.site_id,
            node=run.node,
            slot_index=obs.index,
            pci_bus_id=obs.pci_bus_id,
            firmware_version=obs.firmware_version,
            driver_version=obs.driver_version,
            last_seen_at=run.now,
            health_changed_at=run.now,
        )
        _card_signals(run, card, obs)  # event keys are computed later, once the card has an id
        cards.append(card)
    run.summary["cards_created"] += len(cards)
    return cards


def _card_signals(run: Pass, card: Accelerator, obs: CardObs) -> None:
    card._gpuops_status = obs.status  # type: ignore[attr-defined]
    for signal in obs.signals:
        run.signals.append(PendingSignal(signal=signal, vendor_id=card.model.vendor_id, accelerator=card))


def _flag_missing(run: Pass, matcher: CardMatcher, claimed: set[int], taken_slots: set) -> None:
    if "accelerators" not in run.observed.complete_sections:
        return
    if not run.observed.cards and not run.observed.orphan_signals and matcher.on_node:
        # Every card gone at once is a collection problem (nvidia-smi absent during a driver reinstall, a module
        # not loaded), not eight cards that fell out: one node-level warning instead of eight repair cases.
        collector_signal(
            run,
            "no_accelerators",
            f"The report lists no accelerator; the CMDB has "
            f"{len(matcher.on_node)} in {run.node.hostname}. Check the vendor tool and driver.",
        )
        return
    for card in matcher.on_node:
        if card.pk in claimed or card.lifecycle != AcceleratorLifecycle.INSTALLED:
            continue
        run.track(card)
        # No slot (left so by an older server, or an edit) means no place in this node either: such a card was
        # graded missing, failed and sent to the repair workflow, which cannot repair a card in no slot.
        replaced = card.slot_index is None or card.slot_index in taken_slots
        if not card.is_missing:
            run.summary["cards_replaced" if replaced else "cards_missing"] += 1
        card.is_missing = True
        slot = card.slot_index
        if replaced:
            # Another card sits in its slot now: a swap (usually a repair), not a card that vanished in place.
            # The card is somewhere else and must be accounted for (stock, RMA), which is drift, not a failure:
            # it leaves the node (in transit, with a placement row) until it is seen or booked somewhere.
            _take_out(run, card)
            signal = Signal(
                "replaced",
                "",
                f"{card} was replaced in {run.node.hostname} slot {slot} by another card; record where it went",
                (f"replaced:{card.pk}",),
            )
        else:
            signal = Signal(
                "missing",
                "",
                f"{card} (slot {slot}) is missing from {run.node.hostname}'s report",
                (f"missing:{card.pk}",),
            )
        run.signals.append(PendingSignal(signal=signal, vendor_id=card.model.vendor_id, accelerator=card))


def _take_out(run: Pass, card: Accelerator) -> None:
    """The displaced card out of the node, in transit: its open placement closes and an in-transit one opens."""
    run.placements_close.append(card.pk)
    card.node, card.slot_index, card.lifecycle = None, None, AcceleratorLifecycle.IN_TRANSIT
    run.placements_new.append(
        placement_build(
            accelerator=card, at=run.now, note=f"displaced from {run.node.hostname} (another card in its slot)"
        )
    )


def placements_write(run: Pass, new_cards: list[Accelerator]) -> None:
    """Close the open placement of every card that moved and open the new ones (two statements)."""
    rows = run.placements_new + [
        placement_build(accelerator=c, at=run.now, note="first seen by the inventory agent") for c in new_cards
    ]
    cmdb_placements_write(close_ids=run.placements_close, opened=rows, at=run.now)
