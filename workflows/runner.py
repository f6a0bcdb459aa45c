"""Running automated steps: publish, claim, execute, record the outcome; and the two periodic sweeps.

Life of a StepRun (workflows.models.StepRun):

    pending --claim--> running --Done--> succeeded             (a system transition may follow)
                          |----WaitForEvent/RetryLater--> waiting --due or signalled, claim--> running
                          |----TransientError--> retry --Celery retry with backoff, claim--> running
                          |----Failed / other error / attempts exhausted--> failed --operator retry--> pending
    any active status --ticket leaves the state / cancel--> cancelled

The claim is a compare-and-set on the run's own row (one UPDATE ... WHERE id = %s AND status IN (...)), so two
deliveries of the same message cannot both run the step. A worker that dies mid-step leaves the run
`running`: `runs_reap_stuck` (beat, `workflows.reap_stuck_runs`) requeues it once its time limit has passed,
and its effects already done are not repeated (StepContext.effect/external). Waiting runs are requeued by
`runs_wake_due` (beat, `workflows.wake_due_runs`) rather than by long-countdown messages, which Redis
redelivers after its visibility timeout. A message the broker refused at commit or lost is re-sent by
`runs_republish_unsent` (beat, `workflows.republish_unsent`), the outbox sweep keyed by `StepRun.published_at`.
"""

from __future__ import annotations

import datetime as dt
import logging
import socket
import time
import traceback
from dataclasses import dataclass

from celery.exceptions import SoftTimeLimitExceeded
from celery.utils.time import get_exponential_backoff_interval
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from gpuops.context import ChangeSource, change_context
from gpuops.logs import log_bind, log_event
from gpuops.metrics import STEP_RUN_SECONDS, STEP_RUNS
from gpuops.tasks import PUBLISH_ERRORS
from integrations.exceptions import TransientError

from .conf import workflows_setting
from .engine import notify_on_commit, run_enqueue_on_commit, timeline_add, transition_apply
from .models import StepRun, StepStatus, Ticket, TimelineKind
from .registry import workflow
from .steps import Done, Failed, StepContext, StepOutcome, WaitForEvent

logger = logging.getLogger(__name__)
step_logger = logging.getLogger("gpuops.step")

CLAIMABLE = Q(status__in=[StepStatus.PENDING, StepStatus.RETRY])
# A run committed this recently may still have its on-commit publish under way: not yet "unsent".
UNSENT_GRACE = dt.timedelta(seconds=10)
REPUBLISH_BATCH = 500


@dataclass(frozen=True)
class RetryRequest:
    """The attempt hit a TransientError; the task should retry after `countdown` seconds."""

    countdown: float
    error: Exception


def run_publish(*, run_id: str, time_limit_s: int = 300) -> bool:
    """Publish the task of a run (called on commit; its task id is the run id) and stamp `published_at`.

    Never raises for an unreachable broker: the run is committed, so an error here would only turn a done write
    into a 500 that the client retries into a duplicate. The message is re-sent by `runs_republish_unsent`.
    Returns whether the broker took the message.
    """
    from .tasks import step_run_task

    try:
        step_run_task.apply_async(
            args=[run_id], task_id=run_id, soft_time_limit=time_limit_s, time_limit=time_limit_s + 30
        )
    except PUBLISH_ERRORS as exc:
        logger.warning("step run %s: publish failed (%s); the republish sweep will send it", run_id, exc)
        return False
    StepRun.objects.filter(pk=run_id).update(published_at=timezone.now())
    return True


def _claim(run_id: str, now: dt.datetime, worker: str) -> bool:
    due_wait = Q(status=StepStatus.WAITING, wake_at__lte=now)
    return bool(
        StepRun.objects.filter(CLAIMABLE | due_wait, pk=run_id).update(
            status=StepStatus.RUNNING, attempts=F("attempts") + 1, started_at=now, updated_at=now, worker=worker[:200]
        )
    )


