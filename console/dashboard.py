"""The fleet dashboard's figures: every number is counted over what the user may see, and carries the URL of the
filtered list behind it (the lists take the API filter sets' parameters: cmdb/filtersets.py, the ticket list's
filters, the stock overview's `site` / `below_minimum`).

A fixed number of aggregate queries builds the whole page (one GROUP BY per figure plus the permission lookups),
whatever the size of the fleet.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.utils import timezone

from cmdb import selectors as cmdb_selectors
from cmdb.models import Health, NodeStatus, Site
from cmdb.permissions import SCOPE_MODELS, restrict, user_scope_ids
from integrations.monitoring.selectors import unmatched_alerts_firing
from integrations.schedulers.selectors import scheduler_drift_open_by_site
from integrations.warehouse.services.stock import StockLine, stock_lines
from inventory_agents import selectors as agent_selectors
from inventory_agents.conf import setting as agent_setting
from workflows import selectors as ticket_selectors
from workflows.registry import workflow_or_none
from workflows.rollouts.selectors import RolloutInFlight, rollouts_in_flight

from .charts import Bar, Segment, largest, stacked_bar

HEALTH_ORDER = (Health.OK, Health.DEGRADED, Health.FAILED, Health.UNKNOWN)
HEALTH_TONES = {Health.OK: "ok", Health.DEGRADED: "warn", Health.FAILED: "bad", Health.UNKNOWN: "muted"}
STATUS_TONES = {
    NodeStatus.PLANNED: "muted",
    NodeStatus.RECEIVED: "build",
    NodeStatus.RACKED: "build",
    NodeStatus.PROVISIONING: "build",
    NodeStatus.BURN_IN: "build",
    NodeStatus.ACTIVE: "ok",
    NodeStatus.DRAINING: "warn",
    NodeStatus.MAINTENANCE: "warn",
    NodeStatus.FAILED: "bad",
    NodeStatus.RMA: "bad",
    NodeStatus.DECOMMISSIONED: "gone",
}
AGE_TONES = ("ok", "build", "warn", "bad")
# A holder's kind is a ticket type, or a lock owner's prefix (rollout:<id>): the ticket list that shows it.
HOLDER_TICKET_TYPES = {"rollout": "driver_rollout"}
# Held nodes are listed by host name while the link stays a reasonable length.
HELD_LINK_MAX = 200
REPORTS_WINDOW = dt.timedelta(hours=24)


def list_url(path: str, **params: Any) -> str:
    """`path` with the non-empty `params` as its query string (in the given order)."""
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{path}?{query}" if query else path


def _site_param(site: str) -> str:
    return "null" if site == "none" else site


SCHEDULER_DRIFT_URL = "/api/integrations/schedulers/drift/"


@dataclass(frozen=True)
class Cell:
    """A number and the list it counts."""

    value: int
    href: str = ""


@dataclass
class VendorRow:
    vendor: str
    health: list[Cell]
    total: Cell
    missing: Cell
    bar: Bar | None = None


@dataclass
class SiteAccelerators:
    site: str
    total: Cell
    vendors: list[VendorRow] = field(default_factory=list)


@dataclass
class SiteNodes:
    site: str
    statuses: list[Cell]
    total: Cell
    cordoned: Cell
    schedulable: Cell
    stale: Cell
    silent: Cell
    bar: Bar | None = None


@dataclass
class TicketRow:
    type: str
    label: str
    total: Cell
    ages: list[Cell]
    overdue: Cell
    bar: Bar | None = None


@dataclass
class HeldRow:
    site: str
    kinds: list[Cell]
    total: Cell


@dataclass
class DriftRow:
    site: str
    missing_cards: Cell
    cabling_faults: Cell
    conflicts: Cell
    refused_reports: Cell
    scheduler_drift: Cell


@dataclass
class StockRow:
    line: StockLine
    href: str
    bar: Bar


@dataclass
class RolloutRow:
    item: RolloutInFlight
    href: str
    bar: Bar


def _accelerators(user: AbstractBaseUser) -> dict[str, Any]:
    rows = cmdb_selectors.accelerator_breakdown(user=user)
    by: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    missing: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        by[r["site"]][r["vendor"]][r["health"]] += r["n"]
        missing[r["site"]][r["vendor"]] += r["missing"]
    sites: list[SiteAccelerators] = []
    for site in sorted(by):
        p = _site_param(site)
        group = SiteAccelerators(
            site=site,
            total=Cell(sum(sum(h.values()) for h in by[site].values()), list_url("/accelerators/", site=p)),
        )
        for vendor in sorted(by[site]):
            counts = by[site][vendor]
            group.vendors.append(
                VendorRow(
                    vendor=vendor,
                    health=[
                        Cell(counts.get(h, 0), list_url("/accelerators/", site=p, vendor=vendor, health=h))
                        for h in HEALTH_ORDER
                    ],
                    total=Cell(sum(counts.values()), list_url("/accelerators/", site=p, vendor=vendor)),
                    missing=Cell(
                        missing[site][vendor], list_url("/accelerators/", site=p, vendor=vendor, is_missing="true")
                    ),
                )
            )
        sites.append(group)
    scale = largest([v.total.value for g in sites for v in g.vendors])
    for g in sites:
        for v in g.vendors:
            v.bar = stacked_bar(
                [
                    Segment(f"{g.site} {v.vendor} {h.label}", c.value, HEALTH_TONES[h], c.href)
                    for h, c in zip(HEALTH_ORDER, v.health, strict=True)
                ],
                scale=scale,
            )
    health_totals = defaultdict(int)
    for r in rows:
        health_totals[r["health"]] += r["n"]
    return {
        "sites": sites,
        "total": Cell(sum(health_totals.values()), "/accelerators/"),
        "health": [
            (h.label, Cell(health_totals.get(h, 0), list_url("/accelerators/", health=h))) for h in HEALTH_ORDER
        ],
        "health_labels": [h.label for h in HEALTH_ORDER],
        "missing": Cell(sum(r["missing"] for r in rows), list_url("/accelerators/", is_missing="true")),
    }


def _nodes(user: AbstractBaseUser, now: dt.datetime) -> dict[str, Any]:
    stale_minutes = int(agent_setting("AGENT_STALE_AFTER_MINUTES"))
    stale_after = dt.timedelta(minutes=stale_minutes)
    # Whole seconds, so the link's `last_seen_at__lte` names the same instant the count used.
    cutoff = (now - stale_after).replace(microsecond=0)
    rows = cmdb_selectors.node_breakdown(user=user, stale_after=stale_after, now=cutoff + stale_after)
    present = {r["status"] for r in rows}
    statuses = [s for s in NodeStatus if s in present]
    reporting = ",".join(s for s in NodeStatus if s not in cmdb_selectors.QUIET_STATUSES)
    cutoff_param = cutoff.astimezone(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")

    def site_row(site: str, subset: list[dict[str, Any]]) -> SiteNodes:
        p = _site_param(site) if site else ""
        per_status: dict[str, int] = defaultdict(int)
        for r in subset:
            per_status[r["status"]] += r["n"]
        return SiteNodes(
            site=site or "all",
            statuses=[Cell(per_status.get(s, 0), list_url("/nodes/", site=p, status=s)) for s in statuses],
            total=Cell(sum(r["n"] for r in subset), list_url("/nodes/", site=p)),
            cordoned=Cell(
                sum(r["n"] for r in subset if r["is_cordoned"]), list_url("/nodes/", site=p, is_cordoned="true")
            ),
            schedulable=Cell(
                sum(r["n"] for r in subset if r["status"] == NodeStatus.ACTIVE and not r["is_cordoned"]),
                list_url("/nodes/", site=p, status=NodeStatus.ACTIVE, is_cordoned="false"),
            ),
            stale=Cell(sum(r["stale"] for r in subset), list_url("/nodes/", site=p, is_stale="true")),
            silent=Cell(
                sum(r["silent"] for r in subset),
                list_url("/nodes/", site=p, status__in=reporting, last_seen_at__lte=cutoff_param),
            ),
        )

    by_site: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_site[r["site"]].append(r)
    sites = [site_row(site, by_site[site]) for site in sorted(by_site)]
    scale = largest([s.total.value for s in sites])
    for s in sites:
        s.bar = stacked_bar(
            [
                Segment(f"{s.site} {st.label}", c.value, STATUS_TONES[st], c.href)
                for st, c in zip(statuses, s.statuses, strict=True)
            ],
            scale=scale,
        )
    all_row = site_row("", rows)
    return {
        "sites": sites,
        "all": all_row,
        "statuses": [(s.value, s.label, STATUS_TONES[s]) for s in statuses],
        "status_totals": [
            (s.value, s.label, STATUS_TONES[s], c) for s, c in zip(statuses, all_row.statuses, strict=True)
        ],
        "stale_minutes": stale_minutes,
    }


def _held(user: AbstractBaseUser) -> dict[str, Any]:
    held = cmdb_selectors.held_nodes(user=user)
    kinds_by_site: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for node_id, (site, _hostname, holders) in held.items():
        for holder in holders:
            kinds_by_site[site][holder.kind].add(node_id)
    kinds = sorted({k for per in kinds_by_site.values() for k in per})

    def ticket_url(kind: str, site: str = "") -> str:
        ticket_type = HOLDER_TICKET_TYPES.get(kind, kind if workflow_or_none(kind) else "")
        return list_url("/tickets/", type=ticket_type, site=site)

    rows = []
    for site in sorted(kinds_by_site):
        per = kinds_by_site[site]
        nodes = set().union(*per.values())
        hostnames = sorted(held[n][1] for n in nodes)
        rows.append(
            HeldRow(
                site=site,
                kinds=[Cell(len(per.get(k, ())), ticket_url(k, site)) for k in kinds],
                total=Cell(
                    len(nodes),
                    list_url("/nodes/", hostname__in=",".join(hostnames))
                    if 0 < len(hostnames) <= HELD_LINK_MAX
                    else "",
                ),
            )
        )
    hostnames = sorted(h for _site, h, _holders in held.values())
    return {
        "kind_labels": [getattr(workflow_or_none(HOLDER_TICKET_TYPES.get(k, k)), "label", k) for k in kinds],
        "kind_totals": [Cell(sum(len(per.get(k, ())) for per in kinds_by_site.values()), ticket_url(k)) for k in kinds],
        "rows": rows,
        "total": Cell(
            len(held), list_url("/nodes/", hostname__in=",".join(hostnames)) if 0 < len(held) <= HELD_LINK_MAX else ""
        ),
    }


def _tickets(user: AbstractBaseUser, now: dt.datetime) -> dict[str, Any]:
    ages = ticket_selectors.open_ticket_ages(user, now=now)
    rows = []
    for type_, counts in ages.items():
        wf = workflow_or_none(type_)
        age_cells = [
            Cell(counts.get(key, 0), list_url("/tickets/", type=type_, age=key))
            for key, *_ in ticket_selectors.AGE_BUCKETS
        ]
        rows.append(
            TicketRow(
                type=type_,
                label=wf.label if wf else type_,
                total=Cell(counts["total"], list_url("/tickets/", type=type_)),
                ages=age_cells,
                overdue=Cell(counts["overdue"], list_url("/tickets/", type=type_, overdue=1)),
            )
        )
    scale = largest([r.total.value for r in rows])
    for r in rows:
        r.bar = stacked_bar(
            [
                Segment(f"{r.label} {label}", c.value, tone, c.href)
                for (_key, label, *_), c, tone in zip(ticket_selectors.AGE_BUCKETS, r.ages, AGE_TONES, strict=True)
            ],
            scale=scale,
        )
    return {
        "rows": rows,
        "buckets": [label for _key, label, *_ in ticket_selectors.AGE_BUCKETS],
        "bucket_tones": list(zip([b[1] for b in ticket_selectors.AGE_BUCKETS], AGE_TONES, strict=True)),
        "total": Cell(sum(r.total.value for r in rows), "/tickets/"),
        "overdue": Cell(sum(r.overdue.value for r in rows), list_url("/tickets/", overdue=1)),
    }


def _rollouts(user: AbstractBaseUser) -> dict[str, Any]:
    items, total = rollouts_in_flight(user)
    rows = [
        RolloutRow(
            item=i,
            href=f"/rollouts/{i.rollout.pk}/",
            bar=stacked_bar(
                [
                    Segment("succeeded", i.succeeded, "ok"),
                    Segment("failed", i.failed, "bad"),
                    Segment("in flight", i.in_flight, "build"),
                    Segment("pending", i.pending, "muted"),
                ]
            ),
        )
        for i in items
    ]
    return {"rows": rows, "total": Cell(total, list_url("/tickets/", type="driver_rollout"))}


def _drift(user: AbstractBaseUser, accelerators: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
    missing = {g.site: sum(v.missing.value for v in g.vendors) for g in accelerators["sites"]}
    cabling = cmdb_selectors.cabling_faults_by_site(user=user)
    conflicts = cmdb_selectors.conflicts_by_site(user=user)
    refused = agent_selectors.refused_reports_by_site(user=user, since=now - REPORTS_WINDOW)
    scheduler = scheduler_drift_open_by_site(user)
    sites = sorted({s for s, n in missing.items() if n} | set(cabling) | set(conflicts) | set(refused) | set(scheduler))
    rows = [
        DriftRow(
            site=site,
            missing_cards=Cell(
                missing.get(site, 0), list_url("/accelerators/", site=_site_param(site), is_missing="true")
            ),
            cabling_faults=Cell(cabling.get(site, 0), list_url("/links/", site=_site_param(site), status="mismatch")),
            conflicts=Cell(
                conflicts.get(site, 0),
                list_url("/api/cmdb/health-events/", site=_site_param(site), kind="conflict", is_open="true"),
            ),
            refused_reports=Cell(
                refused.get(site, 0), list_url("/admin/inventory_agents/report/", node__site__code=site)
            ),
            scheduler_drift=Cell(
                scheduler.get(site, 0), list_url(SCHEDULER_DRIFT_URL, site=_site_param(site), open="true")
            ),
        )
        for site in sites
    ]
    return {
        "rows": rows,
        "missing_cards": Cell(sum(missing.values()), list_url("/accelerators/", is_missing="true")),
        "cabling_faults": Cell(sum(cabling.values()), list_url("/links/", status="mismatch")),
        "conflicts": Cell(
            sum(conflicts.values()), list_url("/api/cmdb/health-events/", kind="conflict", is_open="true")
        ),
        "refused_reports": Cell(sum(refused.values()), "/admin/inventory_agents/report/"),
        "scheduler_drift": Cell(sum(scheduler.values()), list_url(SCHEDULER_DRIFT_URL, open="true")),
        "reports_window_hours": int(REPORTS_WINDOW.total_seconds() // 3600),
    }


def _stock(user: AbstractBaseUser) -> dict[str, Any]:
    site_ids = list(restrict(Site.objects.all(), user, "view").values_list("pk", flat=True))
    lines = stock_lines(site_ids=site_ids) if site_ids else []
    scale = largest([max(ln.free, ln.minimum or 0) for ln in lines])
    rows = []
    for ln in lines:
        short = max((ln.minimum or 0) - max(ln.free, 0), 0)
        bar = stacked_bar(
            [
                Segment(f"{ln.model_name} free", max(ln.free, 0), "bad" if ln.is_below_minimum else "ok"),
                Segment(f"{ln.model_name} short of the minimum", short, "short"),
            ],
            scale=scale,
        )
        rows.append(StockRow(line=ln, href=list_url("/stock/", site=ln.site_code), bar=bar))
    below: dict[str, int] = defaultdict(int)
    for ln in lines:
        if ln.is_below_minimum:
            below[ln.site_code] += 1
    return {
        "rows": rows,
        "below": Cell(sum(below.values()), list_url("/stock/", below_minimum="true")),
        "below_by_site": [
            (site, Cell(n, list_url("/stock/", site=site, below_minimum="true"))) for site, n in sorted(below.items())
        ],
        "scale": scale,
    }


def _alerts(user: AbstractBaseUser) -> dict[str, Any]:
    """Firing monitor alerts that matched no node or card: kept and shown, so a host missing from the CMDB (or
    a label the rules do not read) is seen rather than silently dropped. Two queries."""
    total, newest = unmatched_alerts_firing(user, limit=10)
    return {
        "unmatched": Cell(total, list_url("/api/integrations/alerts/", matched="false", status="firing")),
        "rows": [
            {
                "alert": alert,
                "host": alert.labels.get("Hostname") or alert.labels.get("instance") or "",
                "reason": alert.unmatched_reason,
            }
            for alert in newest
        ],
    }


def fleet_dashboard(*, user: AbstractBaseUser, now: dt.datetime | None = None) -> dict[str, Any]:
    """Every figure of the dashboard for `user` (see the module docstring)."""
    now = now or timezone.now()
    accelerators = _accelerators(user)
    return {
        "now": now,
        "accelerators": accelerators,
        "nodes": _nodes(user, now),
        "held": _held(user),
        "tickets": _tickets(user, now),
        "rollouts": _rollouts(user),
        "drift": _drift(user, accelerators, now),
        "stock": _stock(user),
        "alerts": _alerts(user),
    }


CACHE_PREFIX = "console:dashboard:"


def cache_seconds() -> float:
    """GPUOPS_CONSOLE["DASHBOARD_CACHE_SECONDS"]: how long one scope's figures are reused (0: never cached)."""
    return float(getattr(settings, "GPUOPS_CONSOLE", {}).get("DASHBOARD_CACHE_SECONDS", 30))


