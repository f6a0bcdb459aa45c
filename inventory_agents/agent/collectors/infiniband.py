"""InfiniBand / RoCE HCAs from `ibstat`.

    CA 'mlx5_0'
            CA type: MT4123
            Firmware version: 20.31.1014
            Node GUID: 0xb8599f0300c81b2e
            Port 1:
                    State: Active
                    Physical state: LinkUp
                    Rate: 200
                    Base lid: 12
                    Port GUID: 0xb8599f0300c81b2e
                    Link layer: InfiniBand

Identity on IB is the port GUID; the LID is assigned by the subnet manager and only reported.

From /sys/class/infiniband/<ca>/ (or a `sys-class-infiniband/` mirror in the --from-dir folder) each CA also
gets its PCI address and its netdevs (`device/net/`): a RoCE NIC is one PCI function seen twice, as the RDMA
device the fabric plan names and as the netdev lldpd runs on; the server pairs them by these.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional

from ..runner import Source, ToolError, sys_link_target
from ..util import normalize_pci_bus_id, parse_float, parse_int, text_or_none
from . import Fragment

NAME = "ibstat.txt"
_CA_RE = re.compile(r"^CA\s+'([^']+)'")
_PORT_RE = re.compile(r"^Port\s+(\d+)\s*:")


def _guid(raw: Optional[str]) -> Optional[str]:
    text = (raw or "").strip().lower()
    if not re.fullmatch(r"(0x)?[0-9a-f]{1,16}", text):
        return None
    value = int(text, 16)
    return None if value == 0 else "0x{:016x}".format(value)


def _port(port: int, fields: Dict[str, str]) -> Dict[str, Any]:
    rate = parse_float(fields.get("Rate"))
    return {
        "port": port,
        "state": (text_or_none(fields.get("State")) or "").lower() or None,
        "phys_state": (text_or_none(fields.get("Physical state")) or "").lower() or None,
        "rate_gbps": int(rate) if rate is not None and rate == int(rate) else rate,
        "port_guid": _guid(fields.get("Port GUID")),
        "link_layer": (text_or_none(fields.get("Link layer")) or "").lower() or None,
        "lid": parse_int(fields.get("Base lid")),
        "sm_lid": parse_int(fields.get("SM lid")),
    }


def parse_ibstat(text: str) -> List[Dict[str, Any]]:
    cas: List[Dict[str, Any]] = []
    ca: Optional[Dict[str, Any]] = None
    ca_fields: Dict[str, str] = {}
    port_fields: Optional[Dict[str, str]] = None
    port_no = 0

    def close_port() -> None:
        if ca is not None and port_fields is not None:
            ca["ports"].append(_port(port_no, port_fields))

    def close_ca() -> None:
        if ca is None:
            return
        close_port()
        ca.update(
            ca_type=text_or_none(ca_fields.get("CA type")),
            node_guid=_guid(ca_fields.get("Node GUID")),
            system_image_guid=_guid(ca_fields.get("System image GUID")),
            firmware=text_or_none(ca_fields.get("Firmware version")),
        )
        cas.append(ca)

    for line in text.splitlines():
        stripped = line.strip()
        match = _CA_RE.match(stripped)
        if match:
            close_ca()
            ca, ca_fields, port_fields = {"ca": match.group(1), "ports": []}, {}, None
            continue
        if ca is None:
            continue
        match = _PORT_RE.match(stripped)
        if match:
            close_port()
            port_no, port_fields = int(match.group(1)), {}
            continue
        key, sep, value = stripped.partition(":")
        if not sep:
            continue
        (port_fields if port_fields is not None else ca_fields)[key.strip()] = value.strip()
    close_ca()
    if not cas and text.strip():
        raise ToolError("ibstat output has no \"CA '<name>'\" section: {}".format(text.strip().splitlines()[0][:120]))
    return cas


def collect(source: Source) -> Fragment:
    if source.live and not os.path.isdir("/sys/class/infiniband"):
        return {}  # no HCA driver loaded: ibstat would only fail with "No IB devices found"
    text = source.output(NAME)
    if text is None:
        return {}
    cas = parse_ibstat(text)
    root = source.sys_class_infiniband
    if root:
        for ca in cas:
            ca.update(_sysfs_facts(root, ca["ca"]))
    return {"infiniband": cas}


def _sysfs_facts(root: str, ca: str) -> Dict[str, Any]:
    """PCI address and netdevs of one CA; absent keys when sysfs does not say (never an error)."""
    facts: Dict[str, Any] = {}
    pci = normalize_pci_bus_id(sys_link_target(root, ca, "device"))
    if pci:
        facts["pci_bus_id"] = pci
    try:
        netdevs = sorted(n for n in os.listdir(os.path.join(root, ca, "device", "net")) if n)
    except OSError:
        netdevs = []
    if netdevs:
        facts["netdevs"] = netdevs
    return facts