def step_execute(run_id: str, *, worker: str = "") -> RetryRequest | None:
    """Claim run `run_id` and run one attempt of its step; record the outcome.

    Returns a RetryRequest when the attempt should be retried (TransientError with attempts left), else None.
    A run that is not claimable (done, claimed by another delivery, cancelled, not yet due, ticket paused)
    is left alone.
    """
    now = timezone.now()
    run = StepRun.objects.filter(pk=run_id).select_related("ticket", "actor").first()
    if run is None:
        logger.warning("step run %s does not exist; message dropped", run_id)
        return None
    if run.ticket.is_paused:
        logger.info("step run %s: ticket %s is paused; the run waits for resume", run_id, run.ticket_id)
        return None
    if not _claim(run_id, now, worker or socket.gethostname()):
        logger.info("step run %s not claimable (status %s); nothing to do", run_id, run.status)
        return None
    run.refresh_from_db()
    ticket = run.ticket
    log_bind(ticket=ticket.reference)  # the task's own line (and every line of this run) names the ticket
    wf = workflow(ticket.type)
    spec = wf.step_spec(run.step)
    ctx = StepContext(run=run, ticket=ticket, now=now)
    if run.attempts == 1:
        timeline_add(ticket=ticket, kind=TimelineKind.STEP, step_run=run, message=f"Step '{spec.label}' started")
    ctx.log(f"attempt {run.attempts}/{run.max_attempts} on {run.worker}")
    started = time.monotonic()
    try:
        # Every CMDB change the step makes carries the ticket's correlation id and the source "workflow".
        with change_context(source=ChangeSource.WORKFLOW, correlation_id=ticket.correlation_id, actor=run.actor):
            outcome = spec.fn(ctx)
    except (TransientError, SoftTimeLimitExceeded) as exc:
        _step_observe(run, ticket, "transient_error", started)
        return _on_transient(run, ctx, spec.label, exc)
    except Exception as exc:
        # Deliberately broad: any bug or PermanentError fails this run visibly instead of killing the task.
        ctx.log("".join(traceback.format_exception_only(type(exc), exc)).strip(), level="error")
        outcome = Failed(reason=f"{type(exc).__name__}: {exc}")
    _step_observe(run, ticket, _OUTCOME_NAMES.get(type(outcome), type(outcome).__name__.lower()), started)
    _outcome_apply(run, ctx, spec.label, outcome)
    return None


_OUTCOME_NAMES = {Done: "succeeded", WaitForEvent: "waiting", Failed: "failed"}


def _step_observe(run: StepRun, ticket: Ticket, outcome: str, started: float) -> None:
    """One attempt on /metrics (counted by workflow, step and outcome, timed by workflow and step) and its log
    line (gpuops.logs: ticket, step, outcome, duration; the ticket's correlation id)."""
    seconds = time.monotonic() - started
    STEP_RUNS.labels(workflow=ticket.type, step=run.step, outcome=outcome).inc()
    STEP_RUN_SECONDS.labels(workflow=ticket.type, step=run.step).observe(seconds)
    duration_ms = round(seconds * 1000, 1)
    actor = run.actor.get_username() if run.actor_id else None
    log_event(
        step_logger,
        "step_run",
        f"step {ticket.reference} {run.step} {outcome} in {duration_ms:.0f}ms (attempt {run.attempts})",
        level=logging.WARNING if outcome in ("failed", "transient_error") else logging.INFO,
        ticket=ticket.reference,
        workflow=ticket.type,
        step=run.step,
        run_id=str(run.pk),
        attempt=run.attempts,
        outcome=outcome,
        duration_ms=duration_ms,
        actor=actor,
        correlation_id=ticket.correlation_id,
    )


def _backoff(attempt: int) -> float:
    return float(
        get_exponential_backoff_interval(
            factor=workflows_setting("STEP_RETRY_BACKOFF_SECONDS"),
            retries=max(attempt - 1, 0),
            maximum=workflows_setting("STEP_RETRY_BACKOFF_MAX_SECONDS"),
            full_jitter=True,
        )
        or 1
    )


