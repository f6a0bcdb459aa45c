"""Celery tasks of the warehouse integration (queue `integrations`), on gpuops.tasks.BaseTask.

Beat entries (settings.CELERY_BEAT_SCHEDULE), also in conf.BEAT_SCHEDULE:
    "warehouse-minimum-stock-check": {"task": "integrations.warehouse.minimum_stock_check", "schedule": 900.0}
    "warehouse-wms-push": {"task": "integrations.warehouse.wms_push", "schedule": 300.0}
    "warehouse-wms-reconcile": {"task": "integrations.warehouse.wms_reconcile", "schedule": 3600.0}
"""

from __future__ import annotations

from celery import shared_task

from gpuops.context import ChangeSource, change_context
from gpuops.tasks import BaseTask


@shared_task(name="integrations.warehouse.process_event", base=BaseTask, bind=True)
def process_event(self, event_id: int) -> str:
    """Process one stored WMS event (idempotent by compare-and-set on InboundEvent.status)."""
    from integrations.procurement.inbound import event_run

    from .services.wms import wms_event_handle

    return event_run(event_id, wms_event_handle)


@shared_task(name="integrations.warehouse.minimum_stock_check", base=BaseTask, bind=True)
def minimum_stock_check(self, site_id: int | None = None) -> int:
    """Open or update refill requests where free spares are below their minimum. Returns how many levels were low."""
    from cmdb.models import Site

    from .services.minimum import minimum_stock_check as check

    site = Site.objects.filter(pk=site_id).first() if site_id else None
    with change_context(source=ChangeSource.SYSTEM):
        return len(check(site=site))


@shared_task(name="integrations.warehouse.wms_push", base=BaseTask, bind=True)
def wms_push(self) -> int:
    """Push ledger movements to the WMS, a batch per run until caught up (bounded to 20 batches a run)."""
    from .services.wms import wms_push as push

    pushed = 0
    for _ in range(20):
        run = push()
        if run is None:
            break
        pushed += run.items
    return pushed


@shared_task(name="integrations.warehouse.wms_reconcile", base=BaseTask, bind=True)
def wms_reconcile(self, site_id: int | None = None) -> int:
    """Compare the WMS's stock with the ledger for one site, or fan out one task per WMS-managed site."""
    from cmdb.models import Site, StockLocation

    from .conf import warehouse_setting
    from .services.wms import wms_reconcile as reconcile

    if site_id is not None:
        return reconcile(site=Site.objects.get(pk=site_id)).discrepancies
    codes = warehouse_setting("WMS_SITES")
    sites = (
        Site.objects.filter(code__in=codes)
        if codes
        else Site.objects.filter(pk__in=StockLocation.objects.values("site_id"))
    )
    for site in sites:
        wms_reconcile.delay(site.pk)
    return 0
