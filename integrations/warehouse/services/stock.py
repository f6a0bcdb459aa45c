"""Reading stock (selectors): the per-site overview of spares against the installed base, free spares, and the
check that the ledger agrees with where the CMDB says the serialised items are.

Spare cards are counted by cmdb.selectors.spare_counts (the cards in stock) - the one count every view uses
(this overview, the admin page, the minimum-stock check, the console); the ledger stays the history of every
move and the quantity of parts and consumables, and `ledger_drift` finds a card that moved without its row.

Every figure is computed with a fixed number of aggregate queries, whatever the number of sites and models
(one GROUP BY per source), so the overview of a 100,000-card fleet costs the same as a lab's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, Sum

from cmdb.models import (
    Accelerator,
    AcceleratorLifecycle,
    AcceleratorModel,
    PartItem,
    PartItemStatus,
    PartModel,
    Site,
    StockLocation,
    StockMovement,
)
from cmdb.selectors import spare_counts

from ..models import MinimumStock


@dataclass(frozen=True)
class StockLine:
    """One model at one site. For accelerators `installed` is the installed base; parts have none."""

    site_id: int
    site_code: str
    kind: str  # "accelerator" | "part"
    model_id: int
    model_name: str
    installed: int | None
    on_hand: int  # cards: the cards in stock (cmdb.selectors.spare_counts); parts: from the ledger
    reserved: int
    minimum: int | None

    @property
    def free(self) -> int:
        return self.on_hand - self.reserved

    @property
    def spare_ratio_percent(self) -> float | None:
        """Spares per 100 installed cards."""
        if not self.installed:
            return None
        return round(100 * self.on_hand / self.installed, 2)

    @property
    def is_below_minimum(self) -> bool:
        return self.minimum is not None and self.free < self.minimum

    @property
    def summary(self) -> str:
        """E.g. "H100-SXM5-80GB: 2,048 installed, 31 spares, 1.5%"."""
        if self.kind == "part":
            return f"{self.model_name}: {self.on_hand:,} on hand"
        ratio = f", {self.spare_ratio_percent:g}%" if self.spare_ratio_percent is not None else ""
        return f"{self.model_name}: {self.installed or 0:,} installed, {self.on_hand:,} spares{ratio}"


def _site_filter(site_ids: Iterable[int] | None, field: str) -> dict:
    return {} if site_ids is None else {f"{field}__in": list(site_ids)}


def stock_lines(*, site_ids: Iterable[int] | None = None) -> list[StockLine]:
    """Spares per site and model (accelerators and parts), sorted by site and model name (a selector).

    Rows exist for every model with an installed base, stock on hand, a reservation or a minimum at the site.
    """
    site_ids = list(site_ids) if site_ids is not None else None
    installed = {
        (r["site_id"], r["model_id"]): r["n"]
        for r in Accelerator.objects.filter(
            lifecycle=AcceleratorLifecycle.INSTALLED, **_site_filter(site_ids, "site_id")
        )
        .values("site_id", "model_id")
        .annotate(n=Count("id"))
    }
    # Cards: the one count of spare cards (the cards in stock); parts and consumables: the ledger.
    spares = spare_counts(site_ids=site_ids)
    on_hand: dict[tuple[str, int, int], int] = {
        ("accelerator", site_id, model_id): n for (site_id, model_id), (n, _) in spares.items()
    }
    reserved = {key: r for key, (_, r) in spares.items() if r}
    for r in (
        StockMovement.objects.filter(
            location__isnull=False, part_model__isnull=False, **_site_filter(site_ids, "location__site_id")
        )
        .values("location__site_id", "part_model_id")
        .annotate(q=Sum("quantity"))
    ):
        on_hand[("part", r["location__site_id"], r["part_model_id"])] = r["q"] or 0
    minimums: dict[tuple[str, int, int], int] = {}
    for row in MinimumStock.objects.filter(is_active=True, **_site_filter(site_ids, "site_id")):
        kind, model_id = (
            ("accelerator", row.accelerator_model_id) if row.accelerator_model_id else ("part", row.part_model_id)
        )
        minimums[(kind, row.site_id, model_id)] = row.minimum
    keys = (
        {("accelerator", s, mdl) for s, mdl in installed}
        | {k for k, n in on_hand.items() if n}
        | set(minimums)
        | {("accelerator", s, mdl) for s, mdl in reserved}
    )
    sites = Site.objects.in_bulk({k[1] for k in keys})
    accel = AcceleratorModel.objects.in_bulk({k[2] for k in keys if k[0] == "accelerator"})
    parts = PartModel.objects.in_bulk({k[2] for k in keys if k[0] == "part"})
    lines = [
        StockLine(
            site_id=site_id,
            site_code=sites[site_id].code,
            kind=kind,
            model_id=model_id,
            model_name=(accel[model_id].name if kind == "accelerator" else parts[model_id].sku),
            installed=installed.get((site_id, model_id), 0) if kind == "accelerator" else None,
            on_hand=on_hand.get((kind, site_id, model_id), 0),
            reserved=reserved.get((site_id, model_id), 0) if kind == "accelerator" else 0,
            minimum=minimums.get((kind, site_id, model_id)),
        )
        for kind, site_id, model_id in keys
    ]
    return sorted(lines, key=lambda ln: (ln.site_code, ln.kind, ln.model_name))


def stock_line_for(
    *, site: Site, accelerator_model: AcceleratorModel | None = None, part_model: PartModel | None = None
) -> StockLine:
    """The stock line of one model at one site (zeros when there is nothing)."""
    kind, model = ("accelerator", accelerator_model) if accelerator_model else ("part", part_model)
    assert model is not None
    for line in stock_lines(site_ids=[site.pk]):
        if line.kind == kind and line.model_id == model.pk:
            return line
    return StockLine(
        site_id=site.pk,
        site_code=site.code,
        kind=kind,
        model_id=model.pk,
        model_name=getattr(model, "name", "") if kind == "accelerator" else model.sku,
        installed=0 if kind == "accelerator" else None,
        on_hand=0,
        reserved=0,
        minimum=None,
    )


@dataclass(frozen=True)
class LedgerDrift:
    """A location/model where the ledger's on-hand differs from the serialised items the CMDB has there."""

    location_id: int
    location: str
    kind: str
    model_id: int
    ledger_quantity: int
    items_in_stock: int


