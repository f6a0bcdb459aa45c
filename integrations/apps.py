import logging

from django.apps import AppConfig

logger = logging.getLogger(__name__)

# Periodic tasks of the integrations app itself; added to Celery beat unless CELERY_BEAT_SCHEDULE names them.
BEAT_SCHEDULE = {
    "integrations.webhooks_sweep": {"task": "integrations.webhooks_sweep", "schedule": 30.0},
    # Scheduler state synced back as drift (a no-op where no cluster kind has a real adapter).
    "integrations.scheduler_sync_all": {"task": "integrations.scheduler_sync_all", "schedule": 300.0},
}


class IntegrationsConfig(AppConfig):
    name = "integrations"
    verbose_name = "Integrations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from cmdb.hooks import register_changes_committed
        from cmdb.permissions import register_scope

        from .models import SchedulerDrift

        register_changes_committed(changes_committed)
        register_scope(
            SchedulerDrift, {"site": "node__site_id", "cluster": "node__cluster_id", "tenant": "node__tenant_id"}
        )
        _beat_schedule_defaults()


def changes_committed() -> None:
    """cmdb hook (after commit): queue the webhook fan-out. A broker that is down only delays it to the sweep."""
    from gpuops.tasks import PUBLISH_ERRORS

    from .tasks import webhooks_fan_out_task

    try:
        webhooks_fan_out_task.apply_async()
    except PUBLISH_ERRORS as exc:
        logger.warning("webhook fan-out not queued (%s); the sweep will catch up", exc)


def _beat_schedule_defaults() -> None:
    from gpuops.celery import app

    schedule = app.conf.beat_schedule
    for name, entry in BEAT_SCHEDULE.items():
        schedule.setdefault(name, dict(entry))
