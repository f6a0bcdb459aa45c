"""Lifecycle reads for the weekly capacity review: warranties about to end, cards nobody uses, RMA turnaround.

Selectors (user first, read through cmdb.permissions.restrict like every list): what a user may not see is
neither listed nor counted. Each figure is one aggregate query whatever the fleet size; the lists beside them are
capped at LIST_MAX rows (their totals say how many more there are, and the API's filtered lists give them all).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F, Max, Min, Q, QuerySet
from django.utils import timezone

from .models import Accelerator, AcceleratorLifecycle, AcceleratorPlacement, Node, NodeStatus, PlacementKind
from .permissions import restrict

#: rows listed beside each figure (the counts cover every row)
LIST_MAX = 200
MAX_DAYS = 3650
#: an allocation read older than this says nothing about now (the scheduler sync runs every few minutes)
ALLOCATION_FRESH = dt.timedelta(days=2)


class ReportQueryError(ValueError):
    """A bad parameter of a report (here and in cmdb.capacity): `field` names it."""

    def __init__(self, field_name: str, message: str) -> None:
        self.field = field_name
        super().__init__(message)


def days_param(params: Any, name: str, default: int, *, low: int = 0, high: int = MAX_DAYS) -> int:
    """The whole number of days `params[name]` (default `default`); ReportQueryError unless low <= it <= high."""
    raw = str(params.get(name) or default).strip()
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ReportQueryError(name, f"{name} must be a whole number of days from {low} to {high}.")
    return int(raw)


def _key(value: Any) -> str:
    return str(value) if value not in (None, "") else "none"


def _grouped(queryset: QuerySet, **paths: str) -> list[dict[str, Any]]:
    """Counts per combination of `paths` ({name: lookup path}) in one GROUP BY, largest first."""
    rows = queryset.order_by().values(*paths.values()).annotate(n=Count("pk"))
    out = [{**{name: _key(r[path]) for name, path in paths.items()}, "n": r["n"]} for r in rows]
    return sorted(out, key=lambda r: (-r["n"], *(r[name] for name in paths)))


# --- warranty ----------------------------------------------------------------------------------------------------


@dataclass
class WarrantyReport:
    today: dt.date
    until: dt.date
    cards_by_site_vendor: list[dict[str, Any]]
    nodes_by_site_vendor: list[dict[str, Any]]
    cards: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    cards_total: int = 0
    nodes_total: int = 0
    expired_cards_in_service: int = 0
    expired_nodes_in_service: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "from": self.today.isoformat(),
            "until": self.until.isoformat(),
            "cards_total": self.cards_total,
            "nodes_total": self.nodes_total,
            "expired_cards_in_service": self.expired_cards_in_service,
            "expired_nodes_in_service": self.expired_nodes_in_service,
            "cards_by_site_vendor": self.cards_by_site_vendor,
            "nodes_by_site_vendor": self.nodes_by_site_vendor,
            "cards": self.cards,
            "nodes": self.nodes,
        }


# Cards and nodes whose warranty still matters: not scrapped / decommissioned.
_LIVE_CARDS = ~Q(lifecycle=AcceleratorLifecycle.SCRAPPED)
_LIVE_NODES = ~Q(status=NodeStatus.DECOMMISSIONED)


def warranty_ending(
    user: AbstractBaseUser, *, days: int, site: str = "", vendor: str = "", today: dt.date | None = None
) -> WarrantyReport:
    """Cards and nodes whose warranty ends in the next `days` days (from today, inclusive), by site and vendor;
    and how many still in use have a warranty that already ended."""
    today = today or timezone.localdate()
    until = today + dt.timedelta(days=days)
    cards = restrict(Accelerator.objects.all(), user, "view").filter(_LIVE_CARDS)
    nodes = restrict(Node.objects.all(), user, "view").filter(_LIVE_NODES)
    if site:
        cards, nodes = cards.filter(site__code=site), nodes.filter(site__code=site)
    if vendor:
        cards, nodes = cards.filter(model__vendor__slug=vendor), nodes.filter(server_model__vendor__slug=vendor)
    ending_cards = cards.filter(warranty_end__gte=today, warranty_end__lte=until)
    ending_nodes = nodes.filter(warranty_end__gte=today, warranty_end__lte=until)
    card_groups = _grouped(ending_cards, site="site__code", vendor="model__vendor__slug")
    node_groups = _grouped(ending_nodes, site="site__code", vendor="server_model__vendor__slug")
    card_rows = list(
        ending_cards.order_by("warranty_end", "pk").values(
            "id", "serial", "warranty_end", "lifecycle", "site__code", "node__hostname", "model__name"
        )[:LIST_MAX]
    )
    node_rows = list(
        ending_nodes.order_by("warranty_end", "pk").values(
            "id", "hostname", "serial", "warranty_end", "status", "site__code", "server_model__name"
        )[:LIST_MAX]
    )
    return WarrantyReport(
        today=today,
        until=until,
        cards_by_site_vendor=card_groups,
        nodes_by_site_vendor=node_groups,
        cards=[_iso(r) for r in card_rows],
        nodes=[_iso(r) for r in node_rows],
        cards_total=sum(g["n"] for g in card_groups),
        nodes_total=sum(g["n"] for g in node_groups),
        expired_cards_in_service=cards.filter(warranty_end__lt=today, lifecycle=AcceleratorLifecycle.INSTALLED).count(),
        expired_nodes_in_service=nodes.filter(warranty_end__lt=today, status=NodeStatus.ACTIVE).count(),
    )


def _iso(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, dt.date) else v) for k, v in row.items()}


# --- idle cards --------------------------------------------------------------------------------------------------


@dataclass
class IdleReport:
    days: int
    since: dt.datetime
    by_tenant_cluster: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    cards_total: int = 0
    nodes_total: int = 0
    unread_nodes: int = 0  # installed cards on nodes no scheduler has reported on

    def as_dict(self) -> dict[str, Any]:
        return {
            "days": self.days,
            "idle_since_before": self.since.isoformat(),
            "cards_total": self.cards_total,
            "nodes_total": self.nodes_total,
            "nodes_without_scheduler_data": self.unread_nodes,
            "by_tenant_cluster": self.by_tenant_cluster,
            "nodes": self.nodes,
        }


def idle_cards(user: AbstractBaseUser, *, days: int, site: str = "", now: dt.datetime | None = None) -> IdleReport:
    """Installed cards on nodes in a cluster whose scheduler has allocated none of them for `days` days (or never,
    as far as it was read: `allocation.last_allocated_at` empty), with who holds them (tenant, cluster).

    Idle is what the scheduler says (cmdb.NodeAllocation, refreshed by the scheduler sync), so a node whose
    scheduler does not account for accelerators (allocated unknown) or was last read over ALLOCATION_FRESH ago is
    not called idle; nodes with no scheduler data at all are counted apart."""
    now = now or timezone.now()
    since = now - dt.timedelta(days=days)
    nodes = restrict(Node.objects.all(), user, "view").filter(cluster__isnull=False, status=NodeStatus.ACTIVE)
    if site:
        nodes = nodes.filter(site__code=site)
    idle_nodes = nodes.filter(
        Q(allocation__last_allocated_at__lt=since) | Q(allocation__last_allocated_at__isnull=True),
        allocation__total__gt=0,
        allocation__allocated=0,
        allocation__observed_at__gte=now - ALLOCATION_FRESH,
    )
    cards = restrict(Accelerator.objects.all(), user, "view").filter(
        lifecycle=AcceleratorLifecycle.INSTALLED, node__in=idle_nodes.values("pk")
    )
    groups = _grouped(cards, tenant="node__tenant__slug", cluster="node__cluster__name")
    rows = (
        idle_nodes.annotate(cards=Count("accelerators", filter=Q(accelerators__lifecycle="installed")))
        .order_by(F("allocation__last_allocated_at").asc(nulls_first=True), "hostname")
        .values(
            "id",
            "hostname",
            "site__code",
            "cluster__name",
            "tenant__slug",
            "cards",
            "is_cordoned",
            "allocation__last_allocated_at",
            "allocation__observed_at",
        )[:LIST_MAX]
    )
    node_rows = [
        {
            "id": r["id"],
            "hostname": r["hostname"],
            "site": r["site__code"],
            "cluster": r["cluster__name"],
            "tenant": r["tenant__slug"],
            "cards": r["cards"],
            "is_cordoned": r["is_cordoned"],
            "last_allocated_at": _when(r["allocation__last_allocated_at"]),
            "idle_days": (now - r["allocation__last_allocated_at"]).days
            if r["allocation__last_allocated_at"]
            else None,
            "observed_at": _when(r["allocation__observed_at"]),
        }
        for r in rows
    ]
    return IdleReport(
        days=days,
        since=since,
        by_tenant_cluster=groups,
        nodes=node_rows,
        cards_total=sum(g["n"] for g in groups),
        nodes_total=idle_nodes.count(),
        unread_nodes=nodes.filter(allocation__isnull=True).count(),
    )


def _when(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value else None


# --- RMA turnaround ----------------------------------------------------------------------------------------------


@dataclass
class TurnaroundRow:
    vendor: str
    returned: int
    avg_days: float | None
    max_days: float | None
    open: int
    oldest_open_days: float | None
    cards_open: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "vendor": self.vendor,
            "returned": self.returned,
            "avg_days": self.avg_days,
            "max_days": self.max_days,
            "open": self.open,
            "oldest_open_days": self.oldest_open_days,
        }


def _days(value: dt.timedelta | None) -> float | None:
    return round(value.total_seconds() / 86400, 1) if value is not None else None


def rma_turnaround(user: AbstractBaseUser, *, days: int, now: dt.datetime | None = None) -> list[TurnaroundRow]:
    """Per vendor: the cards back from the vendor in the last `days` days and how long they were away (average,
    longest), and the cards at the vendor now with the oldest's age. From the placement history (at_vendor)."""
    now = now or timezone.now()
    start = now - dt.timedelta(days=days)
    visible = restrict(Accelerator.objects.all(), user, "view").values("pk")
    away = AcceleratorPlacement.objects.filter(kind=PlacementKind.AT_VENDOR, accelerator_id__in=visible)
    duration = ExpressionWrapper(F("ended_at") - F("started_at"), output_field=DurationField())
    returned = {
        _key(r["accelerator__model__vendor__slug"]): r
        for r in away.filter(ended_at__gte=start, ended_at__lte=now)
        .order_by()
        .values("accelerator__model__vendor__slug")
        .annotate(n=Count("pk"), avg=Avg(duration), longest=Max(duration))
    }
    still = {
        _key(r["accelerator__model__vendor__slug"]): r
        for r in away.filter(ended_at__isnull=True)
        .order_by()
        .values("accelerator__model__vendor__slug")
        .annotate(n=Count("pk"), since=Min("started_at"))
    }
    rows = []
    for vendor in sorted(set(returned) | set(still)):
        back, out = returned.get(vendor), still.get(vendor)
        rows.append(
            TurnaroundRow(
                vendor=vendor,
                returned=back["n"] if back else 0,
                avg_days=_days(back["avg"]) if back else None,
                max_days=_days(back["longest"]) if back else None,
                open=out["n"] if out else 0,
                oldest_open_days=_days(now - out["since"]) if out else None,
            )
        )
    return rows
