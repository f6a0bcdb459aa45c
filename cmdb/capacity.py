"""Card-hours and their cost for a period, per tenant, cluster, site, vendor or model (selectors).

Reads the monthly rollup (cmdb.CardHours, kept by cmdb.services.capacity), restricted like every CMDB read, so a
year of the fleet is a few thousand rows summed in one GROUP BY. The cost model is data:
- capital: an accelerator model's `unit_price` spread evenly over its `amortisation_months` (730 hours each),
  charged for every hour the card is owned, whatever its state;
- power: the model's `tdp_w` times the site's `pue`, at the site's `power_price_kwh`, charged while the card is in
  a node that runs (in service, idle, burn-in). Cards in repair, at the vendor, in stock or in transit draw none.
"Cost of idle" is the cost of the idle hours; "cost of repair" that of the repair and RMA hours.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import F, Sum

from .lifecycle import ReportQueryError
from .models import AcceleratorModel, CardHours, CardState, Site
from .permissions import restrict
from .services.capacity import month_next, month_start

HOURS_PER_MONTH = 730
DIMENSIONS: dict[str, tuple[str, str]] = {
    "tenant": ("tenant__slug", "Tenant"),
    "cluster": ("cluster__name", "Cluster"),
    "site": ("site__code", "Site"),
    "vendor": ("model__vendor__slug", "Vendor"),
    "model": ("model__name", "Accelerator model"),
}
STATES = [s.value for s in CardState]
POWERED = {CardState.IN_SERVICE, CardState.IDLE, CardState.BURN_IN}
REPAIR = {CardState.REPAIR, CardState.RMA}
MAX_MONTHS = 120


def _month(raw: str, name: str) -> dt.date:
    try:
        return dt.datetime.strptime(raw.strip(), "%Y-%m").date()
    except ValueError as exc:
        raise ReportQueryError(name, f"{name} must be a month as YYYY-MM.") from exc


@dataclass(frozen=True)
class CapacityQuery:
    """Months [start, end] inclusive, grouped by `by` (DIMENSIONS)."""

    start: dt.date
    end: dt.date
    by: str = "tenant"

    @classmethod
    def from_params(cls, params: Any, *, today: dt.date) -> CapacityQuery:
        """From `from` / `to` (YYYY-MM; default: last month alone) and `by`; ReportQueryError names a bad one."""
        last_month = month_start(month_start(today) - dt.timedelta(days=1))
        start = _month(params["from"], "from") if params.get("from") else last_month
        end = _month(params["to"], "to") if params.get("to") else start
        by = str(params.get("by") or "tenant")
        if by not in DIMENSIONS:
            raise ReportQueryError("by", f"by must be one of {', '.join(DIMENSIONS)}.")
        if end < start:
            raise ReportQueryError("to", "to must not be before from.")
        if (end.year - start.year) * 12 + end.month - start.month >= MAX_MONTHS:
            raise ReportQueryError("to", f"At most {MAX_MONTHS} months at once.")
        return cls(start=start, end=end, by=by)

    def months(self) -> list[dt.date]:
        out, month = [], self.start
        while month <= self.end:
            out.append(month)
            month = month_next(month)
        return out


@dataclass
class CapacityRow:
    key: str
    hours: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STATES, 0.0))
    cost: dict[str, Decimal] = field(default_factory=lambda: dict.fromkeys(STATES, Decimal(0)))

    @property
    def total_hours(self) -> float:
        return sum(self.hours.values())

    @property
    def total_cost(self) -> Decimal:
        return sum(self.cost.values(), Decimal(0))

    @property
    def idle_cost(self) -> Decimal:
        return self.cost[CardState.IDLE]

    @property
    def repair_cost(self) -> Decimal:
        return sum((self.cost[s] for s in REPAIR), Decimal(0))

    @property
    def cost_per_service_hour(self) -> Decimal | None:
        """What each hour in service cost, all hours' cost included (idle, repair and stock are overhead)."""
        service = self.hours[CardState.IN_SERVICE]
        return (self.total_cost / Decimal(str(service))).quantize(Decimal("0.0001")) if service else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "hours": {k: round(v, 2) for k, v in self.hours.items()},
            "total_hours": round(self.total_hours, 2),
            "cost": {k: str(v.quantize(Decimal("0.01"))) for k, v in self.cost.items()},
            "total_cost": str(self.total_cost.quantize(Decimal("0.01"))),
            "idle_cost": str(self.idle_cost.quantize(Decimal("0.01"))),
            "repair_cost": str(self.repair_cost.quantize(Decimal("0.01"))),
            "cost_per_service_hour": str(self.cost_per_service_hour) if self.cost_per_service_hour else None,
        }


