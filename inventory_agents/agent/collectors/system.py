"""The node itself: dmidecode (vendor, product, serial, BIOS, CPUs, memory), /etc/os-release, kernel, hostname."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from ..runner import Source
from ..util import clean_serial, parse_int, text_or_none
from . import Fragment

_UNSET = {"not specified", "not provided", "to be filled by o.e.m.", "default string", "none", "unknown", ""}


def parse_dmidecode(text: str) -> List[Tuple[str, Dict[str, str]]]:
    """[(section title, {key: value})] for each 'Handle ...' record; nested list lines are skipped."""
    records: List[Tuple[str, Dict[str, str]]] = []
    title: Optional[str] = None
    fields: Dict[str, str] = {}
    expect_title = False
    for line in text.splitlines():
        if line.startswith("Handle "):
            if title is not None:
                records.append((title, fields))
            title, fields, expect_title = None, {}, True
            continue
        if expect_title:
            if line.strip():
                title, expect_title = line.strip(), False
            continue
        if title is None or not line.startswith("\t") or line.startswith("\t\t"):
            continue
        key, sep, value = line.strip().partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    if title is not None:
        records.append((title, fields))
    return records


def _value(raw: Optional[str]) -> Optional[str]:
    text = text_or_none(raw)
    if text is None or text.lower() in _UNSET:
        return None
    return " ".join(text.split())  # HP pads CPU versions with runs of spaces


def _size_mib(raw: str) -> Optional[int]:
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*(kB|KB|MB|GB|TB)\b", raw)
    if not match:
        return None
    factor = {"kb": 1 / 1024, "mb": 1, "gb": 1024, "tb": 1024 * 1024}[match.group(2).lower()]
    return int(float(match.group(1)) * factor)


def system_from_dmidecode(text: str) -> Dict[str, Any]:
    records = parse_dmidecode(text)
    system: Dict[str, Any] = {}
    cpus: List[Dict[str, str]] = []
    dimm_mib: List[int] = []
    slots = 0
    for title, fields in records:
        if title == "System Information" and "vendor" not in system:
            system["vendor"] = _value(fields.get("Manufacturer"))
            system["product"] = _value(fields.get("Product Name"))
            system["serial"], system["serial_raw"] = clean_serial(fields.get("Serial Number"))
            system["system_uuid"] = _value(fields.get("UUID"))
        elif title == "BIOS Information" and "bios_version" not in system:
            system["bios_version"] = _value(fields.get("Version"))
            system["bios_date"] = _value(fields.get("Release Date"))
            system["bios_vendor"] = _value(fields.get("Vendor"))
        elif title == "Processor Information":
            cpus.append(fields)
        elif title == "Memory Device":
            slots += 1
            size = _size_mib(fields.get("Size", ""))
            if size:
                dimm_mib.append(size)
    populated = [
        cpu
        for cpu in cpus
        if "populated" in cpu.get("Status", "").lower() and "unpopulated" not in cpu.get("Status", "").lower()
    ]
    models = [_value(cpu.get("Version")) for cpu in populated]
    system["cpu_model"] = next((m for m in models if m), None)
    system["cpu_count"] = len(populated) if cpus else None
    cores = [parse_int(cpu.get("Core Count")) for cpu in populated]
    system["cpu_cores"] = sum(c for c in cores if c) or None
    total_mib = sum(dimm_mib)
    system["memory_gib"] = (
        (total_mib // 1024 if total_mib % 1024 == 0 else round(total_mib / 1024, 2)) if dimm_mib else None
    )
    system["memory_dimms"] = len(dimm_mib) if slots else None
    system["memory_slots"] = slots or None
    return system


def parse_os_release(text: str) -> Dict[str, Optional[str]]:
    values: Dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and not key.startswith("#"):
            values[key.strip()] = value.strip().strip("\"'")
    return {
        "os_name": values.get("NAME") or values.get("ID"),
        "os_version": values.get("VERSION_ID") or values.get("VERSION"),
        "os_pretty_name": values.get("PRETTY_NAME"),
    }


def parse_cpuinfo(text: str) -> Dict[str, Any]:
    """/proc/cpuinfo: model name and socket count (fallback when dmidecode needs root)."""
    models = re.findall(r"(?m)^model name\s*:\s*(.+)$", text)
    sockets = set(re.findall(r"(?m)^physical id\s*:\s*(\d+)$", text))
    return {
        "cpu_model": " ".join(models[0].split()) if models else None,
        "cpu_count": len(sockets) if sockets else (1 if models else None),
    }


def parse_meminfo(text: str) -> Optional[float]:
    match = re.search(r"(?m)^MemTotal:\s*(\d+)\s*kB", text)
    return round(int(match.group(1)) / 1024 / 1024, 1) if match else None


def collect_os(source: Source) -> Fragment:
    """Hostname, OS release and kernel: cheap facts that must not depend on dmidecode working."""
    system: Dict[str, Any] = {}
    os_text = source.output("os-release")
    if os_text is not None:
        system.update(parse_os_release(os_text))
    kernel = source.kernel_release()
    if kernel:
        system["kernel"] = kernel
    return {"system": system, "hostname": source.hostname()}


def collect_dmi(source: Source) -> Fragment:
    dmi = source.output("dmidecode.txt")
    system: Dict[str, Any] = system_from_dmidecode(dmi) if dmi is not None else {}
    if not system.get("cpu_model"):
        cpuinfo = source.output("cpuinfo")
        if cpuinfo:
            system.update({k: v for k, v in parse_cpuinfo(cpuinfo).items() if v is not None})
    if not system.get("memory_gib"):
        meminfo = source.output("meminfo")
        usable = parse_meminfo(meminfo) if meminfo else None
        if usable is not None:
            # Usable memory is a little below the installed DIMMs; the key says so.
            system["memory_gib_usable"] = usable
    return {"system": system} if system else {}
