"""Assemble the versioned agent report from the collectors.

Each collector runs isolated: an exception becomes a `collector_errors` entry {collector, error} and nothing
of that collector's output is kept, so one broken tool never crashes the agent nor leaves a half-built
section. The report's shape is described by inventory_agents/schema/agent-report-v1.json.
"""

from __future__ import annotations

import copy
import json
import logging
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import AGENT_VERSION, SCHEMA_ID
from .collectors import Fragment, ascend, firmware, hygon, infiniband, lldp, nics, nvidia, pci, system, topology, xid
from .runner import Source

log = logging.getLogger(__name__)

SYSTEM_KEYS = (
    "vendor",
    "product",
    "serial",
    "serial_raw",
    "bios_version",
    "os_name",
    "os_version",
    "kernel",
    "cpu_model",
    "cpu_count",
    "memory_gib",
)
ACCELERATOR_KEYS = (
    "vendor",
    "model",
    "serial",
    "serial_raw",
    "uuid",
    "index",
    "pci_bus_id",
    "memory_mib",
    "driver_version",
    "firmware_version",
)
LIST_KEYS = ("accelerators", "nics", "infiniband", "lldp_neighbors", "pci_devices", "software")

CollectorFn = Callable[[Source, Optional[str]], Fragment]

# Order matters: xid attaches to the NVIDIA cards and reads lspci for cards nvidia-smi no longer lists.
COLLECTORS: List[Tuple[str, CollectorFn]] = [
    ("os", lambda source, state_dir: system.collect_os(source)),
    ("dmidecode", lambda source, state_dir: system.collect_dmi(source)),
    ("pci", lambda source, state_dir: pci.collect(source)),
    ("nvidia", lambda source, state_dir: nvidia.collect(source)),
    ("ascend", lambda source, state_dir: ascend.collect(source)),
    ("hygon", lambda source, state_dir: hygon.collect(source)),
    ("xid", lambda source, state_dir: xid.collect(source, state_dir)),
    ("nics", lambda source, state_dir: nics.collect(source)),
    ("infiniband", lambda source, state_dir: infiniband.collect(source)),
    ("lldp", lambda source, state_dir: lldp.collect(source)),
    ("topology", lambda source, state_dir: topology.collect(source)),
    ("bmc", lambda source, state_dir: firmware.collect_bmc(source)),
    ("ethtool", lambda source, state_dir: firmware.collect_ethtool(source)),
    ("mlxfwmanager", lambda source, state_dir: firmware.collect_mlxfwmanager(source)),
]


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    return text if len(text) <= 1000 else text[:1000] + "..."


def run_collector(name: str, fn: CollectorFn, source: Source, state_dir: Optional[str]) -> Fragment:
    """The collector's fragment, or {'collector_errors': [...]} when it raised or returned junk."""
    try:
        fragment = fn(source, state_dir) or {}
        if not isinstance(fragment, dict):
            raise TypeError("collector returned {}".format(type(fragment).__name__))
        json.dumps(fragment, allow_nan=False)  # everything must serialise (as strict JSON) before it is merged
        return fragment
    except Exception as exc:  # isolation is the point: any failure is reported, none escapes
        log.warning("collector %s failed: %s", name, exc, exc_info=log.isEnabledFor(logging.DEBUG))
        return {"collector_errors": [{"collector": name, "error": _error_text(exc)}]}


def _merge(report: Dict[str, Any], fragment: Fragment) -> None:
    for key, value in (fragment.get("system") or {}).items():
        if value is not None or key not in report["system"]:
            report["system"][key] = value
    if fragment.get("topology"):
        report["topology"] = fragment["topology"]
    if fragment.get("hostname"):
        report["hostname"] = fragment["hostname"]
    for key in (*LIST_KEYS, "collector_errors"):
        if fragment.get(key):
            report.setdefault(key, []).extend(fragment[key])


def _is_nvidia_gpu(device: Dict[str, Any]) -> bool:
    """An NVIDIA VGA / 3D controller on the bus (not its audio function, not an NVSwitch)."""
    nvidia_vendor = device.get("vendor_id") == "10de" or (
        not device.get("vendor_id") and "nvidia" in (device.get("vendor") or "").lower()
    )
    class_id = device.get("class_id")
    is_gpu = (
        class_id in ("0300", "0302")
        if class_id
        else any(word in (device.get("class") or "").lower() for word in ("vga", "3d controller"))
    )
    return nvidia_vendor and is_gpu


