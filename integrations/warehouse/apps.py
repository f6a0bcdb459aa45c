from __future__ import annotations

from django.apps import AppConfig


class WarehouseConfig(AppConfig):
    """The stock ledger beyond reservations, minimum stock, the WMS, stock overview."""

    name = "integrations.warehouse"
    label = "warehouse"
    verbose_name = "Warehouse"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from gpuops.celery import app

        from .conf import BEAT_SCHEDULE

        # This app's periodic tasks, unless settings.CELERY_BEAT_SCHEDULE names them already (settings win).
        schedule = app.conf.beat_schedule
        for name, entry in BEAT_SCHEDULE.items():
            schedule.setdefault(name, dict(entry))
