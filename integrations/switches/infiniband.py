"""InfiniBand discovery: parse `ibnetdiscover -p` (ports report) into observed IB links, and store them.

A ports-report line is one port as the subnet sees it:

    CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' - 'ib-i1l1s01' )
    SW  2052 37 0x506b4b03005c2740 4x ???                                    'ib-i4l1s01'

type, LID, port number, port GUID, width, speed, then for a connected port "-" and the peer's type, LID,
port, GUID and both node descriptions. Every cable appears twice (once from each end); `ib_links` keeps one.
Identity on InfiniBand is the port GUID (LIDs are handed out by the subnet manager and may change).

A host end (CA) is matched to the CMDB's HCA port - which the node agent's report fills from ibstat - by port
GUID, else by node GUID + port number (port 1 of a ConnectX HCA carries the node GUID; imports may know only
node GUIDs). GUIDs compare by value (`cabling.canonical_guid`): ibnetdiscover prints `0x` + 16 digits, imports
and other tools drop the prefix, the padding or use upper case.

A site may run several subnets (a compute and a storage fabric, each with its own subnet manager), swept one at a
time: a sweep replaces only its own subnet's observations (`_sweep_scope`). The ports report names no subnet -
no subnet prefix, no SM LID, and those would not tell subnets apart anyway (fe80:: and LID 1 are the defaults on
every subnet) - so a subnet is known by its switches: the ones the report lists, the CMDB fabric they are in,
and the previous sweep that saw them.
"""

from __future__ import annotations

import logging
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from cmdb.models import Fabric, NicPort, Node, Switch
from gpuops.context import ChangeSource, change_context

from .cabling import Observation, canonical_guid, device_key
from .models import ObservationSource, ObservedLink, PollRun, PollStatus
from .observations import observations_sync

# The GUID column is 0x-prefixed in every infiniband-diags release seen; a bare hex GUID is accepted too.
_PORT = r"(?P<{p}type>CA|SW|RT)\s+(?P<{p}lid>\d+)\s+(?P<{p}port>\d+)\s+(?P<{p}guid>(?:0x)?[0-9a-fA-F]+)"
_LINE = re.compile(
    r"^\s*" + _PORT.format(p="a_") + r"\s+(?P<width>\S+)\s+(?P<speed>\S+)"
    r"(?:\s+-\s+" + _PORT.format(p="b_") + r"\s+\(\s*'(?P<a_name>[^']*)'\s+-\s+'(?P<b_name>[^']*)'\s*\)"
    r"|\s+(?P<solo_name>.*))?\s*$"
)
# PostgreSQL advisory lock id that queues sweeps one behind the other (see `_sweep_lock`).
SWEEP_LOCK_ID = zlib.crc32(b"gpuops.integrations.switches.ibnetdiscover_apply")
SHOWN = 10  # switches named in a refusal or warning

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class IbPort:
    node_type: str  # CA (HCA), SW (switch), RT (router)
    lid: int
    port: int
    guid: str  # port GUID, 0x + 16 hex digits
    description: str  # node description: "o0001 HCA-1", "ib-i1l1s01"

    @property
    def host(self) -> str:
        """The host name of an HCA ("o0001 HCA-1" -> "o0001"); the whole description for a switch."""
        return self.description.split()[0] if self.node_type == "CA" and self.description else self.description


@dataclass(frozen=True)
class IbPortRecord:
    local: IbPort
    width: str
    speed: str  # SDR..NDR/XDR, or ??? when the port is down
    peer: IbPort | None


@dataclass(frozen=True)
class IbLink:
    a: IbPort  # the switch end when there is one
    b: IbPort
    width: str
    speed: str


def _port(match: re.Match, prefix: str, description: str) -> IbPort:
    raw = match[f"{prefix}guid"]
    return IbPort(
        node_type=match[f"{prefix}type"],
        lid=int(match[f"{prefix}lid"]),
        port=int(match[f"{prefix}port"]),
        guid=canonical_guid(raw) or raw.lower(),
        description=description.strip(),
    )


def parse_ibnetdiscover_ports(text: str) -> list[IbPortRecord]:
    """Every port line of `ibnetdiscover -p`; unparseable lines (headers, warnings) are skipped."""
    records = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        if match["b_type"]:
            local = _port(match, "a_", match["a_name"])
            peer: IbPort | None = _port(match, "b_", match["b_name"])
        else:
            # Unconnected port: the rest of the line is the node description, quoted or not.
            local = _port(match, "a_", (match["solo_name"] or "").strip().strip("'"))
            peer = None
        records.append(IbPortRecord(local=local, width=match["width"], speed=match["speed"], peer=peer))
    return records


