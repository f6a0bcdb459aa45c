from __future__ import annotations

from django.apps import AppConfig


class ProcurementConfig(AppConfig):
    """Procurement requests, purchase orders through the procurement system's API, signed inbound events."""

    name = "integrations.procurement"
    label = "procurement"
    verbose_name = "Procurement"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        _beat_schedule_defaults()
        _workflow_register()


def _beat_schedule_defaults() -> None:
    """Add this app's periodic tasks to Celery beat unless settings (CELERY_BEAT_SCHEDULE) name them already."""
    from gpuops.celery import app

    from .conf import BEAT_SCHEDULE

    schedule = app.conf.beat_schedule
    for name, entry in BEAT_SCHEDULE.items():
        schedule.setdefault(name, dict(entry))


def _workflow_register() -> None:
    """Register the procurement ticket type (workflows/definitions/procurement.py) with the workflow engine.

    Registered here rather than in workflows.definitions.ALL, which belongs to the workflows app; registering
    the same declaration twice is harmless, so this keeps working if it is added there later.
    """
    try:
        from workflows import registry
        from workflows.definitions import procurement
    except ImportError:  # no workflow engine in this deployment: requests work without tickets
        return
    registry.register(procurement.WORKFLOW)
