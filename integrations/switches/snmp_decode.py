"""Pure decoding of walked SNMP tables into our dataclasses (no network, no pysnmp import).

The poller (snmp.py) hands over plain Python values: bytes for OCTET STRINGs, int for INTEGER/Gauge/
TimeTicks, str for OBJECT IDENTIFIERs, keyed by numeric OID column and row index. Everything vendor-specific
about *reading* those values lives here so it can be tested against the real recordings without an agent.
"""

from __future__ import annotations

import ipaddress
import string
from collections.abc import Mapping
from dataclasses import dataclass, field

from integrations.ports import LinkStateValue, LldpNeighbor, SwitchModule, SwitchPortInfo, SwitchSnapshot, SwitchSystem

# --- numeric OIDs (no MIB compilation at run time) -------------------------------------------------------------
SYS_DESCR = "1.3.6.1.2.1.1.1.0"
SYS_OBJECT_ID = "1.3.6.1.2.1.1.2.0"
SYS_UPTIME = "1.3.6.1.2.1.1.3.0"
SYS_NAME = "1.3.6.1.2.1.1.5.0"
SYSTEM_SCALARS = (SYS_DESCR, SYS_OBJECT_ID, SYS_UPTIME, SYS_NAME)

# Juniper has no ENTITY-MIB physical table (QFX5100, JUNOS 14.1X53); JUNIPER-MIB jnxBoxDescr/jnxBoxSerialNo
# carry the chassis model and serial instead.
JNX_BOX_DESCR = "1.3.6.1.4.1.2636.3.1.2.0"
JNX_BOX_SERIAL = "1.3.6.1.4.1.2636.3.1.3.0"
JUNIPER_ENTERPRISE = "1.3.6.1.4.1.2636."

IF_DESCR = "1.3.6.1.2.1.2.2.1.2"
IF_TYPE = "1.3.6.1.2.1.2.2.1.3"
IF_SPEED = "1.3.6.1.2.1.2.2.1.5"
IF_PHYS_ADDRESS = "1.3.6.1.2.1.2.2.1.6"
IF_ADMIN_STATUS = "1.3.6.1.2.1.2.2.1.7"
IF_OPER_STATUS = "1.3.6.1.2.1.2.2.1.8"
IF_NAME = "1.3.6.1.2.1.31.1.1.1.1"
IF_HIGH_SPEED = "1.3.6.1.2.1.31.1.1.1.15"
IF_ALIAS = "1.3.6.1.2.1.31.1.1.1.18"

ENT_DESCR = "1.3.6.1.2.1.47.1.1.1.1.2"
ENT_CLASS = "1.3.6.1.2.1.47.1.1.1.1.5"
ENT_NAME = "1.3.6.1.2.1.47.1.1.1.1.7"
ENT_SERIAL = "1.3.6.1.2.1.47.1.1.1.1.11"
ENT_MODEL = "1.3.6.1.2.1.47.1.1.1.1.13"

LLDP_LOC_PORT_ID = "1.0.8802.1.1.2.1.3.7.1.3"
LLDP_LOC_PORT_DESC = "1.0.8802.1.1.2.1.3.7.1.4"
LLDP_REM_CHASSIS_SUBTYPE = "1.0.8802.1.1.2.1.4.1.1.4"
LLDP_REM_CHASSIS_ID = "1.0.8802.1.1.2.1.4.1.1.5"
LLDP_REM_PORT_SUBTYPE = "1.0.8802.1.1.2.1.4.1.1.6"
LLDP_REM_PORT_ID = "1.0.8802.1.1.2.1.4.1.1.7"
LLDP_REM_PORT_DESC = "1.0.8802.1.1.2.1.4.1.1.8"
LLDP_REM_SYS_NAME = "1.0.8802.1.1.2.1.4.1.1.9"

TABLE_COLUMNS: tuple[str, ...] = (
    IF_DESCR,
    IF_TYPE,
    IF_SPEED,
    IF_PHYS_ADDRESS,
    IF_ADMIN_STATUS,
    IF_OPER_STATUS,
    IF_NAME,
    IF_HIGH_SPEED,
    IF_ALIAS,
    ENT_DESCR,
    ENT_CLASS,
    ENT_NAME,
    ENT_SERIAL,
    ENT_MODEL,
    LLDP_LOC_PORT_ID,
    LLDP_LOC_PORT_DESC,
    LLDP_REM_CHASSIS_SUBTYPE,
    LLDP_REM_CHASSIS_ID,
    LLDP_REM_PORT_SUBTYPE,
    LLDP_REM_PORT_ID,
    LLDP_REM_PORT_DESC,
    LLDP_REM_SYS_NAME,
)

