"""Beat tasks of ingestion (queue `ingest`, routed by name in settings.CELERY_TASK_ROUTES)."""

from __future__ import annotations

from celery import shared_task

from gpuops.context import ChangeSource, change_context

from .services.maintenance import nodes_flag_stale, reports_prune


@shared_task(name="inventory_agents.flag_stale_nodes", bind=True, acks_late=True, ignore_result=True)
def flag_stale_nodes(self) -> int:
    """Flag nodes whose agent stopped reporting (GPUOPS['AGENT_STALE_AFTER_MINUTES']). Idempotent: a node
    already flagged is skipped, so a duplicate or late run changes nothing."""
    with change_context(source=ChangeSource.SYSTEM, correlation_id=self.request.id or None):
        return nodes_flag_stale()


@shared_task(name="inventory_agents.prune_reports", bind=True, acks_late=True, ignore_result=True)
def prune_reports(self) -> int:
    """Keep the newest GPUOPS['AGENT_REPORTS_KEEP_PER_NODE'] raw reports per node."""
    return reports_prune()


@shared_task(name="inventory_agents.demo_agents_report", bind=True, acks_late=True, ignore_result=True)
def demo_agents_report(self) -> int:
    """The demo fleet's stand-in agents (GPUOPS_DEMO_AGENTS=1, set by script/server): see services/demo_agents."""
    from django.conf import settings

    if not getattr(settings, "GPUOPS_DEMO_AGENTS", False):
        return 0
    from .services.demo_agents import demo_agents_report as report_round

    return report_round().nodes
