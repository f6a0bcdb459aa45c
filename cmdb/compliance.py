"""The compliance report: each node's firmware components and driver packages against their baselines.

A status is a function of (component, model, version) and the baselines only, so it is computed once per
distinct triple (a few hundred over a whole fleet, read with one DISTINCT query) and handed to the database as a
CASE expression; the counts per fleet slice are then GROUP BY queries over the component tables. No Python loop
runs over the nodes or their components, whatever the fleet size.

Statuses: `compliant`, `outdated` (older than a `minimum` baseline, or not one of an `exact` baseline's versions),
`unknown` (a `minimum` baseline, but the version cannot be compared: see cmdb.versions), `not_in_baseline` (no
baseline for the component and model, nor one for the component and every model).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db.models import Case, CharField, Count, F, Q, QuerySet, Value, When

from .filtersets import NodeFilterSet
from .models import (
    BaselineRule,
    Cluster,
    ComplianceStatus,
    DriverComponent,
    FirmwareBaseline,
    FirmwareComponent,
    FirmwareKind,
    InstalledSoftware,
    Node,
    ServerModel,
    Site,
)
from .permissions import restrict
from .versions import version_clean, version_key

#: node filters of the report (NodeFilterSet's meaning: `model` is the server model)
NODE_FILTERS = ("site", "cluster", "tenant", "model", "hostname")
COMPONENTS = tuple(FirmwareKind.values) + tuple(DriverComponent.values)
STATUSES = tuple(ComplianceStatus.values)
DRIVER_COMPONENTS = frozenset(DriverComponent.values)


@dataclass(frozen=True)
class Verdict:
    status: str
    baseline: FirmwareBaseline | None


class BaselineBook:
    """Every baseline, read once; `verdict(component, model, version)` is pure."""

    def __init__(self, baselines: Iterable[FirmwareBaseline]) -> None:
        self.by_key = {(b.component, b.model): b for b in baselines}

    @classmethod
    def load(cls) -> BaselineBook:
        return cls(FirmwareBaseline.objects.all())

    def baseline(self, component: str, model: str) -> FirmwareBaseline | None:
        return self.by_key.get((component, model)) or self.by_key.get((component, ""))

    def verdict(self, component: str, model: str, version: str) -> Verdict:
        baseline = self.baseline(component, model)
        if baseline is None:
            return Verdict(ComplianceStatus.NOT_IN_BASELINE, None)
        if baseline.rule == BaselineRule.EXACT:
            approved = {version_clean(v) for v in baseline.versions}
            ok = version_clean(version) in approved
            return Verdict(ComplianceStatus.COMPLIANT if ok else ComplianceStatus.OUTDATED, baseline)
        key = version_key(version)
        floors = [k for k in (version_key(v) for v in baseline.versions) if k is not None]
        if key is None or not floors:
            return Verdict(ComplianceStatus.UNKNOWN, baseline)
        return Verdict(ComplianceStatus.COMPLIANT if key >= min(floors) else ComplianceStatus.OUTDATED, baseline)


def _status_case(triples: Iterable[tuple[str, str, str]], book: BaselineBook, *, with_model: bool) -> Case:
    """CASE mapping each (component, model, version) to its status; `not_in_baseline` is the default."""
    by_status: dict[str, Q] = {}
    for component, model, version in triples:
        status = book.verdict(component, model, version).status
        if status == ComplianceStatus.NOT_IN_BASELINE:
            continue
        term = Q(component=component, version=version)
        if with_model:
            term &= Q(model=model)
        by_status[status] = by_status[status] | term if status in by_status else term
    whens = [When(q, then=Value(status)) for status, q in sorted(by_status.items())]
    return Case(*whens, default=Value(ComplianceStatus.NOT_IN_BASELINE), output_field=CharField())


@dataclass
class ComplianceScope:
    """The rows the report reads: visible components and driver packages of the filtered nodes, with status."""

    firmware: QuerySet
    drivers: QuerySet
    book: BaselineBook
    #: no component in scope at all: the counts are zero without asking the database
    empty: bool = False


def compliance_scope(*, user: AbstractBaseUser | None, filters: Mapping[str, str] | None = None) -> ComplianceScope:
    """Annotate every visible firmware component and driver package with `status` (CASE, no loop over rows).

    `user` None is the whole fleet (/metrics). `filters`: NODE_FILTERS narrow the nodes (as on the node list),
    `component` and `status` (comma-separated) the rows. A bad value raises ValidationError naming the parameter.
    Costs two queries: the baselines and the distinct versions of both tables (one UNION); the returned querysets
    are lazy."""
    filters = dict(filters or {})
    components = [c for c in filters.pop("component", "").split(",") if c]
    statuses = [s for s in filters.pop("status", "").split(",") if s]
    unknown = sorted(set(components) - set(COMPONENTS))
    if unknown:
        raise ValidationError(
            {"component": f"unknown component(s) {', '.join(unknown)}; one of {', '.join(COMPONENTS)}"}
        )
    bad = sorted(set(statuses) - set(STATUSES))
    if bad:
        raise ValidationError({"status": f"unknown status(es) {', '.join(bad)}; one of {', '.join(STATUSES)}"})
    node_filters = {k: v for k, v in filters.items() if k in NODE_FILTERS}
    firmware, drivers, nodes_qs = FirmwareComponent.objects.all(), InstalledSoftware.objects.all(), Node.objects.all()
    if user is not None:
        firmware, drivers = restrict(firmware, user, "view"), restrict(drivers, user, "view")
        nodes_qs = restrict(nodes_qs, user, "view")
    if node_filters:
        nodes = NodeFilterSet(data=node_filters, queryset=nodes_qs)
        if not nodes.is_valid():
            raise ValidationError(dict(nodes.errors))
        node_ids = nodes.qs.values("pk")
        firmware = firmware.filter(node__in=node_ids)
        drivers = drivers.filter(node__in=node_ids)
    if components:
        firmware = firmware.filter(component__in=components)
        drivers = drivers.filter(component__in=components)
    book = BaselineBook.load()
    fw_distinct = firmware.order_by().values_list("component", "model", "version")
    drv_distinct = drivers.order_by().values_list("component", "component", "version")  # no model: a marker
    fw_triples, drv_pairs = [], []
    for component, model, version in fw_distinct.union(drv_distinct):
        if component in DRIVER_COMPONENTS and model == component:
            drv_pairs.append((component, version))
        else:
            fw_triples.append((component, model, version))
    firmware = firmware.annotate(status=_status_case(fw_triples, book, with_model=True))
    drivers = drivers.annotate(
        status=_status_case(((c, "", v) for c, v in drv_pairs), book, with_model=False),
        device=Value("", output_field=CharField()),
        model=Value("", output_field=CharField()),
    )
    if statuses:
        firmware = firmware.filter(status__in=statuses)
        drivers = drivers.filter(status__in=statuses)
    return ComplianceScope(firmware=firmware, drivers=drivers, book=book, empty=not (fw_triples or drv_pairs))


SLICE_FIELDS = ("node__site_id", "node__cluster_id", "node__server_model_id", "component", "status")


def compliance_by_site(scope: ComplianceScope) -> dict[tuple[str, str, str], int]:
    """{(site code, component, status): components} for /metrics: one GROUP BY over both tables (UNION ALL) and
    the site codes."""
    if scope.empty:
        return {}
    grouped = [
        qs.order_by().values_list("node__site_id", "component", "status").annotate(n=Count("id"))
        for qs in (scope.firmware, scope.drivers)
    ]
    rows = list(grouped[0].union(grouped[1], all=True))
    sites = dict(Site.objects.filter(pk__in={r[0] for r in rows}).values_list("pk", "code"))
    counts: dict[tuple[str, str, str], int] = {}
    for site_id, component, status, n in rows:
        key = (sites.get(site_id, ""), component, status)
        counts[key] = counts.get(key, 0) + n
    return counts


def compliance_outdated_nodes(scope: ComplianceScope) -> int:
    """Nodes with at least one outdated component (one query)."""
    if scope.empty:
        return 0
    return Node.objects.filter(
        Q(pk__in=scope.firmware.filter(status=ComplianceStatus.OUTDATED).values("node_id"))
        | Q(pk__in=scope.drivers.filter(status=ComplianceStatus.OUTDATED).values("node_id"))
    ).count()


def compliance_slices(scope: ComplianceScope) -> dict[str, Any]:
    """Counts per fleet slice (site, cluster, server model, component, status): components and distinct nodes.

    Two GROUP BY queries (firmware, drivers) plus the slice names; `totals` sums the statuses, and `nodes_outdated`
    counts the nodes with at least one outdated component (one more query)."""
    rows: list[dict[str, Any]] = []
    for qs in (scope.firmware, scope.drivers):
        grouped = (
            qs.order_by().values(*SLICE_FIELDS).annotate(components=Count("id"), nodes=Count("node", distinct=True))
        )
        rows.extend(grouped)
    sites = dict(Site.objects.filter(pk__in={r["node__site_id"] for r in rows}).values_list("pk", "code"))
    clusters = dict(Cluster.objects.filter(pk__in={r["node__cluster_id"] for r in rows}).values_list("pk", "name"))
    models = dict(
        ServerModel.objects.filter(pk__in={r["node__server_model_id"] for r in rows}).values_list("pk", "name")
    )
    slices = [
        {
            "site": sites.get(r["node__site_id"], ""),
            "cluster": clusters.get(r["node__cluster_id"], ""),
            "server_model": models.get(r["node__server_model_id"], ""),
            "component": r["component"],
            "status": r["status"],
            "components": r["components"],
            "nodes": r["nodes"],
        }
        for r in rows
    ]
    slices.sort(key=lambda s: (s["site"], s["cluster"], s["server_model"], s["component"], s["status"]))
    totals = {status: 0 for status in STATUSES}
    for s in slices:
        totals[s["status"]] += s["components"]
    return {"totals": totals, "nodes_outdated": compliance_outdated_nodes(scope), "slices": slices}


ROW_FIELDS = ("node_id", "hostname", "component", "device", "model", "version", "status")


def compliance_rows(scope: ComplianceScope) -> QuerySet:
    """One row per component of each node (firmware and drivers, UNION ALL), ordered by hostname, component and
    device: dicts of ROW_FIELDS, paginated or streamed by the caller."""
    firmware = scope.firmware.order_by().annotate(hostname=F("node__hostname")).values(*ROW_FIELDS)
    drivers = scope.drivers.order_by().annotate(hostname=F("node__hostname")).values(*ROW_FIELDS)
    return firmware.union(drivers, all=True).order_by("hostname", "component", "device")


def node_compliance(node: Node, book: BaselineBook | None = None) -> list[dict[str, Any]]:
    """The node page's table: each component of one node with its status and the baseline it was held to.
    Three queries (baselines, firmware, drivers) whatever the node holds."""
    book = book or BaselineBook.load()
    rows = []
    items = [(c.component, c.device, c.model, c.version) for c in node.firmware_components.all()]
    items += [(s.component, "", "", s.version) for s in node.installed_software.all()]
    for component, device, model, version in items:
        verdict = book.verdict(component, model, version)
        rows.append(
            {
                "component": component,
                "device": device,
                "model": model,
                "version": version,
                "status": verdict.status,
                "rule": verdict.baseline.rule if verdict.baseline else "",
                "approved": list(verdict.baseline.versions) if verdict.baseline else [],
            }
        )
    rows.sort(key=lambda r: (r["component"], r["device"]))
    return rows
