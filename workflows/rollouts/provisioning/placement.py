"""Where a new node goes: a rack position with free U and power budget, and the planned links of its HCAs.

Rack choice: the rack named by the operator, else the first rack of the node's site with room and power,
preferring racks that already hold nodes of the target cluster (short cables, one failure domain per cluster).
Power: the sum of `server_model.power_draw_kw` of the rack's nodes plus this node's must stay within the rack's
`power_budget_kw` (a rack with no budget recorded is never chosen: we cannot tell it is safe).

Links: on a rail-optimised fabric, HCA i (NIC.rail == i) of every node of a scalable unit goes to the unit's
rail leaf i, on the leaf's next free port. The unit is the one the node's rack neighbours are cabled to, else
the first unit with a free port on every rail the node needs.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from decimal import Decimal

from django.db import transaction
from django.db.models import Sum

from cmdb.models import (
    Fabric,
    FabricPurpose,
    Link,
    LinkStatus,
    Nic,
    NicKind,
    Node,
    Rack,
    RackFace,
    RackStatus,
    RackUnit,
    Switch,
    SwitchPort,
    SwitchRole,
)
from cmdb.services.racks import rack_overlap_errors


class PlacementError(Exception):
    """No rack position, or no leaf port, for this node; the message says why."""


@dataclass(frozen=True)
class Position:
    rack_id: int
    position: int
    face: str
    rack_label: str
    power_after_kw: Decimal
    power_budget_kw: Decimal


def _free_position(occupied: set[int], rack_height: int, u_height: int) -> int | None:
    """The lowest U where `u_height` contiguous units are free."""
    for bottom in range(1, rack_height - u_height + 2):
        if not any(u in occupied for u in range(bottom, bottom + u_height)):
            return bottom
    return None


def rack_power_kw(rack_ids: list[int]) -> dict[int, Decimal]:
    """Power drawn per rack by the nodes in it (one aggregate query)."""
    rows = Node.objects.filter(rack_id__in=rack_ids).values("rack_id").annotate(kw=Sum("server_model__power_draw_kw"))
    return {r["rack_id"]: r["kw"] or Decimal(0) for r in rows}


def position_find(
    node: Node,
    *,
    rack: Rack | None = None,
    position: int | None = None,
    cluster_id: int | None = None,
    face: str = RackFace.FRONT,
) -> Position:
    """Choose a rack position for `node` (pure read). Raises PlacementError with the reason when none fits."""
    u_height = node.server_model.u_height
    draw = node.server_model.power_draw_kw or Decimal(0)
    if rack is not None:
        racks = [rack]
    else:
        racks = list(
            Rack.objects.filter(room__site_id=node.site_id, status=RackStatus.ACTIVE)
            .select_related("room")
            .order_by("room__name", "name")
        )
        if cluster_id:
            with_cluster = set(
                Node.objects.filter(cluster_id=cluster_id, rack__isnull=False).values_list("rack_id", flat=True)
            )
            racks.sort(key=lambda r: r.pk not in with_cluster)  # stable: keeps room/name order within each group
    if not racks:
        raise PlacementError(f"site {node.site} has no active rack")
    ids = [r.pk for r in racks]
    power = rack_power_kw(ids)
    occupied: dict[int, set[int]] = defaultdict(set)
    for rack_id, unit in (
        RackUnit.objects.filter(rack_id__in=ids, face=face).exclude(node_id=node.pk).values_list("rack_id", "unit")
    ):
        occupied[rack_id].add(unit)
    reasons = []
    for r in racks:
        if r.room.site_id != node.site_id:
            reasons.append(f"{r} is not in site {node.site}")
            continue
        budget = r.power_budget_kw or Decimal(0)
        after = power.get(r.pk, Decimal(0)) + draw
        if budget <= 0:
            reasons.append(f"{r} has no power budget recorded")
            continue
        if after > budget:
            reasons.append(
                f"{r}: {power.get(r.pk, Decimal(0))} kW + {draw} kW = {after} kW exceeds its budget of {budget} kW"
            )
            continue
        if position is not None:
            problem = rack_overlap_errors(rack=r, position=position, u_height=u_height, face=face, node_id=node.pk)
            if problem:
                reasons.append(problem)
                continue
            bottom: int | None = position
        else:
            bottom = _free_position(occupied[r.pk], r.u_height, u_height)
            if bottom is None:
                reasons.append(f"{r} has no {u_height} free contiguous U")
                continue
        return Position(
            rack_id=r.pk, position=bottom, face=face, rack_label=str(r), power_after_kw=after, power_budget_kw=budget
        )
    shown = "; ".join(reasons[:5]) + (f" (and {len(reasons) - 5} more racks)" if len(reasons) > 5 else "")
    raise PlacementError(f"no rack position for {node} ({u_height}U, {draw} kW): {shown}")


@transaction.atomic
def position_assign(
    node: Node, *, rack: Rack | None = None, position: int | None = None, cluster_id: int | None = None
) -> Position:
    """Find and write a rack position. The candidate rack rows are locked first, so two provisionings cannot
    both count the same free U or the same power headroom; the RackUnit unique constraint is the last word."""
    if rack is not None:
        Rack.objects.select_for_update().filter(pk=rack.pk).first()
    else:
        list(Rack.objects.select_for_update().filter(room__site_id=node.site_id).order_by("pk").values_list("pk"))
    fresh = Node.objects.select_for_update().select_related("server_model", "site").get(pk=node.pk)
    chosen = position_find(fresh, rack=rack, position=position, cluster_id=cluster_id)
    fresh.rack_id, fresh.position, fresh.face = chosen.rack_id, chosen.position, chosen.face
    try:
        # A plain save: the change history records it and the cmdb signal writes the RackUnit rows.
        fresh.save(update_fields=["rack", "position", "face", "updated_at", "version"])
    except ValueError as exc:  # rack_occupancy_set turns the unique-constraint race into a readable ValueError
        raise PlacementError(str(exc)) from exc
    return chosen


@transaction.atomic
def position_release(node: Node, *, rack_id: int, position: int) -> bool:
    """Clear the node's rack position if it is still the one provisioning assigned. Returns whether it did."""
    fresh = Node.objects.select_for_update().get(pk=node.pk)
    if fresh.rack_id != rack_id or fresh.position != position:
        return False
    fresh.rack, fresh.position = None, None
    fresh.save(update_fields=["rack", "position", "updated_at", "version"])
    return True


