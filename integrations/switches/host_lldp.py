"""The host's view of its cables: what each node's lldpd says is behind each of its interfaces.

The inventory agent reports `lldp_neighbors` (lldpctl). When ingestion applies a report it sends
`inventory_agents.signals.report_applied`; the workflows app's glue (workflows/glue/host_lldp.py, connected at
start-up: integrations do not import ingestion) hands the neighbours to the task
`integrations.switches.node_report_observe`, which calls `node_report_apply` once the report has committed.

Each neighbour becomes an `ObservedLink(source="host_lldp")`: the host end resolved to the node's NicPort by
interface name, the far end to a Switch by sysName (then chassis MAC) and to its SwitchPort by port id (short
or long spelling, or the port MAC). A neighbour inventory does not know is stored with no switch: it is
reported as unknown, never dropped. The cabling report reads these rows next to the switches' own view.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q

from cmdb.models import NicPort, Node, Switch, SwitchPort
from gpuops.context import ChangeSource, change_context

from .cabling import device_key, port_key
from .cli_parse import PLATFORMS, canonical_interface
from .infiniband import ib_links_resolve_node
from .models import ObservationSource, ObservedLink
from .observations import observations_sync
from .snmp_decode import normalize_mac

log = logging.getLogger(__name__)

HOST_LLDP = ObservationSource.HOST_LLDP
# What may change on a row whose key (interface, chassis id, port id) stays: names and what they resolve to.
RESOLUTION_FIELDS = ("local_device", "remote_system", "remote_port_description", "switch", "switch_port", "nic_port")


@dataclass(frozen=True)
class HostNeighbor:
    """One lldpctl neighbour: the host interface and how the far end announced itself."""

    local_port: str
    remote_chassis_id: str = ""
    remote_system: str = ""
    remote_port: str = ""
    remote_port_description: str = ""

    @classmethod
    def of(cls, values: Sequence[str]) -> HostNeighbor:
        """From the task's JSON list [local_port, chassis id, system, port, port description]."""
        fields = [str(v or "").strip() for v in values][:5]
        return cls(*fields)

    @property
    def key(self) -> tuple[str, str, str]:
        """The observation's identity, spelled as stored (MACs as aa:bb:..)."""
        return (self.local_port[:64], normalize_mac(self.remote_chassis_id)[:64], normalize_mac(self.remote_port)[:128])


@dataclass(frozen=True)
class HostLldpResult:
    created: int = 0
    removed: int = 0
    kept: int = 0
    unknown: int = 0  # neighbours naming a switch inventory does not know


def switch_port_name(switch: Switch, announced: str) -> str:
    """The name a port the CMDB does not list yet would have: the platform's long spelling (NX-OS `Eth1/1` ->
    `Ethernet1/1`, as IF-MIB ifName and the switch's own LLDP table spell it)."""
    spec = PLATFORMS.get(switch.platform)
    return canonical_interface(announced, spec.abbreviations) if spec else announced.strip()


# --- resolution ---------------------------------------------------------------------------------------------------


def _host_ports(node: Node, ports: Iterable[NicPort]) -> dict[str, NicPort]:
    """The node's NIC ports by the names lldpd uses for an interface: the netdev NIC's device name (its single
    port, "1"), or a port named like the interface."""
    by_name: dict[str, NicPort] = {}
    ordered = sorted(
        ports, key=lambda p: (p.nic.name, not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name)
    )
    for port in ordered:
        port.nic.node = node  # change records print node:nic/port; no query per row
        if not port.name.isdigit():
            by_name.setdefault(port.name, port)
    for port in ordered:
        by_name.setdefault(port.nic.name, port)  # the NIC's first port
    return by_name