def ib_links(records: list[IbPortRecord]) -> list[IbLink]:
    """One IbLink per cable (the report lists each from both ends), switch end first."""
    links: dict[tuple, IbLink] = {}
    for rec in records:
        if rec.peer is None:
            continue
        a, b = rec.local, rec.peer
        if a.node_type != "SW" and b.node_type == "SW":
            a, b = b, a
        key = tuple(sorted([(a.guid, a.port), (b.guid, b.port)]))
        links.setdefault(key, IbLink(a=a, b=b, width=rec.width, speed=rec.speed))
    return list(links.values())


def ib_observations(records: list[IbPortRecord]) -> list[Observation]:
    """What each switch port sees, in the cabling validator's terms (switch = node description)."""
    return [
        Observation(
            switch=rec.local.description,
            port=str(rec.local.port),
            remote_chassis_id=rec.peer.guid,
            remote_port=str(rec.peer.port),
            remote_system=rec.peer.host,
            remote_port_guid=rec.peer.guid,
        )
        for rec in records
        if rec.local.node_type == "SW" and rec.peer is not None
    ]


class HcaPorts:
    """CMDB HCA ports by canonical port GUID and by (canonical node GUID, port number)."""

    def __init__(self, rows: Iterable[tuple[int, int, str, str, str]]) -> None:
        """rows: (NicPort id, node id, port name, port GUID, NIC node GUID)."""
        self.by_port_guid: dict[str, tuple[int, int]] = {}
        self.by_node_guid: dict[tuple[str, str], tuple[int, int]] = {}
        for port_id, node_id, name, guid, node_guid in rows:
            if g := canonical_guid(guid):
                self.by_port_guid.setdefault(g, (port_id, node_id))
            if g := canonical_guid(node_guid):
                self.by_node_guid.setdefault((g, name), (port_id, node_id))

    @classmethod
    def load(cls) -> HcaPorts:
        # One pass over every port with a GUID, compared by value in Python: CMDB spellings vary (see the
        # module docstring), so an indexed `guid IN (...)` would miss ports. ~100k rows at fleet scale, per sweep.
        rows = NicPort.objects.filter(Q(guid__gt="") | Q(nic__node_guid__gt="")).values_list(
            "pk", "nic__node_id", "name", "guid", "nic__node_guid"
        )
        return cls(rows)

    def find(self, guid: str, port: int | str) -> tuple[int, int] | None:
        """(NicPort id, node id) of the HCA port with this port GUID, else of port `port` of the HCA with this
        node GUID."""
        g = canonical_guid(guid)
        if not g:
            return None
        return self.by_port_guid.get(g) or self.by_node_guid.get((g, str(port)))


class SweepOutsideFabric(ValueError):
    """A sweep meant for a fabric saw none of its switches: usually another subnet (HCA port) was swept."""


@dataclass(frozen=True)
class SeenSwitch:
    """A switch whose ports the report lists, and the CMDB switch named like its node description."""

    guid: str
    description: str
    switch: Switch | None

    def __str__(self) -> str:
        if self.switch is None:
            return f"'{self.description}' {self.guid} (not in the CMDB)"
        return f"{self.switch.name} ({self.switch.fabric.name if self.switch.fabric_id else 'no fabric'})"


def cmdb_switches() -> dict[str, Switch]:
    """CMDB switches by `device_key` of their name, with their fabric."""
    rows = Switch.objects.select_related("fabric").only("id", "name", "fabric__name")
    return {device_key(s.name): s for s in rows}


def switches_seen(records: Iterable[IbPortRecord], switches: Mapping[str, Switch]) -> list[SeenSwitch]:
    """The sweep's switches, one per node GUID: those with ports in the report (a switch that is only some
    port's peer is not listed by this report)."""
    seen: dict[str, SeenSwitch] = {}
    for rec in records:
        if rec.local.node_type == "SW" and rec.local.guid not in seen:
            switch = switches.get(device_key(rec.local.description))
            seen[rec.local.guid] = SeenSwitch(rec.local.guid, rec.local.description, switch)
    return list(seen.values())


def _named(items: Sequence[object]) -> str:
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return (", ".join(str(item) for item in items[:SHOWN]) or "no switch") + more


