from __future__ import annotations

from django.apps import AppConfig


class ProcurementConfig(AppConfig):
    """Procurement requests, purchase orders through the procurement system's API, signed inbound events."""

    name = "integrations.procurement"
    label = "procurement"
    verbose_name = "Procurement"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The procurement ticket type and the glue that opens and moves its tickets live in workflows
        # (workflows.definitions.TICKET_TYPES, workflows/glue/procurement.py): integrations do not import workflows.
        _beat_schedule_defaults()


def _beat_schedule_defaults() -> None:
    """Add this app's periodic tasks to Celery beat unless settings (CELERY_BEAT_SCHEDULE) name them already."""
    from gpuops.celery import app

    from .conf import BEAT_SCHEDULE

    schedule = app.conf.beat_schedule
    for name, entry in BEAT_SCHEDULE.items():
        schedule.setdefault(name, dict(entry))
