"""Failure analytics (reads): failure rates and MTBF per dimension, the top health signals over time, repeat
offenders (card, slot, node) and failures by root cause.

Definitions (docs/failures.md):
- A *failure* is a card going to health `failed` (a change record of the card whose `health` became "failed")
  or a repair ticket opened for a card; the two records of one failure (a repair opened by the health hook on
  the same card within a day) count once.
- *Exposure* is card-days in service in the period: the overlap of each card's node placements
  (cmdb.AcceleratorPlacement, kind node) with the period, summed by one aggregate query per dimension.
- AFR = failures / (card-days / 365) x 100 %. MTBF = card-hours / failures.
- Cards are grouped by their current attributes (model, vendor, site, driver and firmware version); a card
  whose driver changed in the period counts under its version now.

Every read is restricted to the cards, nodes and tickets the user may see, and optionally to one site, cluster
or tenant (`FailureScope`).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.contrib.contenttypes.models import ContentType
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, Greatest, Least, TruncDay, TruncWeek
from django.utils import timezone

from cmdb import models as cm
from cmdb.permissions import restrict

from .models import LinkRole, Postmortem, TicketLink
from .permissions import tickets_visible

# Dimension -> the card's attribute path (from Accelerator).
DIMENSIONS: dict[str, tuple[str, str]] = {
    "model": ("model__name", "Accelerator model"),
    "vendor": ("model__vendor__name", "Vendor"),
    "site": ("site__code", "Site"),
    "driver": ("driver_version", "Driver version"),
    "firmware": ("firmware_version", "Firmware version"),
}
REPEAT_WINDOW = dt.timedelta(days=30)
SAME_FAILURE = dt.timedelta(days=1)  # a repair opened for a card this soon after it went failed is that failure
DAYS_PER_YEAR = 365


class FailureQueryError(ValueError):
    """A bad parameter: `field` names it."""

    def __init__(self, field_name: str, message: str) -> None:
        self.field = field_name
        super().__init__(message)


@dataclass(frozen=True)
class FailureScope:
    """Whose fleet: the user's visible cards, optionally one site (code), cluster (name) or tenant (slug), over
    the `days` before `until`."""

    user: AbstractBaseUser
    site: str = ""
    cluster: str = ""
    tenant: str = ""
    days: int = 365
    until: dt.datetime | None = None

    @classmethod
    def from_params(cls, user: AbstractBaseUser, params: Any) -> FailureScope:
        """From query parameters (site, cluster, tenant, days); raises FailureQueryError naming a bad one."""
        raw_days = str(params.get("days") or "365").strip()
        if not raw_days.isdigit() or not 1 <= int(raw_days) <= 3660:
            raise FailureQueryError("days", "days must be a whole number of days from 1 to 3660.")
        return cls(
            user=user,
            site=str(params.get("site") or "").strip(),
            cluster=str(params.get("cluster") or "").strip(),
            tenant=str(params.get("tenant") or "").strip(),
            days=int(raw_days),
        )

    @property
    def end(self) -> dt.datetime:
        return self.until or timezone.now()

    @property
    def start(self) -> dt.datetime:
        return self.end - dt.timedelta(days=self.days)

    def _narrow(self, qs: QuerySet, site_path: str, node_path: str) -> QuerySet:
        """The user's visible rows of `qs`, then only the asked site / cluster / tenant."""
        qs = restrict(qs, self.user, "view")
        wanted = {
            site_path: self.site,
            f"{node_path}cluster__name": self.cluster,
            f"{node_path}tenant__slug": self.tenant,
        }
        return qs.filter(**{path: value for path, value in wanted.items() if value})

    def cards(self) -> QuerySet[cm.Accelerator]:
        return self._narrow(cm.Accelerator.objects.all(), "site__code", "node__")

    def health_events(self) -> QuerySet[cm.HealthEvent]:
        return self._narrow(cm.HealthEvent.objects.all(), "node__site__code", "node__")

    def as_params(self) -> dict[str, Any]:
        return {"site": self.site, "cluster": self.cluster, "tenant": self.tenant, "days": self.days}


