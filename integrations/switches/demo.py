"""Demo observations for a demo fabric: LLDP as if every leaf had been polled, with a few deliberate faults.

`demo_observe(fabric)` writes one ObservedLink per planned cable (what the leaf port would see) and one
PollRun per leaf, except for the faults below, so `fabric_cabling_report` has something to find:

- crossed pair: the cables of `sh1-h100-0003` mlx5_2 and mlx5_5 are swapped - rail leaf 2 sees mlx5_5 and rail
  leaf 5 sees mlx5_2 (two `miswired` findings naming each other, both rail violations);
- missing: the cable of `sh1-h100-0010` mlx5_6 is not in its planned leaf port (the port sees nothing);
- unexpected: that cable was plugged into a spare port of the same leaf (`p30`), where nothing is planned.

Idempotent: re-running replaces the fabric's demo observations (LLDP rows and demo poll runs).

`demo_oob_switch()` adds the one demo switch that is polled for real: an out-of-band switch whose management
address is 127.0.0.1, so `switch_poll 127.0.0.1:<port> --community <recording>` against snmpsim serving a
recorded device (docs/switches.md) writes its ports and LLDP neighbours into the CMDB.
The neighbour is identified as lldpd on the node reports it: system name = host name, port id = the HCA name
(`mlx5_2`), plus the port GUID on InfiniBand HCAs.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from cmdb.models import Fabric, Link, NicPort, Site, Switch, SwitchPort, SwitchRole, Vendor

from .cabling_service import fabric_cabling_report
from .models import ObservationSource, ObservedLink, PollRun, PollStatus

DEMO_TASK_ID = "demo-observe"

# (hostname, HCA a, HCA b): the two cables of the node are crossed between their rail leaves.
SWAP = ("sh1-h100-0003", "mlx5_2", "mlx5_5")
# (hostname, HCA, spare port): the HCA's cable sits in a spare port of its leaf instead of the planned one.
MOVED = ("sh1-h100-0010", "mlx5_6", "p30")


@dataclass(frozen=True)
class DemoObserveResult:
    switches: int
    observations: int
    faults: tuple[str, ...]


def _neighbour(port: NicPort) -> dict[str, str]:
    return {
        "remote_system": port.nic.node.hostname,
        "remote_port": port.nic.name,
        "remote_port_description": f"{port.nic.name} port {port.name}",
        "remote_port_guid": port.guid or "",
        "remote_chassis_id": port.nic.node_guid or "",
    }


@transaction.atomic
def demo_observe(fabric: Fabric) -> DemoObserveResult:
    """Replace the fabric's LLDP observations with the planned cabling plus the demo faults."""
    switches = list(Switch.objects.filter(fabric=fabric).order_by("name"))
    ObservedLink.objects.filter(switch__in=switches, source=ObservationSource.LLDP).delete()
    PollRun.objects.filter(switch__in=switches, task_id=DEMO_TASK_ID).delete()

    links = list(
        Link.objects.filter(fabric=fabric, a_nic_port__isnull=False).select_related(
            "a_nic_port__nic__node", "b_switch_port__switch"
        )
    )
    seen: dict[tuple[int, str], NicPort] = {}  # (switch id, port name) -> the HCA port it sees
    by_hca: dict[tuple[str, str], Link] = {}
    for link in links:
        seen[(link.b_switch_port.switch_id, link.b_switch_port.name)] = link.a_nic_port
        by_hca[(link.a_nic_port.nic.node.hostname, link.a_nic_port.nic.name)] = link

    faults: list[str] = []
    host, hca_a, hca_b = SWAP
    a, b = by_hca.get((host, hca_a)), by_hca.get((host, hca_b))
    if a is not None and b is not None:
        seen[(a.b_switch_port.switch_id, a.b_switch_port.name)] = b.a_nic_port
        seen[(b.b_switch_port.switch_id, b.b_switch_port.name)] = a.a_nic_port
        faults += [f"{a.b_switch_port} sees {host} {hca_b}", f"{b.b_switch_port} sees {host} {hca_a}"]
    host, hca, spare = MOVED
    moved = by_hca.get((host, hca))
    if moved is not None:
        leaf = moved.b_switch_port.switch
        del seen[(leaf.pk, moved.b_switch_port.name)]
        seen[(leaf.pk, spare)] = moved.a_nic_port
        faults += [f"{moved.b_switch_port} sees nothing", f"{leaf}:{spare} sees {host} {hca}"]

    now = timezone.now()
    ports = {(p.switch_id, p.name): p for p in SwitchPort.objects.filter(switch__in=switches)}
    names = {s.pk: s.name for s in switches}
    runs = {}
    for switch in switches:
        count = sum(1 for (sid, _) in seen if sid == switch.pk)
        runs[switch.pk] = PollRun.objects.create(
            switch=switch,
            kind="snmp",
            status=PollStatus.OK,
            finished_at=now,
            task_id=DEMO_TASK_ID,
            ports_seen=sum(1 for (sid, _) in ports if sid == switch.pk),
            neighbors_seen=count,
        )
    rows = [
        ObservedLink(
            source=ObservationSource.LLDP,
            switch_id=sid,
            switch_port=ports.get((sid, port)),
            local_device=names[sid],
            local_port=port,
            poll_run=runs[sid],
            **_neighbour(nic_port),
        )
        for (sid, port), nic_port in sorted(seen.items(), key=lambda item: (names[item[0][0]], item[0][1]))
        if sid in names
    ]
    ObservedLink.objects.bulk_create(rows, batch_size=2000)
    # Judge the new observations as `cabling_report --update-status` does, so each link's stored status (the
    # dashboard's and the link list's "mismatch") agrees with the fabric and cabling pages.
    fabric_cabling_report(fabric, update_link_status=True)
    return DemoObserveResult(switches=len(switches), observations=len(rows), faults=tuple(faults))


DEMO_OOB_SWITCH = "sh1-oob-01"


def demo_oob_switch() -> Switch | None:
    """The demo's out-of-band switch at 127.0.0.1 (no fabric: its cables are not part of any cabling plan)."""
    site = Site.objects.filter(code="sh1").first()
    if site is None:
        return None
    vendor, _ = Vendor.objects.get_or_create(slug="dell", defaults={"name": "Dell"})
    switch, _ = Switch.objects.get_or_create(
        name=DEMO_OOB_SWITCH, defaults={"vendor": vendor, "site": site, "role": SwitchRole.OOB, "mgmt_ip": "127.0.0.1"}
    )
    return switch
