"""The jobs a failure touched: what ran on a node in the hours before its card failed (or an incident began), read
from the node's scheduler (Slurm sacct, the pods Kubernetes still keeps) so the training teams can be told and
the postmortem names them.

The answer is kept on the ticket (`ticket.data["jobs_impact"]`) as the scheduler gave it when the step ran: job
history changes (jobs end, pods are garbage-collected), the list on the ticket is what was true at the failure.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from cmdb.models import Node
from integrations.exceptions import PermanentError
from integrations.schedulers.base import JobReader, SchedulerJob, SchedulerNode
from integrations.schedulers.registry import scheduler_for

from ..conf import workflows_setting
from ..engine import timeline_add
from ..models import TimelineKind
from ..steps import StepContext


def _aware(at: dt.datetime | None) -> dt.datetime | None:
    # Slurm prints the controller's local time without zone; read it as this server's local time.
    if at is None or timezone.is_aware(at):
        return at
    return timezone.make_aware(at, timezone.get_current_timezone())


def _job_row(job: SchedulerJob) -> dict[str, Any]:
    start, end = _aware(job.start_at), _aware(job.end_at)
    return {
        "job_id": job.job_id,
        "state": job.state,
        "user": job.user,
        "partition": job.partition,
        "name": job.name,
        "nodes": list(job.nodes[:16]),
        "start_at": start.isoformat() if start else None,
        "end_at": end.isoformat() if end else None,
    }


def jobs_impact_read(node: Node, *, failed_at: dt.datetime, hours: float | None = None) -> dict[str, Any]:
    """The jobs that ran on `node` between `failed_at - hours` and `failed_at`, newest first, as JSON for the
    ticket. A scheduler that keeps no history (or refuses: Slurm without accounting) leaves a note saying so,
    with the jobs running now where the adapter can list them; TransientError propagates (the step retries)."""
    hours = float(hours if hours is not None else workflows_setting("JOB_IMPACT_HOURS"))
    start_at = failed_at - dt.timedelta(hours=hours)
    cluster = node.cluster
    kind = cluster.kind if cluster else ""
    target = SchedulerNode(name=node.hostname, cluster=cluster.name if cluster else "", cluster_kind=kind)
    scheduler = scheduler_for(kind)
    result: dict[str, Any] = {
        "node": node.hostname,
        "scheduler": kind or "default",
        "window_start": start_at.isoformat(),
        "window_end": failed_at.isoformat(),
        "read_at": timezone.now().isoformat(),
        "jobs": [],
        "total": 0,
        "note": "",
    }
    if not isinstance(scheduler, JobReader):
        result["note"] = f"The scheduler adapter of {node.hostname} ({type(scheduler).__name__}) keeps no job history."
        return result
    result["note"] = getattr(scheduler, "demo_note", "")
    try:
        jobs = scheduler.job_history(target, start_at=start_at, end_at=failed_at)
    except PermanentError as exc:
        result["note"] = f"Job history unavailable: {exc}"
        current = getattr(scheduler, "node_jobs", None)
        jobs = current(target) if current is not None else []
        if current is not None:
            result["note"] += " Listed instead: the jobs on the node now."
    jobs.sort(key=lambda j: (_aware(j.start_at) or failed_at, j.job_id), reverse=True)
    limit = int(workflows_setting("JOB_IMPACT_MAX"))
    result["total"] = len(jobs)
    result["jobs"] = [_job_row(j) for j in jobs[:limit]]
    return result


def jobs_impact_collect(ctx: StepContext, node: Node, *, failed_at: dt.datetime) -> dict[str, Any]:
    """Inside a step: read the jobs once (a retried or re-woken step does not ask the scheduler again) and put
    one line on the ticket's timeline. Returns the impact for the step to keep in ticket.data["jobs_impact"]."""
    impact = ctx.external("jobs_impact_read", lambda: jobs_impact_read(node, failed_at=failed_at))

    def timeline() -> dict[str, Any]:
        timeline_add(
            ticket=ctx.ticket, kind=TimelineKind.STEP, step_run=ctx.run, message=jobs_impact_summary(impact)[:500]
        )
        return {"total": impact["total"]}

    ctx.effect("jobs_impact_timeline", timeline)
    return impact


def jobs_impact_summary(impact: dict[str, Any]) -> str:
    """One line for the ticket's timeline."""
    total = impact.get("total", 0)
    hours = (
        dt.datetime.fromisoformat(impact["window_end"]) - dt.datetime.fromisoformat(impact["window_start"])
    ).total_seconds() / 3600
    if not total:
        return f"no jobs found on {impact['node']} in the {hours:g} h before" + (
            f" ({impact['note']})" if impact.get("note") else ""
        )
    shown = ", ".join(f"{j['job_id']} ({j['user'] or '?'})" for j in impact["jobs"][:8])
    more = f" and {total - 8} more" if total > 8 else ""
    return f"{total} job(s) ran on {impact['node']} in the {hours:g} h before: {shown}{more}"


__all__ = ["jobs_impact_collect", "jobs_impact_read", "jobs_impact_summary"]
