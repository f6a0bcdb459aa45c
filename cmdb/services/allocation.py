"""The one writer of NodeAllocation: what a cluster's scheduler last said about its nodes' accelerators."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from django.db import transaction

from ..models import NodeAllocation


@dataclass(frozen=True)
class AllocationReading:
    total: int
    allocated: int | None


def node_allocations_record(
    *, scheduler: str, readings: Mapping[int, AllocationReading], observed_at: dt.datetime
) -> int:
    """Upsert the readings (node id -> reading) taken at `observed_at` in one statement. `last_allocated_at`
    moves to `observed_at` where anything is allocated and keeps its value otherwise. Returns the rows written."""
    if not readings:
        return 0
    with transaction.atomic():
        last = dict(
            NodeAllocation.objects.filter(node_id__in=list(readings)).values_list("node_id", "last_allocated_at")
        )
        rows = [
            NodeAllocation(
                node_id=node_id,
                scheduler=scheduler[:32],
                total=max(reading.total, 0),
                allocated=None if reading.allocated is None else max(reading.allocated, 0),
                observed_at=observed_at,
                last_allocated_at=observed_at if reading.allocated else last.get(node_id),
            )
            for node_id, reading in readings.items()
        ]
        NodeAllocation.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["node"],
            update_fields=["scheduler", "total", "allocated", "observed_at", "last_allocated_at"],
            batch_size=2000,
        )
    return len(rows)


__all__ = ["AllocationReading", "node_allocations_record"]
