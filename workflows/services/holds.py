"""What the workflows tell the CMDB's guarded writers (registered in WorkflowsConfig.ready):

- `node_holders`: which open change holds a node (cmdb.holds provider);
- `workflow_scope`: which nodes a step running under a correlation id may change (cmdb.permissions);
- `on_hold_overridden`: a person forced a change on a held node: the holding ticket records it and pauses;
- `on_schedulability_changed`: a cordon / uncordon from outside a step reaches the node's scheduler.

A node is held by an open repair in a state that keeps it drained (repair.HOLDS_NODE), an open provisioning
or decommission ticket about it, an open cabling ticket whose drain touched it, or an active NodeLock (driver
rollouts, provisioning runs).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db.models import Q

from cmdb.holds import Holder, HoldOverride
from cmdb.hooks import SchedulabilityChange
from cmdb.models import Node

from ..models import LinkRole, StepEffect, Ticket, TicketLink, TimelineKind

logger = logging.getLogger(__name__)

# Ticket types whose every open ticket holds its subject node.
_HOLDING_TYPES = ("provisioning",)


IN_LIST_MAX = 1000


def _ticket_holder(ticket: Ticket) -> Holder:
    return Holder(
        ticket_ref=ticket.reference,
        ticket_id=ticket.pk,
        kind=ticket.type,
        correlation_ids=frozenset({ticket.correlation_id}),
    )


def node_holders(node_ids: list[int]) -> dict[int, list[Holder]]:
    """{node id: [holders]} for the held nodes among `node_ids`: a fixed number of queries."""
    from ..definitions.repair import HOLDS_NODE
    from ..rollouts.models import NodeLock, ProvisioningRun, Rollout

    out: dict[int, list[Holder]] = {}
    tickets: dict[int, Ticket] = {}

    def add(node_id: int, ticket: Ticket) -> None:
        tickets.setdefault(ticket.pk, ticket)
        if all(h.ticket_id != ticket.pk for h in out.get(node_id, [])):
            out.setdefault(node_id, []).append(_ticket_holder(ticket))

    wanted = set(node_ids)
    # A whole fleet's ids (the dashboard's 12,000) in IN lists cost more to build and plan than the open holds
    # they filter: past IN_LIST_MAX ids, every open hold is read and the wanted nodes are kept here.
    narrow = len(wanted) <= IN_LIST_MAX
    links = (
        TicketLink.objects.filter(role=LinkRole.SUBJECT, ticket__is_open=True)
        .filter(Q(ticket__type="repair", ticket__state__in=HOLDS_NODE) | Q(ticket__type__in=_HOLDING_TYPES))
        .select_related("ticket")
        .order_by("ticket_id")
    )
    for link in links.filter(node_id__in=node_ids) if narrow else links:
        if link.node_id in wanted:
            add(link.node_id, link.ticket)
    decommissions = Ticket.objects.filter(type="decommission", is_open=True)
    if narrow:
        for ticket in decommissions.filter(data__node_id__in=node_ids):
            add(int(ticket.data["node_id"]), ticket)
    else:
        for ticket in decommissions:
            node_id = ticket.data.get("node_id") if isinstance(ticket.data, dict) else None
            if isinstance(node_id, int) and not isinstance(node_id, bool) and node_id in wanted:
                add(node_id, ticket)
    # A cabling ticket holds the nodes its drain touched (see cabling.drained_by), until it closes.
    effects = (
        StepEffect.objects.filter(
            ticket__type="cabling",
            ticket__is_open=True,
            key__contains=":node:",
            name__in=("scheduler_drain", "cmdb_drain"),
        )
        .select_related("ticket")
        .order_by("ticket_id", "at")
    )
    for effect in effects:
        node_id = int(effect.key.rsplit(":node:", 1)[1])
        if node_id in wanted:
            add(node_id, effect.ticket)

    open_locks = NodeLock.objects.filter(released_at__isnull=True).select_related("ticket")
    locks = [
        lock for lock in (open_locks.filter(node_id__in=node_ids) if narrow else open_locks) if lock.node_id in wanted
    ]
    if locks:
        # A lock's own changes carry its ticket's correlation id, or its rollout's / provisioning run's.
        keys = {lock.owner_key for lock in locks}
        correlation = {r.lock_key: r.correlation_id for r in Rollout.objects.filter(pk__in=_key_ids(keys, "rollout"))}
        correlation |= {
            r.lock_key: r.correlation_id for r in ProvisioningRun.objects.filter(pk__in=_key_ids(keys, "provisioning"))
        }
        for lock in locks:
            ids = {correlation.get(lock.owner_key, "")} | ({lock.ticket.correlation_id} if lock.ticket else set())
            holder = Holder(
                ticket_ref=lock.owner_label,
                ticket_id=lock.ticket_id,
                kind=lock.owner_key.split(":", 1)[0],
                correlation_ids=frozenset(ids - {""}),
            )
            if all(h.ticket_id != lock.ticket_id or lock.ticket_id is None for h in out.get(lock.node_id, [])):
                out.setdefault(lock.node_id, []).append(holder)
            else:  # the lock's ticket holds the node already: one holder, knowing both correlation ids
                out[lock.node_id] = [
                    Holder(h.ticket_ref, h.ticket_id, h.kind, h.correlation_ids | holder.correlation_ids)
                    if h.ticket_id == lock.ticket_id
                    else h
                    for h in out[lock.node_id]
                ]
    return out


def _key_ids(keys: Iterable[str], prefix: str) -> list[int]:
    return [int(k.split(":", 1)[1]) for k in keys if k.startswith(f"{prefix}:") and k.split(":", 1)[1].isdigit()]


def workflow_scope(correlation_id: str, node_ids: list[int]) -> set[int] | None:
    """The nodes among `node_ids` the change with `correlation_id` is about, or None when it is no ticket,
    rollout or provisioning run: its ticket's links and data, its node runs, its locks (even released)."""
    from ..rollouts.models import NodeLock, NodeRun, ProvisioningRun, Rollout

    if not correlation_id:
        return None
    ticket = Ticket.objects.filter(correlation_id=correlation_id).first()
    rollouts = list(Rollout.objects.filter(correlation_id=correlation_id).values_list("pk", flat=True))
    runs = list(ProvisioningRun.objects.filter(correlation_id=correlation_id).values_list("pk", "node_id"))
    if ticket is None and not rollouts and not runs:
        return None
    allowed: set[int] = {node_id for _, node_id in runs if node_id}
    keys = [f"rollout:{pk}" for pk in rollouts] + [f"provisioning:{pk}" for pk, _ in runs]
    locks = Q(owner_key__in=keys)
    if ticket is not None:
        locks |= Q(ticket=ticket) | Q(owner_key=f"ticket:{ticket.pk}")
        allowed |= set(TicketLink.objects.filter(ticket=ticket, node_id__in=node_ids).values_list("node_id", flat=True))
        data = ticket.data or {}
        allowed |= {int(n) for n in [data.get("node_id"), *data.get("node_ids", [])] if n}
    allowed |= set(NodeLock.objects.filter(locks, node_id__in=node_ids).values_list("node_id", flat=True))
    if rollouts:
        allowed |= set(
            NodeRun.objects.filter(rollout_id__in=rollouts, node_id__in=node_ids).values_list("node_id", flat=True)
        )
    return allowed & set(node_ids)


