"""The workflows app: tickets and the workflow engine on Celery."""

from __future__ import annotations

from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from cmdb.holds import hold_overridden_register, hold_provider_register
        from cmdb.hooks import register_accelerator_failed, register_schedulability_changed
        from cmdb.permissions import register_scope, register_workflow_scope
        from inventory_agents.signals import report_received

        from . import definitions, glue, registry
        from .models import Ticket
        from .services.health import on_accelerator_failed, on_node_reported
        from .services.holds import node_holders, on_hold_overridden, on_schedulability_changed, workflow_scope

        for wf in definitions.TICKET_TYPES:  # every ticket type, from one list
            if apps.is_installed(definitions.REQUIRES_APP.get(wf.type, self.name)):
                registry.register(wf)
        # Site and cluster technicians see the tickets of their site/cluster, as they see its inventory.
        register_scope(Ticket, {"site": "site_id", "cluster": "cluster_id"})
        register_accelerator_failed(on_accelerator_failed)
        # Adapters and ingestion call their hook points; the glue that turns those events into tickets is ours.
        glue.register()
        # The CMDB's guarded writers: who holds a node, what a step may touch, who hears of an override, and
        # the scheduler glue for cordons made outside a step.
        hold_provider_register(node_holders)
        register_workflow_scope(workflow_scope)
        hold_overridden_register(on_hold_overridden)
        register_schedulability_changed(on_schedulability_changed)
        report_received.connect(on_node_reported, dispatch_uid="workflows_wake_on_report")
        post_migrate.connect(_permissions_after_migrate, sender=self, dispatch_uid="workflows_transition_perms")
        _beat_schedule_defaults()
        from gpuops.metrics import fleet_section_register

        from .metrics import workflows_fleet_gauges

        fleet_section_register("workflows", workflows_fleet_gauges)  # tickets, SLA, steps, rollouts on /metrics


def _permissions_after_migrate(sender: AppConfig, **kwargs: object) -> None:
    """Every transition's permission exists as a Permission row once the tables do."""
    from .permissions import transition_permissions_ensure

    transition_permissions_ensure()


def _beat_schedule_defaults() -> None:
    """Add the app's periodic tasks to Celery beat unless settings (CELERY_BEAT_SCHEDULE) name them already."""
    from gpuops.celery import app

    from .conf import BEAT_SCHEDULE

    schedule = app.conf.beat_schedule
    for name, entry in BEAT_SCHEDULE.items():
        schedule.setdefault(name, dict(entry))
