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


@dataclass
class _Rows:
    """What the reports of some fabrics read, each kind in one query for all of them."""

    switches: dict[int, dict[int, Switch]]  # fabric id -> {switch id: switch}
    links: dict[int, list[Link]]  # fabric id -> its planned links
    observed: list[ObservedLink]
    ok_polled: set[int]  # ids of switches with a successful poll
    nic_ports: list[NicPort]  # ports an observation of some fabric names by MAC or GUID
    peer_ports: list[SwitchPort]  # ports of switches an observation of some fabric names
    observations: dict[int, list[Observation]]  # fabric id -> its switches' own views


def _observed_keys(observations: Iterable[Observation]) -> tuple[set[str], set[str], set[str]]:
    """(MACs, GUID spellings, system names) the observations name."""
    macs = {normalize_mac(o.remote_port).lower() for o in observations if o.remote_port}
    guids = {normalize_guid(g) for o in observations for g in (o.remote_port_guid, o.remote_port) if normalize_guid(g)}
    systems = {device_key(o.remote_system) for o in observations if o.remote_system}
    return macs, guids | {f"0x{g}" for g in guids}, systems


def _rows_load(fabrics: list[Fabric]) -> _Rows:
    ids = [f.pk for f in fabrics]
    switches: dict[int, dict[int, Switch]] = {pk: {} for pk in ids}
    for sw in Switch.objects.filter(fabric_id__in=ids):
        switches[sw.fabric_id][sw.pk] = sw
    switch_ids = [pk for by_id in switches.values() for pk in by_id]
    planned_nodes = Link.objects.filter(fabric_id__in=ids, a_nic_port__isnull=False).values("a_nic_port__nic__node_id")
    observed = list(
        ObservedLink.objects.filter(
            Q(switch_id__in=switch_ids) | Q(source=ObservationSource.HOST_LLDP, node_id__in=planned_nodes)
        ).select_related("nic_port__nic__node", "node", "switch", "switch_port")
    )
    ok_polled = set(
        PollRun.objects.filter(switch_id__in=switch_ids, status=PollStatus.OK).values_list("switch_id", flat=True)
    )
    links: dict[int, list[Link]] = {pk: [] for pk in ids}
    for link in Link.objects.filter(fabric_id__in=ids).select_related(
        "a_nic_port__nic__node", "a_switch_port__switch", "b_switch_port__switch"
    ):
        links[link.fabric_id].append(link)
    fabric_of = {pk: fabric_id for fabric_id, by_id in switches.items() for pk in by_id}
    observations: dict[int, list[Observation]] = {pk: [] for pk in ids}
    for r in observed:
        if r.source != ObservationSource.HOST_LLDP and r.switch_id in fabric_of:
            fabric_id = fabric_of[r.switch_id]
            observations[fabric_id].append(_observation(r, switches[fabric_id][r.switch_id].name))
    macs, guid_spellings, systems = _observed_keys(o for obs in observations.values() for o in obs)
    nic_ports = list(NicPort.objects.filter(Q(mac__in=macs) | Q(guid__in=guid_spellings)).select_related("nic__node"))
    peer_switches = [s for s in Switch.objects.all().only("name") if device_key(s.name) in systems]
    peer_ports = list(SwitchPort.objects.filter(switch__in=peer_switches).select_related("switch"))
    return _Rows(switches, links, observed, ok_polled, nic_ports, peer_ports, observations)


def _report(fabric: Fabric, rows: _Rows) -> list[Finding]:
    switches = rows.switches[fabric.pk]
    infos = {s.name: SwitchInfo(s.name, s.rail, s.scalable_unit) for s in switches.values()}
    switch_rows = [r for r in rows.observed if r.source != ObservationSource.HOST_LLDP and r.switch_id in switches]
    host_rows = [r for r in rows.observed if r.source == ObservationSource.HOST_LLDP]
    # Only a switch's own view makes it "polled": a host reporting one port says nothing about the others.
    polled = {switches[r.switch_id].name for r in switch_rows} | {
        sw.name for pk, sw in switches.items() if pk in rows.ok_polled
    }
    planned: list[PlannedLink] = []
    endpoints: list[Endpoint] = []
    for link in rows.links[fabric.pk]:
        a = _nic_endpoint(link.a_nic_port) if link.a_nic_port_id else _switch_endpoint(link.a_switch_port)
        b = _switch_endpoint(link.b_switch_port)
        endpoints += [a, b]
        planned.append(PlannedLink(b.device, b.port, a))
        if a.kind == "switch":
            planned.append(PlannedLink(a.device, a.port, b))  # both switches see each other
    planned_by_mac = {
        (ep.device, normalize_mac(mac).lower()): ep for ep in endpoints if ep.kind == "node" for mac in ep.macs
    }

    # Known endpoints that are not in the plan, so a cable to them is "unexpected", not "unknown": those this
    # fabric's observations name (the rows were read for several fabrics at once).
    observations = list(rows.observations[fabric.pk])
    macs, guid_spellings, systems = _observed_keys(observations)
    endpoints += [_nic_endpoint(p) for p in rows.nic_ports if p.mac in macs or p.guid in guid_spellings]
    endpoints += [_switch_endpoint(p) for p in rows.peer_ports if device_key(p.switch.name) in systems]
    planned_refs = {link.peer.ref for link in planned}
    for row in host_rows:
        obs = _host_observation(row, planned_by_mac)
        # A host's other cables (its management NIC on a switch of another fabric) are not this fabric's business.
        if row.switch_id in switches or (obs.peer is not None and obs.peer.ref in planned_refs):
            observations.append(obs)

    return validate_cabling(
        planned=planned,
        observed=observations,
        inventory=Inventory(endpoints),
        switches=infos,
        rail_optimized=fabric.is_rail_optimized,
        polled_switches=polled,
    )


def fabric_cabling_report(fabric: Fabric, *, update_link_status: bool = False) -> list[Finding]:
    """Findings for every judged planned port and every observed port of the fabric."""
    rows = _rows_load([fabric])
    findings = _report(fabric, rows)
    if update_link_status:
        _links_status_update(rows.links[fabric.pk], findings)
    return findings


def fabric_cabling_reports(fabrics: Iterable[Fabric]) -> dict[int, list[Finding]]:
    """`fabric_cabling_report` of several fabrics (by fabric id) in the queries of one: for the fabric list."""
    fabrics = list(fabrics)
    if not fabrics:
        return {}
    rows = _rows_load(fabrics)
    return {f.pk: _report(f, rows) for f in fabrics}


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


def fabric_cabling_overviews(fabrics: Iterable[Fabric], user) -> dict[int, CablingOverview]:
    """The cabling overview of each fabric (by id) as `user` may see it, in the queries of one fabric."""
    reports = fabric_cabling_reports(fabrics)
    shown = {id(f) for f in findings_visible([f for findings in reports.values() for f in findings], user)}
    overviews = {}
    for pk, findings in reports.items():
        visible = [f for f in findings if id(f) in shown]
        overviews[pk] = CablingOverview(findings=visible, summary=cabling_summary(visible))
    return overviews


def fabric_cabling_overview(fabric: Fabric, user) -> CablingOverview:
    return fabric_cabling_overviews([fabric], user)[fabric.pk]