def scope_key(user: AbstractBaseUser) -> str:
    """A cache key naming everything the figures depend on: superusers share one (they see everything); anyone
    else has a key of their own (direct object grants are not part of a scope) that also changes when a
    scope grant or a model permission does, so a changed grant is not served from the cache."""
    if user.is_active and user.is_superuser:
        return CACHE_PREFIX + "superuser"
    parts = [f"user={user.pk}", f"active={user.is_active}"]
    parts += [f"{scope}={user_scope_ids(user, scope, 'view')}" for scope in SCOPE_MODELS]
    parts.append("perms=" + ",".join(sorted(user.get_all_permissions())))
    return CACHE_PREFIX + hashlib.sha256("|".join(parts).encode()).hexdigest()


def cached_fleet_dashboard(*, user: AbstractBaseUser) -> dict[str, Any]:
    """`fleet_dashboard(user=user)`, reused for `cache_seconds()` by the same scope: the figures are aggregates
    over the whole fleet, too heavy to recount at every page view. Their `now` is the time they were counted."""
    seconds = cache_seconds()
    if seconds <= 0:
        return fleet_dashboard(user=user)
    key = scope_key(user)
    figures = cache.get(key)
    # The figures' own age decides, not only the cache backend's expiry (whose clock and rounding vary by backend).
    if figures is None or (timezone.now() - figures["now"]).total_seconds() >= seconds:
        figures = fleet_dashboard(user=user)
        cache.set(key, figures, timeout=seconds)
    return figures


__all__ = ["Cell", "cached_fleet_dashboard", "fleet_dashboard", "list_url"]