ENT_CLASS_CHASSIS = 3
ENT_CLASS_MODULE = 9

# LLDP-MIB LldpChassisIdSubtype / LldpPortIdSubtype values that need more than text decoding.
CHASSIS_SUBTYPE_MAC = 4
CHASSIS_SUBTYPE_NETWORK_ADDRESS = 5
PORT_SUBTYPE_MAC = 3
PORT_SUBTYPE_NETWORK_ADDRESS = 4

# Values that stand for "nothing": LibreNMS anonymises recordings with <private>; Dell OS10 sends the literal
# "Not Advertised" for absent LLDP TLVs; masked captures use N/A or xxx. None of them is ever an identity.
MASKED_VALUES = frozenset({"<private>", "not advertised", "n/a", "na", "xxx", "unknown", "none", "-"})

Value = bytes | int | str
Index = tuple[int, ...]
Column = dict[Index, Value]


@dataclass
class RawSnmpData:
    """What the poller read: scalars by full OID, table columns by column OID then row index."""

    scalars: dict[str, Value] = field(default_factory=dict)
    columns: dict[str, Column] = field(default_factory=dict)

    def column(self, oid: str) -> Column:
        return self.columns.get(oid, {})


# --- value decoding ---------------------------------------------------------------------------------------------

_PRINTABLE = set(string.printable)


def decode_text(value: Value | None) -> str:
    """An OCTET STRING as text: UTF-8 when it decodes to printable text, else lowercase hex.

    Why: agents put both kinds in DisplayString-ish columns. Huawei VRP sends sysDescr and lldpRemSysDesc
    with CR/LF inside (snmprec stores them as `4x` hex), LLDP chassis/port ids may be raw bytes.
    """
    if value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    trimmed = value.rstrip(b"\x00")  # some agents NUL-terminate strings
    try:
        text = trimmed.decode("utf-8")
    except UnicodeDecodeError:
        return trimmed.hex()
    if all(ch in _PRINTABLE or ch.isprintable() for ch in text):
        return text
    return trimmed.hex()


def decode_mac(value: Value | None) -> str:
    """A 6-byte MAC as aa:bb:cc:dd:ee:ff; '' for empty, all-zero or non-MAC values (loopbacks send zeros)."""
    if not isinstance(value, bytes) or len(value) != 6 or not any(value):
        return ""
    return ":".join(f"{b:02x}" for b in value)


def normalize_mac(text: str) -> str:
    """Any common MAC spelling (aabb.ccdd.eeff, aa-bb-cc-dd-ee-ff, AABBCCDDEEFF, b8d6-f6ff-7390) as aa:bb:..;
    the input unchanged when it is not a MAC."""
    hexdigits = "".join(ch for ch in text.lower() if ch in "0123456789abcdef")
    stripped = "".join(ch for ch in text.lower() if ch not in ".:- ")
    if len(hexdigits) == 12 and stripped == hexdigits:
        return ":".join(hexdigits[i : i + 2] for i in range(0, 12, 2))
    return text


def unmasked(text: str | None) -> str | None:
    """None for empty or masked values (see MASKED_VALUES), else the stripped text."""
    if text is None:
        return None
    stripped = text.strip()
    if not stripped or stripped.lower() in MASKED_VALUES:
        return None
    return stripped


def _network_address(value: Value) -> str:
    """LLDP network-address subtype: first octet is the IANA address family (1 IPv4, 2 IPv6)."""
    if isinstance(value, bytes) and len(value) == 5 and value[0] == 1:
        return str(ipaddress.IPv4Address(value[1:]))
    if isinstance(value, bytes) and len(value) == 17 and value[0] == 2:
        return str(ipaddress.IPv6Address(value[1:]))
    return decode_text(value)


def decode_lldp_id(value: Value | None, subtype: int | None, *, mac_subtype: int, net_subtype: int) -> str:
    if value is None:
        return ""
    if subtype == mac_subtype:
        return decode_mac(value) or decode_text(value)
    if subtype == net_subtype:
        return _network_address(value)
    return decode_text(value)