class _SwitchIndex:
    """The switches and ports the neighbours name, loaded in at most three queries."""

    def __init__(self, neighbors: Sequence[HostNeighbor]) -> None:
        names = {n.remote_system.strip().lower() for n in neighbors if n.remote_system.strip()}
        found: list[Switch] = []
        if names:
            # lldpd often sends the FQDN and the CMDB has the short name, or the other way round.
            query = Q()
            for name in names | {device_key(n) for n in names}:
                query |= Q(name__iexact=name) | Q(name__istartswith=f"{name}.")
            found = list(Switch.objects.filter(query).only("id", "name", "platform"))
        self.by_full = {s.name.lower(): s for s in found}
        self.by_short: dict[str, Switch] = {}
        for switch in sorted(found, key=lambda s: s.name):
            self.by_short.setdefault(device_key(switch.name), switch)
        self.by_chassis: dict[str, Switch] = {}
        unnamed = {normalize_mac(n.remote_chassis_id).lower() for n in neighbors if self._by_name(n) is None}
        unnamed = {mac for mac in unnamed if mac.count(":") == 5}
        if unnamed:
            # A switch's chassis id is the MAC of one of its interfaces (Cumulus: eth0) on many platforms.
            for port in SwitchPort.objects.filter(mac__in=unnamed).select_related("switch"):
                self.by_chassis.setdefault(port.mac.lower(), port.switch)
        switches = {s.pk: s for s in (*found, *self.by_chassis.values())}
        self.ports: dict[int, dict[str, SwitchPort]] = {pk: {} for pk in switches}
        self.port_macs: dict[int, dict[str, SwitchPort]] = {pk: {} for pk in switches}
        shared: set[tuple[int, str]] = set()
        if switches:
            for port in SwitchPort.objects.filter(switch_id__in=switches).order_by("name"):
                port.switch = switches[port.switch_id]  # str(port) in change records without a query
                self.ports[port.switch_id].setdefault(port_key(port.name), port)
                mac = port.mac.lower()
                if mac and self.port_macs[port.switch_id].setdefault(mac, port) is not port:
                    shared.add((port.switch_id, mac))
        for switch_id, mac in shared:
            del self.port_macs[switch_id][mac]  # Arista gives every port the system MAC: it names no port

    def _by_name(self, n: HostNeighbor) -> Switch | None:
        name = n.remote_system.strip().lower()
        if not name:
            return None
        return self.by_full.get(name) or self.by_short.get(device_key(name))

    def switch(self, n: HostNeighbor) -> Switch | None:
        return self._by_name(n) or self.by_chassis.get(normalize_mac(n.remote_chassis_id).lower())

    def port(self, switch: Switch, n: HostNeighbor) -> SwitchPort | None:
        """By port id (any spelling), by port MAC (port-id subtype MAC), then by the port description (Cisco
        sends `Gi1/0/29` as id and `GigabitEthernet1/0/29` as description)."""
        ports = self.ports.get(switch.pk, {})
        for candidate in (n.remote_port, n.remote_port_description):
            if candidate and (port := ports.get(port_key(candidate))):
                return port
            mac = normalize_mac(candidate).lower()
            if candidate and (port := self.port_macs.get(switch.pk, {}).get(mac)):
                return port
        return None


# --- replacing a node's observations ------------------------------------------------------------------------------