def ledger_drift(*, site: Site | None = None) -> list[LedgerDrift]:
    """Where derived on-hand and the in-stock serialised items disagree (a selector; empty when consistent).

    The ledger is the truth for quantities; drift means something moved a card or part without a movement
    (an import, a script, an older code path) - warehouse_opening_balance and manual moves fix it.
    """
    scope = {"location__site": site} if site else {}
    ledger: dict[tuple[str, int, int], int] = defaultdict(int)
    for r in (
        StockMovement.objects.filter(location__isnull=False, **scope)
        .filter(accelerator__isnull=False)
        .values("location_id", "accelerator_model_id")
        .annotate(q=Sum("quantity"))
    ):
        ledger[("accelerator", r["location_id"], r["accelerator_model_id"])] += r["q"] or 0
    for r in (
        StockMovement.objects.filter(location__isnull=False, part_item__isnull=False, **scope)
        .values("location_id", "part_model_id")
        .annotate(q=Sum("quantity"))
    ):
        ledger[("part", r["location_id"], r["part_model_id"])] += r["q"] or 0
    items: dict[tuple[str, int, int], int] = defaultdict(int)
    card_scope = {"stock_location__site": site} if site else {}
    for r in (
        Accelerator.objects.filter(lifecycle=AcceleratorLifecycle.IN_STOCK, **card_scope)
        .values("stock_location_id", "model_id")
        .annotate(n=Count("id"))
    ):
        items[("accelerator", r["stock_location_id"], r["model_id"])] = r["n"]
    for r in (
        PartItem.objects.filter(status=PartItemStatus.IN_STOCK, **card_scope)
        .values("stock_location_id", "part_model_id")
        .annotate(n=Count("id"))
    ):
        items[("part", r["stock_location_id"], r["part_model_id"])] = r["n"]
    names = StockLocation.objects.select_related("site").in_bulk({k[1] for k in set(ledger) | set(items)})
    return [
        LedgerDrift(
            location_id=loc,
            location=str(names[loc]),
            kind=kind,
            model_id=model_id,
            ledger_quantity=ledger.get((kind, loc, model_id), 0),
            items_in_stock=items.get((kind, loc, model_id), 0),
        )
        for kind, loc, model_id in sorted(set(ledger) | set(items))
        if ledger.get((kind, loc, model_id), 0) != items.get((kind, loc, model_id), 0)
    ]


__all__ = ["LedgerDrift", "StockLine", "ledger_drift", "stock_line_for", "stock_lines"]
