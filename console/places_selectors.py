"""Reads of the place pages (site, rack) and the group pages (cluster, tenant), permission-scoped at the source.

Every object a page shows comes through `cmdb.permissions.restrict` for the user, so a device the user may
not see is neither drawn nor counted. Each function runs a fixed number of queries whatever the number of
racks, nodes or switches (rows are read in bulk and folded in Python).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Q, QuerySet

from cmdb.models import Accelerator, Cluster, Node, Rack, Room, Site, Switch, Tenant
from cmdb.models.nodes import HEALTH_RANK, Health
from cmdb.permissions import restrict
from workflows.selectors import ticket_list

from .drawing import RackDevice, rack_elevation, rack_fill

#: a switch has a status, not a health: how its status colours the elevation
SWITCH_TONES = {"active": "ok", "maintenance": "degraded", "failed": "failed"}

#: the power figure is an estimate: say how it is made wherever it is shown
POWER_NOTE = (
    "Power drawn is estimated from each server model's rated draw times the nodes placed in the rack; "
    "no measured power is stored, and switches carry no power rating, so they are not counted."
)

NODE_LIMIT = 500  # rows of a node table on a cluster / tenant page; the counts cover them all


def _pct(part: float, whole: float) -> int:
    return round(100 * part / whole) if whole else 0


def _tone(value: str) -> str:
    return {"ok": "done", "degraded": "waiting", "failed": "rejected"}.get(value, "new")


# --- site ---------------------------------------------------------------------------------------------------------


@dataclass
class RackRow:
    rack: Rack
    used_u: int = 0
    node_count: int = 0
    switch_count: int = 0
    power_kw: Decimal = Decimal(0)
    worst_health: str = ""

    @property
    def fill_pct(self) -> int:
        return _pct(self.used_u, self.rack.u_height)

    @property
    def power_pct(self) -> int | None:
        return _pct(float(self.power_kw), float(self.rack.power_budget_kw)) if self.rack.power_budget_kw else None

    @property
    def is_over_budget(self) -> bool:
        return bool(self.rack.power_budget_kw) and self.power_kw > self.rack.power_budget_kw


@dataclass
class RoomRow:
    room: Room
    racks: list[RackRow] = field(default_factory=list)

    @property
    def used_u(self) -> int:
        return sum(r.used_u for r in self.racks)

    @property
    def total_u(self) -> int:
        return sum(r.rack.u_height for r in self.racks)

    @property
    def power_kw(self) -> Decimal:
        return sum((r.power_kw for r in self.racks), Decimal(0))

    @property
    def budget_kw(self) -> Decimal:
        return sum((r.rack.power_budget_kw for r in self.racks), Decimal(0))


def site_get(user: AbstractBaseUser, code: str) -> Site | None:
    return restrict(Site.objects.all(), user, "view").filter(code=code).first()


def site_overview(user: AbstractBaseUser, site: Site) -> dict[str, Any]:
    """Rooms with their racks, each with fill (used U of u_height) and estimated power against its budget, plus
    the site's visible node counts by health."""
    rooms = list(restrict(Room.objects.filter(site=site), user, "view").order_by("name"))
    racks = list(restrict(Rack.objects.filter(room__site=site), user, "view").select_related("room").order_by("name"))
    rows = {r.pk: RackRow(rack=r) for r in racks}
    devices: dict[int, list[RackDevice]] = defaultdict(list)
    node_rows = (
        restrict(Node.objects.filter(rack__room__site=site), user, "view")
        .values_list("rack_id", "position", "face", "server_model__u_height", "server_model__power_draw_kw", "health")
        .order_by()
    )
    for rack_id, position, face, height, power, health in node_rows:
        row = rows.get(rack_id)
        if row is None:
            continue
        devices[rack_id].append(RackDevice("node", "", position, height or 1, face))
        row.node_count += 1
        row.power_kw += power or Decimal(0)
        if not row.worst_health or HEALTH_RANK.get(health, 0) > HEALTH_RANK.get(row.worst_health, 0):
            row.worst_health = health
    switch_rows = (
        restrict(Switch.objects.filter(rack__room__site=site), user, "view")
        .values_list("rack_id", "position", "face", "u_height")
        .order_by()
    )
    for rack_id, position, face, height in switch_rows:
        if rack_id in rows:
            devices[rack_id].append(RackDevice("switch", "", position, height or 1, face))
            rows[rack_id].switch_count += 1
    for rack_id, row in rows.items():
        row.used_u = rack_fill(row.rack.u_height, devices[rack_id])
    by_room = {room.pk: RoomRow(room=room) for room in rooms}
    for row in rows.values():
        if row.rack.room_id in by_room:
            by_room[row.rack.room_id].racks.append(row)
    nodes = restrict(Node.objects.filter(site=site), user, "view")
    health = dict(nodes.order_by().values_list("health").annotate(n=Count("id")))
    unracked = nodes.filter(rack__isnull=True).count()
    return {
        "rooms": list(by_room.values()),
        "rack_count": len(rows),
        "used_u": sum(r.used_u for r in rows.values()),
        "total_u": sum(r.rack.u_height for r in rows.values()),
        "power_kw": sum((r.power_kw for r in rows.values()), Decimal(0)),
        "budget_kw": sum((r.rack.power_budget_kw for r in rows.values()), Decimal(0)),
        "node_health": [(h.value, h.label, health.get(h.value, 0), _tone(h.value)) for h in Health],
        "node_total": sum(health.values()),
        "unracked": unracked,
        "power_note": POWER_NOTE,
    }


