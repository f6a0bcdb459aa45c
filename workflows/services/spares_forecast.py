"""Spares forecast: per site and accelerator model, the observed failure rate turned into days of cover for the
free spares in hand and a suggested minimum stock level; and a refill raised from it through procurement.

The failures are those of the failure analytics (workflows.failures: a card turning `failed` or a repair opened
for it, deduplicated), counted at the site of the node the card failed in. The suggested minimum is the reorder
point of a Poisson demand: the failures expected during the replenishment lead time plus a safety margin of
SPARES_SERVICE_Z standard deviations (1.65: enough for 95% of lead times),
`ceil(rate x lead + z x sqrt(rate x lead))`. Stock comes from the warehouse (free = in stock - reserved).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError

from cmdb import models as cm
from cmdb.permissions import restrict
from integrations.procurement.services.requests import RefillOutcome, refill_request_upsert
from integrations.warehouse.conf import warehouse_setting
from integrations.warehouse.services.stock import stock_lines

from ..conf import workflows_setting
from ..failures import FailureScope, failure_events

RAISE_PERMISSION = "procurement.add_procurementrequest"


@dataclass
class ForecastRow:
    site_id: int
    site: str
    model_id: int
    model: str
    installed: int
    free: int
    failures: int
    days: int
    lead_days: int
    minimum: int | None  # the minimum stock level set for it, if any

    @property
    def per_day(self) -> float:
        return self.failures / self.days if self.days else 0.0

    @property
    def afr_percent(self) -> float | None:
        """Failures per 100 installed cards per year."""
        if not self.installed or not self.days:
            return None
        return round(100 * self.failures * 365 / (self.installed * self.days), 2)

    @property
    def days_of_cover(self) -> float | None:
        """How long the free spares last at the observed rate (None: no failure seen, nothing to cover)."""
        return round(self.free / self.per_day, 1) if self.per_day else None

    @property
    def suggested_minimum(self) -> int:
        expected = self.per_day * self.lead_days
        if expected <= 0:
            return 0
        return math.ceil(expected + workflows_setting("SPARES_SERVICE_Z") * math.sqrt(expected))

    @property
    def shortfall(self) -> int:
        """Spares to order to reach the suggested minimum (0: enough in hand)."""
        return max(self.suggested_minimum - self.free, 0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "site": self.site,
            "model": self.model,
            "model_id": self.model_id,
            "installed": self.installed,
            "free_spares": self.free,
            "failures": self.failures,
            "afr_percent": self.afr_percent,
            "failures_per_30_days": round(self.per_day * 30, 2),
            "days_of_cover": self.days_of_cover,
            "lead_days": self.lead_days,
            "suggested_minimum": self.suggested_minimum,
            "minimum": self.minimum,
            "shortfall": self.shortfall,
        }


def spares_forecast(user: AbstractBaseUser, *, days: int, site: str = "") -> list[ForecastRow]:
    """One row per site and accelerator model the user may see with cards installed or in stock, shortest cover
    first (rows without failures last)."""
    scope = FailureScope(user=user, site=site, days=days)
    events = failure_events(scope.cards(), scope.start, scope.end)
    failed_cards = cm.Accelerator.objects.filter(pk__in={e.card_id for e in events})
    card_models: dict[int, int] = {}
    card_sites: dict[int, int | None] = {}
    for pk, model_id, site_id in failed_cards.values_list("pk", "model_id", "site_id"):
        card_models[pk], card_sites[pk] = model_id, site_id
    nodes = cm.Node.objects.filter(pk__in={e.node_id for e in events if e.node_id})
    node_sites = dict(nodes.values_list("pk", "site_id"))
    failures: dict[tuple[int, int], int] = {}
    for event in events:
        site_id = node_sites.get(event.node_id) if event.node_id else card_sites.get(event.card_id)
        if site_id is not None and event.card_id in card_models:
            key = (site_id, card_models[event.card_id])
            failures[key] = failures.get(key, 0) + 1
    sites = restrict(cm.Site.objects.all(), user, "view")
    if site:
        sites = sites.filter(code=site)
    lead = workflows_setting("SPARES_LEAD_DAYS")
    rows = [
        ForecastRow(
            site_id=line.site_id,
            site=line.site_code,
            model_id=line.model_id,
            model=line.model_name,
            installed=line.installed or 0,
            free=line.free,
            failures=failures.get((line.site_id, line.model_id), 0),
            days=days,
            lead_days=lead,
            minimum=line.minimum,
        )
        for line in stock_lines(site_ids=list(sites.values_list("pk", flat=True)))
        if line.kind == "accelerator" and ((line.installed or 0) > 0 or line.on_hand > 0)
    ]
    return sorted(rows, key=lambda r: (r.days_of_cover is None, r.days_of_cover or 0, r.site, r.model))


def spares_refill_raise(user: AbstractBaseUser, *, site: str, model_id: int, days: int) -> RefillOutcome:
    """Open (or update) the refill request for the forecast's shortfall at `site` for `model_id`, through the
    procurement workflow (submitted for its approvals). Needs RAISE_PERMISSION and sight of the site; a row with
    enough spares is refused (ValidationError naming the field)."""
    if not user.has_perm(RAISE_PERMISSION):
        raise PermissionDenied(f"Raising a procurement request requires {RAISE_PERMISSION}.")
    row = next((r for r in spares_forecast(user, days=days, site=site) if r.model_id == model_id), None)
    if row is None:
        raise ValidationError({"model": f"No accelerator model {model_id} at a site {site!r} you may see."})
    if row.shortfall <= 0:
        enough = f"{row.free} free spares of {row.model} at {row.site} cover the suggested minimum"
        raise ValidationError({"model": f"{enough} of {row.suggested_minimum}."})
    site_obj = cm.Site.objects.get(pk=row.site_id)
    model = cm.AcceleratorModel.objects.get(pk=row.model_id)
    return refill_request_upsert(
        site=site_obj,
        accelerator_model=model,
        quantity=row.shortfall,
        budget_code=warehouse_setting("REFILL_BUDGET_CODE"),
        reason=(
            f"Spares forecast: {row.failures} failures of {row.model} at {row.site} in {days} days "
            f"({row.per_day * 30:.1f} per 30 days); {row.free} free spares cover {row.days_of_cover} days; "
            f"suggested minimum {row.suggested_minimum} for a {row.lead_days}-day lead time; ordering {row.shortfall}."
        ),
    )
