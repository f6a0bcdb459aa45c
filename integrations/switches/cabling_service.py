"""Load a fabric's planned Links (CMDB) and observed links (ObservedLink) and run cabling.validate_cabling.

A selector plus one optional write: `fabric_cabling_report(..., update_link_status=True)` marks each planned
Link connected or mismatch, in bulk, with change records.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from cmdb.models import Fabric, Link, NicPort, Switch, SwitchPort
from cmdb.models.network import LinkStatus
from cmdb.services.changelog import records_for_bulk, records_write
from gpuops.context import ChangeSource, change_context

from .cabling import (
    Endpoint,
    Finding,
    FindingKind,
    Inventory,
    Observation,
    PlannedLink,
    SwitchInfo,
    device_key,
    normalize_guid,
    validate_cabling,
)
from .models import ObservedLink, PollRun, PollStatus
from .snmp_decode import normalize_mac


def _nic_endpoint(port: NicPort) -> Endpoint:
    # NicPort names are often bare port numbers ("1"), unique only within their NIC: name it mlx5_0/1, and let
    # LLDP match it by its own name or (single-port HCAs) the NIC's name too.
    aliases = {port.name, port.nic.name} - {""}
    return Endpoint(
        device=port.nic.node.hostname, port=f"{port.nic.name}/{port.name}", kind="node",
        aliases=frozenset(a for a in aliases if not a.isdigit()),
        macs=frozenset({port.mac}) if port.mac else frozenset(),
        guids=frozenset({port.guid}) if port.guid else frozenset(), hca=port.nic.name, rail=port.nic.rail,
    )


def _switch_endpoint(port: SwitchPort) -> Endpoint:
    return Endpoint(
        device=port.switch.name, port=port.name, kind="switch",
        macs=frozenset({port.mac}) if port.mac else frozenset(),
        guids=frozenset({port.guid}) if port.guid else frozenset(), rail=port.switch.rail,
    )


def _observation(row: ObservedLink, switch_name: str) -> Observation:
    return Observation(
        switch=switch_name, port=row.local_port, remote_chassis_id=row.remote_chassis_id,
        remote_port=row.remote_port, remote_system=row.remote_system,
        remote_port_description=row.remote_port_description, remote_port_guid=row.remote_port_guid,
    )


def fabric_cabling_report(fabric: Fabric, *, update_link_status: bool = False) -> list[Finding]:
    """Findings for every planned or observed port of the fabric's polled switches."""
    switches = {s.pk: s for s in Switch.objects.filter(fabric=fabric)}
    infos = {s.name: SwitchInfo(s.name, s.rail, s.scalable_unit) for s in switches.values()}
    observed_rows = list(ObservedLink.objects.filter(switch_id__in=switches))
    ok_runs = PollRun.objects.filter(switch_id__in=switches, status=PollStatus.OK)
    polled = {switches[r.switch_id].name for r in observed_rows} | {
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

    # Known endpoints that are not in the plan, so a cable to them is "unexpected", not "unknown".
    observations = [_observation(r, switches[r.switch_id].name) for r in observed_rows]
    macs = {normalize_mac(o.remote_port).lower() for o in observations if o.remote_port}
    guids = {normalize_guid(g) for o in observations for g in (o.remote_port_guid, o.remote_port) if normalize_guid(g)}
    guid_spellings = guids | {f"0x{g}" for g in guids}
    nic_ports = NicPort.objects.filter(Q(mac__in=macs) | Q(guid__in=guid_spellings)).select_related("nic__node")
    endpoints += [_nic_endpoint(p) for p in nic_ports]
    systems = {device_key(o.remote_system) for o in observations if o.remote_system}
    peer_switches = [s for s in Switch.objects.all().only("name") if device_key(s.name) in systems]
    peer_ports = SwitchPort.objects.filter(switch__in=peer_switches).select_related("switch")
    endpoints += [_switch_endpoint(p) for p in peer_ports]

    findings = validate_cabling(
        planned=planned, observed=observations, inventory=Inventory(endpoints), switches=infos,
        rail_optimized=fabric.is_rail_optimized, polled_switches=polled,
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
        Link.objects.bulk_update([link for _, link in changed], ["status", "version", "updated_at"])
        records_write(records_for_bulk(updated=changed, reason="cabling validation"))
    return len(changed)