def _on_transient(run: StepRun, ctx: StepContext, label: str, exc: Exception) -> RetryRequest | None:
    ctx.log(f"transient error: {exc}", level="warning")
    if run.attempts >= run.max_attempts:
        _outcome_apply(run, ctx, label, Failed(reason=f"gave up after {run.attempts} attempts: {exc}"))
        return None
    countdown = _backoff(run.attempts)
    now = timezone.now()
    with transaction.atomic():
        updated = StepRun.objects.filter(pk=run.pk, status=StepStatus.RUNNING).update(
            status=StepStatus.RETRY,
            wake_at=now + dt.timedelta(seconds=countdown),
            error=str(exc)[:1000],
            state=ctx.state,
            updated_at=now,
        )
        if updated:
            timeline_add(
                ticket=run.ticket,
                kind=TimelineKind.STEP,
                step_run=run,
                message=f"Step '{label}': attempt {run.attempts} failed ({exc}); retrying in {countdown:.0f} s",
            )
    ctx.flush_log()
    return RetryRequest(countdown=countdown, error=exc) if updated else None


def _outcome_apply(run: StepRun, ctx: StepContext, label: str, outcome: StepOutcome) -> None:
    """Record the outcome and take its transition, in one transaction with the ticket locked."""
    now = timezone.now()
    with transaction.atomic():
        locked = StepRun.objects.select_for_update().get(pk=run.pk)
        if locked.status != StepStatus.RUNNING:
            # Cancelled (or reaped) while it ran: its effects stay recorded, its verdict is void.
            ctx.log(
                f"run became {locked.status} while running; outcome {type(outcome).__name__} discarded", level="warning"
            )
            ctx.flush_log()
            return
        ticket = Ticket.objects.select_for_update().get(pk=run.ticket_id)
        if outcome.data:
            ticket.data.update(outcome.data)
            ticket.save(update_fields=["data", "updated_at"])
        # A waiting run re-checks quietly: only the first wait (or a changed message) reaches the timeline.
        quiet = isinstance(outcome, WaitForEvent) and ctx.state.get("_last_wait_message") == outcome.message
        if isinstance(outcome, WaitForEvent):
            ctx.state["_last_wait_message"] = outcome.message
        locked.state = ctx.state
        locked.updated_at = now
        if isinstance(outcome, Done):
            locked.status, locked.ended_at, locked.error, locked.wake_at = StepStatus.SUCCEEDED, now, "", None
            message = f"Step '{label}' succeeded" + (f": {outcome.message}" if outcome.message else "")
        elif isinstance(outcome, WaitForEvent):
            locked.status, locked.wait_key = StepStatus.WAITING, outcome.key
            locked.wake_at = now + outcome.recheck_in
            locked.attempts = 0  # waiting is not failing: every recheck gets the full retry budget
            message = f"Step '{label}' waiting" + (f": {outcome.message}" if outcome.message else "")
        else:
            locked.status, locked.ended_at, locked.error = StepStatus.FAILED, now, outcome.reason[:4000]
            message = f"Step '{label}' failed: {outcome.reason}"
        locked.save()
        if not quiet:
            timeline_add(ticket=ticket, kind=TimelineKind.STEP, step_run=locked, message=message)
        if isinstance(outcome, Failed):
            notify_on_commit(ticket, "step_failed", f"{ticket.reference}: {message}")
        ctx.log(message)
        if outcome.transition:
            _take(ticket, locked, outcome.transition, ctx)
    ctx.flush_log()


def _take(ticket: Ticket, run: StepRun, name: str, ctx: StepContext) -> None:
    wf = workflow(ticket.type)
    if ticket.state not in wf.transition(name).sources:
        ctx.log(f"ticket is '{ticket.state}'; transition '{name}' no longer applies", level="warning")
        return
    transition_apply(ticket=ticket, name=name, system=True, actor=run.actor, by_run=run)


# --- periodic sweeps ----------------------------------------------------------------------------------------------


