"""Cabling validation: planned links vs what is observed - by the switches (LLDP, ibnetdiscover) and by the
nodes (host LLDP). Pure functions over dataclasses - no Django - so the rules can be tested exhaustively (see
the Hypothesis test).

Every switch port that is planned or observed gets exactly one Finding:
- ok:               the planned peer is what the port sees;
- missing:          planned, but the port sees nothing (`elsewhere`: where the planned peer's host says its
                    cable lands instead);
- miswired:         planned X, the port sees Y (a known endpoint); `swap_partner` names the other port when two
                    cables are crossed (Y is planned at P2 and P2 sees X). Also when the switch's and the host's
                    view of a cable disagree (`conflict` names both), whatever the plan says;
- unexpected:       nothing planned, the port sees a known endpoint;
- unknown_neighbor: the port sees something no inventory record identifies (planned or not), or a host reports
                    a switch inventory does not know (the finding is named after what the host was told).
On a rail-optimised fabric a finding also carries `rail_violation` when the node HCA it sees (or, for
missing links, was planned to see) belongs to another rail than the leaf: "HCA i of every node lands on rail
leaf i".

A link seen from one side only is as good as one seen from both. Planned ports of switches that were never
polled are judged only when there is evidence about them (the port was observed, or the planned peer's host
reported where its cable is): no observation is not evidence of absence.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from .snmp_decode import normalize_mac


class FindingKind(StrEnum):
    OK = "ok"
    MISSING = "missing"
    MISWIRED = "miswired"
    UNEXPECTED = "unexpected"
    UNKNOWN_NEIGHBOR = "unknown_neighbor"


@dataclass(frozen=True, order=True)
class PortRef:
    device: str
    port: str

    def __str__(self) -> str:
        return f"{self.device}:{self.port}"


@dataclass(frozen=True)
class Endpoint:
    """One end of a cable that inventory knows: a node NIC port or a switch port, with its identities."""

    device: str
    port: str
    kind: str = "node"  # node | switch
    macs: frozenset[str] = frozenset()
    guids: frozenset[str] = frozenset()
    hca: str = ""  # NIC/HCA device name (mlx5_3) for node ports
    rail: int | None = None  # Nic.rail for node ports, Switch.rail for switch ports
    aliases: frozenset[str] = frozenset()  # other names LLDP may report for the port (ifname, NIC name)

    @property
    def ref(self) -> PortRef:
        return PortRef(self.device, self.port)

    def __str__(self) -> str:
        return f"{self.device}:{self.port}"


@dataclass(frozen=True)
class SwitchInfo:
    name: str
    rail: int | None = None
    scalable_unit: int | None = None


@dataclass(frozen=True)
class PlannedLink:
    """A planned cable seen from a switch port: `switch:port` should see `peer`."""

    switch: str
    port: str
    peer: Endpoint


class View(StrEnum):
    SWITCH = "switch"  # the switch's neighbour table (LLDP by SNMP or CLI), or ibnetdiscover
    HOST = "host"  # the node's lldpd: the switch port its interface is plugged into


@dataclass(frozen=True)
class Observation:
    """What `switch:port` sees: an LLDP neighbour or an InfiniBand peer.

    `peer` is the far end when whoever observed already identified it (a host knows its own interface; an HCA
    port matched by GUID at ingest). `switch_known` is False when a host names a switch inventory does not
    know; `switch`/`port` are then what the host was told.
    """

    switch: str
    port: str
    remote_chassis_id: str = ""
    remote_port: str = ""
    remote_system: str = ""
    remote_port_description: str = ""
    remote_port_guid: str = ""
    view: View = View.SWITCH
    peer: Endpoint | None = None
    switch_known: bool = True

    def __str__(self) -> str:
        who = self.remote_system or self.remote_chassis_id or self.remote_port_guid or "?"
        return f"{who}:{self.remote_port or '?'}"


@dataclass(frozen=True)
class Finding:
    kind: FindingKind
    switch: str
    port: str
    expected: Endpoint | None = None
    found: Endpoint | None = None
    observed: Observation | None = None
    swap_partner: PortRef | None = None
    rail_violation: str = ""
    conflict: str = ""  # the switch's and the host's view disagree (kind miswired)
    elsewhere: PortRef | None = None  # the port where the planned peer's host reports its cable instead

    @property
    def is_problem(self) -> bool:
        return self.kind != FindingKind.OK or bool(self.rail_violation)

    @property
    def message(self) -> str:
        here = f"{self.switch}:{self.port}"
        if self.kind == FindingKind.OK:
            text = f"{here} ok ({self.expected})"
        elif self.kind == FindingKind.MISSING:
            text = f"{here} missing: expected {self.expected}, sees nothing"
        elif self.conflict:
            text = f"{here} miswired: the views disagree: {self.conflict}"
            if self.expected:
                text += f" (expected {self.expected})"
        elif self.kind == FindingKind.MISWIRED:
            text = f"{here} miswired: expected {self.expected}, found {self.found}"
            if self.swap_partner:
                text += f" (crossed with {self.swap_partner})"
        elif self.kind == FindingKind.UNEXPECTED:
            text = f"{here} unexpected: found {self.found}, nothing planned"
        elif self.observed is not None and not self.observed.switch_known:
            text = f"{here} unknown neighbour: {self.found or self.observed} reports a switch inventory does not know"
        else:
            text = f"{here} unknown neighbour {self.observed}"
            if self.expected:
                text += f" (expected {self.expected})"
        if self.elsewhere and self.expected:
            text += f"; its host reports it on {self.elsewhere}"
        return f"{text}; {self.rail_violation}" if self.rail_violation else text


_ABBREVIATIONS = (
    ("tengigabitethernet", "te"),
    ("gigabitethernet", "gi"),
    ("fastethernet", "fa"),
    ("ethernet", "eth"),
    ("hundredgige", "hu"),
    ("fortygigabitethernet", "fo"),
    ("port-channel", "po"),
)


def port_key(name: str) -> str:
    """A spelling-insensitive port name: `Ethernet1/1`, `Eth1/1`, `eth 1/1` and `Et1/1` compare equal."""
    key = re.sub(r"\s+", "", name.strip().lower())
    for long, short in _ABBREVIATIONS:
        if key.startswith(long):
            return short + key[len(long) :]
    if key.startswith("et") and not key.startswith("eth") and key[2:3].isdigit():
        return "eth" + key[2:]
    return key


def device_key(name: str) -> str:
    """Host names compare without case and without the domain (lldpd sends the FQDN, the CMDB the short)."""
    return name.strip().lower().split(".")[0]


def normalize_guid(text: str) -> str:
    digits = text.lower().removeprefix("0x").replace(":", "")
    return digits.zfill(16) if digits and all(c in "0123456789abcdef" for c in digits) else ""


def canonical_guid(text: str) -> str:
    """A GUID as `0x` + 16 lowercase hex digits, the way ibstat/the agent print it; '' for no GUID (empty, not hex,
    longer than 64 bits, or zero). GUIDs compare by value: `7CFE:9003:003B:4BDE`, `0x7cfe9003003b4bde` and an
    unpadded `0x2c9020040f161` are spellings seen in imports and tool versions."""
    digits = normalize_guid(text.strip())
    if not digits or len(digits) > 16 or not int(digits, 16):
        return ""
    return "0x" + digits


class Inventory:
    """Resolves an observation to a known Endpoint: by port MAC, by port GUID, by (system name, port name)."""

    def __init__(self, endpoints: Iterable[Endpoint]) -> None:
        self.by_mac: dict[str, Endpoint] = {}
        self.by_guid: dict[str, Endpoint] = {}
        self.by_name: dict[tuple[str, str], Endpoint] = {}
        # First one wins: callers list planned endpoints first, so when two CMDB ports share an identity (a RoCE
        # NIC's netdev and its RDMA device carry one MAC) the one the plan names is what an observation matches.
        for ep in endpoints:
            for mac in ep.macs:
                self.by_mac.setdefault(normalize_mac(mac).lower(), ep)
            for guid in ep.guids:
                if g := normalize_guid(guid):
                    self.by_guid.setdefault(g, ep)
            for name in (ep.port, *ep.aliases):
                self.by_name.setdefault((device_key(ep.device), port_key(name)), ep)

    def resolve(self, obs: Observation) -> Endpoint | None:
        if obs.peer is not None:
            return obs.peer
        if obs.remote_port_guid and (ep := self.by_guid.get(normalize_guid(obs.remote_port_guid))):
            return ep
        port = obs.remote_port.strip()
        if port and (ep := self.by_mac.get(normalize_mac(port).lower())):
            return ep
        if port and (guid := normalize_guid(port)) and len(port) >= 16 and (ep := self.by_guid.get(guid)):
            return ep
        system = device_key(obs.remote_system)
        if system:
            for candidate in (port, obs.remote_port_description):
                if candidate and (ep := self.by_name.get((system, port_key(candidate)))):
                    return ep
        return None


def _rail_violation(switch: SwitchInfo | None, peer: Endpoint | None, rail_optimized: bool) -> str:
    if not rail_optimized or switch is None or peer is None or peer.kind != "node":
        return ""
    if switch.rail is None or peer.rail is None or switch.rail == peer.rail:
        return ""
    return (
        f"rail violation: node {peer.device} HCA {peer.hca or peer.port} (rail {peer.rail}) "
        f"lands on leaf {switch.name} (rail {switch.rail})"
    )


Placements = dict[View, dict[PortRef, set[PortRef]]]


def _views_conflict(here: PortRef, candidates: list[tuple[Observation, Endpoint | None]], placed: Placements) -> str:
    """How the switch's and the host's view of the cable at `here` disagree, '' when they do not: both name a
    peer for this port but not the same one, or one view puts a peer here that the other puts elsewhere."""
    switch_eps = [ep for o, ep in candidates if ep is not None and o.view == View.SWITCH]
    host_eps = [ep for o, ep in candidates if ep is not None and o.view == View.HOST]
    if switch_eps and host_eps and not {ep.ref for ep in switch_eps} & {ep.ref for ep in host_eps}:
        return f"the switch sees {switch_eps[0]}, the host reports {host_eps[0]} on this port"
    for ep in switch_eps:
        others = placed[View.HOST].get(ep.ref, set())
        if others and here not in others:
            return f"the switch sees {ep}, its host reports it on {min(others)}"
    for ep in host_eps:
        others = placed[View.SWITCH].get(ep.ref, set())
        if others and here not in others:
            return f"the host reports {ep} on this port, {min(others)} sees it"
    return ""


def validate_cabling(
    *,
    planned: Iterable[PlannedLink],
    observed: Iterable[Observation],
    inventory: Inventory,
    switches: dict[str, SwitchInfo] | None = None,
    rail_optimized: bool = False,
    polled_switches: set[str] | None = None,
) -> list[Finding]:
    """One Finding per judged planned port and per observed port, sorted by switch and port."""
    switches = switches or {}
    seen: dict[PortRef, list[Observation]] = defaultdict(list)
    for obs in observed:
        seen[PortRef(obs.switch, obs.port)].append(obs)
    resolved: dict[PortRef, list[tuple[Observation, Endpoint | None]]] = {
        here: [(o, inventory.resolve(o)) for o in observations] for here, observations in seen.items()
    }
    # Where each view puts each known endpoint (a host's unknown switch included): the two views of one cable
    # are compared through it.
    placed: Placements = {View.SWITCH: defaultdict(set), View.HOST: defaultdict(set)}
    for here, candidates in resolved.items():
        for o, ep in candidates:
            if ep is not None:
                placed[o.view][ep.ref].add(here)

    expected: dict[PortRef, Endpoint] = {}
    for link in planned:
        here = PortRef(link.switch, link.port)
        if (
            polled_switches is None
            or link.switch in polled_switches
            or here in seen
            or link.peer.ref in placed[View.HOST]
        ):
            expected[here] = link.peer

    # Where each endpoint is planned, to name the swap partner of a miswired port.
    planned_at: dict[PortRef, PortRef] = {peer.ref: here for here, peer in expected.items()}

    findings: list[Finding] = []
    for here in sorted(expected.keys() | resolved.keys()):
        want = expected.get(here)
        candidates = resolved.get(here, [])
        switch = switches.get(here.device)
        reported = sorted(placed[View.HOST].get(want.ref, set()) - {here}) if want is not None else []
        elsewhere = reported[0] if reported else None
        if want is not None and not candidates:
            findings.append(
                Finding(
                    FindingKind.MISSING,
                    here.device,
                    here.port,
                    expected=want,
                    elsewhere=elsewhere,
                    rail_violation=_rail_violation(switch, want, rail_optimized),
                )
            )
            continue
        # A port may list several neighbours (a hypervisor, a hub): the planned one among them is enough.
        match = next(
            ((o, ep) for o, ep in candidates if want is not None and ep is not None and ep.ref == want.ref), None
        )
        if match is None:
            match = next(((o, ep) for o, ep in candidates if ep is not None), candidates[0])
        obs, found = match
        if not obs.switch_known:
            findings.append(Finding(FindingKind.UNKNOWN_NEIGHBOR, here.device, here.port, found=found, observed=obs))
            continue
        if conflict := _views_conflict(here, candidates, placed):
            # Name the peer that is not the plan: that is the cable someone has to go and look at.
            other = next((ep for _, ep in candidates if ep is not None and (want is None or ep.ref != want.ref)), found)
            findings.append(
                Finding(
                    FindingKind.MISWIRED,
                    here.device,
                    here.port,
                    expected=want,
                    found=other,
                    observed=obs,
                    conflict=conflict,
                    rail_violation=_rail_violation(switch, other, rail_optimized),
                )
            )
            continue
        rail = _rail_violation(switch, found, rail_optimized)
        if found is None:
            findings.append(
                Finding(
                    FindingKind.UNKNOWN_NEIGHBOR,
                    here.device,
                    here.port,
                    expected=want,
                    observed=obs,
                    elsewhere=elsewhere,
                )
            )
        elif want is None:
            findings.append(
                Finding(FindingKind.UNEXPECTED, here.device, here.port, found=found, observed=obs, rail_violation=rail)
            )
        elif found.ref == want.ref:
            findings.append(
                Finding(
                    FindingKind.OK,
                    here.device,
                    here.port,
                    expected=want,
                    found=found,
                    observed=obs,
                    rail_violation=rail,
                )
            )
        else:
            partner = planned_at.get(found.ref)
            if partner is not None and not any(
                ep is not None and ep.ref == want.ref for _, ep in resolved.get(partner, [])
            ):
                partner = None  # Y belongs elsewhere, but that port does not see X: not a simple crossing
            findings.append(
                Finding(
                    FindingKind.MISWIRED,
                    here.device,
                    here.port,
                    expected=want,
                    found=found,
                    observed=obs,
                    swap_partner=partner,
                    rail_violation=rail,
                    elsewhere=elsewhere if elsewhere != partner else None,
                )
            )
    return findings


@dataclass
class CablingSummary:
    counts: dict[str, int] = field(default_factory=dict)
    rail_violations: int = 0

    @classmethod
    def of(cls, findings: Iterable[Finding]) -> CablingSummary:
        summary = cls(counts={k.value: 0 for k in FindingKind})
        for f in findings:
            summary.counts[f.kind.value] += 1
            summary.rail_violations += bool(f.rail_violation)
        return summary
