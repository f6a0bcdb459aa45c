"""Reads of received alerts, scoped like the inventory: those of the nodes the user may see; alerts with no node
(an unknown host) only with the global view permission on received alerts."""

from __future__ import annotations

from django.db.models import QuerySet

from cmdb.permissions import restrict

from .models import AlertStatus, ReceivedAlert


def received_alert_list(user) -> QuerySet[ReceivedAlert]:
    return (
        restrict(ReceivedAlert.objects.all(), user, "view")
        .select_related("source", "node", "accelerator", "rule")
        .order_by("-received_at", "-id")
    )


def unmatched_alerts_firing(user, *, limit: int = 10) -> tuple[int, list[ReceivedAlert]]:
    """For the console's dashboard: how many firing alerts matched nothing, and the newest `limit` of them
    (two queries whatever their number)."""
    qs = received_alert_list(user).filter(status=AlertStatus.FIRING, is_matched=False)
    return qs.count(), list(qs[:limit])
