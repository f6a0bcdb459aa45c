"""Open cabling repair tickets from a fabric's cabling report: one ticket per fault (cabling_faults.py).

Used by the API option, the button on the fabric's cabling page and `manage.py cabling_report --open-tickets`.
This module picks the faults; the tickets themselves are opened by a *ticket desk* the workflows app registers
at start-up (workflows/glue/cabling.py, the ticket type workflows/definitions/cabling.py), so this package never
imports the workflow engine. The ticket type refuses a second open ticket for a fault (dedup key: the fabric and
the fault's ports) and for any port an open ticket already covers, so running this again opens nothing new for
faults that already have a ticket. A fault the ticket type refuses is skipped with its reason; the other faults
still get their tickets. Without a desk (no workflows app) opening tickets is refused and pages show none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from django.contrib.auth.models import AbstractBaseUser

from cmdb.models import Fabric
from cmdb.permissions import can

from .cabling import Finding
from .cabling_faults import CablingFault, cabling_faults
from .cabling_service import fabric_cabling_report, findings_filter, findings_visible


@dataclass(frozen=True)
class FaultTicket:
    """A fault and its ticket: opened now (`created`), already open, or none (`skipped` says why)."""

    fault: CablingFault
    ticket_id: int | None
    reference: str
    created: bool
    skipped: str = ""

    @property
    def outcome(self) -> str:
        return "skipped" if self.skipped else "created" if self.created else "existing"


class CablingTicketsRefused(Exception):
    """Tickets cannot be opened at all (no desk, or the desk refused the whole request). `errors` are for people."""

    def __init__(self, errors: str | Sequence[str]) -> None:
        self.errors = [errors] if isinstance(errors, str) else list(errors)
        super().__init__("; ".join(self.errors))


class CablingTicketsForbidden(CablingTicketsRefused):
    """The requester may not open tickets."""


class CablingTicketDesk(Protocol):
    """What the switches pages and commands need from the ticket system (registered by workflows/glue/cabling.py)."""

    def may_open(self, requester: AbstractBaseUser) -> bool:
        """Whether this person may open cabling tickets."""
        ...

    def open(
        self, fabric: Fabric, faults: Sequence[CablingFault], *, requester: AbstractBaseUser | None
    ) -> list[FaultTicket]:
        """One ticket per fault, each in its own savepoint (see cabling_tickets_open)."""
        ...

    def open_by_port(self, user: AbstractBaseUser | None = None) -> Mapping[str, Any]:
        """The open cabling tickets by port ("switch:port"); each has reference, title, get_absolute_url().
        With `user`, only those that person may see."""
        ...


_desk: CablingTicketDesk | None = None


def cabling_ticket_desk_set(desk: CablingTicketDesk | None) -> None:
    """Install the ticket desk (WorkflowsConfig.ready); None removes it."""
    global _desk
    _desk = desk


def cabling_tickets_may_open(user: AbstractBaseUser) -> bool:
    return _desk is not None and _desk.may_open(user)


def cabling_tickets_by_port(user: AbstractBaseUser | None = None) -> Mapping[str, Any]:
    """The open cabling tickets by port, for the cabling page (none without a desk); with `user`, only the
    tickets that person may see."""
    return _desk.open_by_port(user) if _desk is not None else {}


def cabling_tickets_open(
    fabric: Fabric,
    *,
    requester: AbstractBaseUser | None,
    params: Mapping[str, Any] | None = None,
    findings: list[Finding] | None = None,
) -> list[FaultTicket]:
    """One cabling ticket per fault of the fabric's current report - or of the faults with a finding the report
    filters `params` (kind, switch, node) show - each in its own savepoint. A fault that already has an open
    ticket (for the same ports, or any of them) is returned with that ticket and `created` False; one the ticket
    type refuses is returned without a ticket, `skipped` saying why, and the others are still opened.

    `requester` None opens them as the system; a person needs `workflows.add_ticket` (CablingTicketsForbidden
    otherwise). Links: the switches and nodes involved (subjects), the planned cables of the ports (related).
    """
    desk = _desk
    if desk is None:
        raise CablingTicketsRefused("No ticket system is installed: cabling tickets cannot be opened.")
    # Checked before the report is computed: a refusal costs nothing and does not depend on the findings.
    if requester is not None and not desk.may_open(requester):
        raise CablingTicketsForbidden("You may not open tickets.")
    if requester is not None and not can(requester, "change", fabric):
        raise CablingTicketsForbidden(f"Opening cabling tickets on {fabric.name} needs change rights on it.")
    findings = fabric_cabling_report(fabric) if findings is None else findings
    if requester is not None:  # a person opens tickets only for what they may see
        findings = findings_visible(findings, requester)
    faults = cabling_faults(findings)
    if params:
        shown = {id(f) for f in findings_filter(findings, params)}
        faults = [fault for fault in faults if any(id(f) in shown for f in fault.findings)]
    if not faults:
        return []
    return desk.open(fabric, faults, requester=requester)


__all__ = [
    "CablingTicketDesk",
    "CablingTicketsForbidden",
    "CablingTicketsRefused",
    "FaultTicket",
    "cabling_ticket_desk_set",
    "cabling_tickets_by_port",
    "cabling_tickets_may_open",
    "cabling_tickets_open",
]
