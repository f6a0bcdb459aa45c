"""Reads of the CMDB that are more than a filtered list: permission-scoped at the source (`user` first)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.db.models import Count, Q, QuerySet

from .filtersets import AcceleratorFilterSet, NodeFilterSet
from .holds import holds_for
from .models import (
    Accelerator,
    AcceleratorLifecycle,
    AcceleratorModel,
    ChangeRecord,
    HealthEvent,
    Link,
    LinkStatus,
    Node,
    NodeStatus,
    ReservationStatus,
    Site,
)
from .permissions import restrict

#: the query parameters of the summary, shared with the lists of accelerators and nodes
SUMMARY_FILTERS = ("site", "cluster", "tenant", "vendor", "model")


def _filtered(filterset_class: type, queryset: QuerySet, data: dict[str, str]) -> QuerySet:
    filterset = filterset_class(data=data, queryset=queryset)
    if not filterset.is_valid():
        summary_names = {"accelerator_model": "model"}
        raise ValidationError({summary_names.get(k, k): v for k, v in filterset.errors.items()})
    return filterset.qs


def _counts(queryset: QuerySet, field: str) -> dict[str, int]:
    """{value: count} in one GROUP BY query (NULL grouped as "none")."""
    rows = queryset.order_by().values(field).annotate(n=Count("id")).values_list(field, "n")
    return {str(value) if value is not None else "none": n for value, n in sorted(rows, key=lambda r: str(r[0]))}


def fleet_summary(*, user: AbstractBaseUser, filters: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Accelerator counts by site, vendor, model, health and lifecycle, and node counts by status and health.

    Only what `user` may see is counted. Each breakdown is one aggregate query over the restricted rows.
    `filters` (SUMMARY_FILTERS: site, cluster, tenant, vendor, model - the accelerator model) narrow both counts
    with the same meaning as on the lists; a bad value raises django.core.exceptions.ValidationError naming it.
    """
    cards = restrict(Accelerator.objects.all(), user, "view")
    nodes = restrict(Node.objects.all(), user, "view")
    if filters:
        cards = _filtered(AcceleratorFilterSet, cards, dict(filters))
        # On nodes `model` is the server model; the summary's `model` is the accelerator model.
        node_filters = {("accelerator_model" if k == "model" else k): v for k, v in filters.items()}
        nodes = _filtered(NodeFilterSet, nodes, node_filters)
    # One pass over the cards grouped by every key at once (a few dozen groups), names looked up after: five
    # GROUP BYs over 100,000 cards, each joined to its site or model, cost five times as much.
    card_groups = list(
        cards.order_by()
        .values("site_id", "model_id", "health", "lifecycle")
        .annotate(n=Count("id"))
        .values_list("site_id", "model_id", "health", "lifecycle", "n")
    )
    site_codes = dict(Site.objects.filter(pk__in={g[0] for g in card_groups}).values_list("pk", "code"))
    models = {
        pk: (name, vendor)
        for pk, name, vendor in AcceleratorModel.objects.filter(pk__in={g[1] for g in card_groups}).values_list(
            "pk", "name", "vendor__slug"
        )
    }
    card_keys = [
        ((site_codes.get(site), models[model][1], models[model][0], health, lifecycle), n)
        for site, model, health, lifecycle, n in card_groups
    ]
    node_keys = [
        ((status, health), n)
        for status, health, n in nodes.order_by()
        .values("status", "health")
        .annotate(n=Count("id"))
        .values_list("status", "health", "n")
    ]
    card_counts = _tally(card_keys, 5)
    node_counts = _tally(node_keys, 2)
    by_site = card_counts[0]
    by_status = node_counts[0]
    return {
        "accelerators": {
            "total": sum(by_site.values()),
            "by_site": by_site,
            "by_vendor": card_counts[1],
            "by_model": card_counts[2],
            "by_health": card_counts[3],
            "by_lifecycle": card_counts[4],
        },
        "nodes": {
            "total": sum(by_status.values()),
            "by_status": by_status,
            "by_health": node_counts[1],
        },
    }


def _tally(groups: Iterable[tuple[tuple[Any, ...], int]], width: int) -> list[dict[str, int]]:
    """Per key position, {value: count} summed over the groups (None counted as "none"), sorted by value."""
    tallies: list[dict[str, int]] = [{} for _ in range(width)]
    for keys, n in groups:
        for tally, value in zip(tallies, keys, strict=True):
            key = str(value) if value is not None else "none"
            tally[key] = tally.get(key, 0) + n
    return [dict(sorted(t.items())) for t in tallies]


# Nodes nobody expects an agent report from: not built yet, or gone (the staleness sweep skips them too).
QUIET_STATUSES = (NodeStatus.PLANNED, NodeStatus.DECOMMISSIONED)


def _key(value: Any) -> str:
    return str(value) if value is not None else "none"


def accelerator_breakdown(*, user: AbstractBaseUser) -> list[dict[str, Any]]:
    """Visible cards counted by site x vendor x health, with how many of each are missing from their node's
    last report: one GROUP BY query. Rows: {site, vendor, health, n, missing}; "none" for an empty key."""
    rows = (
        restrict(Accelerator.objects.all(), user, "view")
        .order_by()
        .values("site__code", "model__vendor__slug", "health")
        .annotate(n=Count("id"), missing=Count("id", filter=Q(is_missing=True)))
    )
    return [
        {
            "site": _key(r["site__code"]),
            "vendor": _key(r["model__vendor__slug"]),
            "health": _key(r["health"]),
            "n": r["n"],
            "missing": r["missing"],
        }
        for r in rows
    ]


