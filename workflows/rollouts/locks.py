"""Node locks: the one place a change takes and gives back the nodes it works on.

A rollout locks its nodes when its plan is saved (so two plans cannot both count on a node), provisioning locks
the node it brings up, and any other workflow may lock a node the same way (`node_locks_acquire` with its own
owner key). The database holds the rule (one active lock per node, a partial unique constraint); these
functions turn a lost race into a readable refusal instead of an IntegrityError.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from .models import NodeLock


@dataclass(frozen=True)
class LockOwner:
    """Who takes the lock: `key` is stable and unique per change ("rollout:12"); `label` is what people see."""

    key: str
    label: str
    ticket_id: int | None = None


def node_lock_holders(node_ids: Iterable[int] | QuerySet, *, exclude_key: str = "") -> dict[int, str]:
    """{node id: label of the change holding it} for the given nodes (ids, or a subquery of node pks) that are
    locked (by others than `exclude_key`)."""
    ids = node_ids if isinstance(node_ids, QuerySet) else list(node_ids)
    qs = NodeLock.objects.filter(node_id__in=ids, released_at__isnull=True)
    if exclude_key:
        qs = qs.exclude(owner_key=exclude_key)
    return dict(qs.values_list("node_id", "owner_label"))


def node_locks_acquire(*, node_ids: Iterable[int], owner: LockOwner, reason: str = "") -> dict[int, str]:
    """Lock the nodes for `owner`. Nodes it holds already stay locked (idempotent).

    Returns the nodes that could not be locked, with the label of the change holding each. One bulk INSERT in
    the common case; if a concurrent change won a node between our read and our write, the INSERT fails on the
    unique constraint and we fall back to one savepoint per node to find out which.
    """
    ids = list(dict.fromkeys(node_ids))
    now = timezone.now()
    with transaction.atomic():
        held = {
            n: (k, label)
            for n, k, label in NodeLock.objects.filter(node_id__in=ids, released_at__isnull=True).values_list(
                "node_id", "owner_key", "owner_label"
            )
        }
        refused = {n: label for n, (k, label) in held.items() if k != owner.key}
        free = [n for n in ids if n not in held]

        def row(node_id: int) -> NodeLock:
            return NodeLock(
                node_id=node_id,
                owner_key=owner.key,
                owner_label=owner.label[:100],
                ticket_id=owner.ticket_id,
                reason=reason[:300],
                acquired_at=now,
            )

        try:
            with transaction.atomic():
                NodeLock.objects.bulk_create([row(n) for n in free], batch_size=2000)
        except IntegrityError:
            for n in free:
                try:
                    with transaction.atomic():
                        row(n).save()
                except IntegrityError:
                    refused[n] = node_lock_holders([n]).get(n, "another change")
    return refused


def node_locks_release(*, owner_key: str, node_ids: Iterable[int] | None = None) -> int:
    """Release the owner's active locks (all of them, or only on `node_ids`). Returns how many were released."""
    qs = NodeLock.objects.filter(owner_key=owner_key, released_at__isnull=True)
    if node_ids is not None:
        qs = qs.filter(node_id__in=list(node_ids))
    return qs.update(released_at=timezone.now())


def node_locks_held(owner_key: str) -> set[int]:
    """The nodes the owner holds now."""
    return set(NodeLock.objects.filter(owner_key=owner_key, released_at__isnull=True).values_list("node_id", flat=True))


__all__ = ["LockOwner", "node_lock_holders", "node_locks_acquire", "node_locks_held", "node_locks_release"]
