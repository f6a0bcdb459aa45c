"""Load a fabric's planned Links (CMDB) and observed links (ObservedLink) and run cabling.validate_cabling.

A selector plus one optional write: `fabric_cabling_report(..., update_link_status=True)` marks each planned
Link connected or mismatch, in bulk, with change records.

Observations come from the fabric's switches (LLDP, ibnetdiscover) and from hosts (host LLDP rows that land on
the fabric's switches, or whose host interface is planned in the fabric - wherever the host says it is).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from cmdb.models import Fabric, Link, NicPort, Node, Switch, SwitchPort
from cmdb.models.network import LinkStatus
from cmdb.permissions import restrict
from cmdb.services.changelog import tracked_bulk_update
from gpuops.context import ChangeSource, change_context

from .cabling import (
    CablingSummary,
    Endpoint,
    Finding,
    FindingKind,
    Inventory,
    Observation,
    PlannedLink,
    SwitchInfo,
    View,
    device_key,
    normalize_guid,
    validate_cabling,
)
from .host_lldp import switch_port_name
from .models import ObservationSource, ObservedLink, PollRun, PollStatus
from .snmp_decode import normalize_mac


def _nic_endpoint(port: NicPort) -> Endpoint:
    # NicPort names are often bare port numbers ("1"), unique only within their NIC: name it mlx5_0/1, and let
    # LLDP match it by its own name or (single-port HCAs) the NIC's name too.
    aliases = {port.name, port.nic.name} - {""}
    return Endpoint(
        device=port.nic.node.hostname,
        port=f"{port.nic.name}/{port.name}",
        kind="node",
        aliases=frozenset(a for a in aliases if not a.isdigit()),
        macs=frozenset({port.mac}) if port.mac else frozenset(),
        guids=frozenset({port.guid}) if port.guid else frozenset(),
        hca=port.nic.name,
        rail=port.nic.rail,
    )


def _switch_endpoint(port: SwitchPort) -> Endpoint:
    return Endpoint(
        device=port.switch.name,
        port=port.name,
        kind="switch",
        macs=frozenset({port.mac}) if port.mac else frozenset(),
        guids=frozenset({port.guid}) if port.guid else frozenset(),
        rail=port.switch.rail,
    )


def _observation(row: ObservedLink, switch_name: str) -> Observation:
    """A switch's view. An HCA matched at ingest (or re-resolved from an agent report) is the peer as stored."""
    return Observation(
        switch=switch_name,
        port=row.local_port,
        remote_chassis_id=row.remote_chassis_id,
        remote_port=row.remote_port,
        remote_system=row.remote_system,
        remote_port_description=row.remote_port_description,
        remote_port_guid=row.remote_port_guid,
        peer=_nic_endpoint(row.nic_port) if row.nic_port_id else None,
    )


def _host_observation(row: ObservedLink, planned_by_mac: dict[tuple[str, str], Endpoint]) -> Observation:
    """A host's view, turned round to the switch port it names: that port sees the host interface."""
    peer = None
    if row.nic_port_id:
        peer = _nic_endpoint(row.nic_port)
        # A RoCE NIC is two CMDB NICs with one MAC: the netdev lldpd runs on, and the RDMA device the plan names.
        mac = normalize_mac(row.nic_port.mac).lower()
        peer = planned_by_mac.get((peer.device, mac), peer) if row.nic_port.mac else peer
    host = row.node.hostname if row.node_id else row.local_device
    announced = row.remote_port or row.remote_port_description or "?"
    if row.switch_id:
        port = row.switch_port.name if row.switch_port_id else switch_port_name(row.switch, announced)
        switch, known = row.switch.name, True
    else:
        switch, port, known = row.remote_system or row.remote_chassis_id or "?", announced, False
    return Observation(
        switch=switch,
        port=port,
        remote_system=host,
        remote_port=row.local_port,
        view=View.HOST,
        peer=peer,
        switch_known=known,
    )


