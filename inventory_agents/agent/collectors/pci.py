"""PCI devices from `lspci -vmm -nn -D`, trimmed to what inventory cares about (accelerators, NICs, HCAs)."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from ..runner import Source
from ..util import normalize_pci_bus_id
from . import Fragment

NAME = "lspci-vmm.txt"
# Class code prefixes kept: network (02xx), display / 3D (03xx), co-processor (0b40), processing accelerator
# (12xx). NVIDIA's NVSwitch is a bridge (0680) and is kept by vendor.
_KEEP_CLASS_PREFIXES = ("02", "03", "0b40", "12")
_KEEP_CLASS_WORDS = (
    "ethernet",
    "network",
    "infiniband",
    "vga",
    "3d",
    "display",
    "processing accelerator",
    "co-processor",
    "coprocessor",
)
_ID_RE = re.compile(r"^(.*?)\s*\[([0-9a-fA-F]{4})\]$")


def _name_and_id(raw: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """'Intel Corporation [8086]' -> ('Intel Corporation', '8086'); plain names keep id None."""
    if raw is None:
        return None, None
    text = raw.strip()
    match = _ID_RE.match(text)
    if match:
        return match.group(1).strip() or None, match.group(2).lower()
    return text or None, None


def parse_lspci(text: str) -> List[Dict[str, Any]]:
    devices: List[Dict[str, Any]] = []
    fields: Dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if fields.get("Slot"):
                devices.append(_device(fields))
            fields = {}
            continue
        key, sep, value = line.partition(":")
        if sep and key.strip() and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    return devices


def _device(fields: Dict[str, str]) -> Dict[str, Any]:
    cls, class_id = _name_and_id(fields.get("Class"))
    vendor, vendor_id = _name_and_id(fields.get("Vendor"))
    device, device_id = _name_and_id(fields.get("Device"))
    svendor, svendor_id = _name_and_id(fields.get("SVendor"))
    sdevice, sdevice_id = _name_and_id(fields.get("SDevice"))
    entry: Dict[str, Any] = {
        "slot": normalize_pci_bus_id(fields.get("Slot")) or fields.get("Slot"),
        "class": cls,
        "class_id": class_id,
        "vendor": vendor,
        "vendor_id": vendor_id,
        "device": device,
        "device_id": device_id,
        "subsystem_vendor": svendor,
        "subsystem_device": sdevice,
        "rev": fields.get("Rev") or None,
    }
    if svendor_id and sdevice_id:
        entry["subsystem_id"] = "{}:{}".format(svendor_id, sdevice_id)
    if fields.get("PhySlot"):
        entry["phy_slot"] = fields["PhySlot"]
    if fields.get("NUMANode", "").isdigit():
        entry["numa_node"] = int(fields["NUMANode"])
    return entry


def is_interesting(device: Dict[str, Any]) -> bool:
    class_id = device.get("class_id") or ""
    if class_id:
        if class_id.startswith(_KEEP_CLASS_PREFIXES):
            return True
        return device.get("vendor_id") == "10de" and class_id == "0680"
    name = (device.get("class") or "").lower()
    return any(word in name for word in _KEEP_CLASS_WORDS)


def collect(source: Source) -> Fragment:
    text = source.output(NAME)
    if text is None:
        return {}
    return {"pci_devices": [device for device in parse_lspci(text) if is_interesting(device)]}