@dataclass
class CapacityReport:
    query: CapacityQuery
    rows: list[CapacityRow]
    by_month: list[CapacityRow]
    total: CapacityRow
    computed_at: dt.datetime | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "from": self.query.start.strftime("%Y-%m"),
            "to": self.query.end.strftime("%Y-%m"),
            "by": self.query.by,
            "currency": getattr(settings, "GPUOPS_COST_CURRENCY", "USD"),
            "states": STATES,
            "computed_at": self.computed_at.isoformat() if self.computed_at else None,
            "total": self.total.as_dict(),
            "rows": [r.as_dict() for r in self.rows],
            "by_month": [r.as_dict() for r in self.by_month],
        }


def hourly_rates() -> tuple[dict[int, tuple[Decimal, Decimal]], dict[int | None, Decimal]]:
    """({model id: (capital per card-hour, kW at the wall before PUE)}, {site id: price per kWh x PUE})."""
    models = {
        pk: (price / (months * HOURS_PER_MONTH) if months else Decimal(0), Decimal(tdp) / 1000)
        for pk, price, months, tdp in AcceleratorModel.objects.values_list(
            "pk", "unit_price", "amortisation_months", "tdp_w"
        )
    }
    sites: dict[int | None, Decimal] = {
        pk: price * pue for pk, price, pue in Site.objects.values_list("pk", "power_price_kwh", "pue")
    }
    return models, sites


def card_hours(user: AbstractBaseUser, query: CapacityQuery) -> CapacityReport:
    """Card-hours by state and their cost per value of `query.by`, per month, and in total (what `user` may see)."""
    path = DIMENSIONS[query.by][0]
    rows = restrict(CardHours.objects.all(), user, "view").filter(
        month__gte=query.start, month__lt=month_next(query.end)
    )
    groups = (
        rows.order_by().values("month", "model_id", "site_id", "state", key_value=F(path)).annotate(hours=Sum("hours"))
    )
    model_rates, site_rates = hourly_rates()
    by_key: dict[str, CapacityRow] = {}
    by_month = {m: CapacityRow(key=m.strftime("%Y-%m")) for m in query.months()}
    total = CapacityRow(key="total")
    computed = rows.order_by("-computed_at").values_list("computed_at", flat=True).first()
    for g in groups:
        hours = float(g["hours"] or 0)
        capital, kw = model_rates.get(g["model_id"], (Decimal(0), Decimal(0)))
        rate = capital + (kw * site_rates.get(g["site_id"], Decimal(0)) if g["state"] in POWERED else Decimal(0))
        cost = rate * Decimal(str(hours))
        key = str(g["key_value"]) if g["key_value"] not in (None, "") else "none"
        for row in (by_key.setdefault(key, CapacityRow(key=key)), by_month[g["month"]], total):
            row.hours[g["state"]] += hours
            row.cost[g["state"]] += cost
    ordered = sorted(by_key.values(), key=lambda r: (-r.total_hours, r.key))
    return CapacityReport(
        query=query, rows=ordered, by_month=list(by_month.values()), total=total, computed_at=computed
    )


def _path(path: str) -> Any:
    from django.db.models import F

    return F(path)