def _by_fabric(seen: Sequence[SeenSwitch]) -> dict[Fabric, list[str]]:
    """The names of the seen CMDB switches that are in a fabric, by fabric."""
    fabrics: dict[Fabric, list[str]] = {}
    for s in seen:
        if s.switch is not None and s.switch.fabric is not None:
            fabrics.setdefault(s.switch.fabric, []).append(s.switch.name)
    return fabrics


def sweep_fabric_check(seen: Sequence[SeenSwitch], fabric: Fabric) -> None:
    """Refuse to store a sweep as `fabric`'s when it saw none of the fabric's switches."""
    if not any(s.switch is not None and s.switch.fabric_id == fabric.pk for s in seen):
        raise SweepOutsideFabric(
            f"fabric {fabric.name}: the sweep saw none of its switches, it saw {_named(seen)}. Was another subnet "
            "swept (ibnetdiscover on the wrong HCA port, -C/-P)? Nothing stored."
        )


def ibnetdiscover_apply(text: str, *, task_id: str = "", fabric: Fabric | None = None) -> PollRun:
    """Store a sweep: make the ibnetdiscover observations of the swept subnet exactly what this report shows
    (`_sweep_scope`: other subnets' observations are left alone). Switch ports are linked to the CMDB Switch whose
    name matches the node description, host ends to the CMDB's HCA port (`HcaPorts.find`); an HCA the CMDB
    learns later is linked when its node's agent report arrives (`ib_links_resolve_node`).

    `fabric` says which CMDB fabric the subnet is; a report with none of its switches raises SweepOutsideFabric.

    A cable seen again keeps its row (new LIDs are refreshed without a record: the subnet manager hands them
    out); an observation that appeared or disappeared, or whose peer description changed, gets a change record
    (source integration, correlation id `task_id` when a worker ran it, else the caller's). Overlapping sweeps
    store one after the other (`_sweep_lock`)."""
    records = parse_ibnetdiscover_ports(text)
    switches = cmdb_switches()
    seen = switches_seen(records, switches)
    if fabric is not None:
        sweep_fabric_check(seen, fabric)
    hcas = HcaPorts.load()
    with change_context(source=ChangeSource.INTEGRATION, correlation_id=task_id or None), transaction.atomic():
        _sweep_lock()
        run = PollRun.objects.create(kind="ibnetdiscover", task_id=task_id)
        wanted: dict[tuple[str, str, str, str], ObservedLink] = {}
        for rec in records:
            if rec.local.node_type != "SW" or rec.peer is None:
                continue
            switch = switches.get(device_key(rec.local.description))
            hca = hcas.find(rec.peer.guid, rec.peer.port) if rec.peer.node_type == "CA" else None
            row = ObservedLink(
                source=ObservationSource.IBNETDISCOVER,
                switch=switch,
                local_device=switch.name if switch else rec.local.description,
                local_port=str(rec.local.port),
                remote_chassis_id=rec.peer.guid,
                remote_port=str(rec.peer.port),
                remote_system=rec.peer.host,
                remote_port_description=rec.peer.description,
                remote_port_guid=rec.peer.guid,
                local_lid=rec.local.lid,
                remote_lid=rec.peer.lid,
                poll_run=run,
                nic_port_id=hca[0] if hca else None,
                node_id=hca[1] if hca else None,
            )
            wanted.setdefault(_key(row), row)
        stored = ObservedLink.objects.filter(source=ObservationSource.IBNETDISCOVER)
        old = {_key(row): row for row in stored.filter(_sweep_scope(seen, fabric, run))}
        result = observations_sync(
            old=old,
            wanted=wanted,
            reason=f"ibnetdiscover sweep #{run.pk}",
            resolution=("switch", "nic_port", "node", "local_lid", "remote_lid"),
            announced=("remote_system", "remote_port_description"),
            touch={"poll_run": run},
        )
        run.status = PollStatus.OK
        run.finished_at = timezone.now()
        run.ports_seen = len(records)
        run.neighbors_seen = len(wanted)
        run.save()
    logger.info(
        "ibnetdiscover sweep #%s: %d switches, %d observations (%d new, %d gone)",
        run.pk,
        len(seen),
        len(wanted),
        result.created,
        result.removed,
    )
    return run


