"""Helpers of the ingestion tests: a node with eight H100s and two HCAs, the report the agent would send."""

from __future__ import annotations

from typing import Any

from cmdb import models as m
from cmdb.services.accelerators import placement_build
from inventory_agents.services.synthetic import nodes_for_reports, report_for
from tests.factories.cmdb import AcceleratorFactory, NodeFactory

REPORTS_URL = "/api/agent/reports/"


def make_node(hostname: str = "gpu-0001", cards: int = 8, nics: int = 2, site=None, slots: int = 16) -> m.Node:
    """A node whose server model has `slots` accelerator slots (reports name slots up to 15 in these tests)."""
    node = NodeFactory(
        hostname=hostname,
        serial=f"SN-{hostname}",
        cpu_model="Intel Xeon Platinum 8480+",
        cpu_count=2,
        memory_gib=2048,
        os_name="Ubuntu 22.04.4 LTS",
        kernel="5.15.0-119-generic",
        server_model__accelerator_slots=slots,
        **({"site": site} if site else {}),
    )
    for slot in range(cards):
        card = AcceleratorFactory(
            node=node,
            site=node.site,
            slot_index=slot,
            serial=f"1654{hostname[-4:]}{slot:04d}",
            uuid=f"GPU-{hostname[-4:]}{slot:04d}-7a1e-4c2b-9d3f-0a1b2c3d4e5f",
            pci_bus_id=f"0000:{(0x18 + slot * 0x10) % 0x100:02x}:00.0",
            driver_version="550.127.05",
        )
        placement_build(accelerator=card, note="racked").save()
    for rail in range(nics):
        nic = m.Nic.objects.create(
            node=node, name=f"mlx5_{rail}", kind="infiniband", rail=rail, node_guid=f"0x{node.pk:08x}{rail:04x}a0"
        )
        m.NicPort.objects.create(
            nic=nic, name="1", guid=f"0x{node.pk:08x}{rail:04x}a1", speed_mbps=400000, link_state="up"
        )
    m.InstalledSoftware.objects.create(node=node, component="nvidia-driver", version="550.127.05")
    return node


def report_of(node: m.Node, **changes: Any) -> dict[str, Any]:
    """The report the agent would send if the CMDB were right, with top-level keys replaced by `changes`."""
    report = report_for(nodes_for_reports(m.Node.objects.filter(pk=node.pk)).get())
    report.update(changes)
    return report


def card_entry(slot: int, serial: str | None, *, model: str = "NVIDIA H100 80GB HBM3", **extra: Any) -> dict[str, Any]:
    """One accelerator as the agent reports an H100."""
    entry = {
        "vendor": "nvidia",
        "model": model,
        "serial": serial,
        "serial_raw": serial,
        "uuid": None,
        "index": slot,
        "pci_bus_id": f"0000:{0xA0 + slot:02x}:00.0",
        "memory_mib": 81559,
        "driver_version": "550.127.05",
        "firmware_version": "96.00.74.00.01",
        "health": {"status": "ok", "reasons": [], "xid_events": []},
    }
    entry.update(extra)
    return entry


def new_cards_report(node: m.Node, count: int, prefix: str = "1654NEW") -> dict[str, Any]:
    """A report of `node` listing `count` cards the CMDB has never seen."""
    return report_of(node, accelerators=[card_entry(i, f"{prefix}{node.pk:04d}{i:03d}") for i in range(count)])