# --- rack ---------------------------------------------------------------------------------------------------------


def rack_get(user: AbstractBaseUser, rack_id: int) -> Rack | None:
    return restrict(Rack.objects.select_related("room__site"), user, "view").filter(pk=rack_id).first()


def rack_overview(user: AbstractBaseUser, rack: Rack) -> dict[str, Any]:
    """Both faces' elevations, the devices in the rack, fill, estimated power against the budget and cooling."""
    nodes = list(
        restrict(Node.objects.filter(rack=rack), user, "view")
        .select_related("server_model", "cluster", "tenant")
        .order_by("position", "hostname")
    )
    switches = list(restrict(Switch.objects.filter(rack=rack), user, "view").order_by("position", "name"))
    devices = [
        RackDevice(
            kind="node",
            name=n.hostname,
            position=n.position,
            height=n.server_model.u_height,
            face=n.face,
            tone=n.health,
            url=f"/nodes/{n.hostname}/",
        )
        for n in nodes
    ] + [
        RackDevice(
            kind="switch",
            name=s.name,
            position=s.position,
            height=s.u_height,
            face=s.face,
            tone=SWITCH_TONES.get(s.status, "unknown"),
            url=f"/switches/{s.name}/",
        )
        for s in switches
    ]
    power = sum((n.server_model.power_draw_kw for n in nodes), Decimal(0))
    budget = rack.power_budget_kw
    used = rack_fill(rack.u_height, devices)
    return {
        "faces": [rack_elevation(rack.u_height, devices, face) for face in ("front", "rear")],
        "nodes": nodes,
        "switches": switches,
        "used_u": used,
        "fill_pct": _pct(used, rack.u_height),
        "power_kw": power,
        "budget_kw": budget,
        "power_pct": _pct(float(power), float(budget)) if budget else None,
        "is_over_budget": bool(budget) and power > budget,
        "power_note": POWER_NOTE,
        "health_tones": {n.hostname: _tone(n.health) for n in nodes},
    }


# --- cluster and tenant -------------------------------------------------------------------------------------------


def cluster_get(user: AbstractBaseUser, name: str) -> Cluster | None:
    return restrict(Cluster.objects.select_related("site"), user, "view").filter(name=name).first()


def tenant_get(user: AbstractBaseUser, slug: str) -> Tenant | None:
    return restrict(Tenant.objects.all(), user, "view").filter(slug=slug).first()


def _counts(qs: QuerySet, field_name: str) -> dict[str, int]:
    return dict(qs.order_by().values_list(field_name).annotate(n=Count("id")))


def group_overview(user: AbstractBaseUser, *, cluster: Cluster | None = None, tenant: Tenant | None = None) -> dict:
    """The visible nodes of a cluster or tenant (first NODE_LIMIT, with counts by health and lifecycle), its
    cards by health, and the open tickets about them that the user may see."""
    on = Q(cluster=cluster) if cluster is not None else Q(tenant=tenant)
    nodes_qs = restrict(Node.objects.filter(on), user, "view")
    nodes = list(
        nodes_qs.select_related("server_model", "site", "rack", "cluster", "tenant").order_by("hostname")[:NODE_LIMIT]
    )
    node_health = _counts(nodes_qs, "health")
    node_status = _counts(nodes_qs, "status")
    card_on = Q(node__cluster=cluster) if cluster is not None else Q(node__tenant=tenant)
    cards = restrict(Accelerator.objects.filter(card_on), user, "view")
    card_health = _counts(cards, "health")
    cordoned = nodes_qs.filter(is_cordoned=True).count()
    # Open work: tickets on the cluster, or linked to one of its (visible) nodes.
    linked = Q(links__node__in=nodes_qs.values("pk"))
    about = (Q(cluster=cluster) | linked) if cluster is not None else linked
    tickets = list(ticket_list(user, {"status": "open"}).filter(about).distinct().order_by("-created_at")[:100])
    return {
        "nodes": nodes,
        "node_total": sum(node_health.values()),
        "node_limit": NODE_LIMIT,
        "node_health": [(h.value, h.label, node_health.get(h.value, 0), _tone(h.value)) for h in Health],
        "node_status": sorted(node_status.items()),
        "card_health": [(h.value, h.label, card_health.get(h.value, 0), _tone(h.value)) for h in Health],
        "card_total": sum(card_health.values()),
        "cordoned": cordoned,
        "tickets": tickets,
        "health_tone": {n.hostname: _tone(n.health) for n in nodes},
    }
