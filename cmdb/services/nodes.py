"""Node lifecycle and schedulability changes: the one writer of Node.status, is_cordoned and cordon_reason.

Every path (API, admin, workflow steps, tasks) calls these. Inside the transaction each one
1. locks the nodes, 2. checks the actor of the change context may change them (`nodes_check_change`),
3. refuses nodes held by another open change (cmdb.holds) unless overridden, 4. writes and records the change,
5. (cordon / uncordon) tells the scheduler on commit through the `schedulability_changed` hook.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from gpuops.context import ChangeSource, current_context

from .. import permissions
from ..holds import holds_check
from ..hooks import SchedulabilityChange, schedulability_changed
from ..models.nodes import Node, NodeStatus
from ..permissions import workflow_may_change
from .changelog import tracked_update

# Statuses that take a node out of service: a workflow may move a node held by another change into these.
WITHDRAWN_STATUSES = frozenset(
    {NodeStatus.DRAINING, NodeStatus.MAINTENANCE, NodeStatus.FAILED, NodeStatus.RMA, NodeStatus.DECOMMISSIONED}
)


def nodes_check_change(nodes: Sequence[Node]) -> None:
    """PermissionDenied unless the change context's actor may change every node.

    A person: cmdb.permissions.can (global permission, scope grant, object grant). A workflow step: only nodes
    linked to its change (the ticket's links, the rollout's or provisioning's nodes). A context without an
    authenticated actor (system, CLI, tasks) is trusted: it runs our own code, not a request.
    """
    ctx = current_context()
    if ctx.source == ChangeSource.WORKFLOW:
        ids = [n.pk for n in nodes]
        allowed = workflow_may_change(ctx.correlation_id, ids)
        denied = [n for n in nodes if n.pk not in allowed]
        if denied:
            raise PermissionDenied(f"This change may not touch {denied[0]}: it is not linked to its ticket.")
        return
    if ctx.actor_id is None:
        return
    _person_check(ctx.user, [n.pk for n in nodes])


def _person_check(user: AbstractBaseUser, ids: Sequence[int]) -> None:
    """PermissionDenied unless `user` may change every node of `ids`: one scoped query for the whole batch."""
    allowed = set(permissions.restrict(Node.objects.filter(pk__in=ids), user, "change").values_list("pk", flat=True))
    denied = [pk for pk in dict.fromkeys(ids) if pk not in allowed]
    if denied:
        first = Node.objects.filter(pk=denied[0]).values_list("hostname", flat=True).first()
        more = f" and {len(denied) - 1} more" if len(denied) > 1 else ""
        raise PermissionDenied(f"You may not change node {first}{more}.")


def _guard(nodes: Sequence[Node], *, what: str, withdraws: bool, override: bool) -> None:
    nodes_check_change(nodes)
    holds_check(
        [n.pk for n in nodes],
        what=what,
        withdraws=withdraws,
        override=override,
        labels={n.pk: n.hostname for n in nodes},
    )


def _notify(nodes: Sequence[Node], *, cordoned: bool, notify_scheduler: bool | None) -> None:
    # Workflow steps drain/resume through ctx.external themselves (idempotent, retried): no second call.
    if notify_scheduler is None:
        notify_scheduler = current_context().source != ChangeSource.WORKFLOW
    if not notify_scheduler:
        return
    for node in nodes:
        change = SchedulabilityChange(node_id=node.pk, cordoned=cordoned, reason=node.cordon_reason)
        transaction.on_commit(lambda change=change: schedulability_changed(change))


@transaction.atomic
def nodes_set_status(
    *,
    nodes: Iterable[Node] | None = None,
    node_ids: Iterable[int] | None = None,
    status: str,
    reason: str = "",
    override_hold: bool = False,
    actor: AbstractBaseUser | None = None,
) -> int:
    """Set the lifecycle status of many nodes at once: one UPDATE and one bulk INSERT of change records.

    Returns how many nodes changed. Nodes already in `status` are left alone (no record). Raises
    PermissionDenied / HeldError (nothing written) when any node may not be changed.
    """
    if status not in NodeStatus.values:
        raise ValidationError({"status": f"Unknown node status {status!r}."})
    ids = [n.pk for n in nodes] if nodes is not None else list(node_ids or [])
    if actor is not None:  # a person named by the caller (admin bulk action): every selected node, or none
        _person_check(actor, ids)
    locked = list(Node.objects.select_for_update().filter(pk__in=ids).exclude(status=status).order_by("pk"))
    if not locked:
        return 0
    _guard(locked, what=f"set status {status} on", withdraws=status in WITHDRAWN_STATUSES, override=override_hold)
    tracked_update(Node.objects.all(), objs=locked, status=status, reason=reason)
    return len(locked)


@transaction.atomic
def node_cordon(*, node: Node, reason: str, override_hold: bool = False, notify_scheduler: bool | None = None) -> Node:
    """Mark a node unschedulable. A manual cordon needs a reason (the database refuses one without).

    `notify_scheduler`: drain it in its scheduler on commit; by default unless a workflow step does it itself.
    """
    if not reason.strip():
        raise ValidationError({"cordon_reason": "A cordon needs a reason."})
    node = Node.objects.select_for_update().get(pk=node.pk)
    _guard([node], what="cordon", withdraws=True, override=override_hold)
    node.is_cordoned, node.cordon_reason = True, reason.strip()[:300]
    node.save(update_fields=["is_cordoned", "cordon_reason", "updated_at", "version"])
    _notify([node], cordoned=True, notify_scheduler=notify_scheduler)
    return node


@transaction.atomic
def node_uncordon(*, node: Node, override_hold: bool = False, notify_scheduler: bool | None = None) -> Node:
    """Make a node schedulable again (and resume it in its scheduler on commit, as for node_cordon)."""
    node = Node.objects.select_for_update().get(pk=node.pk)
    _guard([node], what="uncordon", withdraws=False, override=override_hold)
    node.is_cordoned, node.cordon_reason = False, ""
    node.save(update_fields=["is_cordoned", "cordon_reason", "updated_at", "version"])
    _notify([node], cordoned=False, notify_scheduler=notify_scheduler)
    return node


def node_schedulability_set(*, node: Node, is_cordoned: bool, reason: str = "", override_hold: bool = False) -> Node:
    """Cordon (with `reason`) or uncordon, for callers holding a desired state (a form, a PATCH)."""
    if is_cordoned:
        return node_cordon(node=node, reason=reason, override_hold=override_hold)
    return node_uncordon(node=node, override_hold=override_hold)


@transaction.atomic
def node_cluster_clear(*, node: Node, override_hold: bool = False) -> Node:
    """Take a node out of its cluster in the CMDB (the scheduler side is the adapter's)."""
    locked = Node.objects.select_for_update().get(pk=node.pk)
    if locked.cluster_id is not None:
        _guard([locked], what="take out of its cluster", withdraws=True, override=override_hold)
        locked.cluster = None
        locked.save(update_fields=["cluster", "updated_at", "version"])
    return locked


@transaction.atomic
def node_unrack(*, node: Node, override_hold: bool = False) -> Node:
    """Clear a node's rack and position; its RackUnit rows follow (cmdb signal), freeing the U space."""
    locked = Node.objects.select_for_update().get(pk=node.pk)
    if locked.rack_id is not None or locked.position is not None:
        _guard([locked], what="unrack", withdraws=False, override=override_hold)
        locked.rack, locked.position = None, None
        locked.save(update_fields=["rack", "position", "updated_at", "version"])
    return locked
