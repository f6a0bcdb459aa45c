"""Card-hours by state, rolled up per month from the history, and priced by the cost model.

Where a card's hours went is in two histories: its placements (cmdb.AcceleratorPlacement: in a node, in stock,
in transit, at the vendor) and, while it is in a node, the node's status and cordon changes (cmdb.ChangeRecord).
`capacity_rollup` turns the second into state spans per node (`NodeStateSpan`, rebuilt whole: a few per node)
and then asks the database for the hours of each month: one aggregate joining the node placements to the spans,
clipped to the month, and one over the other placements. Nothing per card is read into Python. The result is
`CardHours` rows (month x site x cluster x tenant x model x state); reports sum those rows, so a year of a
100,000-card fleet is read from a few thousand rows.

The beat task `cmdb.capacity_rollup` recomputes the current and the previous month every hour; `manage.py
capacity_rollup --months N` fills earlier ones.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.contenttypes.models import ContentType
from django.db import connection, transaction
from django.utils import timezone

from ..models import (
    AcceleratorPlacement,
    CardHours,
    CardState,
    ChangeRecord,
    Node,
    NodeStateSpan,
    NodeStatus,
    PlacementKind,
)

#: the start of the first span of every node: "before anything was recorded"
EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)

_BY_STATUS = {
    NodeStatus.PLANNED: CardState.BURN_IN,
    NodeStatus.RECEIVED: CardState.BURN_IN,
    NodeStatus.RACKED: CardState.BURN_IN,
    NodeStatus.PROVISIONING: CardState.BURN_IN,
    NodeStatus.BURN_IN: CardState.BURN_IN,
    NodeStatus.ACTIVE: CardState.IN_SERVICE,
    NodeStatus.DRAINING: CardState.IDLE,
    NodeStatus.MAINTENANCE: CardState.REPAIR,
    NodeStatus.FAILED: CardState.REPAIR,
    NodeStatus.RMA: CardState.RMA,
    NodeStatus.DECOMMISSIONED: CardState.RETIRED,
}
_BY_PLACEMENT = {
    PlacementKind.STOCK: CardState.IN_STOCK,
    PlacementKind.IN_TRANSIT: CardState.IN_TRANSIT,
    PlacementKind.AT_VENDOR: CardState.RMA,
}


def node_state(status: str | None, cordoned: bool | None) -> str:
    """The CardState of the cards in a node with this status and cordon flag."""
    state = _BY_STATUS.get(status or "", CardState.BURN_IN)
    return CardState.IDLE if state == CardState.IN_SERVICE and cordoned else state


def month_start(day: dt.date) -> dt.date:
    return day.replace(day=1)


def month_next(month: dt.date) -> dt.date:
    return (month.replace(day=28) + dt.timedelta(days=4)).replace(day=1)


def _aware(month: dt.date) -> dt.datetime:
    return dt.datetime(month.year, month.month, 1, tzinfo=dt.UTC)


# --- node state spans --------------------------------------------------------------------------------------------


def _spans_of(
    node_id: int, events: list[tuple[dt.datetime, list | None, list | None]], status: str, cordoned: bool
) -> Iterable[NodeStateSpan]:
    """The spans of one node from its status / cordon changes (ascending), ending in its current values."""
    # Before the first change of each field, the field had that change's old value; a creation has none, and
    # then the first value recorded stands for the time before (cards placed in a node loaded later).
    first_status = next((s for _, s, _ in events if s), None)
    first_cordon = next((c for _, _, c in events if c), None)
    cur_status = (first_status[0] if first_status[0] is not None else first_status[1]) if first_status else status
    if first_cordon:
        cur_cordoned = bool(first_cordon[0] if first_cordon[0] is not None else first_cordon[1])
    else:
        cur_cordoned = cordoned
    started = EPOCH
    state = node_state(cur_status, cur_cordoned)
    for at, status_change, cordon_change in events:
        if status_change:
            cur_status = status_change[1]
        if cordon_change:
            cur_cordoned = bool(cordon_change[1])
        new = node_state(cur_status, cur_cordoned)
        if new != state and at > started:
            yield NodeStateSpan(node_id=node_id, state=state, started_at=started, ended_at=at)
            started = at
        state = new
    yield NodeStateSpan(node_id=node_id, state=state, started_at=started, ended_at=None)


@transaction.atomic
def node_spans_rebuild() -> int:
    """Replace every node's state spans with those its change history gives. Returns the spans written."""
    node_type = ContentType.objects.get_for_model(Node)
    events: dict[int, list[tuple[dt.datetime, list | None, list | None]]] = {}
    changes = (
        ChangeRecord.objects.filter(content_type=node_type, changes__has_any_keys=["status", "is_cordoned"])
        .order_by("object_id", "at", "id")
        .values_list("object_id", "at", "changes__status", "changes__is_cordoned")
    )
    for node_id, at, status_change, cordon_change in changes.iterator(chunk_size=5000):
        events.setdefault(node_id, []).append((at, status_change, cordon_change))
    NodeStateSpan.objects.all().delete()
    written = 0
    batch: list[NodeStateSpan] = []
    for node_id, status, cordoned in (
        Node.objects.order_by("pk").values_list("pk", "status", "is_cordoned").iterator(chunk_size=5000)
    ):
        batch.extend(_spans_of(node_id, events.get(node_id, []), status, cordoned))
        if len(batch) >= 5000:
            written += len(NodeStateSpan.objects.bulk_create(batch))
            batch = []
    written += len(NodeStateSpan.objects.bulk_create(batch))
    return written


# --- the monthly rollup ------------------------------------------------------------------------------------------


