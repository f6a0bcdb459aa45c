"""InfiniBand discovery: parse `ibnetdiscover -p` (ports report) into observed IB links, and store them.

A ports-report line is one port as the subnet sees it:

    CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' - 'ib-i1l1s01' )
    SW  2052 37 0x506b4b03005c2740 4x ???                                    'ib-i4l1s01'

type, LID, port number, port GUID, width, speed, then for a connected port "-" and the peer's type, LID,
port, GUID and both node descriptions. Every cable appears twice (once from each end); `ib_links` keeps one.
Identity on InfiniBand is the port GUID (LIDs are handed out by the subnet manager and may change).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from cmdb.models import Switch

from .cabling import Observation, device_key, normalize_guid
from .models import ObservationSource, ObservedLink, PollRun, PollStatus

_PORT = r"(?P<{p}type>CA|SW|RT)\s+(?P<{p}lid>\d+)\s+(?P<{p}port>\d+)\s+(?P<{p}guid>0x[0-9a-fA-F]+)"
_LINE = re.compile(
    r"^\s*" + _PORT.format(p="a_") + r"\s+(?P<width>\S+)\s+(?P<speed>\S+)"
    r"(?:\s+-\s+" + _PORT.format(p="b_") + r"\s+\(\s*'(?P<a_name>[^']*)'\s+-\s+'(?P<b_name>[^']*)'\s*\)"
    r"|\s+(?P<solo_name>.*))?\s*$"
)


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
    return IbPort(
        node_type=match[f"{prefix}type"], lid=int(match[f"{prefix}lid"]), port=int(match[f"{prefix}port"]),
        guid="0x" + normalize_guid(match[f"{prefix}guid"]), description=description.strip(),
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
        Observation(switch=rec.local.description, port=str(rec.local.port), remote_chassis_id=rec.peer.guid,
                    remote_port=str(rec.peer.port), remote_system=rec.peer.host, remote_port_guid=rec.peer.guid)
        for rec in records
        if rec.local.node_type == "SW" and rec.peer is not None
    ]


def ibnetdiscover_apply(text: str) -> PollRun:
    """Store a sweep: replace all ibnetdiscover observations with what this report shows. Switch ports are
    linked to the CMDB Switch whose name matches the node description."""
    records = parse_ibnetdiscover_ports(text)
    switches = {device_key(s.name): s for s in Switch.objects.all().only("id", "name")}
    with transaction.atomic():
        run = PollRun.objects.create(kind="ibnetdiscover")
        rows = []
        for rec in records:
            if rec.local.node_type != "SW" or rec.peer is None:
                continue
            switch = switches.get(device_key(rec.local.description))
            rows.append(ObservedLink(
                source=ObservationSource.IBNETDISCOVER, switch=switch,
                local_device=switch.name if switch else rec.local.description, local_port=str(rec.local.port),
                remote_chassis_id=rec.peer.guid, remote_port=str(rec.peer.port), remote_system=rec.peer.host,
                remote_port_description=rec.peer.description, remote_port_guid=rec.peer.guid,
                local_lid=rec.local.lid, remote_lid=rec.peer.lid, poll_run=run,
            ))
        ObservedLink.objects.filter(source=ObservationSource.IBNETDISCOVER).delete()
        ObservedLink.objects.bulk_create(rows, ignore_conflicts=True)
        run.status = PollStatus.OK
        run.finished_at = timezone.now()
        run.ports_seen = len(records)
        run.neighbors_seen = len(rows)
        run.save()
    return run
