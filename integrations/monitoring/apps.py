from __future__ import annotations

from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    """Alerts in from Prometheus Alertmanager and other monitors, turned into CMDB health events."""

    name = "integrations.monitoring"
    label = "monitoring"
    verbose_name = "Monitoring"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from cmdb.permissions import register_scope
        from gpuops.metrics import fleet_section_register

        from .metrics import monitoring_fleet_gauges
        from .models import ReceivedAlert

        fleet_section_register("monitoring", monitoring_fleet_gauges)

        # A received alert is seen by those who may see its node; an unmatched one only with a global view.
        register_scope(
            ReceivedAlert, {"site": "node__site_id", "cluster": "node__cluster_id", "tenant": "node__tenant_id"}
        )
