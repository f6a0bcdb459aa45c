"""Open cabling repair tickets from a fabric's cabling report: one ticket per fault (cabling_faults.py).

Used by the API option, the button on the fabric's cabling page and `manage.py cabling_report --open-tickets`.
The ticket type is workflows/definitions/cabling.py; it refuses a second open ticket for a fault (dedup key: the
fabric and the fault's ports) and for any port an open ticket already covers, so running this again opens
nothing new for faults that already have a ticket. A fault the ticket type refuses is skipped with its reason;
the other faults still get their tickets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Model

from cmdb.models import Fabric, Link, Node
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


def _description(fabric: Fabric, fault: CablingFault, planned: Sequence[Link]) -> str:
    lines = [f"Cabling validation of fabric {fabric.name} found a {fault.kind.value} fault.", "",
             *fault.instructions]
    if planned:
        lines += ["", "Planned cables on these ports:"]
        for link in planned:
            label = ", ".join(x for x in (link.get_cable_type_display(), link.cable_serial) if x)
            lines.append(f"- {link}" + (f" ({label})" if label else ""))
    lines += ["", "Findings:", *(f"- {f.message}" for f in fault.findings)]
    return "\n".join(lines)


def cabling_tickets_open(fabric: Fabric, *, requester: AbstractBaseUser | None,
                         params: Mapping[str, Any] | None = None,
                         findings: list[Finding] | None = None) -> list[FaultTicket]:
    """One cabling ticket per fault of the fabric's current report - or of the faults with a finding the report
    filters `params` (kind, switch, node) show - each in its own savepoint. A fault that already has an open
    ticket (for the same ports, or any of them) is returned with that ticket and `created` False; one the ticket
    type refuses is returned without a ticket, `skipped` saying why, and the others are still opened.

    `requester` None opens them as the system; a person needs `workflows.add_ticket` (ForbiddenError otherwise).
    Links: the switches and nodes involved (subjects), the planned cables of the ports (related); the nodes are
    passed here (they scope the ticket), the ticket type links the rest.
    """
    from workflows import engine
    from workflows.definitions.cabling import dedup_key_for, open_ticket_for_ports, open_tickets_by_port, planned_links
    from workflows.models import LinkRole, Ticket, TicketPriority

    if requester is not None and not (requester.is_superuser or requester.has_perm("workflows.add_ticket")):
        raise engine.ForbiddenError("You may not open tickets.")
    if requester is not None and not can(requester, "change", fabric):
        raise engine.ForbiddenError(f"Opening cabling tickets on {fabric.name} needs change rights on it.")
    findings = fabric_cabling_report(fabric) if findings is None else findings
    if requester is not None:  # a person opens tickets only for what they may see
        findings = findings_visible(findings, requester)
    faults = cabling_faults(findings)
    if params:
        shown = {id(f) for f in findings_filter(findings, params)}
        faults = [fault for fault in faults if any(id(f) in shown for f in fault.findings)]
    if not faults:
        return []
    # The nodes the tickets link, and the open tickets, in two queries for all faults; the ticket type links each
    # ticket's switches and planned cables itself (workflows/definitions/cabling.py).
    nodes = {n.hostname: n for n in Node.objects.filter(hostname__in={h for f in faults for h in f.nodes})}
    covering = open_tickets_by_port()

    results: list[FaultTicket] = []
    for fault in faults:
        twin = open_ticket_for_ports(fault.ports, covering)
        if twin is not None:
            results.append(FaultTicket(fault, twin.pk, twin.reference, created=False))
            continue
        subjects: list[Model] = [nodes[h] for h in fault.nodes if h in nodes]
        description = _description(fabric, fault, planned_links(fabric, fault.ports))
        try:
            with transaction.atomic():  # a savepoint: a refused or lost creation leaves nothing half-written
                ticket = engine.ticket_create(
                    type_="cabling", title=fault.title[:200], description=description,
                    requester=requester, priority=TicketPriority.HIGH,
                    inputs={"fabric": fabric.name, "ports": fault.key},
                    links=[(LinkRole.SUBJECT, node) for node in subjects])
        except (IntegrityError, engine.WorkflowError) as exc:
            # Opened meanwhile by someone else: the dedup or per-port check says so, or (a double click) the twin
            # committed between our dedup check and our INSERT and the unique index on open dedup keys refused it.
            twin = (Ticket.objects.filter(dedup_key=dedup_key_for(fabric.pk, fault.ports), is_open=True).first()
                    or open_ticket_for_ports(fault.ports))
            if twin is not None:
                results.append(FaultTicket(fault, twin.pk, twin.reference, created=False))
            else:  # refused: this fault is skipped, the others still get their tickets
                reason = ("; ".join(exc.errors) if isinstance(exc, engine.WorkflowError)
                          else "Opened and closed again by someone else meanwhile; run again.")
                results.append(FaultTicket(fault, None, "", created=False, skipped=reason))
            continue
        covering.update({str(p): ticket for p in fault.ports})
        results.append(FaultTicket(fault, ticket.pk, ticket.reference, created=True))
    return results
