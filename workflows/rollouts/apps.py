from django.apps import AppConfig


class RolloutsConfig(AppConfig):
    """Driver rollouts (waves, node locks, per-node pipeline) and node provisioning."""

    name = "workflows.rollouts"
    label = "rollouts"
    verbose_name = "Driver rollouts and provisioning"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Its ticket types (rollout, provisioning) are registered with all others: workflows.definitions.TICKET_TYPES.
        _beat_schedule_defaults()


def _beat_schedule_defaults() -> None:
    """Add the app's periodic tasks to Celery beat unless settings (CELERY_BEAT_SCHEDULE) name them already."""
    from gpuops.celery import app

    from .conf import BEAT_SCHEDULE

    schedule = app.conf.beat_schedule
    for name, entry in BEAT_SCHEDULE.items():
        schedule.setdefault(name, dict(entry))
