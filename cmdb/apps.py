from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _cache_table_ensure(sender, using: str = "default", **kwargs) -> None:
    """Create the database cache's table (idempotent) after every migrate, the test database's included, so the
    embedded default shares throttle counts across processes without a separate setup step."""
    from django.conf import settings
    from django.core.management import call_command

    if any(c["BACKEND"].endswith("DatabaseCache") for c in settings.CACHES.values()):
        call_command("createcachetable", database=using, verbosity=0)


def _scope_memo_invalidation_connect() -> None:
    """A guardian grant or a group membership written while scope lookups are memoised (an admin request, a
    console page) empties the memo, so later checks in the same request see it."""
    from django.contrib.auth import get_user_model
    from django.db.models.signals import m2m_changed, post_delete, post_save

    from .permissions import scope_lookups_forget

    for label in ("guardian.UserObjectPermission", "guardian.GroupObjectPermission"):
        post_save.connect(scope_lookups_forget, sender=label, dispatch_uid=f"scope_memo_save_{label}")
        post_delete.connect(scope_lookups_forget, sender=label, dispatch_uid=f"scope_memo_delete_{label}")
    through = get_user_model().groups.through
    m2m_changed.connect(scope_lookups_forget, sender=through, dispatch_uid="scope_memo_user_groups")


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
        _scope_memo_invalidation_connect()
        from gpuops.metrics import fleet_section_register

        from .metrics import cmdb_fleet_gauges, compliance_fleet_gauges

        fleet_section_register("cmdb", cmdb_fleet_gauges)  # the fleet gauges of /metrics
        fleet_section_register("compliance", compliance_fleet_gauges)  # firmware / driver compliance
