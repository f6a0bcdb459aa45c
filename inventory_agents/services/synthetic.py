"""Reports as the agent would send them if the CMDB were exactly right: for the benchmark, for tests, and for
exercising ingestion against a demo fleet without nodes (`bench/ingest_bench.py`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from django.db.models import Prefetch, QuerySet
from django.utils import timezone

from cmdb.models import Accelerator, AcceleratorLifecycle, InstalledSoftware, Nic, NicKind, Node

from .network import nic_section
from .validation import SUPPORTED_SCHEMAS

SCHEMA_ID = next(iter(SUPPORTED_SCHEMAS))


def _card(card: Accelerator) -> dict[str, Any]:
    model = card.model
    aliases = [a for a in (model.aliases or []) if a]
    return {
        "vendor": model.vendor.slug,
        "model": aliases[0] if aliases else model.name,
        "serial": card.serial,
        "serial_raw": card.serial,
        "uuid": card.uuid,
        "index": card.slot_index,
        "pci_bus_id": card.pci_bus_id or None,
        "memory_mib": model.memory_gib * 1024 or None,
        "driver_version": card.driver_version or None,
        "firmware_version": card.firmware_version or None,
        "temperature_c": 41.0,
        "power_w": 88.5,
        "health": {"status": "ok", "reasons": [], "xid_events": []},
    }


_IB_STATE = {"up": "active", "down": "down", "unknown": "init"}


def _guid(raw: str) -> str | None:
    """The agent prints GUIDs as 0x + 16 hex digits (ibstat); the CMDB may hold them shorter."""
    try:
        return f"0x{int(raw, 16):016x}" if raw else None
    except ValueError:
        return None


def _infiniband(nic: Nic) -> dict[str, Any]:
    layer = "infiniband" if nic.kind == NicKind.INFINIBAND else "ethernet"
    return {
        "ca": nic.name,
        "node_guid": _guid(nic.node_guid),
        "firmware": nic.firmware or None,
        "ports": [
            {
                "port": int(p.name) if p.name.isdigit() else 1,
                "state": _IB_STATE.get(p.link_state, "down"),
                "phys_state": "linkup" if p.link_state == "up" else "disabled",
                "rate_gbps": (p.speed_mbps or 0) // 1000 or None,
                "port_guid": _guid(p.guid),
                "link_layer": layer,
                "lid": None,
            }
            for p in nic.ports.all()
        ],
    }


def _netdev(nic: Nic) -> dict[str, Any]:
    port = next(iter(nic.ports.all()), None)
    return {
        "name": nic.name,
        "mac": port.mac if port else None,
        "speed_mbps": (port.speed_mbps or None) if port else None,
        "state": port.link_state if port else "unknown",
        "kind": "physical",
        "pci_bus_id": nic.pci_bus_id or None,
        "mtu": 9000,
    }


def report_for(node: Node, *, collected_at: dt.datetime | None = None) -> dict[str, Any]:
    """The report of one node (its relations prefetched by `nodes_for_reports`, or fetched lazily)."""
    cards = [c for c in node.accelerators.all() if c.lifecycle == AcceleratorLifecycle.INSTALLED and not c.is_missing]
    nics = list(node.nics.all())
    return {
        "schema": SCHEMA_ID,
        "collected_at": (collected_at or timezone.now()).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "agent_version": "1.0.0",
        "hostname": node.hostname,
        "system": {
            "vendor": node.server_model.vendor.name,
            "product": node.server_model.name,
            "serial": node.serial,
            "serial_raw": node.serial,
            "bios_version": node.bios_version or None,
            "os_name": None,
            "os_version": None,
            "os_pretty_name": node.os_name or None,
            "kernel": node.kernel or None,
            "cpu_model": node.cpu_model or None,
            "cpu_count": node.cpu_count or None,
            "memory_gib": node.memory_gib or None,
        },
        "accelerators": [_card(c) for c in sorted(cards, key=lambda c: (c.slot_index is None, c.slot_index or 0))],
        "nics": [_netdev(n) for n in nics if nic_section(n) != "infiniband" and n.kind != NicKind.BMC],
        "infiniband": [_infiniband(n) for n in nics if nic_section(n) == "infiniband"],
        "lldp_neighbors": [],
        "software": [{"component": s.component, "version": s.version} for s in node.installed_software.all()],
        "collector_errors": [],
    }


def nodes_for_reports(nodes: QuerySet[Node] | Iterable[int]) -> QuerySet[Node]:
    """Nodes with everything `report_for` reads, in a fixed number of queries."""
    qs = nodes if isinstance(nodes, QuerySet) else Node.objects.filter(pk__in=list(nodes))
    return qs.select_related("server_model__vendor").prefetch_related(
        Prefetch("accelerators", queryset=Accelerator.objects.select_related("model__vendor")),
        Prefetch("nics", queryset=Nic.objects.prefetch_related("ports")),
        Prefetch("installed_software", queryset=InstalledSoftware.objects.all()),
    )