@dataclass
class FailureEvent:
    card_id: int
    at: dt.datetime
    source: str  # "health" / "repair"
    ticket_id: int | None = None
    node_id: int | None = None
    slot_index: int | None = None


def failure_events(cards: QuerySet[cm.Accelerator], start: dt.datetime, end: dt.datetime) -> list[FailureEvent]:
    """The failures of `cards` in [start, end), deduplicated, each with the node and slot the card was in.

    Three queries whatever the fleet size (failures, repairs, the failed cards' node placements); the Python
    work is over the failures only, never over the fleet or its history."""
    card_ids = cards.values("pk")
    ct = ContentType.objects.get_for_model(cm.Accelerator)
    raw: list[FailureEvent] = [
        FailureEvent(card_id=object_id, at=at, source="health")
        for object_id, at in cm.ChangeRecord.objects.filter(
            content_type=ct,
            object_id__in=card_ids,
            action=cm.ChangeAction.UPDATE,  # a transition to failed, not a card recorded as failed already
            changes__health__1="failed",
            at__gte=start,
            at__lt=end,
        ).values_list("object_id", "at")
    ]
    raw += [
        FailureEvent(card_id=card_id, at=at, source="repair", ticket_id=ticket_id)
        for card_id, at, ticket_id in TicketLink.objects.filter(
            ticket__type="repair",
            role=LinkRole.SUBJECT,
            accelerator_id__in=card_ids,
            ticket__created_at__gte=start,
            ticket__created_at__lt=end,
        ).values_list("accelerator_id", "ticket__created_at", "ticket_id")
    ]
    raw.sort(key=lambda e: (e.card_id, e.at, e.source != "health"))
    events: list[FailureEvent] = []
    for event in raw:
        last = events[-1] if events else None
        if last is not None and last.card_id == event.card_id and event.at - last.at <= SAME_FAILURE:
            last.ticket_id = last.ticket_id or event.ticket_id
            continue
        events.append(event)
    _locate(events)
    return events


def _locate(events: list[FailureEvent]) -> None:
    """Set each failure's node and slot: the card's node placement at the time (one query)."""
    placements: dict[int, list[tuple[dt.datetime, dt.datetime | None, int | None, int | None]]] = defaultdict(list)
    rows = cm.AcceleratorPlacement.objects.filter(
        accelerator_id__in={e.card_id for e in events}, kind=cm.PlacementKind.NODE
    ).values_list("accelerator_id", "started_at", "ended_at", "node_id", "slot_index")
    for card_id, started, ended, node_id, slot in rows:
        placements[card_id].append((started, ended, node_id, slot))
    for event in events:
        for started, ended, node_id, slot in placements.get(event.card_id, []):
            # A card marked failed is usually still in its slot; the last placement before the failure counts
            # when the card was taken out in the same instant.
            if started <= event.at and (ended is None or ended >= event.at):
                event.node_id, event.slot_index = node_id, slot


# --- rates --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RateRow:
    key: str
    failures: int
    card_days: float

    @property
    def afr_percent(self) -> float | None:
        if self.card_days <= 0:
            return None
        return round(100 * self.failures / (self.card_days / DAYS_PER_YEAR), 3)

    @property
    def mtbf_hours(self) -> float | None:
        if self.failures == 0:
            return None
        return round(self.card_days * 24 / self.failures, 1)

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "failures": self.failures,
            "card_days": round(self.card_days, 3),
            "afr_percent": self.afr_percent,
            "mtbf_hours": self.mtbf_hours,
        }


def _card_days(scope: FailureScope, path: str) -> dict[str, float]:
    """Card-days in service in the period per value of `path`: one aggregate over the node placements."""
    start, end = scope.start, scope.end
    overlap = ExpressionWrapper(
        Least(Coalesce("ended_at", Value(end)), Value(end)) - Greatest("started_at", Value(start)),
        output_field=DurationField(),
    )
    rows = (
        cm.AcceleratorPlacement.objects.filter(
            Q(ended_at__isnull=True) | Q(ended_at__gt=start),
            kind=cm.PlacementKind.NODE,
            accelerator_id__in=scope.cards().values("pk"),
            started_at__lt=end,
        )
        .values(key=F(f"accelerator__{path}"))
        .annotate(total=Sum(overlap))
    )
    return {_key(r["key"]): r["total"].total_seconds() / 86400 if r["total"] else 0.0 for r in rows}