def runs_reap_stuck(*, now: dt.datetime | None = None) -> int:
    """Requeue runs whose worker is presumed lost; fail those out of attempts. Returns how many were touched.

    A run running past its time limit + grace lost its worker (died or hung; acks_late redelivery finds the run
    claimed and leaves it, so this is what resumes it). Queued runs whose message was lost are
    `runs_republish_unsent`'s, within a minute.
    """
    now = now or timezone.now()
    grace = dt.timedelta(seconds=workflows_setting("REAPER_GRACE_SECONDS"))
    touched = 0
    running = StepRun.objects.filter(status=StepStatus.RUNNING, started_at__lt=now - grace).select_related("ticket")
    for run in running:
        if run.started_at + dt.timedelta(seconds=run.time_limit_s) + grace > now:
            continue
        exhausted = run.attempts >= run.max_attempts
        with transaction.atomic():
            # Compare-and-set on (status, started_at): a run that just finished or was re-claimed is not ours.
            updated = StepRun.objects.filter(pk=run.pk, status=StepStatus.RUNNING, started_at=run.started_at).update(
                status=StepStatus.FAILED if exhausted else StepStatus.RETRY,
                updated_at=now,
                ended_at=now if exhausted else None,
                error=f"worker lost during attempt {run.attempts}",
            )
            if not updated:
                continue
            touched += 1
            what = "failed: attempts exhausted" if exhausted else "requeued"
            timeline_add(
                ticket=run.ticket,
                kind=TimelineKind.STEP,
                step_run=run,
                message=f"Step '{run.step}' stuck running since {run.started_at:%H:%M:%S}; {what}",
            )
            if exhausted:
                notify_on_commit(run.ticket, "step_failed", f"{run.ticket.reference}: step '{run.step}' lost")
            else:
                run_enqueue_on_commit(run)
    return touched


def runs_republish_unsent(*, now: dt.datetime | None = None) -> int:
    """Re-send the task messages of queued runs that the broker never took or lost. Returns how many were sent.

    A pending run, or a retrying run a minute past its due time, of an unpaused ticket is re-sent when its
    message was never published (the broker was down at commit; after UNSENT_GRACE, as the on-commit publish may
    still be under way) or was published more than STEP_REPUBLISH_AFTER_SECONDS ago and no worker claimed it
    (lost in the broker). A duplicate message is harmless: the claim is a compare-and-set, so only one delivery
    runs the attempt. Stops at the first refusal: the broker is still down and the next sweep tries again.
    """
    now = now or timezone.now()
    after = now - dt.timedelta(seconds=workflows_setting("STEP_REPUBLISH_AFTER_SECONDS"))
    overdue_retry = Q(status=StepStatus.RETRY) & (Q(wake_at__isnull=True) | Q(wake_at__lt=after))
    queued = Q(status=StepStatus.PENDING) | overdue_retry
    unsent = Q(published_at__isnull=True, created_at__lt=now - UNSENT_GRACE) | Q(published_at__lt=after)
    runs = StepRun.objects.filter(queued, unsent, ticket__is_paused=False).order_by("created_at")
    sent = 0
    for run_id, time_limit_s in runs.values_list("pk", "time_limit_s")[:REPUBLISH_BATCH]:
        if not run_publish(run_id=str(run_id), time_limit_s=time_limit_s):
            break
        sent += 1
    if sent:
        logger.info("republished %d step run message(s)", sent)
    return sent


def runs_wake_due(*, now: dt.datetime | None = None) -> int:
    """Requeue waiting runs whose recheck time has come. Returns how many were queued."""
    now = now or timezone.now()
    due = list(StepRun.objects.filter(status=StepStatus.WAITING, wake_at__lte=now, ticket__is_paused=False))
    for run in due:
        with transaction.atomic():
            run_enqueue_on_commit(run)
    return len(due)


def runs_wake_for_event(key: str) -> int:
    """Wake the runs waiting for event `key` now (e.g. 'accelerator:42:healthy' after an agent report).
    Safe to call inside the caller's transaction: the runs are queued after it commits."""
    now = timezone.now()
    runs = list(StepRun.objects.filter(status=StepStatus.WAITING, wait_key=key))
    if not runs:
        return 0
    StepRun.objects.filter(pk__in=[r.pk for r in runs]).update(wake_at=now, updated_at=now)
    for run in runs:
        run_enqueue_on_commit(run)
    return len(runs)


__all__ = [
    "RetryRequest",
    "run_publish",
    "runs_reap_stuck",
    "runs_republish_unsent",
    "runs_wake_due",
    "runs_wake_for_event",
    "step_execute",
]
