"""Scheduler state synced back: what Slurm or Kubernetes says of each node against what the CMDB says.

A node drained in Slurm by hand, or resumed in Kubernetes while a repair runs, is a disagreement that an operator
must see; the sync never overwrites either side. It records one open `SchedulerDrift` per disagreeing node (with
the scheduler's own state and reason), refreshes it while it lasts and resolves it when the two agree again.

Only clusters whose kind has a real adapter configured are read (the no-op scheduler knows nothing), and only
nodes in a lifecycle where the scheduler should know them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from cmdb.models import Cluster, Node, NodeStatus
from cmdb.services.allocation import AllocationReading, node_allocations_record

from ..exceptions import PermanentError
from ..models import DriftKind, SchedulerDrift
from .base import JobReader, SchedulerNode, SchedulerNodeState
from .registry import scheduler_configured, scheduler_for

logger = logging.getLogger(__name__)

# Nodes the scheduler should know: in service or being worked on. Planned, racked, provisioning, RMA and
# decommissioned nodes are not (yet, or any more) in a partition.
SYNCED_STATUSES = (NodeStatus.ACTIVE, NodeStatus.DRAINING, NodeStatus.MAINTENANCE)


@dataclass
class SyncResult:
    cluster: str
    nodes: int = 0
    opened: list[str] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)
    still_open: int = 0


def nodes_state_read(cluster: Cluster, names: list[str]) -> dict[str, SchedulerNodeState]:
    """The scheduler's state of `names`: the adapter's bulk read where it has one (one call for the cluster),
    else one `node_state` per node. A node the scheduler does not know is absent from the answer."""
    scheduler = scheduler_for(cluster.kind)
    bulk = getattr(scheduler, "nodes_state", None)
    targets = [SchedulerNode(name=n, cluster=cluster.name, cluster_kind=cluster.kind) for n in names]
    if bulk is not None:
        return bulk(targets)
    states: dict[str, SchedulerNodeState] = {}
    for target in targets:
        try:
            states[target.name] = scheduler.node_state(target)
        except PermanentError:
            continue  # unknown to the scheduler: reported as missing
    return states


def _drift_kind(node: Node, state: SchedulerNodeState | None) -> str | None:
    if state is None:
        return DriftKind.MISSING
    if state.is_schedulable and node.is_cordoned:
        return DriftKind.SCHEDULER_SCHEDULABLE
    if not state.is_schedulable and not node.is_cordoned:
        return DriftKind.SCHEDULER_UNSCHEDULABLE
    return None


def scheduler_drift_sync(cluster_id: int) -> SyncResult:
    """Read the cluster's scheduler and record where it and the CMDB disagree. Transient scheduler errors
    propagate (the task retries); the CMDB side is written in one transaction after the read."""
    cluster = Cluster.objects.get(pk=cluster_id)
    result = SyncResult(cluster=cluster.name)
    nodes = list(
        Node.objects.filter(cluster=cluster, status__in=SYNCED_STATUSES).only(
            "id", "hostname", "is_cordoned", "cordon_reason", "cluster_id"
        )
    )
    result.nodes = len(nodes)
    states = nodes_state_read(cluster, [n.hostname for n in nodes]) if nodes else {}
    now = timezone.now()
    with transaction.atomic():
        open_rows = {
            d.node_id: d
            for d in SchedulerDrift.objects.select_for_update().filter(cluster=cluster, resolved_at__isnull=True)
        }
        synced_ids = {n.pk for n in nodes}
        # Open drifts of nodes that left the cluster or the synced lifecycles are over.
        gone = [d.pk for node_id, d in open_rows.items() if node_id not in synced_ids]
        SchedulerDrift.objects.filter(pk__in=gone).update(resolved_at=now)
        to_create, to_update, to_resolve = [], [], []
        for node in nodes:
            state = states.get(node.hostname)
            kind = _drift_kind(node, state)
            row = open_rows.get(node.pk)
            if row is not None and row.kind != kind:
                to_resolve.append(row.pk)
                result.resolved.append(node.hostname)
                row = None
            if kind is None:
                continue
            fields = {
                "scheduler_state": (state.state if state else "")[:200],
                "scheduler_reason": (state.reason if state else "")[:500],
                "cmdb_cordoned": node.is_cordoned,
                "cmdb_cordon_reason": node.cordon_reason,
                "last_seen_at": now,
            }
            if row is None:
                to_create.append(SchedulerDrift(node=node, cluster=cluster, kind=kind, first_seen_at=now, **fields))
                result.opened.append(node.hostname)
            else:
                for name, value in fields.items():
                    setattr(row, name, value)
                to_update.append(row)
        SchedulerDrift.objects.filter(pk__in=to_resolve).update(resolved_at=now)
        SchedulerDrift.objects.bulk_create(to_create)
        SchedulerDrift.objects.bulk_update(
            to_update, ["scheduler_state", "scheduler_reason", "cmdb_cordoned", "cmdb_cordon_reason", "last_seen_at"]
        )
        result.still_open = len(to_update)
    for hostname in result.opened:
        logger.warning("scheduler drift: %s in %s (%s)", hostname, cluster.name, states.get(hostname))
    return result


def scheduler_allocation_sync(cluster_id: int) -> int | None:
    """Record how many accelerators the scheduler has allocated on each of the cluster's synced nodes (one bulk
    read, one upsert). None when the adapter cannot tell; the number of nodes written otherwise."""
    cluster = Cluster.objects.get(pk=cluster_id)
    scheduler = scheduler_for(cluster.kind)
    if not isinstance(scheduler, JobReader):
        return None
    ids = dict(Node.objects.filter(cluster=cluster, status__in=SYNCED_STATUSES).values_list("hostname", "id"))
    if not ids:
        return 0
    targets = [SchedulerNode(name=name, cluster=cluster.name, cluster_kind=cluster.kind) for name in ids]
    read = scheduler.nodes_allocation(targets)
    readings = {ids[name]: AllocationReading(a.total, a.allocated) for name, a in read.items() if name in ids}
    return node_allocations_record(scheduler=cluster.kind, readings=readings, observed_at=timezone.now())


def synced_clusters() -> list[int]:
    """Clusters whose kind has a real scheduler adapter configured."""
    kinds = {kind for kind in Cluster.objects.values_list("kind", flat=True).distinct() if scheduler_configured(kind)}
    return list(Cluster.objects.filter(kind__in=kinds).order_by("pk").values_list("pk", flat=True))


__all__ = [
    "SYNCED_STATUSES",
    "SyncResult",
    "nodes_state_read",
    "scheduler_allocation_sync",
    "scheduler_drift_sync",
    "synced_clusters",
]