def host_lldp_replace(
    *, node: Node, ports: Iterable[NicPort], neighbors: Sequence[HostNeighbor], report_id: str = ""
) -> HostLldpResult:
    """Make the node's host-LLDP observations exactly `neighbors`. Call inside a transaction holding the node.

    Neighbours seen before keep their row (and first_seen_at), with their resolution refreshed and last_seen_at
    set; new ones are inserted and vanished ones deleted, each with a change record (source agent, correlated
    with the report). The same neighbours again write no change record.
    """
    host_ports = _host_ports(node, ports)
    index = _SwitchIndex(neighbors)
    old = {
        (r.local_port, r.remote_chassis_id, r.remote_port): r
        for r in ObservedLink.objects.filter(node=node, source=HOST_LLDP).select_related(
            "switch", "switch_port", "nic_port__nic"
        )
    }
    for row in old.values():
        if row.nic_port_id:
            row.nic_port.nic.node = node
        if row.switch_port_id:
            row.switch_port.switch = row.switch
    wanted: dict[tuple[str, str, str], ObservedLink] = {}
    unknown = 0
    for n in neighbors:
        if not n.local_port or n.key in wanted:
            continue
        switch = index.switch(n)
        unknown += switch is None
        port = index.port(switch, n) if switch is not None else None
        local, chassis, remote_port = n.key
        wanted[n.key] = ObservedLink(
            source=HOST_LLDP,
            node=node,
            nic_port=host_ports.get(n.local_port),
            switch=switch,
            switch_port=port,
            local_device=node.hostname,
            local_port=local,
            remote_chassis_id=chassis,
            remote_port=remote_port,
            remote_system=n.remote_system[:253],
            remote_port_description=n.remote_port_description[:253],
        )

    reason = f"host LLDP of {node.hostname}" + (f", agent report {report_id}" if report_id else "")
    # Rows of another node under this host name (that node was renamed) would collide on the unique key.
    ObservedLink.objects.filter(source=HOST_LLDP, local_device=node.hostname).exclude(node=node).delete()
    # The same cable resolved anew (the switch or the NIC reached the CMDB since, the node was renamed): what
    # the host sees did not change, so every field but the key refreshes without a change record.
    result = observations_sync(old=old, wanted=wanted, reason=reason, resolution=RESOLUTION_FIELDS)
    return HostLldpResult(created=result.created, removed=result.removed, kept=result.kept, unknown=unknown)


# Whether `report_id` is still the node's last applied report: (node_id, report_id) -> bool. Ingestion knows and
# integrations do not import it, so the glue that connects the two (workflows/glue/host_lldp.py) installs it.
LatestReportCheck = Callable[[int, str], bool]
_latest_report_check: LatestReportCheck | None = None


def latest_report_check_set(check: LatestReportCheck | None) -> None:
    global _latest_report_check
    _latest_report_check = check


def _is_latest(node: Node, report_id: str) -> bool:
    """False when a newer report of the node was applied after `report_id` (tasks can run out of order): that
    report's own task writes the host view, and this one must not roll it back. Without a check, every report
    counts as the latest."""
    if not report_id or _latest_report_check is None:
        return True
    return _latest_report_check(node.pk, report_id)


def node_report_apply(
    *, node_id: int, report_id: str = "", neighbors: Sequence[HostNeighbor] = (), lldp_complete: bool = True
) -> dict[str, int]:
    """What an applied agent report of one node means for discovery, in one transaction under the node's lock:

    - its host-LLDP observations become `neighbors` (unless the lldp collector failed: `lldp_complete` False
      keeps the last view, since a failed tool says nothing about the cables);
    - the ibnetdiscover observations of its HCA ports are re-resolved against the port GUIDs the report just
      wrote (`infiniband.ib_links_resolve_node`).

    Idempotent: the same arguments again change nothing but last_seen_at. Returns counters for the task log.
    """
    with change_context(source=ChangeSource.AGENT, correlation_id=report_id or None), transaction.atomic():
        node = Node.objects.select_for_update(of=("self",)).filter(pk=node_id).first()
        if node is None:
            return {}  # deleted since the report
        ports = list(NicPort.objects.filter(nic__node=node).select_related("nic"))
        summary: dict[str, int] = {}
        if lldp_complete and _is_latest(node, report_id):
            result = host_lldp_replace(node=node, ports=ports, neighbors=neighbors, report_id=report_id)
            summary.update(created=result.created, removed=result.removed, kept=result.kept, unknown=result.unknown)
        # Here, on the agent's report, because that is when the CMDB learns HCA GUIDs; validation reads the result.
        summary["ib_links_resolved"] = ib_links_resolve_node(node, ports)
    return summary