def _stub_card(bus: str, lspci: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """A card nvidia-smi did not list: seen on the PCI bus, or only in Xid lines (fallen off the bus)."""
    card: Dict[str, Any] = {key: None for key in ACCELERATOR_KEYS}
    card.update(vendor="nvidia", pci_bus_id=bus, seen_by_tool=False, health=nvidia.new_health())
    if lspci is not None:
        card["model"] = lspci.get("device")
        if lspci.get("device_id"):
            card["pci_device_id"] = "10de:{}".format(lspci["device_id"])
    return card


def complete_nvidia_cards(
    accelerators: List[Dict[str, Any]], pci_devices: List[Dict[str, Any]], events: List[Dict[str, Any]]
) -> Fragment:
    """Add the NVIDIA GPUs nvidia-smi missed (from lspci and Xid lines) and attach Xid events by PCI address.

    Works on a copy and returns the new accelerator list, so a failure here leaves the report untouched.
    "Expected 8, saw 7" is exactly the case ops must see: the eighth card stays in the report, unseen.
    """
    cards = copy.deepcopy(accelerators)
    by_bus: Dict[str, Dict[str, Any]] = {}
    for card in cards:
        if card.get("vendor") != "nvidia":
            continue
        for bus in [card.get("pci_bus_id")] + [chip.get("pci_bus_id") for chip in card.get("chips") or []]:
            if bus:
                by_bus[bus] = card
    gpus_on_bus = {d["slot"]: d for d in pci_devices if d.get("slot") and _is_nvidia_gpu(d)}
    stubs = []
    for bus, device in gpus_on_bus.items():
        if bus not in by_bus:
            by_bus[bus] = _stub_card(bus, device)
            stubs.append(by_bus[bus])
    unmatched = 0
    for event in events:
        bus = event.get("pci_bus_id")
        if not bus:
            unmatched += 1
            continue
        card = by_bus.get(bus)
        if card is None:
            card = by_bus[bus] = _stub_card(bus, None)
            stubs.append(card)
        card["health"].setdefault("xid_events", []).append(xid.public(event))
        if card.get("seen_by_tool") is not False:
            nvidia.grade(card)
    for card in stubs:
        nvidia.grade(card)
        card["health"]["reasons"].append("not listed by nvidia-smi")
        if card["health"]["status"] == "ok":
            card["health"]["status"] = "unknown"
    cards.extend(sorted(stubs, key=lambda c: c["pci_bus_id"]))
    errors = []
    if unmatched:
        errors.append({"collector": "xid", "error": "{} Xid line(s) without a readable PCI address".format(unmatched)})
    return {"accelerators": cards, "collector_errors": errors}


def _dedupe_software(items: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    seen = set()
    result = []
    for item in items:
        key = (item.get("component"), item.get("version"))
        if key not in seen and item.get("version"):
            seen.add(key)
            result.append(item)
    return result


def build_report(
    source: Source, state_dir: Optional[str] = None, now: Optional[datetime] = None
) -> Tuple[Dict[str, Any], Optional[Dict[str, Any]]]:
    """(report, Xid state to save once the report is delivered or spooled; None when there is none)."""
    stamp = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    report: Dict[str, Any] = {
        "schema": SCHEMA_ID,
        "collected_at": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "agent_version": AGENT_VERSION,
        "hostname": None,
        "system": {},
        "accelerators": [],
        "nics": [],
        "infiniband": [],
        "lldp_neighbors": [],
        "pci_devices": [],
        "software": [],
        "collector_errors": [],
    }
    xid_state = None
    firmware_entries: List[Dict[str, Any]] = []
    for name, fn in COLLECTORS:
        fragment = run_collector(name, fn, source, state_dir)
        firmware_entries.extend(fragment.pop("firmware", None) or [])
        if name == "xid":
            # Runs even without a kernel log: lspci alone can show a GPU nvidia-smi no longer lists.
            events = fragment.pop("xid_events", None) or []
            xid_state = fragment.pop("_xid_state", None)
            completed = run_collector(
                "nvidia",
                lambda s, d, e=events: complete_nvidia_cards(report["accelerators"], report["pci_devices"], e),
                source,
                state_dir,
            )
            if "accelerators" in completed:
                report["accelerators"] = completed.pop("accelerators")
            else:
                xid_state = None  # the events were not reported: do not remember them as sent
            _merge(report, completed)
        _merge(report, fragment)
    for key in SYSTEM_KEYS:
        report["system"].setdefault(key, None)
    for card in report["accelerators"]:
        for key in ACCELERATOR_KEYS:
            card.setdefault(key, None)
    report["software"] = _dedupe_software(report["software"])
    _check_topology_nics(report)
    failed = sorted({e["collector"] for e in report["collector_errors"]})
    assembled = run_collector(
        "firmware", lambda s, d: {"firmware": firmware.assemble(report, firmware_entries, failed)}, source, state_dir
    )
    if "firmware" in assembled:
        report["firmware"] = assembled.pop("firmware")
    _merge(report, assembled)
    return report, xid_state


def _check_topology_nics(report: Dict[str, Any]) -> None:
    """A matrix NIC column naming an RDMA device ibstat does not list is a wrong capture or a renamed device:
    report it and keep no topology rather than a matrix that disagrees with the rest of the report."""
    topo = report.get("topology")
    hcas = {hca.get("ca") for hca in report.get("infiniband") or []}
    if not topo or not hcas:
        return
    unknown = []
    for device in topo["devices"]:
        rdma = device.get("alias") or device["name"]
        if device["type"] == "nic" and rdma.startswith("mlx") and rdma not in hcas:
            unknown.append(rdma)
    if unknown:
        del report["topology"]
        report["collector_errors"].append(
            {
                "collector": "topology",
                "error": "{}: NIC column(s) {} name device(s) ibstat does not report".format(
                    " + ".join(topo["sources"]), ", ".join(unknown)
                ),
            }
        )


def to_json(report: Dict[str, Any], indent: Optional[int] = 2) -> str:
    return json.dumps(report, indent=indent, sort_keys=False, ensure_ascii=False)
