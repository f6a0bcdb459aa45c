"""Reads of scheduler drift, scoped like the inventory (by the node's site, cluster and tenant)."""

from __future__ import annotations

import datetime as dt

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from cmdb.models import Node, NodeAllocation
from cmdb.permissions import restrict

from ..models import SchedulerDrift


def scheduler_drift_list(user) -> QuerySet[SchedulerDrift]:
    return (
        restrict(SchedulerDrift.objects.all(), user, "view")
        .select_related("node__site", "cluster")
        .order_by("-first_seen_at", "-id")
    )


def scheduler_drift_open_by_site(user) -> dict[str, int]:
    """Open drifts per site code, for the dashboard (one query)."""
    rows = (
        scheduler_drift_list(user)
        .filter(resolved_at__isnull=True)
        .order_by()
        .values("node__site__code")
        .annotate(n=Count("id"))
    )
    return {r["node__site__code"] or "none": r["n"] for r in rows}


def scheduler_drift_open_for_node(node: Node) -> SchedulerDrift | None:
    """The node's open drift, if any (for its page, which has checked that the user may see the node)."""
    return SchedulerDrift.objects.filter(node=node, resolved_at__isnull=True).select_related("cluster").first()


def node_allocation_list(user, *, idle_days: int | None = None) -> QuerySet[NodeAllocation]:
    """What the schedulers last said of the nodes' accelerators, scoped like the nodes. `idle_days`: only nodes
    with accelerators and none allocated that have had none allocated for that long (or ever, as far as read)."""
    qs = restrict(NodeAllocation.objects.all(), user, "view").select_related("node__site", "node__cluster")
    if idle_days is not None:
        since = timezone.now() - dt.timedelta(days=idle_days)
        qs = qs.filter(total__gt=0, allocated=0).filter(
            Q(last_allocated_at__lt=since) | Q(last_allocated_at__isnull=True)
        )
    return qs.order_by("node__hostname")


__all__ = [
    "node_allocation_list",
    "scheduler_drift_list",
    "scheduler_drift_open_by_site",
    "scheduler_drift_open_for_node",
]