def on_hold_overridden(override: HoldOverride) -> None:
    """Record the forced change on the holding ticket's timeline and pause the ticket, so its automation does not
    carry on from a state someone else changed under it (an operator resumes it once they have looked)."""
    from ..engine import timeline_add

    holder = override.holder
    if holder.ticket_id is None:
        logger.warning("hold of %s on %s overridden (no ticket to tell)", holder.ticket_ref, override.node_label)
        return
    ticket = Ticket.objects.select_for_update().filter(pk=holder.ticket_id).first()
    if ticket is None:
        return
    who = getattr(override.actor, "username", "") or "someone"
    message = f"Hold overridden by {who} ({override.source}): {override.what} {override.node_label}"
    data = {"node_id": override.node_id, "what": override.what, "source": override.source, "override_hold": True}
    timeline_add(ticket=ticket, kind=TimelineKind.OPERATOR, actor=override.actor, message=message, data=data)
    if ticket.is_open and not ticket.is_paused:
        ticket.is_paused = True
        ticket.save(update_fields=["is_paused", "updated_at"])
        timeline_add(
            ticket=ticket,
            kind=TimelineKind.OPERATOR,
            actor=override.actor,
            message="Paused",
            body=f"Paused because its hold on {override.node_label} was overridden; resume it when the "
            f"node is where this ticket expects it.",
        )


def on_schedulability_changed(change: SchedulabilityChange) -> None:
    """Drain or resume the node in its scheduler (after the CMDB change committed)."""
    from integrations.schedulers import scheduler_for

    from ..definitions.common import scheduler_node

    node = Node.objects.select_related("cluster").filter(pk=change.node_id).first()
    if node is None:
        return
    target = scheduler_node(node)
    scheduler = scheduler_for(target.cluster_kind)
    if change.cordoned:
        scheduler.drain(target, reason=change.reason)
    else:
        scheduler.resume(target)
