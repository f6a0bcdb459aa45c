"""Demo data for change governance and failure analytics: a weekly maintenance window per demo site, months of
service behind the demo cards, and one slot whose cards keep failing (a repeat offender: the board, not the
cards). Idempotent."""

from __future__ import annotations

import datetime as dt

from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.utils import timezone

from ..models import (
    Accelerator,
    AcceleratorLifecycle,
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
