from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _cache_table_ensure(sender, using: str = "default", **kwargs) -> None:
    """Create the database cache's table (idempotent) after every migrate, the test database's included, so the
    embedded default shares throttle counts across processes without a separate setup step."""
    from django.conf import settings
    from django.core.management import call_command

    if any(c["BACKEND"].endswith("DatabaseCache") for c in settings.CACHES.values()):
        call_command("createcachetable", database=using, verbosity=0)


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
        post_migrate.connect(_cache_table_ensure, sender=self, dispatch_uid="gpuops_cache_table")
        from gpuops.metrics import fleet_section_register

        from .metrics import cmdb_fleet_gauges, compliance_fleet_gauges

        fleet_section_register("cmdb", cmdb_fleet_gauges)  # the fleet gauges of /metrics
        fleet_section_register("compliance", compliance_fleet_gauges)  # firmware / driver compliance
