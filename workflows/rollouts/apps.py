from django.apps import AppConfig


class RolloutsConfig(AppConfig):
    """Driver rollouts (waves, node locks, per-node pipeline) and node provisioning."""

    name = "workflows.rollouts"
    label = "rollouts"
    verbose_name = "Driver rollouts and provisioning"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        _beat_schedule_defaults()
        _workflows_register()


def _beat_schedule_defaults() -> None:
    """Add the app's periodic tasks to Celery beat unless settings (CELERY_BEAT_SCHEDULE) name them already."""
    from gpuops.celery import app

    from .conf import BEAT_SCHEDULE

    schedule = app.conf.beat_schedule
    for name, entry in BEAT_SCHEDULE.items():
        schedule.setdefault(name, dict(entry))


def _workflows_register() -> None:
    """Register the rollout and provisioning ticket types with the workflow registry.

    The workflows app registers `workflows.definitions.ALL` in its own ready(), which runs before ours
    (INSTALLED_APPS order); registering the same declaration twice is harmless, so this keeps working once the
    two modules are added to ALL.
    """
    from workflows import registry
    from workflows.definitions import provisioning, rollout

    registry.register(rollout.WORKFLOW)
    registry.register(provisioning.WORKFLOW)
