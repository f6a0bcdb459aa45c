"""LLDP neighbours from lldpd: `lldpctl -f json` or, on lldpd too old for JSON, `lldpctl -f keyvalue`.

The JSON shape depends on counts: one interface gives {"interface": {"eth0": {...}}}, several give a list of
one-key objects; a chassis with a system name is keyed by that name. json0 output (every value in a list) is
accepted too. Keyvalue lines look like `lldp.eno1.chassis.mac=e4:f0:04:b6:47:32`; values may run over several
lines (Cisco system descriptions), and a new `.via=` for an interface starts a new neighbour.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

from ..runner import Source, ToolError
from . import Fragment

JSON_NAME = "lldpctl.json"
TEXT_NAME = "lldpctl.txt"
_ID_TYPES = ("mac", "ifname", "local", "ip", "ifalias", "agentcid")
_KV_RE = re.compile(
    r"^lldp\.(.+?)\.(via|rid|age|chassis|port|vlan|lldp-med|ppvid|pi|unknown-tlvs|ttl|dot3|power)(?:\.([^=]*))?=(.*)$"
)


def _one(value: Any) -> Any:
    """json0 wraps every value in a list and scalars in {"value": ...}: unwrap both."""
    while isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, dict) and set(value) == {"value"}:
        return value["value"]
    return value


def _id(value: Any) -> Tuple[Optional[str], Optional[str]]:
    value = _one(value)
    if isinstance(value, dict):
        ident = _one(value.get("value"))
        return (str(ident) if ident is not None else None), (str(value.get("type")) if value.get("type") else None)
    return (str(value) if value is not None else None), None


def _text(value: Any) -> Optional[str]:
    value = _one(value)
    return str(value) if isinstance(value, (str, int, float)) and str(value) else None


def _neighbor_from_json(local: str, body: Dict[str, Any]) -> Dict[str, Any]:
    chassis = _one(body.get("chassis")) or {}
    name = _text(chassis.get("name")) if isinstance(chassis, dict) else None
    if isinstance(chassis, dict) and "id" not in chassis and len(chassis) == 1:
        # {"switch01": {"id": ..., "descr": ...}}: the single key is the system name
        name, chassis = next(iter(chassis.items()))
        chassis = _one(chassis) or {}
    if not isinstance(chassis, dict):
        chassis = {}
    port = _one(body.get("port")) or {}
    if not isinstance(port, dict):
        port = {}
    chassis_id, chassis_type = _id(chassis.get("id"))
    port_id, port_type = _id(port.get("id"))
    mgmt = chassis.get("mgmt-ip")
    mgmt_ips = [str(_one(m)) for m in mgmt] if isinstance(mgmt, list) else ([str(mgmt)] if mgmt else [])
    return {
        "local_port": local,
        "remote_chassis_id": chassis_id,
        "remote_chassis_id_type": chassis_type,
        "remote_system": name,
        "remote_system_description": _text(chassis.get("descr")),
        "remote_port": port_id,
        "remote_port_id_type": port_type,
        "remote_port_description": _text(port.get("descr")),
        "remote_mgmt_ips": mgmt_ips,
    }


def parse_json(text: str) -> List[Dict[str, Any]]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ToolError("unparseable lldpctl JSON: {}".format(exc)) from exc
    lldp = _one(data.get("lldp")) if isinstance(data, dict) else None
    if lldp is None or lldp == {}:
        return []
    if not isinstance(lldp, dict):
        raise ToolError("lldpctl JSON without an 'lldp' object")
    interfaces = lldp.get("interface") or []
    items: List[Tuple[str, Any]] = []
    if isinstance(interfaces, dict):
        items = list(interfaces.items())
    elif isinstance(interfaces, list):
        for entry in interfaces:
            if isinstance(entry, dict) and "name" in entry:  # json0
                items.append((str(_one(entry["name"])), entry))
            elif isinstance(entry, dict):
                items.extend(entry.items())
    return [_neighbor_from_json(str(name), body) for name, body in items if isinstance(body, dict)]


def parse_keyvalue(text: str) -> List[Dict[str, Any]]:
    neighbors: List[Dict[str, Any]] = []
    latest: Dict[str, Dict[str, Any]] = {}
    last: Optional[Tuple[Dict[str, Any], str]] = None
    for line in text.splitlines():
        match = _KV_RE.match(line)
        if not match:
            if last is not None and line.strip():
                record, key = last
                record[key] = (record.get(key) or "") + "\n" + line.rstrip()
            continue
        local, section, rest, value = match.groups()
        rest = rest or ""
        if section == "via" or local not in latest:
            latest[local] = {"local_port": local, "_mgmt": []}
            neighbors.append(latest[local])
        record = latest[local]
        key = "{}.{}".format(section, rest) if rest else section
        if key == "chassis.mgmt-ip":
            record["_mgmt"].append(value)
            last = None
            continue
        record.setdefault(key, value)
        last = (record, key)
    return [_neighbor_from_keyvalue(record) for record in neighbors]


def _typed(record: Dict[str, Any], section: str) -> Tuple[Optional[str], Optional[str]]:
    for kind in _ID_TYPES:
        if "{}.{}".format(section, kind) in record:
            return record["{}.{}".format(section, kind)], kind
    return None, None


def _neighbor_from_keyvalue(record: Dict[str, Any]) -> Dict[str, Any]:
    chassis_id, chassis_type = _typed(record, "chassis")
    port_id, port_type = _typed(record, "port")
    return {
        "local_port": record["local_port"],
        "remote_chassis_id": chassis_id,
        "remote_chassis_id_type": chassis_type,
        "remote_system": record.get("chassis.name"),
        "remote_system_description": record.get("chassis.descr"),
        "remote_port": port_id,
        "remote_port_id_type": port_type,
        "remote_port_description": record.get("port.descr"),
        "remote_mgmt_ips": record["_mgmt"],
    }


def collect(source: Source) -> Fragment:
    try:
        text = source.output(JSON_NAME)
    except ToolError as exc:
        if "timed out" in str(exc):
            raise  # lldpd is not answering; keyvalue would hang as long
        text = None  # lldpd older than 0.7.2 has no JSON writer: ask for keyvalue instead
    if text is not None and text.strip():
        return {"lldp_neighbors": parse_json(text)}
    text = source.output(TEXT_NAME)
    if text is None:
        return {}
    return {"lldp_neighbors": parse_keyvalue(text)}
