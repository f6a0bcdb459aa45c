"""Reconciling NICs/HCAs with their ports, and installed software, for one report.

NICs are matched by device name within the node (mlx5_0, ens1f0np0): port GUIDs and MACs are facts of the
port, so a replaced HCA shows as a GUID change on the same port (and its cable record stays attached).
A NIC the report does not list is flagged `is_missing` only when the report section that would list it was
collected without error. A netdev NIC has one port named "1" holding its MAC, as the demo fleet records them.
Software rows are upserted per component; a component the report no longer lists is left as it is (a tool
that failed to answer is no proof of an uninstall).
"""

from __future__ import annotations

import re
from typing import Any

from cmdb.models import DriverPackage, InstalledSoftware, LinkState, Nic, NicKind, NicPort
from cmdb.services.changelog import tracked_bulk_update

from .normalize import NicObs
from .passes import Pass, bulk_save

# RDMA device names: these HCAs/RNICs are listed by the `infiniband` (ibstat) section, whatever their link layer.
_RDMA_NAME = re.compile(r"^(mlx\d+_(bond_)?\d+|irdma\d*|bnxt_re\d+|hns_?\d+|qedr\d+|erdma_?\d+|rxe\d+|hfi\d+_\d+)$")


def nic_section(nic: Nic) -> str:
    """Which report section lists this NIC: decides whether its absence from a report means it is missing."""
    if nic.kind == NicKind.INFINIBAND or _RDMA_NAME.match(nic.name):
        return "infiniband"
    if nic.kind == NicKind.BMC or nic.name.startswith("hccn"):
        return "none"  # BMC ports and Ascend NPU-integrated NICs are not host netdevs: no section lists them
    return "nics"


def _same_guid(a: str, b: str) -> bool:
    try:
        return int(a, 16) == int(b, 16)
    except ValueError:
        return a == b


class NicStep:
    """Loads the node's NICs with their ports (two queries) and computes creates/updates in memory."""

    def __init__(self, run: Pass) -> None:
        self.run = run
        self.nics = {n.name: n for n in Nic.objects.filter(node=run.node).prefetch_related("ports")}
        for nic in self.nics.values():
            nic.node = run.node  # cached: change records print "node:nic/port" without a query per row
        self.new_nics: list[Nic] = []
        self.new_ports: list[NicPort] = []
        self.nic_updates: list[tuple[dict[str, Any], Nic]] = []
        self.port_updates: list[tuple[dict[str, Any], NicPort]] = []

    def reconcile(self) -> None:
        run = self.run
        reported = set()
        for obs in run.observed.nics:
            if obs.name in reported:
                continue
            reported.add(obs.name)
            nic = self.nics.get(obs.name)
            if nic is None:
                nic = Nic(
                    node=run.node,
                    name=obs.name,
                    kind=obs.kind,
                    pci_bus_id=obs.pci_bus_id,
                    firmware=obs.firmware,
                    node_guid=obs.node_guid,
                )
                nic._gpuops_ports = []  # type: ignore[attr-defined]
                self.new_nics.append(nic)
                run.summary["nics_created"] += 1
                self._ports(nic, obs, {})
                continue
            before = nic.snapshot()
            nic.pci_bus_id = obs.pci_bus_id or nic.pci_bus_id
            nic.firmware = obs.firmware or nic.firmware
            if obs.node_guid and not _same_guid(obs.node_guid, nic.node_guid):
                nic.node_guid = obs.node_guid
            nic.is_missing = False
            if nic.snapshot() != before:
                run.updated[id(nic)] = (before, nic)
                self.nic_updates.append((before, nic))
            self._ports(nic, obs, {p.name: p for p in nic.ports.all()})
        for nic in self.nics.values():
            if nic.name in reported or nic.is_missing or nic_section(nic) not in run.observed.complete_sections:
                continue
            before = nic.snapshot()
            run.updated[id(nic)] = (before, nic)
            nic.is_missing = True
            self.nic_updates.append((before, nic))
            run.summary["nics_missing"] += 1

    def _ports(self, nic: Nic, obs: NicObs, existing: dict[str, NicPort]) -> None:
        for port_obs in obs.ports:
            port = existing.get(port_obs.name)
            if port is None:
                port = NicPort(
                    nic=nic,
                    name=port_obs.name,
                    mac=port_obs.mac,
                    guid=port_obs.guid,
                    speed_mbps=port_obs.speed_mbps,
                    link_state=port_obs.link_state,
                )
                self.new_ports.append(port)
                continue
            before = port.snapshot()
            port.mac = port_obs.mac or port.mac
            if port_obs.guid and not _same_guid(port_obs.guid, port.guid):
                port.guid = port_obs.guid
            if port_obs.speed_mbps is not None:
                port.speed_mbps = port_obs.speed_mbps
            if port_obs.link_state != LinkState.UNKNOWN:
                port.link_state = port_obs.link_state
            if port.snapshot() != before:
                self.run.updated[id(port)] = (before, port)
                self.port_updates.append((before, port))

    def write(self) -> None:
        """At most four statements, whatever the number of NICs and ports (only changed fields are written)."""
        run = self.run
        if self.new_nics:
            # bulk_create fills each new port's nic_id from its (now saved) NIC; setting nic_id by hand would
            # drop the cached NIC and cost a query per port when the change records print it.
            Nic.objects.bulk_create(self.new_nics)
            run.created += self.new_nics
        if self.new_ports:
            NicPort.objects.bulk_create(self.new_ports)
            run.created += self.new_ports
        bulk_save(Nic, self.nic_updates, run.now)
        bulk_save(NicPort, self.port_updates, run.now)


class SoftwareStep:
    """Upserts InstalledSoftware per reported component (one read, at most one lookup and two writes)."""

    def __init__(self, run: Pass) -> None:
        self.run = run
        self.rows = {r.component: r for r in InstalledSoftware.objects.filter(node=run.node)}
        for row in self.rows.values():
            row.node = run.node  # its change record's repr names the node: no query per row

    def reconcile_and_write(self) -> None:
        run = self.run
        wanted = {c: v for c, v in run.observed.software.items() if c not in self.rows or self.rows[c].version != v}
        if not wanted:
            return
        packages = {
            (p.component, p.version): p.pk
            for p in DriverPackage.objects.filter(component__in=list(wanted), version__in=list(wanted.values()))
        }
        new, changed = [], []
        for component, version in wanted.items():
            row = self.rows.get(component)
            if row is None:
                new.append(
                    InstalledSoftware(
                        node=run.node,
                        component=component,
                        version=version,
                        package_id=packages.get((component, version)),
                    )
                )
                continue
            run.track(row)
            # InstalledSoftware.version is the software's version (it shadows TrackedModel's counter).
            row.version, row.package_id, row.updated_at = version, packages.get((component, version)), run.now
            changed.append(row)
        if new:
            InstalledSoftware.objects.bulk_create(new)
            run.created += new
        if changed:
            # record=False: run.track() queued their records for the pass's one INSERT.
            tracked_bulk_update([({}, row) for row in changed], ["version", "package", "updated_at"], record=False)
        run.summary["software_changed"] += len(new) + len(changed)
