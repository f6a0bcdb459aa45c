"""Cabling validation: planned links vs what the switches observe (LLDP, ibnetdiscover). Pure functions over
dataclasses - no Django - so the rules can be tested exhaustively (see the Hypothesis test).

Every switch port that is planned or observed gets exactly one Finding:
- ok:               the planned peer is what the port sees;
- missing:          planned, but the port sees nothing;
- miswired:         planned X, the port sees Y (a known endpoint); `swap_partner` names the other port when two
                    cables are crossed (Y is planned at P2 and P2 sees X);
- unexpected:       nothing planned, the port sees a known endpoint;
- unknown_neighbor: the port sees something no inventory record identifies (planned or not).
On a rail-optimised fabric a finding also carries `rail_violation` when the node HCA it sees (or, for
missing links, was planned to see) belongs to another rail than the leaf: "HCA i of every node lands on rail
leaf i".

Switches that were never polled are left out (`polled_switches`): no observation is not evidence of absence.
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


@dataclass(frozen=True)
class Observation:
    """What `switch:port` sees: an LLDP neighbour or an InfiniBand peer."""

    switch: str
    port: str
    remote_chassis_id: str = ""
    remote_port: str = ""
    remote_system: str = ""
    remote_port_description: str = ""
    remote_port_guid: str = ""

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
        elif self.kind == FindingKind.MISWIRED:
            text = f"{here} miswired: expected {self.expected}, found {self.found}"
            if self.swap_partner:
                text += f" (crossed with {self.swap_partner})"
        elif self.kind == FindingKind.UNEXPECTED:
            text = f"{here} unexpected: found {self.found}, nothing planned"
        else:
            text = f"{here} unknown neighbour {self.observed}"
            if self.expected:
                text += f" (expected {self.expected})"
        return f"{text}; {self.rail_violation}" if self.rail_violation else text


_ABBREVIATIONS = (
    ("tengigabitethernet", "te"), ("gigabitethernet", "gi"), ("fastethernet", "fa"), ("ethernet", "eth"),
    ("hundredgige", "hu"), ("fortygigabitethernet", "fo"), ("port-channel", "po"),
)


def port_key(name: str) -> str:
    """A spelling-insensitive port name: `Ethernet1/1`, `Eth1/1`, `eth 1/1` and `Et1/1` compare equal."""
    key = re.sub(r"\s+", "", name.strip().lower())
    for long, short in _ABBREVIATIONS:
        if key.startswith(long):
            return short + key[len(long):]
    if key.startswith("et") and not key.startswith("eth") and key[2:3].isdigit():
        return "eth" + key[2:]
    return key


def device_key(name: str) -> str:
    """Host names compare without case and without the domain (lldpd sends the FQDN, the CMDB the short)."""
    return name.strip().lower().split(".")[0]


def normalize_guid(text: str) -> str:
    digits = text.lower().removeprefix("0x").replace(":", "")
    return digits.zfill(16) if digits and all(c in "0123456789abcdef" for c in digits) else ""


class Inventory:
    """Resolves an observation to a known Endpoint: by port MAC, by port GUID, by (system name, port name)."""

    def __init__(self, endpoints: Iterable[Endpoint]) -> None:
        self.by_mac: dict[str, Endpoint] = {}
        self.by_guid: dict[str, Endpoint] = {}
        self.by_name: dict[tuple[str, str], Endpoint] = {}
        for ep in endpoints:
            for mac in ep.macs:
                self.by_mac[normalize_mac(mac).lower()] = ep
            for guid in ep.guids:
                if g := normalize_guid(guid):
                    self.by_guid[g] = ep
            for name in (ep.port, *ep.aliases):
                self.by_name.setdefault((device_key(ep.device), port_key(name)), ep)

    def resolve(self, obs: Observation) -> Endpoint | None:
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
    return (f"rail violation: node {peer.device} HCA {peer.hca or peer.port} (rail {peer.rail}) "
            f"lands on leaf {switch.name} (rail {switch.rail})")


def validate_cabling(
    *,
    planned: Iterable[PlannedLink],
    observed: Iterable[Observation],
    inventory: Inventory,
    switches: dict[str, SwitchInfo] | None = None,
    rail_optimized: bool = False,
    polled_switches: set[str] | None = None,
) -> list[Finding]:
    """One Finding per planned-or-observed switch port of the polled switches, sorted by switch and port."""
    switches = switches or {}
    expected: dict[PortRef, Endpoint] = {}
    for link in planned:
        if polled_switches is None or link.switch in polled_switches:
            expected[PortRef(link.switch, link.port)] = link.peer
    seen: dict[PortRef, list[Observation]] = defaultdict(list)
    for obs in observed:
        seen[PortRef(obs.switch, obs.port)].append(obs)

    # Where each endpoint is planned, to name the swap partner of a miswired port.
    planned_at: dict[PortRef, PortRef] = {peer.ref: here for here, peer in expected.items()}
    resolved: dict[PortRef, list[tuple[Observation, Endpoint | None]]] = {
        here: [(o, inventory.resolve(o)) for o in observations] for here, observations in seen.items()
    }

    findings: list[Finding] = []
    for here in sorted(expected.keys() | resolved.keys()):
        want = expected.get(here)
        candidates = resolved.get(here, [])
        switch = switches.get(here.device)
        if want is not None and not candidates:
            findings.append(Finding(FindingKind.MISSING, here.device, here.port, expected=want,
                                    rail_violation=_rail_violation(switch, want, rail_optimized)))
            continue
        # A port may list several neighbours (a hypervisor, a hub): the planned one among them is enough.
        match = next(((o, ep) for o, ep in candidates if want is not None and ep is not None and ep.ref == want.ref),
                     None)
        if match is None:
            match = next(((o, ep) for o, ep in candidates if ep is not None), candidates[0])
        obs, found = match
        rail = _rail_violation(switch, found, rail_optimized)
        if found is None:
            findings.append(Finding(FindingKind.UNKNOWN_NEIGHBOR, here.device, here.port, expected=want,
                                    observed=obs))
        elif want is None:
            findings.append(Finding(FindingKind.UNEXPECTED, here.device, here.port, found=found, observed=obs,
                                    rail_violation=rail))
        elif found.ref == want.ref:
            findings.append(Finding(FindingKind.OK, here.device, here.port, expected=want, found=found,
                                    observed=obs, rail_violation=rail))
        else:
            partner = planned_at.get(found.ref)
            if partner is not None and not any(
                ep is not None and ep.ref == want.ref for _, ep in resolved.get(partner, [])
            ):
                partner = None  # Y belongs elsewhere, but that port does not see X: not a simple crossing
            findings.append(Finding(FindingKind.MISWIRED, here.device, here.port, expected=want, found=found,
                                    observed=obs, swap_partner=partner, rail_violation=rail))
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
