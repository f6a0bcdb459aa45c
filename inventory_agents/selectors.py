"""Reads of ingestion state for pages (permission-scoped through the reporting node)."""

from __future__ import annotations

import datetime as dt

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count

from cmdb.models import Node
from cmdb.permissions import restrict

from .models import Report, ReportStatus

#: Reports the server did not apply: refused as invalid or for another host, or failed while applying.
REFUSED_STATUSES = (ReportStatus.REJECTED, ReportStatus.FAILED)


def refused_reports_by_site(*, user: AbstractBaseUser, since: dt.datetime) -> dict[str, int]:
    """Reports received since `since` that were not applied, per site of the reporting node, counting only the
    nodes `user` may see: one GROUP BY query."""
    rows = (
        Report.objects.filter(
            status__in=REFUSED_STATUSES,
            received_at__gte=since,
            node__in=restrict(Node.objects.all(), user, "view"),
        )
        .order_by()
        .values_list("node__site__code")
        .annotate(n=Count("id"))
    )
    return dict(sorted(rows))


__all__ = ["REFUSED_STATUSES", "refused_reports_by_site"]
