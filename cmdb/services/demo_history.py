"""Demo data for change governance and failure analytics: a weekly maintenance window per demo site, months of
service behind the demo cards, and one slot whose cards keep failing (a repeat offender: the board, not the
cards). Idempotent."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.utils import timezone

from gpuops.context import change_context

from ..models import (
    Accelerator,
    AcceleratorLifecycle,
    AcceleratorModel,
    AcceleratorPlacement,
    ChangeRecord,
    Health,
    MaintenanceWindow,
    Node,
    PlacementKind,
    Site,
    WindowKind,
)
from .accelerators import placement_build, placements_backdate, placements_write
from .changelog import record_build, records_write, tracked_update

# Tuesday 02:00-06:00 in each site's own zone (weekday 1).
DEMO_WINDOW = (1, dt.time(2, 0), dt.time(6, 0))
OFFENDER_HOST = "sh1-h100-0003"
OFFENDER_SLOT = 5


@transaction.atomic
def demo_windows_load(site_codes: list[str]) -> int:
    """One weekly window per demo site that has none. Returns how many were created."""
    created = 0
    weekday, start, end = DEMO_WINDOW
    for site in Site.objects.filter(code__in=site_codes):
        if MaintenanceWindow.objects.filter(site=site).exists():
            continue
        MaintenanceWindow.objects.create(
            site=site,
            kind=WindowKind.WEEKLY,
            name="Weekly maintenance",
            weekday=weekday,
            start_time=start,
            end_time=end,
        )
        created += 1
    return created


@transaction.atomic
def demo_service_history_load(*, days: int = 180, now: dt.datetime | None = None) -> int:
    """The demo fleet was loaded just now, but it stands for cards in service for months: its node placements
    opened by the load start `days` ago, so failure rates have a believable exposure. Returns rows moved."""
    now = now or timezone.now()
    return placements_backdate(opened_since=now - dt.timedelta(hours=6), to=now - dt.timedelta(days=days))


@transaction.atomic
def demo_repeat_offender_load(*, now: dt.datetime | None = None) -> int:
    """Two cards that failed in the same slot of OFFENDER_HOST within 30 days, already sent to RMA: their node
    placements and their `health -> failed` change records. Returns how many cards were created."""
    node = Node.objects.filter(hostname=OFFENDER_HOST).first()
    if node is None or Accelerator.objects.filter(serial=f"{OFFENDER_HOST}-rma-1").exists():
        return 0
    current = Accelerator.objects.filter(node=node).select_related("model").first()
    if current is None:
        return 0
    now = now or timezone.now()
    ct = ContentType.objects.get_for_model(Accelerator)
    spans = [
        (now - dt.timedelta(days=200), now - dt.timedelta(days=21)),
        (now - dt.timedelta(days=20), now - dt.timedelta(days=6)),
    ]
    for i, (placed, failed) in enumerate(spans, start=1):
        card = Accelerator.objects.create(
            model=current.model,
            serial=f"{OFFENDER_HOST}-rma-{i}",
            lifecycle=AcceleratorLifecycle.RMA,
            health=Health.FAILED,
            health_detail="XID 79: fallen off the bus",
            health_changed_at=failed,
            site=node.site,
            driver_version=current.driver_version,
            firmware_version=current.firmware_version,
        )
        in_slot = AcceleratorPlacement(
            accelerator=card,
            serial=card.serial,
            kind=PlacementKind.NODE,
            node=node,
            node_hostname=node.hostname,
            slot_index=OFFENDER_SLOT,
            started_at=placed,
            ended_at=failed + dt.timedelta(hours=4),
            source="import",
        )
        # In the slot until it was pulled, then at the vendor.
        placements_write(opened=[in_slot, placement_build(accelerator=card, at=failed + dt.timedelta(hours=4))])
        ChangeRecord.objects.create(
            at=failed,
            content_type=ct,
            object_id=card.pk,
            object_repr=card.serial,
            action="update",
            changes={"health": [Health.OK, Health.FAILED]},
            source="agent",
            correlation_id=f"demo-offender-{i}",
            reason="demo history",
        )
    return len(spans)


# Illustrative prices of the demo (the fleet's currency): card price, and per site electricity and PUE.
DEMO_CARD_PRICES = {
    "H100-SXM5-80GB": 30000,
    "H200-SXM5-141GB": 35000,
    "A100-SXM4-80GB": 15000,
    "Ascend 910B3": 18000,
    "Ascend 910B4": 14000,
    "Hygon K100": 12000,
    "Hygon Z100": 8000,
}
DEMO_POWER = {
    "sh1": ("0.1200", "1.30"),
    "bj2": ("0.1100", "1.25"),
    "wh1": ("0.0900", "1.20"),
    "gy1": ("0.0600", "1.15"),
}


@transaction.atomic
def demo_capacity_load(*, now: dt.datetime | None = None) -> int:
    """Prices for the cost model where none are set, and months of node history behind the demo's card-hours:
    every 20th node spent two days in maintenance and every 15th was cordoned for three days, at dates spread over
    the last 150 days (change records, as the services would have written them). Returns the records written."""
    for name, price in DEMO_CARD_PRICES.items():
        tracked_update(
            AcceleratorModel.objects.filter(name=name, unit_price=0),
            reason="demo prices",
            unit_price=Decimal(price),
            amortisation_months=48,
        )
    for code, (kwh, pue) in DEMO_POWER.items():
        tracked_update(
            Site.objects.filter(code=code, power_price_kwh=0),
            reason="demo prices",
            power_price_kwh=Decimal(kwh),
            pue=Decimal(pue),
        )
    if ChangeRecord.objects.filter(correlation_id__startswith="demo-capacity").exists():
        return 0
    now = now or timezone.now()
    records: list[ChangeRecord] = []

    def record(node: Node, at: dt.datetime, **changes: list) -> None:
        records.append(record_build(obj=node, action="update", changes=changes, reason="demo history", at=at))

    active = Node.objects.filter(status="active", is_cordoned=False).order_by("pk").only("pk", "hostname")
    # The k-th episode of each kind starts 13 (maintenance) or 17 (cordon) days before the one after it, so every
    # month - the page opens on the last one - has some of each, whatever the day of the month. The correlation id
    # is what makes this load run once.
    with change_context(correlation_id="demo-capacity"):
        for i, node in enumerate(active.iterator(chunk_size=5000)):
            if i % 20 == 0:
                start = now - dt.timedelta(days=5 + (13 * (i // 20)) % 150, hours=node.pk % 24)
                record(node, start, status=["active", "maintenance"])
                record(node, start + dt.timedelta(days=2), status=["maintenance", "active"])
            elif i % 15 == 0:
                start = now - dt.timedelta(days=3 + (17 * (i // 15)) % 150, hours=node.pk % 24)
                reason = "demo: fabric errors"
                record(node, start, is_cordoned=[False, True], cordon_reason=["", reason])
                record(node, start + dt.timedelta(days=3), is_cordoned=[True, False], cordon_reason=[reason, ""])
    return records_write(records)
