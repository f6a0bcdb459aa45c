"""Celery tasks of the integrations app itself (outbound webhooks). Peers' tasks live in their packages."""

from __future__ import annotations

import logging

from celery import shared_task

from gpuops.tasks import BaseTask
from integrations.exceptions import PermanentError, TransientError

logger = logging.getLogger(__name__)


@shared_task(bind=True, base=BaseTask, name="integrations.webhook_deliver", autoretry_for=(), max_retries=None)
def webhook_deliver_task(self: BaseTask, delivery_id: int) -> None:
    """Send WebhookDelivery `delivery_id` once. Idempotent: the row is claimed by compare-and-set, so a duplicate
    message or a retry after delivery sends nothing. The attempt budget is the subscription's `max_attempts`
    (kept on the row), hence no Celery max_retries; the countdown is the row's exponential backoff."""
    from .webhooks.services import delivery_attempt

    countdown = delivery_attempt(delivery_id)
    if countdown is not None:
        raise self.retry(countdown=countdown)


@shared_task(base=BaseTask, name="integrations.webhooks_fan_out")
def webhooks_fan_out_task() -> int:
    """Fan newly committed CMDB changes out to the subscriptions (queued after each commit that wrote changes)."""
    from .webhooks.services import change_events_fan_out

    written, more = change_events_fan_out()
    if more:
        webhooks_fan_out_task.apply_async()
    return written


@shared_task(base=BaseTask, name="integrations.webhooks_sweep")
def webhooks_sweep_task() -> int:
    """Beat: catch up the fan-out and re-publish deliveries whose message was lost (webhooks.services)."""
    from .webhooks.services import webhooks_sweep

    return webhooks_sweep()


@shared_task(base=BaseTask, name="integrations.scheduler_sync_all")
def scheduler_sync_all_task() -> int:
    """Beat: one sync task per cluster whose scheduler has a real adapter (integrations/schedulers/sync.py)."""
    from .schedulers.sync import synced_clusters

    cluster_ids = synced_clusters()
    for cluster_id in cluster_ids:
        scheduler_sync_cluster_task.delay(cluster_id)
    return len(cluster_ids)


@shared_task(
    bind=True,
    base=BaseTask,
    name="integrations.scheduler_sync_cluster",
    autoretry_for=(TransientError,),
    retry_backoff=True,
    max_retries=3,
)
def scheduler_sync_cluster_task(self: BaseTask, cluster_id: int) -> dict[str, int]:
    """Read one cluster's scheduler and record where it disagrees with the CMDB. Idempotent: a second run with
    the same answers opens nothing new. A scheduler that stays unreachable is read again at the next beat."""
    from .schedulers.sync import scheduler_allocation_sync, scheduler_drift_sync

    result = scheduler_drift_sync(cluster_id)
    try:
        allocated = scheduler_allocation_sync(cluster_id)
    except PermanentError as exc:  # an answer we cannot read must not hide the drift just recorded
        logger.warning("scheduler allocation of cluster %s not read: %s", cluster_id, exc)
        allocated = None
    return {
        "nodes": result.nodes,
        "opened": len(result.opened),
        "resolved": len(result.resolved),
        "allocation_nodes": -1 if allocated is None else allocated,
    }