_IF_STATUS: dict[int, LinkStateValue] = {1: "up", 2: "down", 5: "down", 6: "down", 7: "down"}


def link_state(value: Value | None) -> LinkStateValue:
    """IF-MIB status to ours: up(1); down(2), dormant(5), notPresent(6), lowerLayerDown(7) are down;
    testing(3) and unknown(4) stay unknown."""
    return _IF_STATUS.get(value, "unknown") if isinstance(value, int) else "unknown"


def _int(value: Value | None) -> int | None:
    return value if isinstance(value, int) else None


# --- assembling the snapshot ------------------------------------------------------------------------------------


def build_system(raw: RawSnmpData) -> SwitchSystem:
    uptime = _int(raw.scalars.get(SYS_UPTIME))
    classes = raw.column(ENT_CLASS)
    chassis_rows = sorted(idx for idx, cls in classes.items() if cls == ENT_CLASS_CHASSIS)
    model = serial = None
    if chassis_rows:
        # The first chassis row is the box itself (stacks list one chassis per member; the lowest is the master).
        idx = chassis_rows[0]
        model = unmasked(decode_text(raw.column(ENT_MODEL).get(idx))) or unmasked(
            decode_text(raw.column(ENT_DESCR).get(idx))
        )
        serial = unmasked(decode_text(raw.column(ENT_SERIAL).get(idx)))
    if model is None and JNX_BOX_DESCR in raw.scalars:
        model = unmasked(decode_text(raw.scalars.get(JNX_BOX_DESCR)))
    if serial is None and JNX_BOX_SERIAL in raw.scalars:
        serial = unmasked(decode_text(raw.scalars.get(JNX_BOX_SERIAL)))
    modules = []
    for idx in sorted(i for i, cls in classes.items() if cls == ENT_CLASS_MODULE):
        mod_model = unmasked(decode_text(raw.column(ENT_MODEL).get(idx)))
        mod_serial = unmasked(decode_text(raw.column(ENT_SERIAL).get(idx)))
        if not (mod_model or mod_serial):
            continue  # Arista lists every transceiver lane as a module with nothing in it
        modules.append(
            SwitchModule(
                index=idx[0] if idx else 0,
                name=decode_text(raw.column(ENT_NAME).get(idx)),
                description=decode_text(raw.column(ENT_DESCR).get(idx)),
                model=mod_model,
                serial=mod_serial,
            )
        )
    return SwitchSystem(
        name=unmasked(decode_text(raw.scalars.get(SYS_NAME))),
        description=decode_text(raw.scalars.get(SYS_DESCR)).strip(),
        object_id=decode_text(raw.scalars.get(SYS_OBJECT_ID)),
        model=model,
        serial=serial,
        uptime_s=uptime // 100 if uptime is not None else None,
        modules=tuple(modules),
    )


def build_ports(raw: RawSnmpData) -> list[SwitchPortInfo]:
    names, descrs = raw.column(IF_NAME), raw.column(IF_DESCR)
    high_speeds, speeds = raw.column(IF_HIGH_SPEED), raw.column(IF_SPEED)
    ports = []
    for idx in sorted(set(names) | set(descrs)):
        # ifName is the short CLI name (xe-0/0/0, Ethernet1/49); older or minimal agents only fill ifDescr.
        name = decode_text(names.get(idx)).strip() or decode_text(descrs.get(idx)).strip()
        if not name:
            continue
        speed = _int(high_speeds.get(idx))
        if not speed and _int(speeds.get(idx)):
            # ifHighSpeed is in Mb/s; ifSpeed in b/s saturates at 4294967295 (so >= 4 Gb/s needs ifHighSpeed).
            speed = int(_int(speeds.get(idx)) or 0) // 1_000_000
        ports.append(
            SwitchPortInfo(
                index=idx[0],
                name=name,
                alias=decode_text(raw.column(IF_ALIAS).get(idx)).strip(),
                speed_mbps=speed if speed else None,
                admin_state=link_state(raw.column(IF_ADMIN_STATUS).get(idx)),
                oper_state=link_state(raw.column(IF_OPER_STATUS).get(idx)),
                mac=decode_mac(raw.column(IF_PHYS_ADDRESS).get(idx)),
                if_type=_int(raw.column(IF_TYPE).get(idx)),
            )
        )
    return ports