def _seconds_sql(later: str, earlier: str) -> str:
    if connection.vendor == "postgresql":
        return f"EXTRACT(EPOCH FROM ({later}) - ({earlier}))"
    return f"((julianday({later}) - julianday({earlier})) * 86400.0)"


def _bound(kind: str, *args: str) -> str:
    name = {"max": "GREATEST", "min": "LEAST"} if connection.vendor == "postgresql" else {"max": "MAX", "min": "MIN"}
    return f"{name[kind]}({', '.join(args)})"


def _in_nodes_sql() -> str:
    """Hours of node placements x the node's state spans, clipped to [%(start)s, %(end)s), by site, cluster,
    tenant, model and state."""
    p, s = "p", "s"
    start = _bound("max", f"{p}.started_at", f"{s}.started_at", "%(start)s")
    end = _bound("min", f"COALESCE({p}.ended_at, %(end)s)", f"COALESCE({s}.ended_at, %(end)s)", "%(end)s")
    placement, span, card, node = (
        AcceleratorPlacement._meta.db_table,
        NodeStateSpan._meta.db_table,
        "cmdb_accelerator",
        Node._meta.db_table,
    )
    return f"""
        SELECT n.site_id, n.cluster_id, n.tenant_id, a.model_id, {s}.state,
               SUM({_seconds_sql(end, start)}) / 3600.0
        FROM {placement} {p}
        JOIN {span} {s} ON {s}.node_id = {p}.node_id
        JOIN {card} a ON a.id = {p}.accelerator_id
        JOIN {node} n ON n.id = {p}.node_id
        WHERE {p}.kind = %(kind)s
          AND {p}.started_at < %(end)s AND ({p}.ended_at IS NULL OR {p}.ended_at > %(start)s)
          AND {s}.started_at < %(end)s AND ({s}.ended_at IS NULL OR {s}.ended_at > %(start)s)
          AND {s}.started_at < COALESCE({p}.ended_at, %(end)s)
          AND ({s}.ended_at IS NULL OR {s}.ended_at > {p}.started_at)
        GROUP BY n.site_id, n.cluster_id, n.tenant_id, a.model_id, {s}.state
    """


def _elsewhere_sql() -> str:
    """Hours of the placements outside nodes (stock, in transit, at the vendor), clipped to the month."""
    start = _bound("max", "p.started_at", "%(start)s")
    end = _bound("min", "COALESCE(p.ended_at, %(end)s)", "%(end)s")
    return f"""
        SELECT COALESCE(l.site_id, a.site_id), a.model_id, p.kind, SUM({_seconds_sql(end, start)}) / 3600.0
        FROM {AcceleratorPlacement._meta.db_table} p
        JOIN cmdb_accelerator a ON a.id = p.accelerator_id
        LEFT JOIN cmdb_stocklocation l ON l.id = p.stock_location_id
        WHERE p.kind IN (%(kind_stock)s, %(kind_transit)s, %(kind_vendor)s)
          AND p.started_at < %(end)s AND (p.ended_at IS NULL OR p.ended_at > %(start)s)
        GROUP BY COALESCE(l.site_id, a.site_id), a.model_id, p.kind
    """


@transaction.atomic
def month_rollup(month: dt.date, *, now: dt.datetime | None = None) -> int:
    """Recompute the CardHours rows of `month` (the current month up to `now`). Spans must be current
    (node_spans_rebuild). Returns the rows written."""
    now = now or timezone.now()
    month = month_start(month)
    start = _aware(month)
    end = min(_aware(month_next(month)), now)
    CardHours.objects.filter(month=month).delete()
    if end <= start:
        return 0
    rows: list[CardHours] = []
    adapt = connection.ops.adapt_datetimefield_value
    params = {
        "start": adapt(start),
        "end": adapt(end),
        "kind": PlacementKind.NODE.value,
        "kind_stock": PlacementKind.STOCK.value,
        "kind_transit": PlacementKind.IN_TRANSIT.value,
        "kind_vendor": PlacementKind.AT_VENDOR.value,
    }
    with connection.cursor() as cursor:
        cursor.execute(_in_nodes_sql(), params)
        for site, cluster, tenant, model, state, hours in cursor.fetchall():
            rows.append(
                CardHours(site_id=site, cluster_id=cluster, tenant_id=tenant, model_id=model, state=state, hours=hours)
            )
        cursor.execute(_elsewhere_sql(), params)
        for site, model, kind, hours in cursor.fetchall():
            rows.append(CardHours(site_id=site, model_id=model, state=_BY_PLACEMENT[kind], hours=hours))
    for row in rows:
        row.month, row.computed_at, row.hours = month, now, float(row.hours or 0)
    return len(CardHours.objects.bulk_create([r for r in rows if r.hours > 0]))


@dataclass
class RollupResult:
    spans: int
    months: list[dt.date]
    rows: int


#: PostgreSQL advisory lock key of the rollup: two runs at once (beat and a manual one) take turns
ROLLUP_LOCK = 0x6770756F70730001


@transaction.atomic
def capacity_rollup(*, months: int = 2, now: dt.datetime | None = None) -> RollupResult:
    """Rebuild the node state spans, then the CardHours of the last `months` months (the current one included),
    in one transaction: readers see the previous rollup until this one is whole."""
    now = now or timezone.now()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ROLLUP_LOCK])
    spans = node_spans_rebuild()
    month = month_start(now.astimezone(dt.UTC).date())
    done: list[dt.date] = []
    for _ in range(months):
        done.append(month)
        month = month_start(month - dt.timedelta(days=1))
    rows = sum(month_rollup(m, now=now) for m in done)
    return RollupResult(spans=spans, months=sorted(done), rows=rows)