def node_breakdown(*, user: AbstractBaseUser, stale_after: dt.timedelta, now: dt.datetime) -> list[dict[str, Any]]:
    """Visible nodes counted by site x status x cordoned, with the flagged-stale ones and the silent ones (last
    seen before `now - stale_after`, not planned or decommissioned, whether or not the sweep flagged them yet):
    one GROUP BY query. Rows: {site, status, is_cordoned, n, stale, silent}."""
    cutoff = now - stale_after
    rows = (
        restrict(Node.objects.all(), user, "view")
        .order_by()
        .values("site__code", "status", "is_cordoned")
        .annotate(
            n=Count("id"),
            stale=Count("id", filter=Q(is_stale=True)),
            silent=Count("id", filter=Q(last_seen_at__lt=cutoff) & ~Q(status__in=QUIET_STATUSES)),
        )
    )
    return [
        {
            "site": _key(r["site__code"]),
            "status": r["status"],
            "is_cordoned": r["is_cordoned"],
            "n": r["n"],
            "stale": r["stale"],
            "silent": r["silent"],
        }
        for r in rows
    ]


def cabling_faults_by_site(*, user: AbstractBaseUser) -> dict[str, int]:
    """Visible links whose observed peer differs from the plan (status mismatch), per site: one query."""
    links = restrict(Link.objects.filter(status=LinkStatus.MISMATCH), user, "view")
    return _counts(links, "fabric__site__code")


def conflicts_by_site(*, user: AbstractBaseUser) -> dict[str, int]:
    """Open `conflict` health events (an agent report that does not match the CMDB: a UUID on another serial, a
    card in a slot the model lacks, ...) on visible nodes, per site: one query."""
    events = restrict(HealthEvent.objects.filter(kind="conflict", resolved_at__isnull=True), user, "view")
    return _counts(events, "node__site__code")


def held_nodes(*, user: AbstractBaseUser) -> dict[int, tuple[str, str, list]]:
    """{node id: (site code, hostname, [Holder, ...])} for the visible nodes an open change holds (cmdb.holds):
    one query for the visible nodes plus the hold providers' fixed few, whatever the fleet size."""
    nodes = restrict(Node.objects.all(), user, "view").order_by()
    facts = {pk: (site, hostname) for pk, site, hostname in nodes.values_list("pk", "site__code", "hostname")}
    if not facts:
        return {}
    return {
        node_id: (*facts[node_id], holders)
        for node_id, holders in holds_for(node_ids=facts).items()
        if holders and node_id in facts
    }


def node_history(*, node: Node) -> QuerySet:
    """The change records of one node, newest first (the caller has checked the node is visible)."""
    return (
        ChangeRecord.objects.filter(content_type=ContentType.objects.get_for_model(Node), object_id=node.pk)
        .select_related("actor", "content_type")
        .order_by("-at", "-id")
    )


def change_list(*, user: AbstractBaseUser) -> QuerySet:
    """The global change history: only for users with the global view permission on change records."""
    return restrict(ChangeRecord.objects.select_related("actor", "content_type"), user, "view")


def spare_counts(*, site_ids: Iterable[int] | None = None) -> dict[tuple[int, int], tuple[int, int]]:
    """{(site id, accelerator model id): (spares on hand, of which reserved)} - THE count of spare cards.

    A spare is a card in stock (lifecycle in_stock, in a stock location of the site); reserved = held by an
    active reservation (one per card, a database constraint). Counted from the cards themselves, so every
    path that puts a card into stock (warehouse moves, the API, imports, the demo) shows up the same, and
    the stock overview, the minimum-stock check and the console's stock list agree with the cards a repair
    can reserve. One GROUP BY whatever the fleet size. `site_ids`: the sites the caller may see (None: all).
    """
    cards = Accelerator.objects.filter(lifecycle=AcceleratorLifecycle.IN_STOCK)
    if site_ids is not None:
        cards = cards.filter(site_id__in=list(site_ids))
    rows = (
        cards.order_by()
        .values("site_id", "model_id")
        # Past (released, issued) reservations join in as extra rows: hence distinct cards and a filtered count.
        .annotate(
            on_hand=Count("id", distinct=True),
            reserved=Count("reservations", filter=Q(reservations__status=ReservationStatus.ACTIVE), distinct=True),
        )
    )
    return {(r["site_id"], r["model_id"]): (r["on_hand"], r["reserved"]) for r in rows}


def component_versions(node_ids: Iterable[int] | QuerySet, component: str) -> dict[int, str]:
    """The version of `component` on each node, for rollouts (planning, verification): the installed software's
    for a driver or toolkit; for a firmware component the one its devices report, the oldest where they differ
    (a node is at a version only when every device is). Nodes with nothing recorded are absent. One query."""
    from .models import FirmwareComponent, FirmwareKind, InstalledSoftware
    from .versions import version_key

    if component not in FirmwareKind.values:
        return dict(
            InstalledSoftware.objects.filter(node_id__in=node_ids, component=component).values_list(
                "node_id", "version"
            )
        )
    by_node: dict[int, list[str]] = {}
    for node_id, version in (
        FirmwareComponent.objects.filter(node_id__in=node_ids, component=component)
        .order_by()
        .values_list("node_id", "version")
    ):
        by_node.setdefault(node_id, []).append(version)

    def oldest(versions: list[str]) -> str:
        if len(set(versions)) == 1:
            return versions[0]
        keyed = [(version_key(v), v) for v in versions]
        if all(k is not None for k, _ in keyed):
            return min(keyed)[1]
        return sorted(versions)[0]  # incomparable strings: any one that differs keeps the node "not there yet"

    return {node_id: oldest(versions) for node_id, versions in by_node.items()}
