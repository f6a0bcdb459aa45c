"""Celery tasks of the procurement integration: thin wrappers that load by id and call one service.

Names are explicit and stable (routed to the `integrations` queue by the `integrations.*` route). All tasks
use gpuops.tasks.BaseTask: acks_late, bounded retries of TransientError with backoff and jitter, no result
backend, and eager mode decided by the live Django setting.

Beat entry (settings.CELERY_BEAT_SCHEDULE), also in conf.BEAT_SCHEDULE:
    "procurement-sweep": {"task": "integrations.procurement.sweep", "schedule": 900.0}
"""

from __future__ import annotations

import datetime as dt
import logging

from celery import shared_task

from gpuops.context import ChangeSource, change_context
from gpuops.tasks import BaseTask

from .conf import procurement_setting

logger = logging.getLogger(__name__)


@shared_task(name="integrations.procurement.process_event", base=BaseTask, bind=True)
def process_event(self, event_id: int) -> str:
    """Process one stored procurement event. Idempotent: the compare-and-set claim on InboundEvent.status lets
    exactly one run apply it; a redelivered message finds it processed and returns "skipped"."""
    from .inbound import event_run
    from .services.events import procurement_event_handle

    return event_run(event_id, procurement_event_handle)


@shared_task(name="integrations.procurement.place_order", base=BaseTask, bind=True)
def place_order(self, request_id: int) -> str:
    """Create the PO of an approved request in the procurement system (idempotent by the request's key).

    TransientError (peer down after the adapter's own retries) is retried by the base task with backoff; a
    PermanentError stays on the request (`po_error`) for an operator.
    """
    from .services.orders import order_place

    with change_context(source=ChangeSource.INTEGRATION):
        req = order_place(request_id=request_id)
    return req.po_number


@shared_task(name="integrations.procurement.sweep", base=BaseTask, bind=True)
def sweep(self) -> dict[str, int]:
    """Periodic housekeeping (beat, every 15 minutes):

    - events stuck in `processing` for 15 minutes (their worker died) go back to pending and are re-enqueued;
    - deferred events older than DEFERRED_EVENT_TIMEOUT_H are failed (what they waited for never came);
    - approved requests without a PO and with no error are re-enqueued (a lost task message);
    - requests with deliveries still lacking a dispatch notice are reconciled (no_dispatch_notice after grace);
    - procurement tickets whose state lags their request's (a sync that failed on commit) are synced.
    """
    from .hooks import requests_resync
    from .inbound import event_enqueue, events_expire_deferred, events_reclaim_stuck
    from .models import InboundEvent, ProcurementRequest, RequestState, Shipment
    from .services.receiving import request_reconcile

    stuck = events_reclaim_stuck(older_than=dt.timedelta(minutes=15))
    for event in InboundEvent.objects.filter(pk__in=stuck):
        event_enqueue(event)
    expired = events_expire_deferred(older_than=dt.timedelta(hours=procurement_setting("DEFERRED_EVENT_TIMEOUT_H")))
    orphans = list(
        ProcurementRequest.objects.filter(state=RequestState.APPROVED, po_number="", po_error="").values_list(
            "pk", flat=True
        )
    )
    for request_id in orphans:
        place_order.delay(request_id)
    waiting = (
        Shipment.objects.filter(delivered_at__isnull=False, is_dispatch_known=False)
        .values_list("request_id", flat=True)
        .distinct()
    )
    with change_context(source=ChangeSource.SYSTEM):
        for request in ProcurementRequest.objects.filter(pk__in=list(waiting)):
            request_reconcile(request)
        resynced = requests_resync()
    return {"reclaimed": len(stuck), "expired": expired, "orders_requeued": len(orphans), "tickets": resynced}