def fabric_cabling_report(fabric: Fabric, *, update_link_status: bool = False) -> list[Finding]:
    """Findings for every judged planned port and every observed port of the fabric."""
    switches = {s.pk: s for s in Switch.objects.filter(fabric=fabric)}
    infos = {s.name: SwitchInfo(s.name, s.rail, s.scalable_unit) for s in switches.values()}
    planned_nodes = Link.objects.filter(fabric=fabric, a_nic_port__isnull=False).values("a_nic_port__nic__node_id")
    observed_rows = list(
        ObservedLink.objects.filter(
            Q(switch_id__in=switches) | Q(source=ObservationSource.HOST_LLDP, node_id__in=planned_nodes)
        ).select_related("nic_port__nic__node", "node", "switch", "switch_port")
    )
    switch_rows = [r for r in observed_rows if r.source != ObservationSource.HOST_LLDP]
    host_rows = [r for r in observed_rows if r.source == ObservationSource.HOST_LLDP]
    ok_runs = PollRun.objects.filter(switch_id__in=switches, status=PollStatus.OK)
    # Only a switch's own view makes it "polled": a host reporting one port says nothing about the others.
    polled = {switches[r.switch_id].name for r in switch_rows} | {
        switches[pk].name for pk in ok_runs.values_list("switch_id", flat=True)
    }
    links = list(
        Link.objects.filter(fabric=fabric).select_related(
            "a_nic_port__nic__node", "a_switch_port__switch", "b_switch_port__switch"
        )
    )
    planned: list[PlannedLink] = []
    endpoints: list[Endpoint] = []
    for link in links:
        a = _nic_endpoint(link.a_nic_port) if link.a_nic_port_id else _switch_endpoint(link.a_switch_port)
        b = _switch_endpoint(link.b_switch_port)
        endpoints += [a, b]
        planned.append(PlannedLink(b.device, b.port, a))
        if a.kind == "switch":
            planned.append(PlannedLink(a.device, a.port, b))  # both switches see each other
    planned_by_mac = {
        (ep.device, normalize_mac(mac).lower()): ep for ep in endpoints if ep.kind == "node" for mac in ep.macs
    }

    # Known endpoints that are not in the plan, so a cable to them is "unexpected", not "unknown".
    observations = [_observation(r, switches[r.switch_id].name) for r in switch_rows]
    macs = {normalize_mac(o.remote_port).lower() for o in observations if o.remote_port}
    guids = {normalize_guid(g) for o in observations for g in (o.remote_port_guid, o.remote_port) if normalize_guid(g)}
    guid_spellings = guids | {f"0x{g}" for g in guids}
    nic_ports = NicPort.objects.filter(Q(mac__in=macs) | Q(guid__in=guid_spellings)).select_related("nic__node")
    endpoints += [_nic_endpoint(p) for p in nic_ports]
    systems = {device_key(o.remote_system) for o in observations if o.remote_system}
    peer_switches = [s for s in Switch.objects.all().only("name") if device_key(s.name) in systems]
    peer_ports = SwitchPort.objects.filter(switch__in=peer_switches).select_related("switch")
    endpoints += [_switch_endpoint(p) for p in peer_ports]
    planned_refs = {link.peer.ref for link in planned}
    for row in host_rows:
        obs = _host_observation(row, planned_by_mac)
        # A host's other cables (its management NIC on a switch of another fabric) are not this fabric's business.
        if row.switch_id in switches or (obs.peer is not None and obs.peer.ref in planned_refs):
            observations.append(obs)

    findings = validate_cabling(
        planned=planned,
        observed=observations,
        inventory=Inventory(endpoints),
        switches=infos,
        rail_optimized=fabric.is_rail_optimized,
        polled_switches=polled,
    )
    if update_link_status:
        _links_status_update(links, findings)
    return findings


