"""The workflows' fleet gauges for /metrics: open tickets, SLA breaches, step runs, rollouts and their nodes."""

from __future__ import annotations

from django.db.models import Count, Min
from django.utils import timezone

from gpuops.metrics import GaugeData

from .models import Ticket
from .models.runs import ACTIVE_STEP_STATUSES, StepRun, StepStatus


def workflows_fleet_gauges() -> list[GaugeData]:
    now = timezone.now()
    open_tickets = GaugeData("gpuops_tickets_open", "Open tickets by type and state", ["type", "state"])
    for type_, state, n in (
        Ticket.objects.filter(is_open=True).values_list("type", "state").annotate(n=Count("id")).order_by()
    ):
        open_tickets.add([type_, state], n)
    breaches = GaugeData("gpuops_sla_breaches", "Open tickets past their SLA due time, by type", ["type"])
    for type_, n in (
        Ticket.objects.filter(is_open=True, due_at__lt=now).values_list("type").annotate(n=Count("id")).order_by()
    ):
        breaches.add([type_], n)

    steps = GaugeData("gpuops_step_runs_active", "Step runs not finished, by status", ["status"])
    counts = dict(
        StepRun.objects.filter(status__in=ACTIVE_STEP_STATUSES).values_list("status").annotate(n=Count("id")).order_by()
    )
    for status in ACTIVE_STEP_STATUSES:
        steps.add([status], counts.get(status, 0))
    oldest = StepRun.objects.filter(status=StepStatus.RUNNING).aggregate(at=Min("started_at"))["at"]
    running_age = GaugeData("gpuops_step_run_oldest_running_seconds", "Age of the longest-running step attempt", [])
    running_age.add([], (now - oldest).total_seconds() if oldest else 0)
    return [open_tickets, breaches, steps, running_age, *_rollout_gauges()]


def _rollout_gauges() -> list[GaugeData]:
    from django.apps import apps

    if not apps.is_installed("workflows.rollouts"):
        return []
    from .rollouts.models.rollouts import FINAL_STATUSES, NodeRun, Rollout

    rollouts = GaugeData("gpuops_rollouts", "Driver rollouts by status", ["status"])
    for status, n in Rollout.objects.values_list("status").annotate(n=Count("id")).order_by():
        rollouts.add([status], n)
    nodes = GaugeData("gpuops_rollout_nodes", "Nodes of unfinished rollouts by state", ["state"])
    for state, n in (
        NodeRun.objects.exclude(rollout__status__in=FINAL_STATUSES)
        .values_list("state")
        .annotate(n=Count("id"))
        .order_by()
    ):
        nodes.add([state], n)
    return [rollouts, nodes]
