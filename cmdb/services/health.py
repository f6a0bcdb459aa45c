"""Health event writes that are not ingestion's (ingestion opens and updates events in its own bulk pass)."""

from __future__ import annotations

from django.utils import timezone

from ..models import HealthEvent


def health_events_resolve(*, accelerator_id: int) -> int:
    """Resolve a card's open health events (its repair is done). Returns how many were resolved.

    HealthEvent is not a tracked model: an event's own resolved_at is its history.
    """
    return HealthEvent.objects.filter(accelerator_id=accelerator_id, resolved_at__isnull=True).update(
        resolved_at=timezone.now()
    )
