"""Rack positions: validating and writing the U occupancy of nodes and switches."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from ..models.locations import Rack, RackUnit


def rack_overlap_errors(
    *,
    rack: Rack,
    position: int,
    u_height: int,
    face: str,
    node_id: int | None = None,
    switch_id: int | None = None,
) -> str:
    """A readable error if [position, position + u_height) does not fit the rack or overlaps another device
    on that face; "" when it fits."""
    top = position + u_height - 1
    if position < 1 or top > rack.u_height:
        return f"U{position}-U{top} does not fit rack {rack} (U1-U{rack.u_height})."
    taken = (
        RackUnit.objects.filter(rack=rack, face=face, unit__gte=position, unit__lte=top)
        .exclude(node_id=node_id if node_id else -1)
        .exclude(switch_id=switch_id if switch_id else -1)
        .select_related("node", "switch")
        .order_by("unit")
    )
    first = taken.first()
    if first is None:
        return ""
    occupant = first.node or first.switch
    return f"U{first.unit} ({face}) of rack {rack} is already occupied by {occupant}."


def rack_occupancy_set(*, device, u_height: int) -> None:
    """Make the RackUnit rows of a node or switch match its rack/position/face.

    The unique (rack, face, unit) constraint is the last line of defence against two concurrent placements;
    its IntegrityError becomes a ValueError with the readable message.
    """
    from ..models.nodes import Node

    is_node = isinstance(device, Node)
    key = {"node": device} if is_node else {"switch": device}
    with transaction.atomic():
        RackUnit.objects.filter(**key).delete()
        if not device.rack_id or not device.position:
            return
        rows = [
            RackUnit(rack_id=device.rack_id, face=device.face, unit=u, **key)
            for u in range(device.position, device.position + u_height)
        ]
        try:
            with transaction.atomic():
                RackUnit.objects.bulk_create(rows)
        except IntegrityError as exc:
            msg = rack_overlap_errors(
                rack=device.rack,
                position=device.position,
                u_height=u_height,
                face=device.face,
                **({"node_id": device.pk} if is_node else {"switch_id": device.pk}),
            )
            raise ValueError(msg or f"Rack position of {device} overlaps another device.") from exc