def _local_port_name(port_num: int, raw: RawSnmpData, if_names: Mapping[int, str]) -> str:
    """lldpRemLocalPortNum -> our interface name.

    The port number is only an index into lldpLocPortTable (RFC 2922); it equals ifIndex on Arista and
    NX-OS but not on Dell OS10 (612 -> ethernet1/1/25) or Huawei (49 -> XGigabitEthernet0/0/1). Juniper puts
    the ifIndex itself in lldpLocPortId ("513" -> xe-0/0/0). So: lldpLocPortId if it names an interface, then
    lldpLocPortId as an ifIndex, then the port number as an ifIndex, then whatever text the agent gave.
    """
    loc_id = decode_text(raw.column(LLDP_LOC_PORT_ID).get((port_num,))).strip()
    known = set(if_names.values())
    if loc_id in known:
        return loc_id
    if loc_id.isdigit() and int(loc_id) in if_names:
        return if_names[int(loc_id)]
    loc_desc = decode_text(raw.column(LLDP_LOC_PORT_DESC).get((port_num,))).strip()
    if loc_desc in known:
        return loc_desc
    if port_num in if_names:
        return if_names[port_num]
    return loc_id or loc_desc or str(port_num)


def build_lldp(raw: RawSnmpData, ports: list[SwitchPortInfo]) -> list[LldpNeighbor]:
    if_names = {p.index: p.name for p in ports}
    chassis = raw.column(LLDP_REM_CHASSIS_ID)
    neighbors = []
    # Row index is (lldpRemTimeMark, lldpRemLocalPortNum, lldpRemIndex). Cumulus 4.2 answers with no rows at all.
    for idx in sorted(chassis, key=lambda i: (i[1:], i[0]) if len(i) == 3 else i):
        if len(idx) != 3:
            continue
        port_num = idx[1]
        chassis_id = decode_lldp_id(
            chassis.get(idx),
            _int(raw.column(LLDP_REM_CHASSIS_SUBTYPE).get(idx)),
            mac_subtype=CHASSIS_SUBTYPE_MAC,
            net_subtype=CHASSIS_SUBTYPE_NETWORK_ADDRESS,
        )
        port_id = decode_lldp_id(
            raw.column(LLDP_REM_PORT_ID).get(idx),
            _int(raw.column(LLDP_REM_PORT_SUBTYPE).get(idx)),
            mac_subtype=PORT_SUBTYPE_MAC,
            net_subtype=PORT_SUBTYPE_NETWORK_ADDRESS,
        )
        neighbors.append(
            LldpNeighbor(
                local_port=_local_port_name(port_num, raw, if_names),
                remote_chassis_id=unmasked(chassis_id) or "",
                remote_port=unmasked(port_id) or "",
                remote_system=unmasked(decode_text(raw.column(LLDP_REM_SYS_NAME).get(idx))) or "",
                remote_port_description=unmasked(decode_text(raw.column(LLDP_REM_PORT_DESC).get(idx))) or "",
            )
        )
    return neighbors


def build_snapshot(raw: RawSnmpData) -> SwitchSnapshot:
    ports = build_ports(raw)
    return SwitchSnapshot(system=build_system(raw), ports=tuple(ports), lldp_neighbors=tuple(build_lldp(raw, ports)))


def snapshot_as_json(snapshot: SwitchSnapshot) -> dict:
    """The JSON shape `switch_poll --json` prints (and the fakes return)."""
    s = snapshot.system
    return {
        "system": {
            "name": s.name,
            "description": s.description,
            "object_id": s.object_id,
            "model": s.model,
            "serial": s.serial,
            "uptime": s.uptime_s,
            "modules": [{"name": m.name, "model": m.model, "serial": m.serial} for m in s.modules],
        },
        "ports": [
            {
                "name": p.name,
                "alias": p.alias,
                "speed_mbps": p.speed_mbps,
                "admin_state": p.admin_state,
                "oper_state": p.oper_state,
                "mac": p.mac,
                "index": p.index,
                "if_type": p.if_type,
            }
            for p in snapshot.ports
        ],
        "lldp_neighbors": [
            {
                "local_port": n.local_port,
                "remote_chassis_id": n.remote_chassis_id,
                "remote_port": n.remote_port,
                "remote_system": n.remote_system,
                "remote_port_description": n.remote_port_description,
            }
            for n in snapshot.lldp_neighbors
        ],
    }