def _sweep_scope(seen: Sequence[SeenSwitch], fabric: Fabric | None, run: PollRun) -> Q:
    """The stored observations a sweep replaces: those of its subnet's switches.

    - the switches it saw: by CMDB switch, else by node description (what `local_device` holds; the rows keep no
      node GUID);
    - the other switches of its CMDB fabric: `fabric`, else the one fabric of the CMDB switches it saw - a switch
      powered off is not in the report, but still in its fabric. When they are in several fabrics (a switch
      recorded in the wrong one, or moved to this subnet) no fabric is taken: that would empty another
      fabric's observations;
    - of switches without a fabric (not in the CMDB, or in no fabric): those the subnet's previous sweep stored,
      i.e. the poll run that last stored observations of the switches this sweep saw. When that is several runs
      (a switch came over from another subnet), none.
    A switch that was not seen stays in scope only by these rules, so another subnet's observations are kept.
    """
    ids = {s.switch.pk for s in seen if s.switch is not None}
    names = {s.description for s in seen} | {s.switch.name for s in seen if s.switch is not None}
    mine = Q(switch_id__in=ids) | Q(local_device__in=names)
    scope = mine
    fabrics = _by_fabric(seen)
    if fabric is None and len(fabrics) == 1:
        (fabric,) = fabrics
    elif len(fabrics) > 1:
        described = "; ".join(f"{f.name}: {_named(fabrics[f])}" for f in sorted(fabrics, key=lambda f: f.name))
        keeps = f"as fabric {fabric.name}" if fabric else "observations of switches it did not see are kept"
        logger.warning(
            "ibnetdiscover sweep #%s saw switches of several fabrics (%s); %s. A switch in the wrong "
            "fabric in the CMDB, or moved to this subnet?",
            run.pk,
            described,
            keeps,
        )
    if fabric is not None:
        scope |= Q(switch__fabric=fabric)
    previous = set(
        ObservedLink.objects.filter(mine, source=ObservationSource.IBNETDISCOVER)
        .exclude(poll_run=None)
        .order_by()
        .values_list("poll_run", flat=True)
        .distinct()
    )
    if len(previous) == 1:
        scope |= Q(poll_run__in=previous) & (Q(switch=None) | Q(switch__fabric=None))
    elif previous:
        logger.warning(
            "ibnetdiscover sweep #%s: the switches it saw were last stored by sweeps %s; observations "
            "of switches without a fabric that it did not see are kept",
            run.pk,
            ", ".join(f"#{pk}" for pk in sorted(previous)),
        )
    return scope


def _sweep_lock() -> None:
    """Queue behind any sweep still storing (held until the caller's transaction ends), then read what it committed.

    Overlapping sweeps (cron plus a manual run) would otherwise both insert the same new observations and the
    second would fail on the unique constraint, or read a scope (`_sweep_scope`) the other is rewriting. The
    report names no subnet and no CMDB Fabric (which may not exist yet), so one advisory lock serves all sweeps,
    of every subnet: no row has to exist and nothing else is blocked. SQLite needs none: its transactions take the
    write lock when they begin (IMMEDIATE).
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [SWEEP_LOCK_ID])


def _key(row: ObservedLink) -> tuple[str, str, str, str]:
    """An InfiniBand observation's identity: the switch port and the peer's port GUID + port number (the
    unique constraint's columns)."""
    return (row.local_device, row.local_port, row.remote_chassis_id, row.remote_port)


def ib_links_resolve_node(node: Node, ports: Iterable[NicPort]) -> int:
    """Point the ibnetdiscover observations of `node`'s HCA ports at those ports, by the GUIDs the CMDB holds
    now, and unlink observations whose GUID the node no longer has (a replaced HCA). Returns how many changed.

    Called for every applied agent report (the agent is where HCA GUIDs come from, often after the sweep that
    saw the cable), inside the caller's transaction: one read, at most one write.
    """
    ports = list(ports)
    hcas = HcaPorts((p.pk, node.pk, p.name, p.guid, p.nic.node_guid) for p in ports)
    guids = set(hcas.by_port_guid) | {g for g, _ in hcas.by_node_guid}
    rows = (
        ObservedLink.objects.filter(source=ObservationSource.IBNETDISCOVER)
        .filter(Q(remote_port_guid__in=guids) | Q(node=node))
        .only("id", "remote_port_guid", "remote_port", "nic_port", "node")
    )
    changed = []
    for row in rows:
        hca = hcas.find(row.remote_port_guid, row.remote_port)
        if hca is None and row.node_id != node.pk:
            continue
        port_id, node_id = hca if hca else (None, None)
        if (row.nic_port_id, row.node_id) != (port_id, node_id):
            row.nic_port_id, row.node_id = port_id, node_id
            changed.append(row)
    if changed:
        ObservedLink.objects.bulk_update(changed, ["nic_port", "node"])
    return len(changed)
