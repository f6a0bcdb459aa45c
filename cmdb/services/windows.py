"""May a change start now at these sites and clusters? Maintenance windows and freezes (cmdb.models.windows).

Rules, per site and per cluster the change touches (a cluster's windows are its own plus its site's):
- a freeze covering now refuses the change, window or not;
- a scope with active windows allows the change only inside one of them;
- a scope with no active window at all is not restricted.
An emergency approval (held by the change ticket, checked by the caller) lifts both.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Q
from django.utils import timezone

from ..models import Cluster, MaintenanceWindow, Site, WindowKind

# How far ahead the next window is looked for.
LOOKAHEAD = dt.timedelta(days=60)


@dataclass(frozen=True)
class WindowRefusal:
    """Why a change may not start now at one scope, and when it next may."""

    scope: str  # "site sh1", "cluster train-a"
    reason: str  # "outside the maintenance window" / "change freeze 'Year end'"
    next_start: dt.datetime | None = None
    next_end: dt.datetime | None = None

    @property
    def message(self) -> str:
        text = f"{self.reason} for {self.scope}"
        if self.next_start and self.next_end:
            text += f"; next window {format_period(self.next_start, self.next_end)}"
        elif self.reason.startswith("outside"):
            text += f"; no window in the next {LOOKAHEAD.days} days"
        return text


def format_period(start: dt.datetime, end: dt.datetime) -> str:
    """'Tue 2026-12-08 02:00-06:00 +08:00' in the window's own zone (the end's date when it is another day)."""
    offset = start.strftime("%z")
    offset = f"{offset[:3]}:{offset[3:]}" if len(offset) == 5 else "UTC"
    until = f"{end:%H:%M}" if end.date() == start.date() else f"{end:%Y-%m-%d %H:%M}"
    return f"{start:%a %Y-%m-%d %H:%M}-{until} {offset}"


def _windows_for(site_ids: set[int], cluster_ids: set[int]) -> list[MaintenanceWindow]:
    condition = Q(site_id__in=site_ids, cluster__isnull=True) | Q(cluster_id__in=cluster_ids)
    cluster_sites = set(Cluster.objects.filter(pk__in=cluster_ids).values_list("site_id", flat=True))
    condition |= Q(site_id__in=cluster_sites, cluster__isnull=True)
    return list(
        MaintenanceWindow.objects.filter(condition, is_active=True).select_related("site", "cluster").order_by("pk")
    )


def change_window_refusals(
    *, site_ids: Iterable[int], cluster_ids: Iterable[int], at: dt.datetime | None = None
) -> list[WindowRefusal]:
    """What stops a change touching these sites and clusters from starting at `at` (now); empty: it may."""
    at = at or timezone.now()
    site_ids, cluster_ids = {i for i in site_ids if i}, {i for i in cluster_ids if i}
    if not site_ids and not cluster_ids:
        return []
    windows = _windows_for(site_ids, cluster_ids)
    if not windows:
        return []
    clusters = {c.pk: c for c in Cluster.objects.filter(pk__in=cluster_ids)}
    sites = {s.pk: s for s in Site.objects.filter(pk__in=site_ids | {c.site_id for c in clusters.values()})}
    scopes: list[tuple[str, list[MaintenanceWindow]]] = []
    for site_id in sorted(site_ids):
        own = [w for w in windows if w.site_id == site_id and w.cluster_id is None]
        scopes.append((f"site {sites[site_id].code}", own))
    for cluster_id in sorted(cluster_ids):
        cluster = clusters.get(cluster_id)
        if cluster is None:
            continue
        own = [w for w in windows if w.cluster_id == cluster_id or (w.site_id == cluster.site_id and not w.cluster_id)]
        scopes.append((f"cluster {cluster.name}", own))
    refusals = []
    for scope, own in scopes:
        if refusal := _scope_refusal(scope, own, at):
            refusals.append(refusal)
    return refusals


def _scope_refusal(scope: str, windows: list[MaintenanceWindow], at: dt.datetime) -> WindowRefusal | None:
    freezes = [w for w in windows if w.kind == WindowKind.FREEZE]
    opens = [w for w in windows if w.kind != WindowKind.FREEZE]
    for freeze in freezes:
        if freeze.occurrences(at, at + dt.timedelta(microseconds=1)):
            label = f"change freeze '{freeze.name}'" if freeze.name else "change freeze"
            until = f" until {freeze.ends_at:%Y-%m-%d %H:%M} UTC" if freeze.ends_at else ""
            nxt = next_window(opens, freezes, after=freeze.ends_at or at) if opens else None
            return WindowRefusal(scope, f"{label}{until}", *(nxt or (None, None)))
    if not opens:
        return None
    if any(w.occurrences(at, at + dt.timedelta(microseconds=1)) for w in opens):
        return None
    nxt = next_window(opens, freezes, after=at)
    return WindowRefusal(scope, "outside the maintenance window", *(nxt or (None, None)))


def next_window(
    opens: list[MaintenanceWindow], freezes: list[MaintenanceWindow], *, after: dt.datetime
) -> tuple[dt.datetime, dt.datetime] | None:
    """The first window period starting after `after` (or running at it) that no freeze covers at its start."""
    horizon = after + LOOKAHEAD
    periods = sorted(p for w in opens for p in w.occurrences(after, horizon))
    frozen = [p for f in freezes for p in f.occurrences(after, horizon)]
    for start, end in periods:
        begin = max(start, after)
        if not any(fs <= begin < fe for fs, fe in frozen):
            return start, end
    return None


def windows_upcoming(
    *, site_ids: Iterable[int], cluster_ids: Iterable[int] = (), at: dt.datetime | None = None, limit: int = 5
) -> list[tuple[MaintenanceWindow, dt.datetime, dt.datetime]]:
    """The next periods of the windows and freezes of these scopes (for pages), earliest first."""
    at = at or timezone.now()
    windows = _windows_for(set(site_ids), set(cluster_ids))
    periods = [(s, e, w) for w in windows for s, e in w.occurrences(at, at + LOOKAHEAD)]
    return [(w, s, e) for s, e, w in sorted(periods, key=lambda p: (p[0], p[2].pk))[:limit]]


__all__ = ["WindowRefusal", "change_window_refusals", "format_period", "next_window", "windows_upcoming"]
