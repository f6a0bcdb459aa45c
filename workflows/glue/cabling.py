"""Cabling repair tickets for the faults the switches' cabling report finds: the ticket desk that
integrations.switches.cabling_tickets calls (the API option, the button on the cabling page, `cabling_report
--open-tickets`). `register()` (from WorkflowsConfig.ready) installs it.

The ticket type is workflows/definitions/cabling.py; it refuses a second open ticket for a fault (dedup key: the
fabric and the fault's ports) and for any port an open ticket already covers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Model

from cmdb.models import Fabric, Link, Node
from integrations.switches.cabling_faults import CablingFault
from integrations.switches.cabling_tickets import (
    CablingTicketsForbidden,
    CablingTicketsRefused,
    FaultTicket,
    cabling_ticket_desk_set,
)

from .. import engine
from ..definitions import cabling as cabling_wf  # by module: tests replace its lookups
from ..models import LinkRole, Ticket, TicketPriority
from ..permissions import can_view


def _description(fabric: Fabric, fault: CablingFault, planned: Sequence[Link]) -> str:
    lines = [f"Cabling validation of fabric {fabric.name} found a {fault.kind.value} fault.", "", *fault.instructions]
    if planned:
        lines += ["", "Planned cables on these ports:"]
        for link in planned:
            label = ", ".join(x for x in (link.get_cable_type_display(), link.cable_serial) if x)
            lines.append(f"- {link}" + (f" ({label})" if label else ""))
    lines += ["", "Findings:", *(f"- {f.message}" for f in fault.findings)]
    return "\n".join(lines)


def _faults_open(
    fabric: Fabric, faults: Sequence[CablingFault], *, requester: AbstractBaseUser | None
) -> list[FaultTicket]:
    """One cabling ticket per fault, each in its own savepoint; a fault with an open ticket gets it back, one the
    ticket type refuses is skipped with the reason. The nodes are linked here (they scope the ticket), the ticket
    type links each ticket's switches and planned cables itself."""
    # The nodes the tickets link, and the open tickets, in two queries for all faults.
    nodes = {n.hostname: n for n in Node.objects.filter(hostname__in={h for f in faults for h in f.nodes})}
    covering = cabling_wf.open_tickets_by_port()

    results: list[FaultTicket] = []
    for fault in faults:
        twin = cabling_wf.open_ticket_for_ports(fault.ports, covering)
        if twin is not None:
            results.append(FaultTicket(fault, twin.pk, twin.reference, created=False))
            continue
        subjects: list[Model] = [nodes[h] for h in fault.nodes if h in nodes]
        description = _description(fabric, fault, cabling_wf.planned_links(fabric, fault.ports))
        try:
            with transaction.atomic():  # a savepoint: a refused or lost creation leaves nothing half-written
                ticket = engine.ticket_create(
                    type_="cabling",
                    title=fault.title[:200],
                    description=description,
                    requester=requester,
                    priority=TicketPriority.HIGH,
                    inputs={"fabric": fabric.name, "ports": fault.key},
                    links=[(LinkRole.SUBJECT, node) for node in subjects],
                )
        except (IntegrityError, engine.WorkflowError) as exc:
            # Opened meanwhile by someone else: the dedup or per-port check says so, or (a double click) the twin
            # committed between our dedup check and our INSERT and the unique index on open dedup keys refused it.
            twin = Ticket.objects.filter(
                dedup_key=cabling_wf.dedup_key_for(fabric.pk, fault.ports), is_open=True
            ).first() or cabling_wf.open_ticket_for_ports(fault.ports)
            if twin is not None:
                results.append(FaultTicket(fault, twin.pk, twin.reference, created=False))
            else:  # refused: this fault is skipped, the others still get their tickets
                reason = (
                    "; ".join(exc.errors)
                    if isinstance(exc, engine.WorkflowError)
                    else "Opened and closed again by someone else meanwhile; run again."
                )
                results.append(FaultTicket(fault, None, "", created=False, skipped=reason))
            continue
        covering.update({str(p): ticket for p in fault.ports})
        results.append(FaultTicket(fault, ticket.pk, ticket.reference, created=True))
    return results


class CablingTicketDesk:
    """The workflow engine behind integrations.switches.cabling_tickets."""

    def may_open(self, requester: AbstractBaseUser) -> bool:
        return bool(requester.is_superuser or requester.has_perm("workflows.add_ticket"))

    def open(
        self, fabric: Fabric, faults: Sequence[CablingFault], *, requester: AbstractBaseUser | None
    ) -> list[FaultTicket]:
        try:
            return _faults_open(fabric, faults, requester=requester)
        except engine.ForbiddenError as exc:  # the switches side speaks its own errors, not the engine's
            raise CablingTicketsForbidden(exc.errors) from exc
        except engine.WorkflowError as exc:
            raise CablingTicketsRefused(exc.errors) from exc

    def open_by_port(self, user: AbstractBaseUser | None = None) -> Mapping[str, Any]:
        tickets = cabling_wf.open_tickets_by_port()
        if user is None:
            return tickets
        return {port: t for port, t in tickets.items() if can_view(user, t)}


def register() -> None:
    """Install the desk (WorkflowsConfig.ready)."""
    cabling_ticket_desk_set(CablingTicketDesk())


__all__ = ["CablingTicketDesk", "register"]