def _key(value: Any) -> str:
    return str(value) if value not in (None, "") else "(none)"


def failure_rates(scope: FailureScope, by: str) -> list[RateRow]:
    """AFR and MTBF per value of dimension `by` (DIMENSIONS), worst AFR first."""
    if by not in DIMENSIONS:
        raise FailureQueryError("by", f"by must be one of {', '.join(DIMENSIONS)}.")
    path = DIMENSIONS[by][0]
    events = failure_events(scope.cards(), scope.start, scope.end)
    keys = dict(cm.Accelerator.objects.filter(pk__in={e.card_id for e in events}).values_list("pk", path))
    failures = Counter(_key(keys.get(e.card_id)) for e in events)
    exposure = _card_days(scope, path)
    rows = [RateRow(k, failures.get(k, 0), exposure.get(k, 0.0)) for k in sorted(set(failures) | set(exposure))]
    return sorted(rows, key=lambda r: (-(r.afr_percent or 0), r.key))


# --- signals ------------------------------------------------------------------------------------------------------


@dataclass
class SignalSeries:
    signal: str  # "xid:79", "ecc_uncorrectable", "vendor_health:80E01801"
    total: int
    by_period: dict[dt.date, int] = field(default_factory=dict)


def top_signals(scope: FailureScope, *, limit: int = 8) -> tuple[list[dt.date], list[SignalSeries]]:
    """The `limit` most frequent health signals (kind and code; repeats counted) in the period, per week (per
    day for periods up to 31 days): one aggregate query."""
    trunc = TruncDay if scope.days <= 31 else TruncWeek
    rows = (
        scope.health_events()
        .filter(first_seen_at__gte=scope.start, first_seen_at__lt=scope.end)
        .annotate(period=trunc("first_seen_at"))
        .values("kind", "code", "period")
        .annotate(n=Sum("count"))
    )
    series: dict[str, SignalSeries] = {}
    periods: set[dt.date] = set()
    for r in rows:
        name = f"{r['kind']}:{r['code']}" if r["code"] else r["kind"]
        day = r["period"].date() if isinstance(r["period"], dt.datetime) else r["period"]
        periods.add(day)
        s = series.setdefault(name, SignalSeries(name, 0))
        s.total += r["n"] or 0
        s.by_period[day] = s.by_period.get(day, 0) + (r["n"] or 0)
    top = sorted(series.values(), key=lambda s: (-s.total, s.signal))[:limit]
    return sorted(periods), top


# --- repeat offenders ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Offender:
    kind: str  # card / slot / node
    label: str
    failures: int
    cards: tuple[str, ...]
    last_at: dt.datetime
    node_id: int | None
    slot_index: int | None
    hint: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "label": self.label,
            "failures": self.failures,
            "cards": list(self.cards),
            "last_at": self.last_at.isoformat(),
            "hint": self.hint,
        }


def slot_hint(cards: int, days: int = REPEAT_WINDOW.days) -> str:
    return f"this slot failed {cards} cards in {days} days - consider board repair"


