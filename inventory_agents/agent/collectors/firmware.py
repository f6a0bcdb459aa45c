"""Firmware versions: BMC (`ipmitool mc info`), NIC / HCA firmware and PSID (`ethtool -i <if>`,
`mlxfwmanager --query`), and the report's `firmware` list assembled from them plus what other collectors read
already (BIOS from dmidecode, VBIOS / InfoROM from nvidia-smi, Ascend firmware from npu-smi, Hygon VBIOS from
hy-smi / rocm-smi, HCA firmware from ibstat).

One entry per component: {component, device, model, version} plus optional facts (`vendor`, `date`, `psid`,
`driver`, `pci_bus_id`, `part_number`, `rom_versions`, `source`). `component` is one of COMPONENTS; `device`
names the instance on the node (`system`, `bmc`, a PCI address, an interface or CA name); `model` is what a
baseline is written for (server model, accelerator model, NIC model).

Each parser raises ToolError naming the tool and the line it could not read; the report keeps nothing of that
tool then (a collector error instead), so a garbled capture never yields half a list.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Tuple

from ..runner import Source, ToolError, read_sys_file, sys_link_target
from ..util import is_masked_text, normalize_pci_bus_id, text_or_none
from . import Fragment

IPMITOOL_NAME = "ipmitool-mc-info.txt"
MLXFWMANAGER_NAME = "mlxfwmanager-query.txt"
ETHTOOL_PREFIX = "ethtool-i-"  # ethtool-i-<interface>.txt
COMPONENTS = ("bios", "bmc", "nic", "gpu_vbios", "gpu_inforom", "npu_firmware", "dcu_vbios")
_ACCEL_COMPONENT = {"nvidia": "gpu_vbios", "ascend": "npu_firmware", "hygon": "dcu_vbios"}
_KEY_RE = re.compile(r"^([A-Za-z][A-Za-z0-9 ./()#_-]*?)\s*:\s?(.*)$")
_PSID_RE = re.compile(r"^(.*?)\s*\(([A-Z]{2,4}_[0-9A-Za-z_]+)\)\s*$")
_PLACEHOLDERS = {"", "n/a", "na", "unknown", "not available", "not supported", "-", "redacted", "masked"}
_IFNAME_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")


def _version(raw: Optional[str]) -> Optional[str]:
    text = text_or_none(raw)
    if text is None:
        return None
    bare = text.strip("[]() ").lower()
    if bare in _PLACEHOLDERS or is_masked_text(text):
        return None
    return " ".join(text.split())


def _excerpt(line: str) -> str:
    line = line.strip()
    return line if len(line) <= 80 else line[:80] + "..."


def parse_ipmitool_mc_info(text: str) -> Dict[str, Any]:
    """`ipmitool mc info`: `Key : value` lines, list values on indented lines below their key."""
    fields: Dict[str, str] = {}
    last_key: Optional[str] = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line[:1] in (" ", "\t") and last_key is not None:
            continue  # a list item of the key above (Additional Device Support, Aux Firmware Rev Info)
        match = _KEY_RE.match(line.strip())
        if not match:
            raise ToolError("ipmitool mc info line {}: unreadable line {!r}".format(lineno, _excerpt(line)))
        last_key = match.group(1).strip()
        fields[last_key] = match.group(2).strip()
    if "Firmware Revision" not in fields:
        lines = len(text.splitlines())
        raise ToolError("ipmitool mc info line {}: output ends without a 'Firmware Revision' line".format(lines))
    version = _version(fields["Firmware Revision"])
    if version is None or not re.match(r"^[0-9A-Za-z]", version):
        line = next(n for n, row in enumerate(text.splitlines(), 1) if row.strip().startswith("Firmware Revision"))
        raise ToolError("ipmitool mc info line {}: unreadable Firmware Revision {!r}".format(line, version))
    return {
        "component": "bmc",
        "device": "bmc",
        "model": None,
        "version": version,
        "vendor": _version(fields.get("Manufacturer Name")),
        "ipmi_version": _version(fields.get("IPMI Version")),
        "source": "ipmitool mc info",
    }


def split_psid(raw: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """'22.39.1002 (MT_0000000838)' -> ('22.39.1002', 'MT_0000000838'); the mlx5 driver appends the PSID."""
    text = _version(raw)
    if text is None:
        return None, None
    match = _PSID_RE.match(text)
    return (match.group(1) or None, match.group(2)) if match else (text, None)


def parse_ethtool_i(text: str, interface: str) -> Optional[Dict[str, Any]]:
    """`ethtool -i <if>`: None for an interface without firmware (virtual, or a driver that reports none)."""
    fields: Dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep or not re.fullmatch(r"[a-z][a-z-]*", key.strip()):
            raise ToolError("ethtool -i {} line {}: unreadable line {!r}".format(interface, lineno, _excerpt(line)))
        fields[key.strip()] = value.strip()
    if "driver" not in fields:
        raise ToolError("ethtool -i {} line 1: output has no 'driver:' line".format(interface))
    if "firmware-version" not in fields or "bus-info" not in fields:
        # ethtool always prints both: their absence is a cut-off output, not a NIC without firmware.
        raise ToolError(
            "ethtool -i {} line {}: output ends before 'firmware-version' / 'bus-info'".format(
                interface, len(text.splitlines())
            )
        )
    version, psid = split_psid(fields["firmware-version"])
    pci = normalize_pci_bus_id(fields["bus-info"])
    if version is None or pci is None:
        return None
    entry: Dict[str, Any] = {
        "component": "nic",
        "device": pci,
        "model": None,
        "version": version,
        "driver": text_or_none(fields["driver"]),
        "driver_version": text_or_none(fields.get("version")),
        "pci_bus_id": pci,
        "interface": interface,
        "source": "ethtool -i",
    }
    if psid:
        entry["psid"] = psid
    rom = _version(fields.get("expansion-rom-version"))
    if rom:
        entry["rom_versions"] = {"expansion_rom": rom}
    return entry


def parse_mlxfwmanager(text: str) -> List[Dict[str, Any]]:
    """`mlxfwmanager --query`: one `Device #N:` block per adapter with a `Versions: Current Available` table."""
    devices: List[Dict[str, Any]] = []
    block: Optional[Dict[str, str]] = None
    roms: Dict[str, str] = {}
    in_versions = False
    start = 0

    def close(lineno: int) -> None:
        if block is None:
            return
        if "FW" not in roms:
            raise ToolError("mlxfwmanager --query line {}: device block has no FW version row".format(lineno))
        pci = normalize_pci_bus_id(block.get("PCI Device Name"))
        device = pci or text_or_none(block.get("PCI Device Name")) or "device{}".format(len(devices) + 1)
        entry: Dict[str, Any] = {
            "component": "nic",
            "device": device,
            "model": _version(block.get("Device Type")),
            "version": roms["FW"],
            "psid": _version(block.get("PSID")),
            "part_number": _version(block.get("Part Number")),
            "pci_bus_id": pci,
            "source": "mlxfwmanager --query",
        }
        extra = {k.lower(): v for k, v in roms.items() if k != "FW"}
        if extra:
            entry["rom_versions"] = extra
        devices.append(entry)

    lines = text.splitlines()
    for lineno, line in enumerate(lines, 1):
        stripped = line.strip()
        if re.match(r"^Device #\d+:$", stripped):
            close(lineno - 1)
            block, roms, in_versions, start = {}, {}, False, lineno
            continue
        if block is None or not stripped or set(stripped) == {"-"}:
            continue
        if in_versions:
            parts = stripped.split()
            if len(parts) >= 2 and re.fullmatch(r"[A-Z][A-Za-z0-9_]*", parts[0]) and ":" not in parts[0]:
                current = _version(parts[1])
                if current is None:
                    raise ToolError(
                        "mlxfwmanager --query line {}: no current version in {!r}".format(lineno, _excerpt(line))
                    )
                roms[parts[0]] = current
                continue
            in_versions = False
        key, sep, value = stripped.partition(":")
        if not sep:
            raise ToolError("mlxfwmanager --query line {}: unreadable line {!r}".format(lineno, _excerpt(line)))
        if key.strip() == "Versions":
            in_versions = True
            continue
        block[key.strip()] = value.strip()
    close(len(lines))
    if not devices and text.strip() and "No devices found" not in text:
        raise ToolError("mlxfwmanager --query line {}: no 'Device #N:' block".format(max(start, 1)))
    return devices


def _interfaces(source: Source) -> List[str]:
    """Interfaces to ask `ethtool -i`: live, the PCI-backed ones under /sys/class/net; replayed, the captures."""
    if not source.live:
        names = [n for n in source.names() if n.startswith(ETHTOOL_PREFIX) and n.endswith(".txt")]
        return sorted(n[len(ETHTOOL_PREFIX) : -len(".txt")] for n in names)
    root = source.sys_class_net
    if not root or not os.path.isdir(root):
        return []
    found = []
    for name in sorted(os.listdir(root)):
        # A physical function has a device link; VLANs, bonds and bridges have none and no firmware.
        if _IFNAME_RE.match(name) and sys_link_target(root, name, "device") and read_sys_file(root, name, "type"):
            found.append(name)
    return found


IPMI_DEVICES = ("/dev/ipmi0", "/dev/ipmi/0", "/dev/ipmidev/0")


def collect_bmc(source: Source) -> Fragment:
    if source.live and not any(os.path.exists(path) for path in IPMI_DEVICES):
        return {}  # no BMC interface loaded (a VM, or ipmi_si missing): ipmitool would only fail
    text = source.output(IPMITOOL_NAME)
    if text is None:
        return {}
    return {"firmware": [parse_ipmitool_mc_info(text)]}


def collect_ethtool(source: Source) -> Fragment:
    entries = []
    for interface in _interfaces(source):
        text = source.output("{}{}.txt".format(ETHTOOL_PREFIX, interface))
        if text is None:
            continue
        entry = parse_ethtool_i(text, interface)
        if entry is not None:
            entries.append(entry)
    return {"firmware": entries} if entries else {}


def collect_mlxfwmanager(source: Source) -> Fragment:
    text = source.output(MLXFWMANAGER_NAME)
    if text is None:
        return {}
    return {"firmware": parse_mlxfwmanager(text)}


def _device_of(card: Dict[str, Any]) -> str:
    return card.get("pci_bus_id") or "index {}".format(card.get("index"))


def assemble(report: Dict[str, Any], tool_entries: List[Dict[str, Any]], failed: List[str]) -> List[Dict[str, Any]]:
    """The report's `firmware` list: the tools' entries plus BIOS, accelerator and HCA firmware that the other
    collectors read, one entry per (component, device). Sources whose collector failed (`failed`) add nothing.

    NIC entries are one per PCI function: mlxfwmanager (it knows the board type and PSID) wins over
    `ethtool -i`, which wins over ibstat. A NIC's model is, in that order, mlxfwmanager's device type, ibstat's
    CA type and the lspci device name of its PCI address."""
    system = report.get("system") or {}
    entries: List[Dict[str, Any]] = []
    if "dmidecode" not in failed and _version(system.get("bios_version")):
        bios: Dict[str, Any] = {
            "component": "bios",
            "device": "system",
            "model": system.get("product"),
            "version": _version(system.get("bios_version")),
            "source": "dmidecode",
        }
        if system.get("bios_vendor"):
            bios["vendor"] = system["bios_vendor"]
        if system.get("bios_date"):
            bios["date"] = system["bios_date"]
        entries.append(bios)
    for entry in tool_entries:
        if entry["component"] == "bmc":
            entry["model"] = system.get("product")
            entries.append(entry)
    for card in report.get("accelerators") or []:
        component = _ACCEL_COMPONENT.get(card.get("vendor") or "")
        if component is None or card.get("vendor") in failed or card.get("seen_by_tool") is False:
            continue
        version = _version(card.get("firmware_version"))
        if version:
            entries.append(
                {"component": component, "device": _device_of(card), "model": card.get("model"), "version": version}
            )
        inforom = _version(card.get("inforom_version"))
        if inforom:
            entries.append(
                {"component": "gpu_inforom", "device": _device_of(card), "model": card.get("model"), "version": inforom}
            )
    lspci = {d.get("slot"): d.get("device") for d in report.get("pci_devices") or [] if d.get("slot")}
    nics: Dict[str, Dict[str, Any]] = {}
    for entry in tool_entries:
        if entry["component"] == "nic" and entry.get("source") == "mlxfwmanager --query":
            nics[entry["device"]] = entry
    for entry in tool_entries:
        if entry["component"] == "nic" and entry.get("source") == "ethtool -i":
            nics.setdefault(entry["device"], entry)
    if "infiniband" not in failed:
        for ca in report.get("infiniband") or []:
            version, psid = split_psid(ca.get("firmware"))
            if not version:
                continue
            device = ca.get("pci_bus_id") or ca["ca"]
            known = nics.get(device)
            if known is not None:
                known.setdefault("ca", ca["ca"])
                if not known.get("model"):
                    known["model"] = ca.get("ca_type")
                continue
            entry = {"component": "nic", "device": device, "model": ca.get("ca_type"), "version": version}
            entry.update(ca=ca["ca"], source="ibstat")
            if ca.get("pci_bus_id"):
                entry["pci_bus_id"] = ca["pci_bus_id"]
            if psid:
                entry["psid"] = psid
            nics[device] = entry
    for entry in nics.values():
        if not entry.get("model") and entry.get("pci_bus_id") in lspci:
            entry["model"] = lspci[entry["pci_bus_id"]]
        entries.append(entry)
    seen = set()
    result = []
    for entry in entries:
        key = (entry["component"], entry["device"])
        if key not in seen:
            seen.add(key)
            result.append(entry)
    return sorted(result, key=lambda e: (COMPONENTS.index(e["component"]), e["device"]))
