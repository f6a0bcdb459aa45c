"""Periodic upkeep run by Celery beat: flag nodes whose agent went silent, prune old raw reports."""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from cmdb.models import Node, NodeStatus
from cmdb.services.changelog import tracked_update

from ..conf import setting
from ..models import Report

BATCH = 2000
# Nodes nobody expects a report from: not built yet, or gone.
QUIET_STATUSES = (NodeStatus.PLANNED, NodeStatus.DECOMMISSIONED)


def nodes_flag_stale(*, now: dt.datetime | None = None, stale_after_minutes: int | None = None) -> int:
    """Set is_stale on nodes that reported before but not within the threshold. Returns nodes flagged.

    Batches of BATCH nodes, each one UPDATE plus one bulk INSERT of change records in its own short
    transaction: a whole site losing power flags thousands of nodes without holding locks for long. Rows are
    locked with SKIP LOCKED so a report being applied right now is not waited for (it clears the flag anyway);
    the UPDATE re-checks last_seen_at, so a report that landed in between wins.
    """
    now = now or timezone.now()
    minutes = stale_after_minutes if stale_after_minutes is not None else setting("AGENT_STALE_AFTER_MINUTES")
    cutoff = now - dt.timedelta(minutes=minutes)
    flagged = 0
    while True:
        with transaction.atomic():
            batch = list(
                Node.objects.select_for_update(skip_locked=True)
                .filter(is_stale=False, last_seen_at__lt=cutoff)
                .exclude(status__in=QUIET_STATUSES)
                .order_by("pk")[:BATCH]
            )
            if not batch:
                return flagged
            # The UPDATE re-checks last_seen_at (a report that landed in between wins).
            tracked_update(
                Node.objects.filter(last_seen_at__lt=cutoff),
                objs=batch,
                is_stale=True,
                updated_at=now,
                reason=f"agent silent for more than {minutes} minutes",
            )
            flagged += len(batch)
        if len(batch) < BATCH:
            return flagged


def reports_prune(*, keep: int | None = None) -> int:
    """Delete all but the newest `keep` reports of each node (AGENT_REPORTS_KEEP_PER_NODE). Returns rows deleted.

    Runs hourly or daily; a few thousand ids per statement."""
    keep = keep if keep is not None else setting("AGENT_REPORTS_KEEP_PER_NODE")
    by_node = {"partition_by": [F("node_id")], "order_by": F("received_at").desc()}
    # The newest report that carries a payload is kept whatever its age: the periodic full passes of an
    # unchanged node store none and point back at it.
    newest_payload = (
        Report.objects.filter(payload__isnull=False)
        .annotate(rank=Window(RowNumber(), **by_node))
        .filter(rank=1)
        .values_list("pk", flat=True)
    )
    beyond = Report.objects.annotate(rank=Window(RowNumber(), **by_node)).filter(rank__gt=keep).values("pk")
    # Excluded outside the ranked query: a WHERE inside it would filter rows before they are ranked.
    ranked = Report.objects.filter(pk__in=beyond).exclude(pk__in=newest_payload).values_list("pk", flat=True)
    deleted = 0
    while True:
        ids = list(ranked[:BATCH])
        if not ids:
            return deleted
        deleted += Report.objects.filter(pk__in=ids).delete()[0]