def repeat_offenders(events: Iterable[FailureEvent], *, window: dt.timedelta = REPEAT_WINDOW) -> list[Offender]:
    """Cards, slots and nodes that failed again within `window` of an earlier failure. A slot whose different
    cards keep failing points at the board, not the cards."""
    events = sorted(events, key=lambda e: e.at)
    serials = dict(cm.Accelerator.objects.filter(pk__in={e.card_id for e in events}).values_list("pk", "serial"))
    hosts = dict(cm.Node.objects.filter(pk__in={e.node_id for e in events if e.node_id}).values_list("pk", "hostname"))
    groups: dict[tuple[str, Any], list[FailureEvent]] = defaultdict(list)
    for e in events:
        groups["card", e.card_id].append(e)
        if e.node_id is not None:
            groups["node", e.node_id].append(e)
            if e.slot_index is not None:
                groups["slot", (e.node_id, e.slot_index)].append(e)
    found = []
    for (kind, key), group in groups.items():
        cluster = _densest(group, window)
        if len(cluster) < 2:
            continue
        card_serials = tuple(dict.fromkeys(serials.get(e.card_id) or f"#{e.card_id}" for e in cluster))
        if kind == "slot" and len(card_serials) < 2:
            continue  # one card failing twice is the card's story, told by its own row
        node_id = key[0] if kind == "slot" else key if kind == "node" else cluster[-1].node_id
        slot = key[1] if kind == "slot" else None
        host = hosts.get(node_id, f"node #{node_id}") if node_id else ""
        label = {
            "card": card_serials[0],
            "slot": f"{host} slot {slot}",
            "node": host,
        }[kind]
        hint = {
            "card": f"card failed {len(cluster)} times in {window.days} days - RMA it, do not reseat again",
            "slot": slot_hint(len(card_serials), window.days),
            "node": f"node failed {len(cluster)} times in {window.days} days - check power, cooling and board",
        }[kind]
        found.append(Offender(kind, label, len(cluster), card_serials, cluster[-1].at, node_id, slot, hint))
    order = {"slot": 0, "card": 1, "node": 2}
    return sorted(found, key=lambda o: (order[o.kind], -o.failures, o.label))


def _densest(group: list[FailureEvent], window: dt.timedelta) -> list[FailureEvent]:
    """The largest run of failures that all fall within `window` of each other (group is sorted by time)."""
    best: list[FailureEvent] = []
    lo = 0
    for hi in range(len(group)):
        while group[hi].at - group[lo].at > window:
            lo += 1
        if hi - lo + 1 > len(best):
            best = group[lo : hi + 1]
    return best


def offenders_in_scope(scope: FailureScope) -> list[Offender]:
    """Repeat offenders among the scope's failures of the last 30 days before the period's end."""
    end = scope.end
    return repeat_offenders(failure_events(scope.cards(), end - REPEAT_WINDOW, end))


def slot_failures(node_id: int, slot_index: int, *, at: dt.datetime, window: dt.timedelta = REPEAT_WINDOW) -> int:
    """How many different cards failed in this node slot in the `window` before `at` (the repair page hint)."""
    cards = cm.Accelerator.objects.filter(placements__node_id=node_id, placements__slot_index=slot_index).distinct()
    events = failure_events(cards, at - window, at + dt.timedelta(seconds=1))
    return len({e.card_id for e in events if e.node_id == node_id and e.slot_index == slot_index})


# --- root causes --------------------------------------------------------------------------------------------------


def root_cause_counts(scope: FailureScope) -> list[tuple[str, int, int]]:
    """(category slug, postmortems, repairs) in the period: postmortems of visible incidents and repairs of
    visible tickets whose verdict named a root cause."""
    tickets = tickets_visible(scope.user).filter(created_at__gte=scope.start, created_at__lt=scope.end)
    if scope.site:
        tickets = tickets.filter(site__code=scope.site)
    if scope.cluster:
        tickets = tickets.filter(cluster__name=scope.cluster)
    if scope.tenant:
        tickets = tickets.filter(links__node__tenant__slug=scope.tenant).distinct()
    ids = tickets.values("pk")
    pms = dict(
        Postmortem.objects.filter(ticket_id__in=ids, root_cause__isnull=False)
        .values_list("root_cause__slug")
        .annotate(n=Count("pk"))
    )
    repairs = Counter(
        slug
        for slug in tickets.model.objects.filter(pk__in=ids, type="repair", data__has_key="root_cause").values_list(
            "data__root_cause", flat=True
        )
        if slug
    )
    return [(slug, pms.get(slug, 0), repairs.get(slug, 0)) for slug in sorted(set(pms) | set(repairs))]


__all__ = [
    "DIMENSIONS",
    "FailureEvent",
    "FailureQueryError",
    "FailureScope",
    "Offender",
    "RateRow",
    "SignalSeries",
    "failure_events",
    "failure_rates",
    "offenders_in_scope",
    "repeat_offenders",
    "root_cause_counts",
    "slot_failures",
    "slot_hint",
    "top_signals",
]
