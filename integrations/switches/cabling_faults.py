"""Cabling faults: a cabling report's findings grouped into the repairs a technician does, one ticket each.

- crossed:    two `miswired` findings that name each other as swap partner - one swap of two cables;
- moved:      a `missing` finding (the planned port) and the `unexpected` finding of the port where that very
              endpoint landed instead - one cable to move;
- miswired, missing, unexpected: any other such finding, alone.

`unknown_neighbor` findings are not cabling faults (inventory does not know what is there: fix the inventory
first), nor is a rail violation on an `ok` port (the plan breaks the rail rule: fix the plan, not a cable).
Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from .cabling import Finding, FindingKind, PortRef

FAULT_FINDINGS = frozenset({FindingKind.MISWIRED, FindingKind.MISSING, FindingKind.UNEXPECTED})


class FaultKind(StrEnum):
    CROSSED = "crossed"
    MOVED = "moved"
    MISWIRED = "miswired"
    MISSING = "missing"
    UNEXPECTED = "unexpected"


def _here(f: Finding) -> PortRef:
    return PortRef(f.switch, f.port)


@dataclass(frozen=True)
class CablingFault:
    """One repair: its findings (crossed: both ports; moved: the planned port, then the port the cable is in)."""

    kind: FaultKind
    findings: tuple[Finding, ...]

    @property
    def ports(self) -> tuple[PortRef, ...]:
        """The switch ports involved, sorted: the fault's identity."""
        return tuple(sorted(_here(f) for f in self.findings))

    @property
    def key(self) -> str:
        return " ".join(str(p) for p in self.ports)

    @property
    def nodes(self) -> list[str]:
        """Host names of the node ends involved: planned there or found there."""
        return sorted(
            {ep.device for f in self.findings for ep in (f.expected, f.found) if ep is not None and ep.kind == "node"}
        )

    @property
    def title(self) -> str:
        first = self.findings[0]
        if self.kind == FaultKind.CROSSED:
            a, b = self.ports
            return f"Crossed cables on {a} and {b}"
        if self.kind == FaultKind.MOVED:
            return f"Cable of {first.expected} in {_here(self.findings[1])} instead of {_here(first)}"
        label = {FaultKind.MISWIRED: "Miswired", FaultKind.MISSING: "Missing", FaultKind.UNEXPECTED: "Unplanned"}
        return f"{label[self.kind]} cable on {_here(first)}"

    @property
    def instructions(self) -> list[str]:
        """What to do, in the technician's terms, then what the report saw."""
        first = self.findings[0]
        if self.kind == FaultKind.CROSSED:
            a, b = self.findings
            lines = [
                f"Swap the cables on {_here(a)} and {_here(b)}.",
                f"- {_here(a)} must connect {a.expected}; it connects {a.found}.",
                f"- {_here(b)} must connect {b.expected}; it connects {b.found}.",
            ]
        elif self.kind == FaultKind.MOVED:
            there = self.findings[1]
            lines = [
                f"Move the cable of {first.expected} from {_here(there)} (nothing is planned there) to {_here(first)}."
            ]
        elif self.kind == FaultKind.MISWIRED:
            lines = [
                f"{_here(first)} must connect {first.expected}; it connects {first.found or first.observed}. "
                f"Trace both cables and re-plug {first.expected} into {_here(first)}."
            ]
            if first.conflict:
                lines.append(f"- The switch's and the host's view disagree: {first.conflict}.")
        elif self.kind == FaultKind.MISSING:
            lines = [
                f"{_here(first)} must connect {first.expected} but sees nothing: check the cable is seated at "
                f"both ends and the link comes up."
            ]
            if first.elsewhere:
                lines.append(f"- The host of {first.expected} reports its cable on {first.elsewhere}.")
        else:
            lines = [
                f"{_here(first)} connects {first.found}, which is planned nowhere on this port: remove the "
                f"cable, or fix the plan if it is right."
            ]
        lines += [f"- {f.rail_violation}" for f in self.findings if f.rail_violation]
        return lines


def cabling_faults(findings: Iterable[Finding]) -> list[CablingFault]:
    """The faults among `findings`, in port order; each problem finding belongs to exactly one fault."""
    problems = sorted((f for f in findings if f.kind in FAULT_FINDINGS), key=_here)
    by_port = {_here(f): f for f in problems}
    used: set[PortRef] = set()
    faults: list[CablingFault] = []
    for f in problems:
        partner = by_port.get(f.swap_partner) if f.swap_partner else None
        if (
            f.kind == FindingKind.MISWIRED
            and partner is not None
            and partner.kind == FindingKind.MISWIRED
            and partner.swap_partner == _here(f)
            and not {_here(f), _here(partner)} & used
        ):
            faults.append(CablingFault(FaultKind.CROSSED, (f, partner)))
            used |= {_here(f), _here(partner)}
    landed = {f.found.ref: f for f in problems if f.kind == FindingKind.UNEXPECTED and f.found is not None}
    for f in problems:
        there = landed.get(f.expected.ref) if f.kind == FindingKind.MISSING and f.expected else None
        if there is not None and not {_here(f), _here(there)} & used:
            faults.append(CablingFault(FaultKind.MOVED, (f, there)))
            used |= {_here(f), _here(there)}
    faults += [CablingFault(FaultKind(f.kind.value), (f,)) for f in problems if _here(f) not in used]
    return sorted(faults, key=lambda fault: fault.ports)
