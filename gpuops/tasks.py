"""The base class of every gpuops Celery task.

House rules it encodes (DESIGN.md section 4, style-anchors 9.6):

- `acks_late`: a message is acknowledged after the task ran, so a worker that dies mid-task does not lose it.
  `reject_on_worker_lost` stays False: a task that kills its worker would otherwise be redelivered forever
  (celery/celery discussion #8969). Work left half-done by a lost worker is found by each app's reaper
  (for workflow steps: the beat task `workflows.reap_stuck_runs`), which reads our own run rows.
- Bounded retries for transient errors only (`TransientError`), with exponential backoff and jitter.
- Results live in our own rows (StepRun, ...), never in a Celery result backend: `ignore_result`.
- Enqueue only after the surrounding transaction commits: `apply_async_on_commit` / `delay_on_commit`
  (from Celery's DjangoTask). A plain `.delay()` inside a transaction may run before the rows it reads exist.
- Eager mode follows Django's `CELERY_TASK_ALWAYS_EAGER` *at call time*. Celery reads its configuration once,
  so a test flipping the Django setting (pytest-django's `settings` fixture) would otherwise still publish to
  the broker.
"""

from __future__ import annotations

from typing import Any

from celery.contrib.django.task import DjangoTask
from celery.exceptions import Retry
from django.conf import settings
from kombu.exceptions import OperationalError as BrokerOperationalError

from .exceptions import TransientError

# What publishing a message raises when the broker is unreachable: kombu re-raises the transport's connection
# errors (redis ConnectionError, socket errors) as its OperationalError once its publish retries are spent.
# Callers that publish after commit catch these and leave the message to their outbox sweep.
PUBLISH_ERRORS: tuple[type[Exception], ...] = (BrokerOperationalError, OSError)


def eager_mode() -> bool:
    """Whether tasks run in-process right now (tests and broker-less demos set CELERY_TASK_ALWAYS_EAGER)."""
    return bool(getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False))


class BaseTask(DjangoTask):
    """Base for gpuops tasks: late acks, bounded backoff retries of TransientError, no result backend."""

    acks_late = True
    reject_on_worker_lost = False
    ignore_result = True
    autoretry_for = (TransientError,)
    max_retries = 5  # unbounded retries amplify outages (getsentry/sentry#29853)
    retry_backoff = 5
    retry_backoff_max = 600
    retry_jitter = True

    def apply_async(self, args: Any = None, kwargs: Any = None, task_id: str | None = None, **options: Any):
        if eager_mode() and not self.app.conf.task_always_eager:
            # Same as Celery's own eager branch, but decided by the live Django setting (see module docstring).
            for key in ("countdown", "eta", "queue", "routing_key", "expires", "priority"):
                options.pop(key, None)
            return self.apply(
                args, kwargs, task_id=task_id, throw=getattr(settings, "CELERY_TASK_EAGER_PROPAGATES", True), **options
            )
        return super().apply_async(args, kwargs, task_id=task_id, **options)

    def apply(self, args: Any = None, kwargs: Any = None, *, retries: int | None = None, **options: Any):
        """Run in-process. Under `task_eager_propagates`, Celery's tracer re-raises a task's Retry instead of
        running the retry; run it here, at once, the way a worker would run it after its countdown."""
        try:
            return super().apply(args, kwargs, retries=retries, **options)
        except Retry as exc:
            if exc.sig is None:
                raise
            return exc.sig.apply(retries=(retries or 0) + 1)


__all__ = ["PUBLISH_ERRORS", "BaseTask", "eager_mode"]
