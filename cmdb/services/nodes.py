"""Node lifecycle and schedulability changes."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F

from .. import permissions
from ..models.nodes import Node, NodeStatus
from .changelog import records_for_bulk, records_write


@transaction.atomic
def nodes_set_status(*, nodes: Iterable[Node] | None = None, node_ids: Iterable[int] | None = None,
                     status: str, reason: str = "", actor: AbstractBaseUser | None = None) -> int:
    """Set the lifecycle status of many nodes at once: one UPDATE and one bulk INSERT of change records.

    Returns how many nodes changed. Nodes already in `status` are left alone (no record).
    """
    if status not in NodeStatus.values:
        raise ValidationError({"status": f"Unknown node status {status!r}."})
    ids = [n.pk for n in nodes] if nodes is not None else list(node_ids or [])
    if actor is not None:  # a person (admin bulk action): every node, or none (steps act as the system)
        allowed = permissions.restrict(Node.objects.filter(pk__in=ids), actor, "change").count()
        if allowed != len(set(ids)):
            raise PermissionDenied(f"You may not change {len(set(ids)) - allowed} of the selected nodes.")
    locked = list(Node.objects.select_for_update().filter(pk__in=ids).exclude(status=status))
    if not locked:
        return 0
    befores = [(n.snapshot(), n) for n in locked]
    for n in locked:
        n.status = status
    Node.objects.filter(pk__in=[n.pk for n in locked]).update(status=status, version=F("version") + 1)
    records_write(records_for_bulk(updated=befores, reason=reason))
    return len(locked)


@transaction.atomic
def node_cordon(*, node: Node, reason: str) -> Node:
    """Mark a node unschedulable. A manual cordon needs a reason (the database refuses one without)."""
    if not reason.strip():
        raise ValidationError({"cordon_reason": "A cordon needs a reason."})
    node = Node.objects.select_for_update().get(pk=node.pk)
    node.is_cordoned, node.cordon_reason = True, reason.strip()[:300]
    node.save(update_fields=["is_cordoned", "cordon_reason", "updated_at", "version"])
    return node


@transaction.atomic
def node_uncordon(*, node: Node) -> Node:
    node = Node.objects.select_for_update().get(pk=node.pk)
    node.is_cordoned, node.cordon_reason = False, ""
    node.save(update_fields=["is_cordoned", "cordon_reason", "updated_at", "version"])
    return node
