"""Live progress of a rollout for the ticket panel and the API: per wave and per node state, failures with their
step log, and an ETA. A fixed number of queries whatever the rollout's size; per-node rows only for the waves
that are moving (and on request for all), so a 12,500-node rollout answers in a few kilobytes."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from django.db.models import Count, Prefetch
from django.utils import timezone

from .conf import rollouts_setting
from .models import (
    IN_FLIGHT_NODE_STATES,
    NodeLogLine,
    NodeRun,
    NodeRunState,
    NodeStep,
    Rollout,
    RolloutStatus,
    WaveStatus,
)

DRY_RUN = "dry_run"  # succeeded node runs whose executor only logged its commands
DRY_RUN_NOTE = (
    "dry run - nothing changed: the executor only logged its commands (integrations EXECUTOR is the dry-run "
    "executor), so no node has the new driver"
)
FAILURES_SHOWN = 50
LOG_LINES_PER_FAILURE = 40
ACTIVE_STATUSES = (RolloutStatus.RUNNING, RolloutStatus.ABORTING, RolloutStatus.ROLLING_BACK)
PREPARING_MESSAGE = (
    "Preparing the plan: a worker is writing the waves, node runs and node locks. Approval and "
    "start wait until it is written."
)


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value else None


def _node_row(run: NodeRun) -> dict[str, Any]:
    steps = list(run.steps.all())
    last = steps[-1] if steps else None
    return {
        "id": run.pk,
        "hostname": run.hostname,
        "action": run.action,
        "state": run.state,
        "state_label": run.get_state_display(),
        "previous_version": run.previous_version,
        "target_version": run.target_version,
        "is_flagged": run.is_flagged,
        "is_dry_run": run.is_dry_run,
        "step": last.name if last else "",
        "step_status": last.status if last else "",
        "step_message": last.message if last else "",
        "error": run.error,
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
    }


def _durations(rollout: Rollout) -> tuple[float | None, float | None]:
    """(mean seconds per finished wave, mean seconds per succeeded node), from what already happened."""
    waves = [
        (w.finished_at - w.started_at).total_seconds()
        for w in rollout.waves.filter(status=WaveStatus.DONE, started_at__isnull=False, finished_at__isnull=False).only(
            "started_at", "finished_at"
        )
    ]
    # The newest 200 nodes are a fair sample and keep this query small on a huge rollout.
    nodes = [
        (f - s).total_seconds()
        for s, f in rollout.node_runs.filter(
            state=NodeRunState.SUCCEEDED, started_at__isnull=False, finished_at__isnull=False
        )
        .order_by("-finished_at")
        .values_list("started_at", "finished_at")[:200]
    ]
    return (sum(waves) / len(waves) if waves else None, sum(nodes) / len(nodes) if nodes else None)


def rollout_eta(rollout: Rollout, waves: list[dict[str, Any]], now: dt.datetime) -> dict[str, Any]:
    """When the rollout should be done, if it keeps going: remaining waves times the mean wave duration so far
    (else the mean node duration, else NODE_ESTIMATE_MINUTES), minus what the current wave already spent."""
    if rollout.status not in ACTIVE_STATUSES:
        return {"at": None, "seconds_left": None, "basis": f"not running ({rollout.get_status_display().lower()})"}
    per_wave, per_node = _durations(rollout)
    basis = "mean wave duration so far"
    if per_wave is None:
        per_wave = per_node if per_node is not None else 60.0 * rollouts_setting("NODE_ESTIMATE_MINUTES")
        basis = "mean node duration so far" if per_node is not None else "configured estimate per node"
    left = 0.0
    for wave in waves:
        if wave["status"] == WaveStatus.PENDING:
            left += per_wave
        elif wave["status"] == WaveStatus.RUNNING and wave["started_at"]:
            spent = (now - dt.datetime.fromisoformat(wave["started_at"])).total_seconds()
            left += max(per_wave - spent, 0.0)
    return {"at": _iso(now + dt.timedelta(seconds=left)), "seconds_left": round(left), "basis": basis}


def progress_summary(totals: dict[str, int], total: int) -> str:
    """E.g. "21 of 21 succeeded", or - when the executor was a dry run - "21 of 21 dry-run (nothing installed)";
    never "succeeded" for a node that kept its old driver. Failures and cancellations follow."""
    dry = totals.get(DRY_RUN, 0)
    real = totals.get(NodeRunState.SUCCEEDED, 0) - dry
    parts = []
    if real or not dry:
        parts.append(f"{real} of {total} succeeded")
    if dry:
        parts.append(f"{dry} of {total} dry-run (nothing installed)")
    for state, label in ((NodeRunState.FAILED, "failed"), (NodeRunState.CANCELLED, "cancelled")):
        if totals.get(state):
            parts.append(f"{totals[state]} {label}")
    return ", ".join(parts)


def rollout_summary(rollout: Rollout) -> str:
    """`progress_summary` of a rollout in one query (for ticket messages)."""
    totals: dict[str, int] = defaultdict(int)
    for row in rollout.node_runs.values("state", "is_dry_run").annotate(n=Count("id")):
        totals[row["state"]] += row["n"]
        if row["is_dry_run"] and row["state"] == NodeRunState.SUCCEEDED:
            totals[DRY_RUN] += row["n"]
    return progress_summary(totals, sum(n for state, n in totals.items() if state != DRY_RUN))


def rollout_progress(rollout: Rollout, *, all_nodes: bool = False, now: dt.datetime | None = None) -> dict[str, Any]:
    """The progress document (JSON-ready). `all_nodes` lists every node of every wave (large)."""
    now = now or timezone.now()
    counts: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    totals: dict[str, int] = defaultdict(int)
    for row in rollout.node_runs.values("wave_id", "state", "is_dry_run").annotate(n=Count("id")):
        counts[row["wave_id"]][row["state"]] += row["n"]
        totals[row["state"]] += row["n"]
        if row["is_dry_run"] and row["state"] == NodeRunState.SUCCEEDED:
            # Succeeded under a dry-run executor: the commands were only logged, nothing was installed.
            counts[row["wave_id"]][DRY_RUN] += row["n"]
            totals[DRY_RUN] += row["n"]
    wave_rows = list(rollout.waves.order_by("index"))
    moving = {w.pk for w in wave_rows if w.status == WaveStatus.RUNNING}
    if not moving:
        nxt = next((w for w in wave_rows if w.status == WaveStatus.PENDING), None)
        moving = {nxt.pk} if nxt else set()
    shown = NodeRun.objects.filter(rollout=rollout).order_by("wave__index", "position")
    if not all_nodes:
        shown = shown.filter(wave_id__in=moving)
    nodes_by_wave: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for run in shown.prefetch_related(Prefetch("steps", queryset=NodeStep.objects.order_by("created_at"))):
        nodes_by_wave[run.wave_id].append(_node_row(run))
    waves = []
    for w in wave_rows:
        c = counts.get(w.pk, {})
        waves.append(
            {
                "id": w.pk,
                "index": w.index,
                "kind": w.kind,
                "kind_label": w.get_kind_display(),
                "status": w.status,
                "failure_budget": w.failure_budget,
                "failure_allowance": w.failure_allowance,
                "total": sum(n for state, n in c.items() if state != DRY_RUN),
                "succeeded": c.get(NodeRunState.SUCCEEDED, 0),
                "dry_run": c.get(DRY_RUN, 0),
                "failed": c.get(NodeRunState.FAILED, 0),
                "pending": c.get(NodeRunState.PENDING, 0),
                "in_flight": sum(c.get(s, 0) for s in IN_FLIGHT_NODE_STATES),
                "cancelled": c.get(NodeRunState.CANCELLED, 0),
                "started_at": _iso(w.started_at),
                "finished_at": _iso(w.finished_at),
                "nodes": nodes_by_wave.get(w.pk) if (all_nodes or w.pk in moving) else None,
            }
        )
    failed = (
        NodeRun.objects.filter(rollout=rollout, state=NodeRunState.FAILED)
        .select_related("wave")
        .prefetch_related(Prefetch("log_lines", queryset=NodeLogLine.objects.order_by("at", "id")))
        .order_by("-finished_at")[:FAILURES_SHOWN]
    )
    failures = [
        {
            "hostname": r.hostname,
            "wave": r.wave.index,
            "action": r.action,
            "error": r.error,
            "finished_at": _iso(r.finished_at),
            "is_flagged": r.is_flagged,
            "log": [
                {"at": _iso(line.at), "step": line.step, "level": line.level, "message": line.message}
                for line in list(r.log_lines.all())[-LOG_LINES_PER_FAILURE:]
            ],
        }
        for r in failed
    ]
    total = sum(n for state, n in totals.items() if state != DRY_RUN)
    done = (
        totals.get(NodeRunState.SUCCEEDED, 0)
        + totals.get(NodeRunState.FAILED, 0)
        + totals.get(NodeRunState.CANCELLED, 0)
    )
    return {
        "id": rollout.pk,
        "label": rollout.label,
        "ticket_id": rollout.ticket_id,
        "component": rollout.component,
        "target_version": rollout.target_version,
        "status": rollout.status,
        "status_label": rollout.get_status_display(),
        "paused_reason": rollout.paused_reason,
        "is_active": rollout.status in ACTIVE_STATUSES,
        # No waves or node runs exist until the plan is written: say so rather than show an empty plan.
        "is_preparing": rollout.status == RolloutStatus.PREPARING,
        "message": PREPARING_MESSAGE if rollout.status == RolloutStatus.PREPARING else "",
        "started_at": _iso(rollout.started_at),
        "finished_at": _iso(rollout.finished_at),
        "totals": {
            "nodes": total,
            "done": done,
            "percent": round(100 * done / total) if total else 100,
            **{s: totals.get(s, 0) for s in NodeRunState.values},
            "dry_run": totals.get(DRY_RUN, 0),
            # Succeeded for real (the executor ran the commands).
            "installed": totals.get(NodeRunState.SUCCEEDED, 0) - totals.get(DRY_RUN, 0),
        },
        "summary": progress_summary(totals, total),
        "is_dry_run": bool(totals.get(DRY_RUN)),
        "dry_run_note": DRY_RUN_NOTE if totals.get(DRY_RUN) else "",
        "eta": rollout_eta(rollout, waves, now),
        "waves": waves,
        "failures": failures,
        "refused": rollout.plan.get("refused", []),
        "skipped_count": len(rollout.plan.get("skipped", [])),
    }


__all__ = ["DRY_RUN_NOTE", "progress_summary", "rollout_eta", "rollout_progress", "rollout_summary"]
