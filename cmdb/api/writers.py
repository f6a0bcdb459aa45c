"""CMDB writers: how API rows are written for tracked models, accelerators and racked devices.

Single-row writes go through `save()` (the change-history signals record them) or through the domain service
(moving a card -> `accelerator_place`, which writes the placement history). Bulk writes use bulk statements and
write what the signals would have written themselves, in bulk: change records (`records_for_bulk`), placement
rows, rack-unit rows; bulk updates bump `version` with `F("version") + 1`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Model
from django.utils import timezone

from gpuops.api.exceptions import Conflict, _as_field_errors
from gpuops.api.validation import Errors, add_error
from gpuops.api.writers import ModelWriter, Row, RowErrors, has_row_version

from ..holds import holds_check
from ..models import (
    Accelerator,
    AcceleratorLifecycle,
    Node,
    PlacementKind,
    RackUnit,
    Switch,
    TrackedModel,
)
from ..services.accelerators import accelerator_place, placement_build, placements_write
from ..services.changelog import records_for_bulk, records_write
from ..services.nodes import node_cordon, node_uncordon, nodes_set_status

CONSTRAINT_MESSAGES = {
    "node_cordon_needs_reason": "A cordoned node needs a cordon_reason.",
    "node_position_needs_rack": "A position needs a rack.",
    "accelerator_node_or_stock": "A card is in a node or in a stock location, not both.",
    "accelerator_installed_has_node": "An installed card needs a node.",
    "accelerator_in_stock_has_location": "A card in stock needs a stock_location.",
    "link_one_a_side": "Side A is either a NIC port or a switch port (exactly one).",
    "link_not_loop": "A link cannot connect a switch port to itself.",
    "partitem_stock_or_node": "A part is in a stock location or in a node, not both.",
    "rack_u_height_positive": "A rack is at least 1U high.",
}


class CmdbWriter(ModelWriter):
    """Tracked models: bulk updates bump `version`; bulk creates/updates write change records in one INSERT."""

    constraint_messages = CONSTRAINT_MESSAGES

    @property
    def tracked(self) -> bool:
        return issubclass(self.model, TrackedModel)

    def save_one(self, row: Row) -> None:
        if self.tracked and not row.is_new and not has_row_version(self.model):
            # DriverPackage and InstalledSoftware use `version` for the software version, and the change-history
            # signal bumps `version` numerically on every save(): write them with an UPDATE and record the change
            # here instead, exactly as the bulk path does.
            fields = self.bulk_update_fields([row], sorted(row.changed))
            if fields:
                self.model._default_manager.bulk_update([row.instance], fields)
                self.after_bulk_update([row])
            return
        super().save_one(row)

    def bulk_update_fields(self, rows: Sequence[Row], names: list[str]) -> list[str]:
        fields = super().bulk_update_fields(rows, names)
        if fields and has_row_version(self.model):
            # The rows are locked, but F() keeps the bump atomic even for a caller that did not lock.
            for row in rows:
                row.instance.version = F("version") + 1
            fields.append("version")
        return fields

    def after_bulk_create(self, rows: Sequence[Row]) -> None:
        if self.tracked:
            records_write(records_for_bulk(created=[r.instance for r in rows]))

    def after_bulk_update(self, rows: Sequence[Row]) -> None:
        if self.tracked:
            records_write(records_for_bulk(updated=[(r.before or {}, r.instance) for r in rows]))


# --- accelerators ------------------------------------------------------------------------------------------------

_LOCATION_FIELDS = {"node", "slot_index", "stock_location", "lifecycle"}
_KIND_FOR_LIFECYCLE = {
    AcceleratorLifecycle.RMA: PlacementKind.AT_VENDOR,
    AcceleratorLifecycle.SCRAPPED: PlacementKind.SCRAPPED,
    AcceleratorLifecycle.IN_TRANSIT: PlacementKind.IN_TRANSIT,
    AcceleratorLifecycle.FAILED: PlacementKind.IN_TRANSIT,  # removed from its node, lifecycle stays failed
}
# The lifecycle a move implies when the row does not set one (as accelerator_place does).
_LIFECYCLE_FOR_KIND = {
    PlacementKind.NODE: AcceleratorLifecycle.INSTALLED,
    PlacementKind.STOCK: AcceleratorLifecycle.IN_STOCK,
    PlacementKind.IN_TRANSIT: AcceleratorLifecycle.IN_TRANSIT,
    PlacementKind.AT_VENDOR: AcceleratorLifecycle.RMA,
    PlacementKind.SCRAPPED: AcceleratorLifecycle.SCRAPPED,
}


class AcceleratorWriter(CmdbWriter):
    """Cards: where a card is (node slot, stock, transit, vendor, scrap) changes only with a placement row.

    A row that sets `node` installs the card there (and clears its stock location), one that sets
    `stock_location` puts it in stock, one that sets lifecycle rma/scrapped/in_transit/failed takes it out of
    its node. `site` follows the node or stock location. Single moves call `accelerator_place`; bulk moves
    write the same rows with bulk statements.
    """

    def row(self, index: int, data: dict[str, Any], instance: Model | None = None) -> Row:
        row = super().row(index, data, instance)
        card = row.instance
        assert isinstance(card, Accelerator)
        kind = self._placement_kind(row)
        row.kind = kind  # type: ignore[attr-defined]
        if kind is None:
            return row
        row.touched |= {"node", "slot_index", "pci_bus_id", "stock_location", "lifecycle", "site", "is_missing"}
        card.is_missing = False
        if kind == PlacementKind.NODE:
            card.stock_location = None
        elif kind == PlacementKind.STOCK:
            card.node, card.slot_index, card.pci_bus_id = None, None, ""
        else:
            card.node, card.slot_index, card.pci_bus_id, card.stock_location = None, None, "", None
        if "lifecycle" not in row.data:
            card.lifecycle = _LIFECYCLE_FOR_KIND[kind]
        if card.node_id:
            card.site_id = card.node.site_id
        elif card.stock_location_id:
            card.site_id = card.stock_location.site_id
        elif kind in (PlacementKind.AT_VENDOR, PlacementKind.SCRAPPED):
            card.site_id = None
        return row

    @staticmethod
    def _placement_kind(row: Row) -> str | None:
        """Where the row puts the card, or None when it does not move it."""
        data = row.data
        if not row.is_new and not (_LOCATION_FIELDS & set(data)):
            return None
        card = row.instance
        if data.get("node") is not None or ("node" not in data and "slot_index" in data and card.node_id):
            return PlacementKind.NODE
        if data.get("stock_location") is not None:
            return PlacementKind.STOCK
        lifecycle = data.get("lifecycle")
        if lifecycle in _KIND_FOR_LIFECYCLE:
            return _KIND_FOR_LIFECYCLE[lifecycle]
        if "node" in data or "stock_location" in data:  # explicitly cleared: on its way somewhere
            return PlacementKind.IN_TRANSIT
        if row.is_new:
            return (
                PlacementKind.NODE
                if card.node_id
                else (PlacementKind.STOCK if card.stock_location_id else PlacementKind.IN_TRANSIT)
            )
        return None  # lifecycle installed/in_stock without a location: the constraints will say what is missing

    def create(self, rows: Sequence[Row], *, bulk: bool) -> list[Model]:
        objs = super().create(rows, bulk=bulk)
        now = timezone.now()
        placements_write(
            opened=[placement_build(accelerator=card, note="created through the API", at=now) for card in objs],
            at=now,
            batch_size=self.batch_size,
        )
        return objs

    def save_one(self, row: Row) -> None:
        kind = getattr(row, "kind", None)
        card = row.instance
        if row.is_new or kind is None:
            card.save()
            return
        assert isinstance(card, Accelerator)
        # Delegate the move to the service (it locks, closes the open placement, opens the next one); then save
        # whatever else the row changed (health, firmware, ...) as an ordinary update.
        other = {name: getattr(card, name) for name in row.data if name not in _LOCATION_FIELDS}
        requested_lifecycle = card.lifecycle
        try:
            moved = accelerator_place(
                accelerator=card,
                kind=kind,
                node=card.node,
                slot_index=card.slot_index,
                pci_bus_id=card.pci_bus_id,
                stock_location=card.stock_location,
                override_hold=override_requested(self.request),
            )
        except DjangoValidationError as exc:
            raise RowErrors({row.index: _as_field_errors(exc)}) from exc
        for name, value in other.items():
            setattr(moved, name, value)
        if other or requested_lifecycle != moved.lifecycle:
            moved.lifecycle = requested_lifecycle  # e.g. "failed": taken out of the node, not merely in transit
            moved.save()
        row.instance = moved

    def update(self, rows: Sequence[Row], *, bulk: bool) -> list[Model]:
        if bulk:  # single moves are checked by accelerator_place
            moving = [r for r in rows if getattr(r, "kind", None) is not None]
            touched = {n for r in moving for n in ((r.before or {}).get("node_id"), r.instance.node_id) if n}
            if touched:
                holds_check(touched, what="move cards in or out of", override=override_requested(self.request))
        objs = super().update(rows, bulk=bulk)
        if bulk:
            moved = [r.instance for r in rows if getattr(r, "kind", None) is not None]
            if moved:
                now = timezone.now()
                placements_write(
                    close_ids=[card.pk for card in moved],
                    at=now,
                    batch_size=self.batch_size,
                    opened=[placement_build(accelerator=card, note="moved through the API", at=now) for card in moved],
                )
        return objs


# --- racked devices ----------------------------------------------------------------------------------------------

_DEVICE_LOCATION = {"rack", "position", "face", "site", "server_model", "u_height"}
# Written only by cmdb.services.nodes (permission, holds, change record, scheduler): never by the generic save.
_NODE_SERVICE_FIELDS = ("status", "is_cordoned", "cordon_reason")


def override_requested(request: Any) -> bool:
    """`?override_hold=1` (or `?force=1`): the caller asks to force a change on a held node."""
    params = getattr(request, "query_params", None) or {}
    return any(str(params.get(name, "")).lower() in ("1", "true", "yes") for name in ("override_hold", "force"))


class DeviceWriter(CmdbWriter):
    """Nodes and switches: a racked device occupies RackUnit rows, unique per (rack, face, unit).

    One row is validated by the model's clean() and saved (a signal rewrites its units). A batch is validated
    with one query for the occupancy of every rack it touches, and its units are rewritten with one DELETE and
    one INSERT. Rows that do not move keep their units untouched.
    """

    def _height(self, device: Model) -> int:
        return device.server_model.u_height if isinstance(device, Node) else device.u_height

    @property
    def _key(self) -> str:
        return "node" if self.model is Node else "switch"

    @staticmethod
    def _moving(rows: Sequence[Row]) -> list[Row]:
        return [r for r in rows if r.is_new or (_DEVICE_LOCATION & r.changed)]

    def clean_rows(self, rows: Sequence[Row], errors: Errors, *, bulk: bool) -> None:
        if not bulk:
            super().clean_rows(rows, errors, bulk=bulk)
            return
        moving = self._moving(rows)
        if not moving:
            return
        moving_ids = {r.instance.pk for r in moving if r.instance.pk}
        racks = {r.instance.rack_id for r in moving if r.instance.rack_id}
        occupied: dict[tuple[int, str, int], str] = {}
        units = RackUnit.objects.filter(rack_id__in=racks).values_list(
            "rack_id", "face", "unit", "node_id", "switch_id", "node__hostname", "switch__name"
        )
        for rack_id, face, unit, node_id, switch_id, hostname, switch_name in units:
            own = node_id if self.model is Node else switch_id
            if own is not None and own in moving_ids:
                continue  # this device moves in the batch: its current units are freed
            occupied[(rack_id, face, unit)] = hostname or switch_name
        for row in moving:
            device = row.instance
            if device.rack_id and device.site_id and device.rack.room.site_id != device.site_id:
                add_error(errors, row.index, "rack", f"Rack {device.rack} is not in site {device.site}.")
                continue
            if not (device.rack_id and device.position):
                continue
            height = self._height(device)
            top = device.position + height - 1
            if device.position < 1 or top > device.rack.u_height:
                add_error(
                    errors,
                    row.index,
                    "position",
                    f"U{device.position}-U{top} does not fit rack {device.rack} (U1-U{device.rack.u_height}).",
                )
                continue
            wanted = [(device.rack_id, device.face, u) for u in range(device.position, top + 1)]
            taken = next((k for k in wanted if k in occupied), None)
            if taken is not None:
                add_error(
                    errors,
                    row.index,
                    "position",
                    f"U{taken[2]} ({taken[1]}) of rack {device.rack} is already occupied by {occupied[taken]}.",
                )
                continue
            for k in wanted:
                occupied[k] = f"row {row.index} of this request"

    def save_one(self, row: Row) -> None:
        try:
            super().save_one(row)
        except ValueError as exc:  # rack_occupancy_set: lost a race for the units
            raise RowErrors({row.index: {"position": [str(exc)]}}) from exc

    def update(self, rows: Sequence[Row], *, bulk: bool) -> list[Model]:
        if self.model is not Node:
            return super().update(rows, bulk=bulk)
        override = override_requested(self.request)
        # A held node is not moved either (the services below check holds for status and cordon).
        moving = [r.instance for r in rows if _DEVICE_LOCATION & r.changed]
        if moving:
            holds_check(
                [n.pk for n in moving], what="move", override=override, labels={n.pk: n.hostname for n in moving}
            )
        # Take status and cordon out of the generic write: back to their stored values, applied by the services.
        asked: dict[int, dict[str, Any]] = {}
        for row in rows:
            wanted = {name: row.data.pop(name) for name in _NODE_SERVICE_FIELDS if name in row.data}
            if wanted:
                asked[row.index] = wanted
                for name in wanted:
                    setattr(row.instance, name, (row.before or {}).get(name, getattr(row.instance, name)))
        # Rows left with nothing else to write skip the generic write (one version bump per change, not two).
        others = [r for r in rows if r.data or r.m2m or r.touched]
        if others:
            super().update(others, bulk=bulk)
        if asked:
            self._node_services(rows, asked, override=override)
        return [r.instance for r in rows]

    @staticmethod
    def _node_services(rows: Sequence[Row], asked: dict[int, dict[str, Any]], *, override: bool) -> None:
        """Apply the requested status (one call per distinct status) and cordon changes through the services."""
        by_status: dict[str, list[int]] = {}
        for row in rows:
            wanted = asked.get(row.index, {})
            node = row.instance
            if "status" in wanted and wanted["status"] != node.status:
                by_status.setdefault(wanted["status"], []).append(node.pk)
        for status, ids in by_status.items():
            nodes_set_status(node_ids=ids, status=status, reason="set through the API", override_hold=override)
        for row in rows:
            wanted = asked.get(row.index, {})
            node = row.instance
            cordon = wanted.get("is_cordoned", node.is_cordoned)
            reason = wanted.get("cordon_reason", node.cordon_reason)
            if cordon and (not node.is_cordoned or reason != node.cordon_reason):
                node_cordon(node=node, reason=reason, override_hold=override)
            elif not cordon and node.is_cordoned:
                node_uncordon(node=node, override_hold=override)

    def _sync_units(self, rows: Sequence[Row]) -> None:
        moving = [r.instance for r in self._moving(rows)]
        if not moving:
            return
        key = self._key
        RackUnit.objects.filter(**{f"{key}_id__in": [d.pk for d in moving]}).delete()
        units = [
            RackUnit(rack_id=d.rack_id, face=d.face, unit=u, **{key: d})
            for d in moving
            if d.rack_id and d.position
            for u in range(d.position, d.position + self._height(d))
        ]
        try:
            with transaction.atomic():
                RackUnit.objects.bulk_create(units, batch_size=self.batch_size)
        except IntegrityError as exc:
            raise Conflict("A rack position in this batch was taken by a concurrent write; retry.") from exc

    def after_bulk_create(self, rows: Sequence[Row]) -> None:
        super().after_bulk_create(rows)
        self._sync_units(rows)

    def after_bulk_update(self, rows: Sequence[Row]) -> None:
        super().after_bulk_update(rows)
        self._sync_units(rows)


WRITERS: dict[type[Model], type[CmdbWriter]] = {
    Accelerator: AcceleratorWriter,
    Node: DeviceWriter,
    Switch: DeviceWriter,
}


def writer_for(model: type[Model]) -> type[CmdbWriter]:
    return WRITERS.get(model, CmdbWriter)
