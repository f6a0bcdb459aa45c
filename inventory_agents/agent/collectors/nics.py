"""Network interfaces from `ip -j -d link` plus /sys/class/net (speed, PCI address).

/sys/class/net/<if>/speed is read from the live node, or from a `sys-class-net/<if>/speed` mirror in the
--from-dir folder when one was captured. Without `ip -j` (iproute2 < 4.13 on old distributions) the live
/sys/class/net listing alone is used.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

from ..runner import Source, ToolError, read_sys_file, sys_link_target
from ..util import normalize_pci_bus_id, parse_int
from . import Fragment

NAME = "ip-link.json"
_KIND_OF_INFO = {"bond": "bond", "team": "bond", "vlan": "vlan", "bridge": "bridge", "ipoib": "infiniband"}
_ARPHRD = {"1": "ether", "32": "infiniband", "772": "loopback"}


def _speed(root: Optional[str], name: str) -> Optional[int]:
    speed = parse_int(read_sys_file(root, name, "speed"))
    return speed if speed is not None and speed > 0 else None  # -1 / 4294967295 on links that are down


def _nic(entry: Dict[str, Any], root: Optional[str]) -> Optional[Dict[str, Any]]:
    name = entry.get("ifname")
    if not isinstance(name, str) or not name:
        return None
    link_type = entry.get("link_type")
    if link_type == "loopback" or name == "lo":
        return None
    linkinfo = entry.get("linkinfo") if isinstance(entry.get("linkinfo"), dict) else {}
    info_kind = linkinfo.get("info_kind")
    pci = None
    if entry.get("parentbus") == "pci":
        pci = normalize_pci_bus_id(str(entry.get("parentdev") or ""))
    if pci is None:
        pci = normalize_pci_bus_id(sys_link_target(root, name, "device"))
    if link_type == "infiniband":
        kind = "infiniband"
    elif isinstance(info_kind, str) and info_kind:
        kind = _KIND_OF_INFO.get(info_kind, "virtual")
    elif pci is not None or entry.get("parentbus"):
        kind = "physical"
    else:
        kind = "unknown"
    nic: Dict[str, Any] = {
        "name": name,
        "mac": entry.get("address") if isinstance(entry.get("address"), str) else None,
        "speed_mbps": _speed(root, name),
        "state": str(entry.get("operstate") or "unknown").lower(),
        "kind": kind,
        "pci_bus_id": pci,
        "mtu": entry.get("mtu") if isinstance(entry.get("mtu"), int) else None,
    }
    if isinstance(entry.get("master"), str):
        nic["master"] = entry["master"]
    return nic


def parse_ip_link(text: str, root: Optional[str] = None) -> List[Dict[str, Any]]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ToolError("unparseable `ip -j link` output: {}".format(exc)) from exc
    if not isinstance(data, list):
        raise ToolError("`ip -j link` output is not a list")
    nics = [_nic(entry, root) for entry in data if isinstance(entry, dict)]
    return [nic for nic in nics if nic is not None]


def from_sysfs(root: str) -> List[Dict[str, Any]]:
    """The interface list from /sys/class/net alone."""
    nics = []
    for name in sorted(os.listdir(root)):
        link_type = _ARPHRD.get(read_sys_file(root, name, "type") or "", "other")
        entry = {
            "ifname": name,
            "link_type": link_type,
            "address": read_sys_file(root, name, "address"),
            "operstate": read_sys_file(root, name, "operstate"),
            "mtu": parse_int(read_sys_file(root, name, "mtu")),
        }
        if os.path.isdir(os.path.join(root, name, "bonding")):
            entry["linkinfo"] = {"info_kind": "bond"}
        elif os.path.isdir(os.path.join(root, name, "bridge")):
            entry["linkinfo"] = {"info_kind": "bridge"}
        nic = _nic(entry, root)
        if nic is not None:
            nics.append(nic)
    return nics


def collect(source: Source) -> Fragment:
    root = source.sys_class_net
    try:
        text = source.output(NAME)
    except ToolError as exc:
        if source.live and root and os.path.isdir(root):
            return {"nics": from_sysfs(root), "collector_errors": [{"collector": "nics", "error": str(exc)}]}
        raise
    if text is None:
        if source.live and root and os.path.isdir(root):
            return {"nics": from_sysfs(root)}
        return {}
    return {"nics": parse_ip_link(text, root)}
