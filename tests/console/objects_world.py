"""Data for the console's object-page and change-log tests: two sites, a node of each with cards, NICs cabled to a
leaf, software, health events, an agent report, tickets and change records; people scoped to site A."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import Permission
from django.utils import timezone

from cmdb import models as m
from cmdb.permissions import grant_scope
from cmdb.services.accelerators import placement_build, placements_write
from integrations.switches.models import ObservedLink
from inventory_agents.models import Report
from tests.factories.cmdb import (
    AcceleratorFactory,
    AcceleratorModelFactory,
    ClusterFactory,
    FabricFactory,
    NodeFactory,
    RackFactory,
    RoomFactory,
    ServerModelFactory,
    SiteFactory,
    StockLocationFactory,
    SwitchFactory,
    UserFactory,
)
from workflows.engine import ticket_create


@dataclass
class Place:
    site: m.Site
    node: m.Node
    cards: list[m.Accelerator]
    switch: m.Switch
    store: m.StockLocation
    report: Report | None = None
    tickets: list[Any] = field(default_factory=list)


def build_place(
    prefix: str, *, cards: int = 2, nics: int = 1, events: int = 1, changes: int = 1, tickets: int = 1
) -> Place:
    """A racked node `<prefix>-node` in site `<prefix>-site` with `cards` cards (card 0 failed), `nics` HCAs of
    two ports each cabled to `<prefix>-leaf` (port 0 also observed by LLDP), software, `events` health events,
    an agent report, `tickets` repair tickets and `changes` status changes."""
    site = SiteFactory(code=f"{prefix}-site", name=f"{prefix} site")
    rack = RackFactory(room=RoomFactory(site=site, name=f"{prefix}-hall"), name=f"{prefix}-rack")
    cluster = ClusterFactory(name=f"{prefix}-cluster", site=site)
    model = AcceleratorModelFactory()
    node = NodeFactory(
        hostname=f"{prefix}-node",
        serial=f"{prefix}-nodeserial",
        site=site,
        rack=rack,
        position=3,
        cluster=cluster,
        server_model=ServerModelFactory(),
        bmc_address=None,
        status="active",
    )
    made = [
        AcceleratorFactory(
            serial=f"{prefix}-card-{i:02d}",
            uuid=f"GPU-{prefix}-{i:02d}",
            node=node,
            slot_index=i,
            model=model,
            firmware_version=f"96.00.{i}",
        )
        for i in range(cards)
    ]
    placements_write(opened=[placement_build(accelerator=card) for card in made])
    m.Accelerator.objects.filter(pk=made[0].pk).update(health="failed", health_detail="XID 79")
    made[0].refresh_from_db()
    fabric = FabricFactory(name=f"{prefix}-fabric", site=site)
    switch = SwitchFactory(name=f"{prefix}-leaf", site=site, fabric=fabric)
    for n in range(nics):
        nic = m.Nic.objects.create(node=node, name=f"mlx5_{n}", kind="infiniband", rail=n, firmware="28.39.1002")
        for p in range(2):
            port = m.NicPort.objects.create(nic=nic, name=str(p + 1), guid=f"{prefix}{n}{p}".ljust(16, "0")[:16])
            sport = m.SwitchPort.objects.create(switch=switch, name=f"{prefix}-p{n}-{p}")
            m.Link.objects.create(fabric=fabric, a_nic_port=port, b_switch_port=sport, status="connected")
            if p == 0:
                ObservedLink.objects.create(
                    source="lldp",
                    switch=switch,
                    switch_port=sport,
                    local_device=switch.name,
                    local_port=sport.name,
                    remote_chassis_id=f"{prefix}-{n}",
                    node=node,
                    nic_port=port,
                )
    m.InstalledSoftware.objects.create(node=node, component="nvidia-driver", version="550.127.05")
    now = timezone.now()
    for i in range(events):
        m.HealthEvent.objects.create(
            node=node,
            accelerator=made[i % len(made)],
            kind="xid",
            code=str(70 + i),
            severity="critical",
            action="drain_repair",
            message=f"{prefix} event {i}",
            dedup_key=f"{prefix}-ev-{i}",
            first_seen_at=now - dt.timedelta(minutes=i + 5),
            last_seen_at=now - dt.timedelta(minutes=i),
        )
    report = Report.objects.create(
        node=node,
        received_at=now,
        status="applied",
        schema="agent-report-v1",
        agent_version="1.4.0",
        payload={"hostname": node.hostname},
        summary={"cards_updated": 1},
    )
    store = StockLocationFactory(site=site, name=f"{prefix}-store")
    place = Place(site=site, node=node, cards=made, switch=switch, store=store, report=report)
    for i in range(tickets):
        place.tickets.append(
            ticket_create(
                type_="repair",
                title=f"{prefix}-repair-{i}",
                requester=None,
                inputs={"accelerator": made[i % len(made)]},
            )
        )
    for _ in range(changes):
        node.refresh_from_db()
        node.status = "maintenance" if node.status == "active" else "active"
        node.save()
    return place


def scoped_user(username: str, site: m.Site, *, change: bool = False, perms: tuple[str, ...] = ()) -> Any:
    user = UserFactory(username=username, is_staff=False)
    grant_scope(scope_obj=site, perms=["change_scope" if change else "view_scope"], users=[user])
    if perms:
        user.user_permissions.add(*Permission.objects.filter(codename__in=perms))
    return user