def _links_status_update(links: list[Link], findings: list[Finding]) -> int:
    """connected when the b-side port sees the planned peer (and no rail violation), mismatch otherwise;
    links on switches that were not polled keep their status."""
    by_port = {(f.switch, f.port): f for f in findings}
    now = timezone.now()
    changed: list[tuple[dict, Link]] = []
    for link in links:
        finding = by_port.get((link.b_switch_port.switch.name, link.b_switch_port.name))
        if finding is None:
            continue
        is_ok = finding.kind == FindingKind.OK and not finding.is_problem
        status = LinkStatus.CONNECTED if is_ok else LinkStatus.MISMATCH
        if link.status != status:
            before = link.snapshot()
            link.status = status
            link.version += 1
            link.updated_at = now
            changed.append((before, link))
    with change_context(source=ChangeSource.INTEGRATION), transaction.atomic():
        tracked_bulk_update(changed, ["status", "version", "updated_at"], reason="cabling validation")
    return len(changed)


def findings_filter(findings: Iterable[Finding], params: Mapping[str, Any]) -> list[Finding]:
    """`kind` (a finding kind, or `problems`), `switch` (name contains), `node` (expected or found host name
    contains); empty values do not filter."""
    kind = (params.get("kind") or "").strip()
    switch = (params.get("switch") or "").strip().lower()
    node = device_key(params.get("node") or "")
    out = []
    for f in findings:
        if kind == "problems" and not f.is_problem:
            continue
        if kind and kind != "problems" and f.kind.value != kind:
            continue
        if switch and switch not in f.switch.lower():
            continue
        if node and not any(
            ep is not None and ep.kind == "node" and node in ep.device.lower() for ep in (f.expected, f.found)
        ):
            continue
        out.append(f)
    return out


def _finding_devices(f: Finding) -> set[str]:
    ends = (f.expected, f.found, f.swap_partner, f.elsewhere)
    return {f.switch, *(e.device for e in ends if e is not None)}


def findings_visible(findings: Iterable[Finding], user) -> list[Finding]:
    """The findings every CMDB switch and node of which `user` may see (a fabric of site A can have a cable into
    a site-B device: that finding names it, so it is left out). Names the CMDB does not know (an unknown LLDP
    neighbour) are observations, not inventory, and do not hide a finding. Two queries per model."""
    findings = list(findings)
    names = set().union(*(_finding_devices(f) for f in findings)) if findings else set()
    known = set(Switch.objects.filter(name__in=names).values_list("name", flat=True))
    known |= set(Node.objects.filter(hostname__in=names).values_list("hostname", flat=True))
    seen = set(restrict(Switch.objects.filter(name__in=known), user, "view").values_list("name", flat=True))
    seen |= set(restrict(Node.objects.filter(hostname__in=known), user, "view").values_list("hostname", flat=True))
    hidden = known - seen
    return [f for f in findings if not (_finding_devices(f) & hidden)]


@dataclass(frozen=True)
class CablingOverview:
    """A fabric's cabling as one user may see it: the findings (findings_visible) and their counts. The fabric
    list, the cabling page and the console's fabric page all read it here, so their numbers agree."""

    findings: list[Finding]
    summary: dict[str, int]

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.is_problem]

    @property
    def problem_count(self) -> int:
        """Findings that need someone to look (any kind but ok, or a rail violation): what `kind=problems`
        shows."""
        return len(self.problems)


def cabling_summary(findings: Iterable[Finding]) -> dict[str, int]:
    """Counts by kind, rail violations, and `problems` (findings that are not ok)."""
    summary = CablingSummary.of(findings)
    problems = sum(v for k, v in summary.counts.items() if k != FindingKind.OK.value)
    return {**summary.counts, "rail_violations": summary.rail_violations, "problems": problems}


def fabric_cabling_overview(fabric: Fabric, user) -> CablingOverview:
    findings = findings_visible(fabric_cabling_report(fabric), user)
    return CablingOverview(findings=findings, summary=cabling_summary(findings))
