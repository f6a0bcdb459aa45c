"""Per-platform CLI knowledge without a connection: which command to run, how to parse it (TextFSM via
ntc-templates), and how to normalise LLDP rows whose field names differ between templates and releases.

Used by the netmiko adapter for live output and by `manage.py switch_parse` for saved output, so both parse
the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ntc_templates.parse import ParsingException, parse_output

from integrations.exceptions import PermanentError
from integrations.ports import LldpNeighbor

from .snmp_decode import normalize_mac, unmasked

# Prefixes some platforms abbreviate in LLDP tables but spell out in IF-MIB ifName / running config.
_NXOS_ABBREVIATIONS = {"eth": "Ethernet", "mgmt": "mgmt", "po": "port-channel"}
_EOS_ABBREVIATIONS = {"et": "Ethernet", "ma": "Management", "po": "Port-Channel"}


@dataclass(frozen=True)
class PlatformSpec:
    """How to talk to one platform. `ntc_platform` is the ntc-templates name, which is not always netmiko's
    device type (netmiko's `huawei` is ntc's `huawei_vrp`)."""

    ntc_platform: str
    lldp: str
    version: str
    interfaces: str
    running_interface: str  # format string, {interface}
    abbreviations: dict[str, str] = field(default_factory=dict)


PLATFORMS: dict[str, PlatformSpec] = {
    "cisco_nxos": PlatformSpec(
        "cisco_nxos",
        "show lldp neighbors detail",
        "show version",
        "show interface status",
        "show running-config interface {interface}",
        _NXOS_ABBREVIATIONS,
    ),
    "arista_eos": PlatformSpec(
        "arista_eos",
        "show lldp neighbors detail",
        "show version",
        "show interfaces status",
        "show running-config interfaces {interface}",
        _EOS_ABBREVIATIONS,
    ),
    "juniper_junos": PlatformSpec(
        "juniper_junos",
        "show lldp neighbors",
        "show version",
        "show interfaces terse",
        "show configuration interfaces {interface} | display set",
    ),
    "huawei": PlatformSpec(
        "huawei_vrp",
        "display lldp neighbor",
        "display version",
        "display interface brief",
        "display current-configuration interface {interface}",
    ),
    "huawei_vrpv8": PlatformSpec(
        "huawei_vrp",
        "display lldp neighbor",
        "display version",
        "display interface brief",
        "display current-configuration interface {interface}",
    ),
    # Cumulus Linux and SONiC: lldpd's own key=value output (no TextFSM template exists for it). A port's config
    # is read from NVUE (Cumulus Linux 5): the applied revision as JSON, which config_push spells as `nv set` lines.
    "linux": PlatformSpec(
        "linux",
        "sudo lldpctl -f keyvalue",
        "cat /etc/os-release",
        "ip link show",
        "nv show --applied interface {interface} -o json",
    ),
}

# ntc-templates platform names accepted by switch_parse as well as the netmiko ones.
_NTC_ALIASES = {"huawei_vrp": "huawei"}


def platform_spec(platform: str) -> PlatformSpec:
    spec = PLATFORMS.get(platform) or PLATFORMS.get(_NTC_ALIASES.get(platform, ""))
    if spec is None:
        raise PermanentError(f"unsupported platform {platform!r} (known: {', '.join(sorted(PLATFORMS))})")
    return spec


def is_lldp_command(command: str) -> bool:
    return "lldp" in command.lower()


def parse_cli(platform: str, command: str, raw: str) -> list[dict[str, str]]:
    """TextFSM rows for one command's output (ntc-templates' index picks the template). Output of lldpctl
    and /etc/os-release (Linux switches) is key=value and split directly."""
    spec = platform_spec(platform)
    if spec.ntc_platform == "linux" and "lldpctl" in command:
        return lldpctl_keyvalue_rows(raw)
    if spec.ntc_platform == "linux" and "os-release" in command:
        return [_os_release(raw)]
    try:
        return parse_output(platform=spec.ntc_platform, command=command, data=raw)
    except ParsingException as exc:
        raise PermanentError(f"no TextFSM template for {command!r} on {spec.ntc_platform}: {exc}") from exc


def _os_release(raw: str) -> dict[str, str]:
    row: dict[str, str] = {}
    for line in raw.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            row[key.strip().lower()] = value.strip().strip('"')
    return row


_LLDPCTL_KEY = re.compile(
    r"(?P<iface>.+?)\.(?P<path>(via|rid|age|chassis|port|vlan|lldp-med|ppvid|pi|unknown-tlvs)\b.*)"
)


def lldpctl_keyvalue_rows(raw: str) -> list[dict[str, str]]:
    """`lldpctl -f keyvalue`: lines `lldp.<ifname>.<path>=<value>`, one block per local interface, as rows with
    the same keys the TextFSM LLDP templates use."""
    by_port: dict[str, dict[str, str]] = {}
    for line in raw.splitlines():
        key, sep, value = line.strip().partition("=")
        if not sep or not key.startswith("lldp."):
            continue
        _, _, rest = key.partition(".")
        # Interface names contain dots (eth0.100): the path starts at the first known section name.
        match = _LLDPCTL_KEY.match(rest)
        if not match:
            continue
        row = by_port.setdefault(match["iface"], {"local_interface": match["iface"]})
        path = match["path"]
        if path in {"chassis.mac", "chassis.local", "chassis.ip"} and "chassis_id" not in row:
            row["chassis_id"] = value
        elif path == "chassis.name":
            row.setdefault("neighbor_name", value)  # first one wins: some captures repeat a name line
        elif path == "chassis.descr":
            row["neighbor_description"] = value
        elif path in {"port.ifname", "port.mac", "port.local"}:
            row["neighbor_port_id"] = value
        elif path == "port.descr":
            row["neighbor_interface"] = value
    return list(by_port.values())


def canonical_interface(name: str, abbreviations: dict[str, str]) -> str:
    """Expand a platform's short interface name (NX-OS `Eth1/1`, EOS `Et3/1`) to its ifName spelling."""
    match = re.fullmatch(r"([A-Za-z-]+)\s*([\d/.:]+)", name.strip())
    if not match:
        return name.strip()
    prefix, rest = match.groups()
    full = abbreviations.get(prefix.lower())
    return f"{full}{rest}" if full else name.strip()


