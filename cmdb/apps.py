from django.apps import AppConfig


class CmdbConfig(AppConfig):
    name = "cmdb"
    verbose_name = "CMDB"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.apps import apps

        from . import signals
        from .models.base import TrackedModel

        # Every tracked model of every app (workflows and integrations may define their own).
        signals.connect([m for m in apps.get_models() if issubclass(m, TrackedModel)])
        signals.connect_rack_units()
