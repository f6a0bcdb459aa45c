"""Step building blocks shared by several workflows: drain a node, resume it, release what a ticket holds.

Each helper performs its side effects through the StepContext (`ctx.external` for the scheduler, `ctx.effect`
for the CMDB), so a retried or resumed step never repeats one.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from cmdb.models import Node, NodeStatus, ReservationStatus, StockReservation
from cmdb.services.nodes import node_cordon, node_uncordon, nodes_set_status
from cmdb.services.stock import reservation_release
from integrations.schedulers import SchedulerNode, scheduler_for

from ..conf import workflows_setting
from ..models import ProcurementNeed, Ticket
from ..registry import workflow_or_none
from ..services.cmdb_writes import procurement_needs_close
from ..steps import Failed, StepContext, WaitForEvent

# Cordons set by a workflow start with the ticket reference ("REP-12: ..."); only those are lifted by a
# workflow. A person's manual cordon stays until that person lifts it.
WORKFLOW_CORDON = re.compile(r"^[A-Z]{2,5}-\d+: ")
# Statuses a drained node is restored to; anything else comes back as active.
RESTORABLE = {NodeStatus.ACTIVE, NodeStatus.BURN_IN, NodeStatus.PROVISIONING}


def reservation_ref(ticket: Ticket) -> str:
    """What holds a ticket's spare reservation and tags its ledger rows."""
    return f"ticket:{ticket.pk}"


def scheduler_node(node: Node) -> SchedulerNode:
    cluster = node.cluster
    return SchedulerNode(
        name=node.hostname, cluster=cluster.name if cluster else "", cluster_kind=cluster.kind if cluster else ""
    )


def drain_reason(ticket: Ticket) -> str:
    return f"{ticket.reference}: {ticket.title}"[:200]


def drain_timeout(ticket: Ticket) -> dt.timedelta:
    """How long a drain waits for running jobs: the ticket type's `drain_timeout`, else the setting."""
    declared = workflow_or_none(ticket.type)
    if declared is not None and declared.drain_timeout is not None:
        return declared.drain_timeout
    return dt.timedelta(minutes=workflows_setting("DRAIN_TIMEOUT_MINUTES"))


def node_drain(ctx: StepContext, node: Node) -> tuple[dict[str, Any], Failed | WaitForEvent | None]:
    """Drain `node` in its scheduler and mark it draining + cordoned in the CMDB; once the scheduler reports
    it drained, move it to maintenance.

    Returns (what the node was before, None when drained or the outcome to return meanwhile).
    """
    reason = drain_reason(ctx.ticket)
    target = scheduler_node(node)
    scheduler = scheduler_for(target.cluster_kind)
    ctx.external("scheduler_drain", lambda: scheduler.drain(target, reason=reason))

    def cmdb_drain() -> dict[str, Any]:
        fresh = Node.objects.get(pk=node.pk)
        before = {"status_before": fresh.status, "drain_reason": reason}
        if fresh.status not in (NodeStatus.DRAINING, NodeStatus.MAINTENANCE):
            nodes_set_status(node_ids=[fresh.pk], status=NodeStatus.DRAINING, reason=reason)
        if not fresh.is_cordoned:
            node_cordon(node=fresh, reason=reason)
        return before

    before = ctx.effect("cmdb_drain", cmdb_drain)
    state = scheduler.node_state(target)
    if not state.is_drained:
        timeout = drain_timeout(ctx.ticket)
        deadline = ctx.deadline("drain", timeout)
        left = f"{state.running} job(s)" if state.running is not None else f"work ({state.state})"
        if state.jobs:  # the scheduler named them (Slurm): the ticket shows which jobs hold the node
            shown = ", ".join(state.jobs[:20]) + (f" and {len(state.jobs) - 20} more" if len(state.jobs) > 20 else "")
            left += f" ({shown})"
        if ctx.now >= deadline:
            return before, Failed(
                reason=f"{node} still runs {left} after {timeout}; retry the step to keep waiting, or cancel the ticket"
            )
        return before, WaitForEvent(
            key=f"node:{node.pk}:drained",
            message=f"{node} still runs {left}",
            recheck_in=dt.timedelta(seconds=workflows_setting("DRAIN_POLL_SECONDS")),
        )
    ctx.effect(
        "cmdb_maintenance", lambda: nodes_set_status(node_ids=[node.pk], status=NodeStatus.MAINTENANCE, reason=reason)
    )
    return before, None


def node_resume(ctx: StepContext, node: Node, *, status_before: str) -> None:
    """Resume `node` in its scheduler, restore its CMDB status and lift a workflow's cordon."""
    target = scheduler_node(node)
    scheduler = scheduler_for(target.cluster_kind)
    ctx.external("scheduler_resume", lambda: scheduler.resume(target))

    def cmdb_resume() -> dict[str, Any]:
        fresh = Node.objects.get(pk=node.pk)
        status = status_before if status_before in RESTORABLE else NodeStatus.ACTIVE
        nodes_set_status(node_ids=[fresh.pk], status=status, reason=drain_reason(ctx.ticket))
        lifted = fresh.is_cordoned and bool(WORKFLOW_CORDON.match(fresh.cordon_reason))
        if lifted:
            node_uncordon(node=fresh)
        elif fresh.is_cordoned:
            ctx.log(f"{fresh} keeps its manual cordon: {fresh.cordon_reason}")
        return {"status": status, "uncordoned": lifted}

    ctx.effect("cmdb_resume", cmdb_resume)


def holdings_release(ctx: StepContext) -> str:
    """Release the ticket's active spare reservations and cancel its procurement need (a cancelled ticket
    holds nothing). Returns a summary."""
    ticket = ctx.ticket
    released = []
    for res in StockReservation.objects.filter(
        reserved_for=reservation_ref(ticket), status=ReservationStatus.ACTIVE
    ).select_related("accelerator"):
        ctx.effect(
            f"release_reservation_{res.pk}",
            lambda res=res: (
                reservation_release(reservation=res, reason=f"{ticket.reference} cancelled")
                or {"reservation_id": res.pk}
            ),
        )
        released.append(str(res.accelerator))
    needs = ctx.effect(
        "procurement_cancel", lambda: procurement_needs_close(ticket=ticket, status=ProcurementNeed.Status.CANCELLED)
    )
    parts = [f"released spare {', '.join(released)}" if released else "no spare held"]
    if needs:
        parts.append(f"cancelled {needs} procurement need(s)")
    return "; ".join(parts)
