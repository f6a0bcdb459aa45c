"""A validated report turned into what reconciliation needs: plain observations with server-side identities,
raw health counters turned into signals, and a digest of exactly that content.

The digest covers only what reconciliation reads. Telemetry that changes every minute (temperature, power,
utilisation) and `collected_at` are left out, so a node whose inventory did not change sends the same digest
every time and takes the cheap path. Health signals are in the digest: a new Xid changes it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from cmdb.models import DriverComponent, LinkState
from cmdb.services.firmware import firmware_canonical, firmware_digest
from cmdb.services.topology import topology_canonical, topology_digest

from ..conf import setting
from .identity import clean_serial, clean_uuid, normalize_pci
from .validation import ReportProblem, json_path

VENDOR_DRIVER_COMPONENT = {"nvidia": "nvidia-driver", "ascend": "ascend-driver", "hygon": "hygon-driver"}
KNOWN_COMPONENTS = frozenset(DriverComponent.values)
# Netdev kinds (from `ip -d link`) that are NIC hardware; bonds, VLANs, bridges and veths are configuration.
# IPoIB netdevs (kind infiniband) are skipped: the HCA itself comes from the `infiniband` section.
HARDWARE_NETDEV_KINDS = {"physical": "ethernet", "ethernet": "ethernet", "roce": "roce"}
# A collector error naming one of these words means the section may be incomplete: nothing of it is flagged
# missing this time (a crashed nvidia-smi must not mark eight healthy cards missing).
ACCELERATOR_COLLECTORS = ("nvidia", "ascend", "npu", "hygon", "dcu", "rocm", "hy-smi", "gpu", "accelerator")
NIC_COLLECTORS = ("nics", "ip-link", "network")
IB_COLLECTORS = ("infiniband", "ibstat", "rdma")
_UP_STATES = {"up", "active", "linkup"}
_DOWN_STATES = {"down", "lowerlayerdown", "dormant", "polling", "init", "armed", "disabled", "notpresent"}


@dataclass(frozen=True)
class Signal:
    """A health observation: graded by HealthPolicy (vendor, kind, code). `fingerprints` identify occurrences:
    an open event grows its count only for fingerprints not counted before."""

    kind: str
    code: str
    message: str
    fingerprints: tuple[str, ...]


@dataclass
class CardObs:
    path: str
    vendor: str
    model: str
    serial: str | None
    serial_raw: str
    uuid: str | None
    index: int | None
    pci_bus_id: str
    driver_version: str
    firmware_version: str
    status: str
    signals: list[Signal] = field(default_factory=list)

    @property
    def identity(self) -> str | None:
        return self.serial or self.uuid


@dataclass
class PortObs:
    name: str
    mac: str = ""
    guid: str = ""
    speed_mbps: int | None = None
    link_state: str = LinkState.UNKNOWN


@dataclass
class NicObs:
    name: str
    kind: str
    section: str  # "nics" or "infiniband": which part of the report it came from
    pci_bus_id: str = ""
    firmware: str = ""
    node_guid: str = ""
    ports: list[PortObs] = field(default_factory=list)


@dataclass(frozen=True)
class LldpObs:
    """One LLDP neighbour as the host sees it (lldpctl): the host interface and what answers on it."""

    local_port: str
    remote_chassis_id: str
    remote_system: str
    remote_port: str
    remote_port_description: str


@dataclass
class Observed:
    """One report, normalised."""

    schema: str
    hostname: str
    collected_at: dt.datetime | None
    agent_version: str
    node_facts: dict[str, Any]
    node_serial: str | None
    cards: list[CardObs]
    nics: list[NicObs]
    software: dict[str, str]
    # Signals not attributable to a reported card, keyed by PCI bus id ('' when unknown): an Xid of a card that
    # fell off the bus names a bus the report no longer lists; reconciliation maps it to the CMDB's card.
    orphan_signals: dict[str, list[Signal]]
    complete_sections: frozenset[str]
    # Collectors that failed this time (name -> error), surfaced as node-level `collector` events.
    collector_errors: dict[str, str] = field(default_factory=dict)
    # The host's view of its links; the switches app turns it into observed links (integrations.switches).
    lldp: list[LldpObs] = field(default_factory=list)
    # The intra-node topology (cmdb.services.topology canonical form); None when the report carries none.
    topology: dict[str, Any] | None = None
    # The node's firmware components (cmdb.services.firmware canonical form); None when the report has no list.
    firmware: list[dict[str, str]] | None = None
    digest: str = ""


def _text(value: Any, limit: int = 100) -> str:
    return str(value).strip()[:limit] if value is not None else ""


def _mac(raw: Any) -> str:
    text = _text(raw, 64).lower().replace("-", ":")
    return text if re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", text) and text != "00:00:00:00:00:00" else ""


def _guid(raw: Any) -> str:
    text = _text(raw, 40).lower()
    if not re.fullmatch(r"(0x)?[0-9a-f]{1,16}", text) or int(text, 16) == 0:
        return ""
    return f"0x{int(text, 16):016x}"


def _link_state(raw: Any) -> str:
    text = _text(raw, 40).lower()
    text = text.split(":", 1)[-1].strip()  # ibstat-style "4: ACTIVE"
    if text in _UP_STATES:
        return LinkState.UP
    if text in _DOWN_STATES:
        return LinkState.DOWN
    return LinkState.UNKNOWN


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value)
    return None


def _node_facts(system: dict[str, Any]) -> dict[str, Any]:
    """Node fields the report states. A null means 'not known', never 'erase': it is left out."""
    facts: dict[str, Any] = {}
    for key in ("cpu_model", "kernel", "bios_version"):
        if system.get(key):
            facts[key] = _text(system[key], 200 if key == "cpu_model" else 100)
    sockets = _int(system.get("cpu_sockets", system.get("cpu_count")))
    if sockets is not None and 0 < sockets < 32768:
        facts["cpu_count"] = sockets
    memory = system.get("memory_gib")
    if isinstance(memory, int | float) and not isinstance(memory, bool) and memory > 0:
        facts["memory_gib"] = round(memory)
    os_name = _text(system.get("os_pretty_name") or "", 100)
    if not os_name and system.get("os_name"):
        name, version = _text(system["os_name"]), _text(system.get("os_version"))
        os_name = name if not version or version in name else f"{name} {version}"[:100]
    if os_name:
        facts["os_name"] = os_name
    return facts


def _xid_signal(event: dict[str, Any]) -> Signal:
    code = str(event.get("xid"))
    when = event.get("occurred_at") or event.get("timestamp") or event.get("timestamp_raw") or ""
    message = _text(event.get("message"), 300)
    # The fingerprint names one occurrence: a re-sent report (spooled by the agent, retried by the network)
    # must not count an Xid twice.
    digest = hashlib.sha256(f"{when}|{message}|{event.get('pid')}".encode()).hexdigest()[:16]
    return Signal("xid", code, f"Xid {code}: {message}" if message else f"Xid {code}", (f"xid:{code}:{digest}",))


def _counter_signals(vendor: str, health: dict[str, Any]) -> list[Signal]:
    """Raw counters -> conditions. A fingerprint carries the counter value, so growth counts as a repeat."""
    out: list[Signal] = []

    def cond(kind: str, message: str, value: Any) -> None:
        out.append(Signal(kind, "", message[:300], (f"{kind}={value}",)))

    volatile_dbe = _int(health.get("ecc_volatile_dbe")) or 0
    aggregate_dbe = _int(health.get("ecc_aggregate_dbe")) or 0
    other_dbe = sum(
        _int(v) or 0
        for k, v in health.items()
        if k.endswith("_dbe") and not k.startswith(("ecc_volatile", "ecc_aggregate", "retired_pages"))
    )
    if volatile_dbe > 0 or other_dbe > 0:
        count = volatile_dbe or other_dbe
        cond("ecc_uncorrectable", f"{count} uncorrectable (double-bit) ECC errors", count)
    elif aggregate_dbe > 0:
        cond(
            "ecc_uncorrectable_aggregate",
            f"{aggregate_dbe} uncorrectable ECC errors over the card's life",
            aggregate_dbe,
        )
    if health.get("remapped_rows_failure") is True:
        cond("remap_failure", "Row remapping failed", True)
    if health.get("remapped_rows_pending") is True:
        cond("remap_pending", "Row remap pending: reset the GPU", True)
    if health.get("retired_pages_pending") is True:
        cond("retired_pages_pending", "Page retirement pending: reset the GPU", True)
    retired = (_int(health.get("retired_pages_sbe")) or 0) + (_int(health.get("retired_pages_dbe")) or 0)
    if retired >= setting("AGENT_RETIRED_PAGES_LIMIT"):
        cond("retired_pages_limit", f"{retired} retired pages (limit {setting('AGENT_RETIRED_PAGES_LIMIT')})", retired)
    if health.get("reset_required") is True:
        cond("reset_required", "The tool reports that a GPU reset is required", True)
    raw = _text(health.get("health_raw"), 40)
    if raw and raw.lower() not in {"ok", "normal", "healthy"}:
        codes = " ".join(str(c) for c in health.get("error_codes") or [])[:200]
        info = _text(health.get("error_info"), 200)
        message = f"{vendor} health {raw}" + (f", codes {codes}" if codes else "") + (f": {info}" if info else "")
        out.append(Signal("vendor_health", raw.lower(), message[:300], (f"vendor_health:{raw.lower()}:{codes}",)))
    return out


def _stub_signals(raw: dict[str, Any], orphan: dict[str, list[Signal]]) -> None:
    """A card the vendor tool did not list (`seen_by_tool: false`: the kernel logged Xids for a PCI address
    nvidia-smi no longer shows, typically Xid 79). It is no identity; its signals go to the CMDB's card at that
    address."""
    health = raw.get("health") if isinstance(raw.get("health"), dict) else {}
    bus = normalize_pci(raw.get("pci_bus_id"))
    for event in health.get("xid_events") or []:
        if isinstance(event, dict) and _int(event.get("xid")) is not None:
            orphan.setdefault(normalize_pci(event.get("pci_bus_id")) or bus, []).append(_xid_signal(event))


def _card(i: int, raw: dict[str, Any], orphan: dict[str, list[Signal]]) -> CardObs:
    health = raw.get("health") if isinstance(raw.get("health"), dict) else {}
    vendor = _text(raw.get("vendor"), 32).lower()
    pci = normalize_pci(raw.get("pci_bus_id"))
    card = CardObs(
        path=json_path(["accelerators", i]),
        vendor=vendor,
        model=_text(raw.get("model")),
        serial=clean_serial(raw.get("serial")),
        serial_raw=_text(raw.get("serial_raw") or raw.get("serial")),
        uuid=clean_uuid(raw.get("uuid")),
        index=_int(raw.get("index")),
        pci_bus_id=pci,
        driver_version=_text(raw.get("driver_version")),
        firmware_version=_text(raw.get("firmware_version")),
        status=_text(health.get("status"), 16).lower() or "unknown",
    )
    for event in health.get("xid_events") or []:
        if not isinstance(event, dict) or _int(event.get("xid")) is None:
            continue
        bus = normalize_pci(event.get("pci_bus_id"))
        if bus and pci and bus != pci:
            orphan.setdefault(bus, []).append(_xid_signal(event))  # filed under the wrong card: re-route
        else:
            card.signals.append(_xid_signal(event))
    card.signals += _counter_signals(vendor, health)
    if not card.signals and card.status in ("failed", "degraded"):
        # The agent saw something this server cannot name; keep its verdict, graded as agent_health.
        reasons = "; ".join(str(r) for r in health.get("reasons") or [])[:250]
        card.signals.append(
            Signal(
                "agent_health",
                card.status,
                f"agent reports {card.status}: {reasons}"[:300],
                (f"agent_health:{card.status}:{reasons}",),
            )
        )
    return card


def _nics(payload: dict[str, Any]) -> list[NicObs]:
    out: list[NicObs] = []
    netdevs: dict[str, list[str]] = {}
    for raw in payload.get("infiniband") or []:
        ports = []
        for port in raw.get("ports") or []:
            if not isinstance(port, dict) or port.get("port") is None:
                continue
            rate = port.get("rate_gbps")
            speed = int(rate * 1000) if isinstance(rate, int | float) and not isinstance(rate, bool) else None
            ports.append(
                PortObs(
                    name=_text(port["port"], 64),
                    guid=_guid(port.get("port_guid")),
                    speed_mbps=speed,
                    link_state=_link_state(port.get("state")),
                )
            )
        ethernet = any(
            _text(p.get("link_layer")).lower() == "ethernet" for p in raw.get("ports") or [] if isinstance(p, dict)
        )
        out.append(
            NicObs(
                name=_text(raw["ca"], 64),
                kind="roce" if ethernet else "infiniband",
                section="infiniband",
                pci_bus_id=normalize_pci(raw.get("pci_bus_id")),
                firmware=_text(raw.get("firmware")),
                node_guid=_guid(raw.get("node_guid")),
                ports=ports,
            )
        )
        netdevs[out[-1].name] = [_text(n, 64) for n in raw.get("netdevs") or [] if isinstance(n, str)]
    rdma = list(out)
    for raw in payload.get("nics") or []:
        kind = HARDWARE_NETDEV_KINDS.get(_text(raw.get("kind"), 32).lower())
        if kind is None or raw.get("name") in (None, "", "lo"):
            continue
        speed = _int(raw.get("speed_mbps"))
        out.append(
            NicObs(
                name=_text(raw["name"], 64),
                kind=kind,
                section="nics",
                pci_bus_id=normalize_pci(raw.get("pci_bus_id")),
                ports=[
                    PortObs(
                        name="1",
                        mac=_mac(raw.get("mac")),
                        speed_mbps=speed if speed and speed > 0 else None,
                        link_state=_link_state(raw.get("state")),
                    )
                ],
            )
        )
    _roce_pair(rdma, [n for n in out if n.section == "nics"], netdevs)
    return out


def _roce_pair(rdma: list[NicObs], netdev_nics: list[NicObs], netdevs: dict[str, list[str]]) -> None:
    """A RoCE RDMA device (mlx5_0) and its netdev (ens1f0np0) are one port: give the RDMA port the netdev's MAC
    (ibstat prints none), so the cabling plan, made on the RDMA device, matches LLDP seen on the netdev."""
    by_name = {n.name: n for n in netdev_nics}
    by_pci = {n.pci_bus_id: n for n in netdev_nics if n.pci_bus_id}
    for nic in rdma:
        if nic.kind != "roce" or len(nic.ports) != 1 or nic.ports[0].mac:
            continue
        named = [by_name[name] for name in netdevs.get(nic.name, []) if name in by_name]
        twin = named[0] if len(named) == 1 else by_pci.get(nic.pci_bus_id) if nic.pci_bus_id else None
        if twin is not None and twin.ports and twin.ports[0].mac:
            nic.ports[0].mac = twin.ports[0].mac


def _software(payload: dict[str, Any], cards: list[CardObs]) -> dict[str, str]:
    software: dict[str, str] = {}
    for raw in payload.get("software") or []:
        component, version = _text(raw.get("component"), 32).lower(), _text(raw.get("version"), 64)
        if component in KNOWN_COMPONENTS and version:
            software[component] = version
    # The driver version each card reports is the installed driver when the agent did not list it separately.
    for card in cards:
        component = VENDOR_DRIVER_COMPONENT.get(card.vendor)
        if component and card.driver_version and component not in software:
            software[component] = card.driver_version[:64]
    return software


def _lldp(payload: dict[str, Any]) -> list[LldpObs]:
    neighbours = set()
    for raw in payload.get("lldp_neighbors") or []:
        if isinstance(raw, dict) and _text(raw.get("local_port"), 64):
            neighbours.add(
                LldpObs(
                    local_port=_text(raw.get("local_port"), 64),
                    remote_chassis_id=_text(raw.get("remote_chassis_id"), 64),
                    remote_system=_text(raw.get("remote_system"), 253),
                    remote_port=_text(raw.get("remote_port"), 100),
                    remote_port_description=_text(raw.get("remote_port_description"), 200),
                )
            )
    return sorted(neighbours, key=lambda n: (n.local_port, n.remote_chassis_id, n.remote_port))


def _complete_sections(payload: dict[str, Any]) -> frozenset[str]:
    """Sections present and collected without error: only those may flag things missing."""
    failed = " ".join(
        _text(e.get("collector"), 64).lower() for e in payload.get("collector_errors") or [] if isinstance(e, dict)
    )
    sections = set()
    if "accelerators" in payload and not any(word in failed for word in ACCELERATOR_COLLECTORS):
        sections.add("accelerators")
    if "nics" in payload and not any(word in failed for word in NIC_COLLECTORS):
        sections.add("nics")
    if "infiniband" in payload and not any(word in failed for word in IB_COLLECTORS):
        sections.add("infiniband")
    return frozenset(sections)


def _check_duplicates(cards: list[CardObs]) -> None:
    seen: dict[tuple[str, str], str] = {}
    errors = []
    for card in cards:
        for what, value in (("serial", card.serial), ("uuid", card.uuid), ("index", card.index)):
            if value is None:
                continue
            first = seen.setdefault((what, str(value)), card.path)
            if first != card.path:
                errors.append(
                    {"path": f"{card.path}.{what}", "message": f"Duplicate {what} {value!r}: also at {first}.{what}."}
                )
    if errors:
        raise ReportProblem(
            400, "duplicate_identity", "Two accelerators in one report share an identity.", errors=errors
        )


def report_normalize(payload: dict[str, Any], schema: str) -> Observed:
    """Validated payload -> Observed. Raises ReportProblem(400) for contradictions a schema cannot express."""
    orphan: dict[str, list[Signal]] = {}
    cards = []
    for i, raw in enumerate(payload.get("accelerators") or []):
        unidentified = raw.get("serial") is None and raw.get("uuid") is None and raw.get("index") is None
        if raw.get("seen_by_tool") is False or unidentified:
            _stub_signals(raw, orphan)
        else:
            cards.append(_card(i, raw, orphan))
    _check_duplicates(cards)
    for event in payload.get("xid_events") or []:  # events the agent could not place on a card
        if isinstance(event, dict) and _int(event.get("xid")) is not None:
            bus = normalize_pci(event.get("pci_bus_id"))
            target = next((c for c in cards if bus and c.pci_bus_id == bus), None)
            (target.signals if target else orphan.setdefault(bus, [])).append(_xid_signal(event))
    for bus, signals in list(orphan.items()):
        target = next((c for c in cards if bus and c.pci_bus_id == bus), None)
        if target is not None:
            target.signals += signals
            del orphan[bus]
    system = payload.get("system") if isinstance(payload.get("system"), dict) else {}
    if not isinstance(payload.get("hostname"), str) or not payload["hostname"].strip():
        raise ReportProblem(
            400,
            "invalid_report",
            "The report names no host.",
            errors=[{"path": "$.hostname", "message": "a hostname is required"}],
        )
    collected = payload.get("collected_at")
    try:
        collected_at = parse_datetime(collected) if isinstance(collected, str) else None
    except ValueError:  # well-formed but impossible (month 13, hour 25): parse_datetime raises instead of None
        collected_at = None
    if isinstance(collected, str) and collected_at is None:
        raise ReportProblem(
            400,
            "invalid_report",
            "collected_at is not an ISO 8601 date-time.",
            errors=[{"path": "$.collected_at", "message": f"{collected[:64]!r} is not a date-time"}],
        )
    if collected_at is not None and timezone.is_naive(collected_at):
        collected_at = timezone.make_aware(collected_at, dt.UTC)  # the schema asks for Z; the fallback does not
    observed = Observed(
        schema=schema,
        hostname=_text(payload.get("hostname"), 253).lower(),
        collected_at=collected_at,
        agent_version=_text(payload.get("agent_version"), 32),
        node_facts=_node_facts(system),
        node_serial=clean_serial(system.get("serial")),
        cards=cards,
        nics=_nics(payload),
        software=_software(payload, cards),
        orphan_signals=orphan,
        complete_sections=_complete_sections(payload),
        collector_errors={
            _text(e.get("collector"), 32).lower(): _text(e.get("error"), 300)
            for e in payload.get("collector_errors") or []
            if isinstance(e, dict) and e.get("collector")
        },
        lldp=_lldp(payload),
        topology=topology_canonical(payload["topology"]) if isinstance(payload.get("topology"), dict) else None,
        firmware=firmware_canonical(payload["firmware"]) if isinstance(payload.get("firmware"), list) else None,
    )
    observed.digest = observed_digest(observed)
    return observed


def _signals(signals: list[Signal]) -> list[Any]:
    return [(s.kind, s.code, s.message, s.fingerprints) for s in signals]


def host_view_empty(observed: Observed) -> bool:
    """Whether the report gives discovery nothing: no LLDP neighbour (and a working lldp collector, whose failure
    says nothing) and no InfiniBand HCA or port GUID to resolve links against."""
    if observed.lldp or any("lldp" in name for name in observed.collector_errors):
        return False
    return not any(
        nic.section == "infiniband" or nic.node_guid or any(port.guid for port in nic.ports) for nic in observed.nics
    )


def observed_digest(observed: Observed) -> str:
    """SHA-256 over every field reconciliation reads (built by hand: dataclasses.asdict costs more than all the
    rest of an unchanged report's handling)."""
    content = [
        observed.schema,
        observed.hostname,
        observed.agent_version,
        sorted(observed.node_facts.items()),
        observed.node_serial,
        [
            (
                c.vendor,
                c.model,
                c.serial,
                c.serial_raw,
                c.uuid,
                c.index,
                c.pci_bus_id,
                c.driver_version,
                c.firmware_version,
                c.status,
                _signals(c.signals),
            )
            for c in observed.cards
        ],
        [
            (
                n.name,
                n.kind,
                n.section,
                n.pci_bus_id,
                n.firmware,
                n.node_guid,
                [(p.name, p.mac, p.guid, p.speed_mbps, p.link_state) for p in n.ports],
            )
            for n in observed.nics
        ],
        sorted(observed.software.items()),
        sorted((bus, _signals(signals)) for bus, signals in observed.orphan_signals.items()),
        sorted(observed.complete_sections),
        sorted(observed.collector_errors.items()),
        [tuple(n.__dict__.values()) for n in observed.lldp],
        # Only when present, so the digest of a report without topology is the one older servers stored.
        *([topology_digest(observed.topology)] if observed.topology is not None else []),
        *([["firmware", firmware_digest(observed.firmware)]] if observed.firmware is not None else []),
    ]
    blob = json.dumps(content, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()