# Field names for the same fact across templates and ntc-templates releases (older releases used
# local_port / neighbor / port_id / system_name; Huawei's neighbor_interface is the port *description*).
_LOCAL = ("local_interface", "local_port", "local_intf")
_REMOTE_PORT = ("neighbor_port_id", "port_id", "neighbor_interface", "remote_port", "neighbor_port")
_REMOTE_SYSTEM = ("neighbor_name", "system_name", "neighbor", "remote_system_name")
_CHASSIS = ("chassis_id", "remote_chassis_id", "neighbor_chassis_id")
_PORT_DESCR = ("neighbor_interface", "port_description", "neighbor_port_description")


def _first(row: dict[str, str], keys: tuple[str, ...]) -> str:
    for key in keys:
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def normalize_lldp(platform: str, rows: list[dict[str, str]]) -> list[LldpNeighbor]:
    """(local_port, remote_system, remote_port, remote_chassis_id) whatever the template called them."""
    spec = platform_spec(platform)
    neighbors = []
    for row in rows:
        local = _first(row, _LOCAL)
        if not local:
            continue
        remote_port = _first(row, _REMOTE_PORT)
        description = _first(row, _PORT_DESCR)
        neighbors.append(
            LldpNeighbor(
                local_port=canonical_interface(local, spec.abbreviations),
                remote_chassis_id=normalize_mac(unmasked(_first(row, _CHASSIS)) or ""),
                remote_port=normalize_mac(remote_port.strip('"')),
                remote_system=unmasked(_first(row, _REMOTE_SYSTEM).strip('"')) or "",
                remote_port_description="" if description == remote_port else description,
            )
        )
    return neighbors
