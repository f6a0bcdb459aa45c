"""Running the per-node steps of a rollout: publish, claim, execute, record the outcome, wake and reap.

Life of a NodeStep (its id is the Celery task id of every message for it):

    pending --claim--> running --Next(step)--> succeeded; the next step is written and published
                          |--Next(None)--> succeeded; the node run ends (succeeded, or failed after a rollback)
                          |--Wait--> waiting --due (countdown message or the beat sweep), claim--> running
                          |--TransientError--> waiting with backoff, until STEP_MAX_ATTEMPTS, then Fail
                          |--Fail(rollback)--> failed; a rollback step is written and published
                          |--Fail--> failed; the node run ends failed: flagged, cordoned, left drained

The claim is a compare-and-set on the step row (pending, or waiting and due -> running), so a duplicate or
redelivered message does nothing. A worker lost mid-step leaves it running; `node_steps_sweep` requeues it
after STEP_STUCK_AFTER_SECONDS, and external calls it had checkpointed are not repeated.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from celery.utils.time import get_exponential_backoff_interval
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from gpuops.context import ChangeSource, change_context
from gpuops.logs import log_bind, log_event
from gpuops.tasks import eager_mode
from integrations.exceptions import TransientError

from .conf import rollouts_setting
from .models import NodeLogLine, NodeRun, NodeRunState, NodeStep, NodeStepStatus, Rollout

logger = logging.getLogger(__name__)
step_logger = logging.getLogger("gpuops.step")
T = TypeVar("T")

# The node run's state while each step runs.
STEP_STATES = {
    "drain": NodeRunState.DRAINING,
    "install": NodeRunState.INSTALLING,
    "reboot": NodeRunState.REBOOTING,
    "verify": NodeRunState.VERIFYING,
    "resume": NodeRunState.RESUMING,
    "rollback": NodeRunState.ROLLING_BACK,
}
# Countdown messages only for short waits; longer ones are left to the beat sweep (Redis redelivers unacked
# messages after its visibility timeout, so long countdowns are unreliable).
MAX_COUNTDOWN_S = 300


@dataclass(frozen=True)
class Next:
    """The step is done. `step` names the next one (None: the node run ends in `final_state`)."""

    step: str | None
    message: str = ""
    final_state: str = NodeRunState.SUCCEEDED


@dataclass(frozen=True)
class Wait:
    """Not yet: run the step again in `seconds`."""

    seconds: float
    message: str = ""


@dataclass(frozen=True)
class Fail:
    """The step failed. With `rollback`, the rollback step runs next; without, the node run ends failed."""

    reason: str
    rollback: bool = False


Outcome = Next | Wait | Fail


class NodeStepContext:
    """What a step function sees: the step, its node run, the rollout, and checkpointed effects."""

    def __init__(self, step: NodeStep, now: dt.datetime) -> None:
        self.step = step
        self.run: NodeRun = step.node_run
        self.rollout: Rollout = step.node_run.rollout
        self.now = now
        self.state: dict[str, Any] = dict(step.state or {})
        self._lines: list[NodeLogLine] = []

    def log(self, message: str, level: str = "info") -> None:
        """A log line for the node run (kept even if the step's own transaction rolls back)."""
        self._lines.append(
            NodeLogLine(
                node_run_id=self.run.pk, step=self.step.name, at=timezone.now(), level=level, message=message[:4000]
            )
        )

    def flush_log(self) -> None:
        if self._lines:
            NodeLogLine.objects.bulk_create(self._lines)
            self._lines = []

    def _checkpoint(self) -> None:
        NodeStep.objects.filter(pk=self.step.pk).update(state=self.state)

    def done(self, name: str) -> bool:
        return name in self.state.get("effects", {})

    def external(self, name: str, fn: Callable[[], T]) -> T:
        """Call an adapter once per step: the JSON result is checkpointed right after the call (outside any
        transaction: no row lock is held while a node installs a driver). A worker lost between the call and
        the checkpoint repeats the call; adapters' calls are idempotent by contract."""
        effects = self.state.setdefault("effects", {})
        if name in effects:
            self.log(f"{name}: already done, not repeated")
            return effects[name]
        result = fn()
        effects[name] = result
        self._checkpoint()
        return result

    def effect(self, name: str, fn: Callable[[], T]) -> T:
        """A CMDB write performed once: the write and its checkpoint commit together."""
        effects = self.state.setdefault("effects", {})
        if name in effects:
            return effects[name]
        with transaction.atomic():
            result = fn()
            effects[name] = result
            self._checkpoint()
        return result

    def deadline(self, name: str, after_s: float) -> dt.datetime:
        """A deadline fixed at the first call and remembered across polls."""
        key = f"deadline:{name}"
        if key not in self.state:
            self.state[key] = (self.now + dt.timedelta(seconds=after_s)).isoformat()
            self._checkpoint()
        return dt.datetime.fromisoformat(self.state[key])


# --- publish --------------------------------------------------------------------------------------------------


def step_publish(step_id: str, *, countdown: float | None = None) -> None:
    """Publish the task of a step (task id = step id)."""
    from .tasks import node_step_task

    options: dict[str, Any] = {"task_id": step_id}
    if countdown:
        options["countdown"] = countdown
    node_step_task.apply_async(args=[step_id], **options)


def step_publish_on_commit(step: NodeStep, *, countdown: float | None = None) -> None:
    """Publish after the surrounding transaction commits (the row must exist before the message)."""
    if countdown and eager_mode():
        return  # eager (tests, broker-less demo): a delayed poll would run at once; the sweep picks it up
    transaction.on_commit(functools.partial(step_publish, str(step.pk), countdown=countdown))


# --- execute --------------------------------------------------------------------------------------------------


def _claim(step_id: str, now: dt.datetime) -> bool:
    due = Q(status=NodeStepStatus.PENDING) | Q(status=NodeStepStatus.WAITING, wake_at__lte=now)
    return bool(
        NodeStep.objects.filter(due, pk=step_id).update(
            status=NodeStepStatus.RUNNING,
            attempts=F("attempts") + 1,
            claimed_at=now,
            started_at=Coalesce("started_at", now),
        )
    )


def node_step_execute(step_id: str) -> str:
    """Claim step `step_id` and run one attempt; record the outcome. Returns what happened (for logs/tests)."""
    from .node_steps import STEPS

    now = timezone.now()
    if not _claim(step_id, now):
        return "not claimable"
    step = NodeStep.objects.select_related(
        "node_run__rollout__package", "node_run__rollout__ticket", "node_run__node__cluster"
    ).get(pk=step_id)
    ctx = NodeStepContext(step, now)
    rollout = ctx.rollout
    ticket_ref = rollout.ticket.reference if rollout.ticket_id else None
    log_bind(ticket=ticket_ref)
    started = time.monotonic()
    try:
        # CMDB changes carry the rollout's (its ticket's) correlation id and the source "workflow".
        with change_context(source=ChangeSource.WORKFLOW, correlation_id=rollout.correlation_id):
            outcome = STEPS[step.name](ctx)
    except TransientError as exc:
        outcome = _on_transient(ctx, exc)
    except Exception as exc:
        # Deliberately broad: a PermanentError or a bug fails this node visibly instead of killing the worker.
        ctx.log("".join(traceback.format_exception_only(type(exc), exc)).strip(), level="error")
        outcome = Fail(f"{step.name}: {exc}", rollback=_may_need_rollback(ctx))
    with change_context(source=ChangeSource.WORKFLOW, correlation_id=rollout.correlation_id):
        result = _outcome_apply(ctx, outcome)
    ctx.flush_log()
    _step_log(ctx, ticket_ref, outcome, result, started)
    return result


_OUTCOME_NAMES = {Next: "succeeded", Wait: "waiting", Fail: "failed"}


def _step_log(ctx: NodeStepContext, ticket_ref: str | None, outcome: Outcome, result: str, started: float) -> None:
    """The step's log line (gpuops.logs): the rollout's ticket, the node, the step and what came of it."""
    name = "discarded" if result == "discarded" else _OUTCOME_NAMES[type(outcome)]
    duration_ms = round((time.monotonic() - started) * 1000, 1)
    log_event(
        step_logger,
        "step_run",
        f"step {ticket_ref or ctx.rollout.pk} {ctx.step.name} on node {ctx.run.node_id} {name} in {duration_ms:.0f}ms",
        level=logging.WARNING if name == "failed" else logging.INFO,
        ticket=ticket_ref,
        workflow=ctx.rollout.ticket.type if ticket_ref else "rollout",
        rollout_id=ctx.rollout.pk,
        node_id=ctx.run.node_id,
        step=ctx.step.name,
        run_id=str(ctx.step.pk),
        attempt=ctx.step.attempts,
        outcome=name,
        duration_ms=duration_ms,
        correlation_id=ctx.rollout.correlation_id,
    )


def _may_need_rollback(ctx: NodeStepContext) -> bool:
    """Only an upgrade that may have touched the driver is rolled back (drain and resume do not touch it)."""
    from .models import NodeRunAction

    return ctx.run.action == NodeRunAction.UPGRADE and ctx.step.name in ("install", "reboot", "verify")


def _on_transient(ctx: NodeStepContext, exc: TransientError) -> Outcome:
    tries = int(ctx.state.get("transient_errors", 0)) + 1
    ctx.state["transient_errors"] = tries
    ctx.log(f"transient error ({tries}/{rollouts_setting('STEP_MAX_ATTEMPTS')}): {exc}", level="warning")
    if tries >= rollouts_setting("STEP_MAX_ATTEMPTS"):
        return Fail(f"{ctx.step.name}: gave up after {tries} attempts: {exc}", rollback=_may_need_rollback(ctx))
    backoff = get_exponential_backoff_interval(
        factor=rollouts_setting("STEP_RETRY_BACKOFF_SECONDS"),
        retries=tries - 1,
        maximum=rollouts_setting("STEP_RETRY_BACKOFF_MAX_SECONDS"),
        full_jitter=True,
    )
    return Wait(seconds=max(1.0, float(backoff)), message=f"retrying after: {exc}")


def _outcome_apply(ctx: NodeStepContext, outcome: Outcome) -> str:
    """Record the outcome, in one transaction with the step and its node run locked."""
    from .services import _advance_on_commit

    now = timezone.now()
    with transaction.atomic():
        step = NodeStep.objects.select_for_update().get(pk=ctx.step.pk)
        if step.status != NodeStepStatus.RUNNING:
            ctx.log(f"step became {step.status} while running; outcome discarded", level="warning")
            return "discarded"
        run = NodeRun.objects.select_for_update().get(pk=ctx.run.pk)
        step.state = ctx.state
        if isinstance(outcome, Wait):
            step.status, step.wake_at = NodeStepStatus.WAITING, now + dt.timedelta(seconds=outcome.seconds)
            if outcome.message != step.message:
                ctx.log(f"waiting: {outcome.message}")
            step.message = outcome.message[:500]
            step.save()
            step_publish_on_commit(step, countdown=outcome.seconds if outcome.seconds <= MAX_COUNTDOWN_S else None)
            return f"{step.name}: waiting"
        step.ended_at = now
        if isinstance(outcome, Next):
            step.status, step.message = NodeStepStatus.SUCCEEDED, outcome.message[:500]
            step.save()
            if outcome.message:
                ctx.log(outcome.message)
            if outcome.step is not None:
                _next_step(run, outcome.step)
                return f"{step.name} -> {outcome.step}"
            if outcome.final_state == NodeRunState.FAILED:
                _run_failed(ctx, run, run.error or "failed")
            else:
                run.state, run.finished_at = NodeRunState.SUCCEEDED, now
                run.save(update_fields=["state", "finished_at", "updated_at"])
            _advance_on_commit(ctx.rollout)
            return f"{step.name}: node {run.state}"
        step.status, step.message = NodeStepStatus.FAILED, outcome.reason[:500]
        step.save()
        ctx.log(f"failed: {outcome.reason}", level="error")
        run.error = (f"{run.error}\n" if run.error else "") + outcome.reason
        if outcome.rollback:
            run.save(update_fields=["error", "updated_at"])
            _next_step(run, "rollback")
            return f"{step.name}: failed, rolling back"
        _run_failed(ctx, run, outcome.reason)
        _advance_on_commit(ctx.rollout)
        return f"{step.name}: node failed"


def _next_step(run: NodeRun, name: str) -> None:
    run.state = STEP_STATES[name]
    run.save(update_fields=["state", "error", "updated_at"])
    step, _ = NodeStep.objects.get_or_create(node_run=run, name=name)
    step_publish_on_commit(step)


def _run_failed(ctx: NodeStepContext, run: NodeRun, reason: str) -> None:
    """End a node run failed: flagged for a person, cordoned with the reason, left drained (maintenance)."""
    from cmdb.models import Node, NodeStatus
    from cmdb.services.nodes import node_cordon, nodes_set_status

    run.state, run.is_flagged, run.finished_at = NodeRunState.FAILED, True, timezone.now()
    run.save(update_fields=["state", "is_flagged", "finished_at", "error", "updated_at"])
    if run.node_id:
        cordon = f"{ctx.rollout.label}: {run.action} to {run.target_version} failed: {reason}"[:300]
        node_cordon(node=Node(pk=run.node_id), reason=cordon)
        nodes_set_status(node_ids=[run.node_id], status=NodeStatus.MAINTENANCE, reason=cordon)


# --- sweeps ---------------------------------------------------------------------------------------------------


def node_steps_sweep(*, now: dt.datetime | None = None) -> dict[str, int]:
    """Beat: publish waiting steps that are due, requeue steps whose worker was lost, republish pending steps
    whose message never arrived. Returns counts per kind."""
    now = now or timezone.now()
    stuck_after = dt.timedelta(seconds=rollouts_setting("STEP_STUCK_AFTER_SECONDS"))
    counts = {"due": 0, "stuck": 0, "lost": 0}
    for step in NodeStep.objects.filter(status=NodeStepStatus.WAITING, wake_at__lte=now):
        with transaction.atomic():
            step_publish_on_commit(step)
        counts["due"] += 1
    for step in NodeStep.objects.filter(status=NodeStepStatus.RUNNING, claimed_at__lt=now - stuck_after):
        with transaction.atomic():
            # Compare-and-set on claimed_at: a step that just finished or was re-claimed is not ours to touch.
            if NodeStep.objects.filter(pk=step.pk, status=NodeStepStatus.RUNNING, claimed_at=step.claimed_at).update(
                status=NodeStepStatus.WAITING, wake_at=now, message="worker lost; requeued"
            ):
                step_publish_on_commit(step)
                counts["stuck"] += 1
    for step in NodeStep.objects.filter(status=NodeStepStatus.PENDING, created_at__lt=now - dt.timedelta(minutes=2)):
        with transaction.atomic():
            step_publish_on_commit(step)
        counts["lost"] += 1
    return counts


__all__ = [
    "Fail",
    "Next",
    "NodeStepContext",
    "Outcome",
    "Wait",
    "node_step_execute",
    "node_steps_sweep",
    "step_publish",
    "step_publish_on_commit",
]