# --- links ----------------------------------------------------------------------------------------------------


def _port_order(name: str) -> tuple:
    """Natural order of port names: p2 before p10, Ethernet1/2 before Ethernet1/10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def fabric_for(node: Node, *, cluster_id: int | None = None, fabric_id: int | None = None) -> Fabric:
    """The compute fabric the node's HCAs join: the one named, else the one its cluster's nodes are cabled to,
    else the only rail-optimised compute fabric of its site."""
    if fabric_id:
        return Fabric.objects.get(pk=fabric_id)
    if cluster_id:
        used = Link.objects.filter(
            a_nic_port__nic__node__cluster_id=cluster_id, fabric__purpose=FabricPurpose.COMPUTE
        ).values_list("fabric_id", flat=True)[:500]
        top = Counter(used).most_common(1)
        if top:
            return Fabric.objects.get(pk=top[0][0])
    fabrics = list(Fabric.objects.filter(site_id=node.site_id, purpose=FabricPurpose.COMPUTE, is_rail_optimized=True))
    if len(fabrics) != 1:
        names = ", ".join(f.name for f in fabrics) or "none"
        raise PlacementError(
            f"cannot tell which compute fabric {node} joins (rail-optimised at {node.site}: "
            f"{names}); name one on the ticket"
        )
    return fabrics[0]


@dataclass(frozen=True)
class PlannedLinks:
    fabric: str
    created: list[int]  # Link ids written now
    existing: list[str]  # HCAs already cabled in the CMDB (kept)
    scalable_unit: int | None
    hcas_created: int = 0  # placeholder HCAs written from the fabric design


# How the node's agent names rail HCAs, per accelerator vendor (Ascend's integrated RoCE ports are hccn0..7;
# ConnectX HCAs are mlx5_0..). Placeholder HCAs use the same names so the agent's first report fills them in.
HCA_NAMES = {"ascend": "hccn{rail}"}
DEFAULT_HCA_NAME = "mlx5_{rail}"


def expected_hcas_ensure(node: Node, *, fabric: Fabric) -> int:
    """A server fresh from the dock has no HCAs in the CMDB yet (its agent runs only once the OS is on), but the
    cabling plan needs them: create one HCA per rail of a rail-optimised fabric, named as the agent will report
    it, with one port each. Ordinary saves, so the history records them. Returns how many were created."""
    from cmdb.models import NicPort

    if not fabric.is_rail_optimized or not fabric.rail_count:
        return 0
    if Nic.objects.filter(node=node, rail__isnull=False).exists():
        return 0
    model = node.server_model.accelerator_model
    pattern = HCA_NAMES.get(model.vendor.slug if model else "", DEFAULT_HCA_NAME)
    kind = NicKind.INFINIBAND if fabric.kind == "infiniband" else NicKind.ROCE
    for rail in range(fabric.rail_count):
        nic = Nic.objects.create(node=node, name=pattern.format(rail=rail), kind=kind, rail=rail)
        NicPort.objects.create(nic=nic, name="1")
    return fabric.rail_count


@transaction.atomic
def links_plan(node: Node, *, fabric: Fabric) -> PlannedLinks:
    """Write `planned` links for the node's rail HCAs that have none yet (idempotent: a cabled HCA is kept).

    The fabric's leaves are locked while free ports are chosen, so two nodes never get the same leaf port.
    """
    created_hcas = expected_hcas_ensure(node, fabric=fabric)
    nics = list(
        Nic.objects.filter(node=node, rail__isnull=False, kind__in=[NicKind.INFINIBAND, NicKind.ROCE])
        .prefetch_related("ports")
        .order_by("rail", "name")
    )
    if not nics:
        raise PlacementError(
            f"{node} has no HCA with a rail in the CMDB and {fabric} is not rail-optimised; add the "
            "HCAs in the admin, then retry"
        )
    if fabric.is_rail_optimized and fabric.rail_count and any(n.rail >= fabric.rail_count for n in nics):
        raise PlacementError(f"{node} has HCAs on rails beyond the {fabric.rail_count} rails of {fabric}")
    wanted: dict[int, tuple[Nic, object]] = {}
    existing: list[str] = []
    for nic in nics:
        ports = sorted(nic.ports.all(), key=lambda p: _port_order(p.name))
        if not ports:
            raise PlacementError(f"{nic} has no port in the CMDB")
        port = ports[0]
        if Link.objects.filter(a_nic_port=port).exists():
            existing.append(nic.name)
        else:
            wanted[nic.rail] = (nic, port)
    if not wanted:
        return PlannedLinks(
            fabric=fabric.name, created=[], existing=existing, scalable_unit=None, hcas_created=created_hcas
        )
    leaves = list(
        Switch.objects.select_for_update()
        .filter(fabric=fabric, role=SwitchRole.LEAF, rail__in=list(wanted))
        .order_by("scalable_unit", "rail", "name")
    )
    by_unit: dict[int | None, dict[int, Switch]] = defaultdict(dict)
    for leaf in leaves:
        by_unit[leaf.scalable_unit].setdefault(leaf.rail, leaf)
    free: dict[int, list[SwitchPort]] = defaultdict(list)
    for port in SwitchPort.objects.filter(switch__in=leaves, link_as_b__isnull=True, link_as_a__isnull=True):
        free[port.switch_id].append(port)
    neighbours = (
        Counter(
            Link.objects.filter(a_nic_port__nic__node__rack_id=node.rack_id, fabric=fabric)
            .exclude(a_nic_port__nic__node=node)
            .values_list("b_switch_port__switch__scalable_unit", flat=True)
        )
        if node.rack_id
        else Counter()
    )
    units = sorted(by_unit, key=lambda u: (-neighbours.get(u, 0), u is None, u or 0))
    for unit in units:
        rails = by_unit[unit]
        if all(rail in rails and free[rails[rail].pk] for rail in wanted):
            created = []
            for rail, (_nic, port) in sorted(wanted.items()):
                leaf_port = min(free[rails[rail].pk], key=lambda p: _port_order(p.name))
                created.append(
                    Link.objects.create(
                        fabric=fabric, a_nic_port=port, b_switch_port=leaf_port, status=LinkStatus.PLANNED
                    ).pk
                )
            return PlannedLinks(
                fabric=fabric.name, created=created, existing=existing, scalable_unit=unit, hcas_created=created_hcas
            )
    missing = sorted(wanted)
    raise PlacementError(f"no scalable unit of {fabric} has a free leaf port on every rail {missing} that {node} needs")


def links_remove(link_ids: list[int]) -> int:
    """Delete the links provisioning planned (a plain delete per row, so the change history records each)."""
    removed = 0
    for link in Link.objects.filter(pk__in=link_ids):
        link.delete()
        removed += 1
    return removed


__all__ = [
    "PlacementError",
    "PlannedLinks",
    "Position",
    "expected_hcas_ensure",
    "fabric_for",
    "links_plan",
    "links_remove",
    "position_assign",
    "position_find",
    "position_release",
    "rack_power_kw",
]
