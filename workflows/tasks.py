"""Celery tasks of the workflows app. Thin: load by id, call the runner or a service, classify errors.

Names are explicit and stable (routing sends `workflows.*` to the `workflows` queue); arguments are ids and
JSON values only.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from gpuops.tasks import BaseTask

from . import runner


@shared_task(bind=True, base=BaseTask, name="workflows.step_run", autoretry_for=(), max_retries=None)
def step_run_task(self: BaseTask, run_id: str) -> None:
    """Run one attempt of the automated step recorded as StepRun `run_id` (== this task's id).

    Idempotent: the run is claimed by compare-and-set, so a redelivered message does nothing. Retries on
    TransientError are Celery retries (same task id) with exponential backoff; the attempt budget is the
    run's own `max_attempts`, hence no Celery max_retries here.
    """
    retry = runner.step_execute(run_id, worker=self.request.hostname or "")
    if retry is not None:
        raise self.retry(countdown=retry.countdown, exc=retry.error)


@shared_task(base=BaseTask, name="workflows.reap_stuck_runs")
def reap_stuck_runs_task() -> int:
    """Beat: requeue or fail runs whose worker was lost (see runner.runs_reap_stuck)."""
    return runner.runs_reap_stuck()


@shared_task(base=BaseTask, name="workflows.wake_due_runs")
def wake_due_runs_task() -> int:
    """Beat: requeue waiting runs whose recheck time has come (a spare may have arrived; a card reported)."""
    return runner.runs_wake_due()


@shared_task(base=BaseTask, name="workflows.republish_unsent")
def republish_unsent_task() -> int:
    """Beat: the outbox sweep. Re-send step run messages the broker never took or lost, and the notifications
    still owed (runner.runs_republish_unsent, services.notifications.notifications_flush)."""
    from .services.notifications import notifications_flush

    return runner.runs_republish_unsent() + notifications_flush()


@shared_task(base=BaseTask, name="workflows.notify")
def notify_task(notifier_path: str, payload: dict[str, Any]) -> None:
    """Send one notification through one notifier. TransientError is retried with backoff (BaseTask);
    one task per notifier so a retry never re-sends through a notifier that succeeded."""
    from .services.notifications import notification_send

    notification_send(notifier_path=notifier_path, payload=payload)
