"""Storing and running inbound events: the part of webhook handling every peer shares (procurement, WMS).

The webhook view calls `event_record` (after the signature and schema checks) and enqueues the peer's task on
commit; the task calls `event_run` with the peer's handler. `event_run`:

1. claims the row by compare-and-set (pending/deferred -> processing); a duplicate message finds it claimed
   or done and returns quietly - this is what makes the acks_late task idempotent;
2. runs the handler in one transaction together with marking the row processed, so the business change and
   "processed" commit or roll back together;
3. turns the outcome into a status: EventDeferred -> deferred (waits for another event, re-run when that
   arrives), TransientError -> back to pending and re-raised for the task's backoff retry, anything else ->
   failed with the error kept on the row (visible in the admin, re-runnable there).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.module_loading import import_string

from integrations.exceptions import TransientError

from .models import EventStatus, InboundEvent

logger = logging.getLogger(__name__)


class EventDeferred(Exception):
    """The event depends on one that has not arrived yet (e.g. a PO update before the PO). `waits_for` names it."""

    def __init__(self, waits_for: str, message: str = "") -> None:
        super().__init__(message or f"waits for {waits_for}")
        self.waits_for = waits_for


EventHandler = Callable[[InboundEvent], Any]

# The processing task of each channel (dotted paths: imported when needed, so neither app imports the other's
# tasks at start-up).
CHANNEL_TASKS: dict[str, str] = {
    "procurement": "integrations.procurement.tasks.process_event",
    "wms": "integrations.warehouse.tasks.process_event",
}


def event_enqueue(event: InboundEvent) -> None:
    """Publish the processing task of the event's channel (call on commit, or outside a transaction)."""
    import_string(CHANNEL_TASKS[event.channel]).delay(event.pk)


def event_record(
    *, channel: str, source: str, event: dict[str, Any], signed_with: int = 0
) -> tuple[InboundEvent, bool]:
    """Store a verified, schema-valid event. Returns (row, created); created is False for a replayed event id.

    Call inside the request's transaction; the caller enqueues processing on commit only when created.
    """
    occurred = parse_datetime(event["occurred_at"]) if isinstance(event.get("occurred_at"), str) else None
    try:
        # A savepoint: the duplicate's IntegrityError must not poison the caller's transaction.
        with transaction.atomic():
            row = InboundEvent.objects.create(
                channel=channel,
                source=source,
                event_id=event["id"],
                type=event["type"],
                payload=event,
                signed_with=signed_with,
                occurred_at=occurred,
                received_at=timezone.now(),
            )
    except IntegrityError:
        return InboundEvent.objects.get(source=source, event_id=event["id"]), False
    return row, True


def event_claim(event_pk: int) -> InboundEvent | None:
    """Compare-and-set pending/deferred -> processing. None when another worker has it or it is finished."""
    claimed = InboundEvent.objects.filter(pk=event_pk, status__in=(EventStatus.PENDING, EventStatus.DEFERRED)).update(
        status=EventStatus.PROCESSING, attempts=F("attempts") + 1, claimed_at=timezone.now()
    )
    if not claimed:
        return None
    return InboundEvent.objects.get(pk=event_pk)


def _finish(event_pk: int, **fields: Any) -> None:
    InboundEvent.objects.filter(pk=event_pk, status=EventStatus.PROCESSING).update(**fields)


def event_run(event_pk: int, handler: EventHandler) -> str:
    """Claim and process one event with `handler`. Returns the final status (or "skipped" when not claimed).

    Raises:
        TransientError: re-raised after putting the event back to pending, so the task retries with backoff.
    """
    event = event_claim(event_pk)
    if event is None:
        return "skipped"
    try:
        with transaction.atomic():
            handler(event)
            _finish(event_pk, status=EventStatus.PROCESSED, processed_at=timezone.now(), error="", waits_for="")
    except EventDeferred as deferred:
        _finish(event_pk, status=EventStatus.DEFERRED, waits_for=deferred.waits_for[:128], error=str(deferred))
        logger.info("event %s deferred: %s", event, deferred)
        return EventStatus.DEFERRED
    except TransientError as exc:
        _finish(event_pk, status=EventStatus.PENDING, error=f"transient: {exc}")
        raise
    except Exception as exc:
        # A handler bug or bad data must not be retried forever (poison message); keep it visible instead.
        logger.exception("event %s failed", event)
        _finish(
            event_pk,
            status=EventStatus.FAILED,
            processed_at=timezone.now(),
            error=f"{type(exc).__name__}: {exc}"[:5000],
        )
        return EventStatus.FAILED
    return EventStatus.PROCESSED


def events_waiting(waits_for: str) -> list[int]:
    """Ids of deferred events waiting for `waits_for`, oldest first."""
    return list(
        InboundEvent.objects.filter(status=EventStatus.DEFERRED, waits_for=waits_for)
        .order_by("received_at", "id")
        .values_list("pk", flat=True)
    )


def events_expire_deferred(*, older_than: dt.timedelta, now: dt.datetime | None = None) -> int:
    """Fail deferred events that waited longer than `older_than` (what they waited for never came)."""
    cutoff = (now or timezone.now()) - older_than
    stale = InboundEvent.objects.filter(status=EventStatus.DEFERRED, received_at__lt=cutoff)
    count = 0
    for event in stale:
        count += InboundEvent.objects.filter(pk=event.pk, status=EventStatus.DEFERRED).update(
            status=EventStatus.FAILED,
            processed_at=timezone.now(),
            error=f"gave up: {event.waits_for} did not arrive within {older_than}",
        )
    return count


def events_reclaim_stuck(*, older_than: dt.timedelta, now: dt.datetime | None = None) -> list[int]:
    """Put events stuck in `processing` (their worker died) back to pending; returns their ids to re-enqueue.

    Safe because processing is one transaction: a dead worker's half-done work was rolled back.
    """
    cutoff = (now or timezone.now()) - older_than
    ids = list(
        InboundEvent.objects.filter(status=EventStatus.PROCESSING, claimed_at__lt=cutoff).values_list("pk", flat=True)
    )
    InboundEvent.objects.filter(pk__in=ids, status=EventStatus.PROCESSING).update(
        status=EventStatus.PENDING, error="re-queued: the worker processing it was lost"
    )
    return ids


def event_requeue(event_pk: int) -> bool:
    """Put a failed event back to pending (admin "re-run"). The caller enqueues its task on commit."""
    return bool(
        InboundEvent.objects.filter(pk=event_pk, status=EventStatus.FAILED).update(status=EventStatus.PENDING, error="")
    )


__all__ = [
    "CHANNEL_TASKS",
    "EventDeferred",
    "EventHandler",
    "event_claim",
    "event_enqueue",
    "event_record",
    "event_requeue",
    "event_run",
    "events_expire_deferred",
    "events_reclaim_stuck",
    "events_waiting",
]
