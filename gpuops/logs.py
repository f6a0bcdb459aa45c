"""Structured logs: one line per HTTP request, Celery task run and workflow step.

`GPUOPS_LOG_FORMAT=json` (settings LOGGING) writes every log record as one JSON object per line on stdout, for a
log shipper to index; `plain` (the default, what script/server uses) keeps the human format on stderr.

Every JSON line carries `ts`, `level`, `logger`, `message`, the correlation id of the change context it was
written under (a request's id, a ticket's correlation id, a task's), the Celery task it ran in, and the fields
bound to the current scope (`log_bind`, e.g. the ticket a step belongs to). The three event lines add their own
fields (`event`: `http_request`, `task_run`, `step_run`); docs/operations.md lists them.

The task line comes from Celery's signals, so it covers every task whatever its base class. A task published
under a change context carries that context's correlation id in a message header (`gpuops_correlation_id`): the
worker runs the task under it, so the request that enqueued a task and the task's own lines (and the change
records it writes) share one id.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import sys
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from celery import signals
from celery._state import get_current_task
from celery.exceptions import Ignore, Reject, Retry

from .context import change_context, context_get

CORRELATION_HEADER = "gpuops_correlation_id"

request_logger = logging.getLogger("gpuops.request")
task_logger = logging.getLogger("gpuops.task")

# Fields every line of the current scope carries (a request, a task run); `log_bind` adds to the innermost one.
_bound: ContextVar[dict[str, Any] | None] = ContextVar("gpuops_log_fields", default=None)

# The record attributes logging itself sets: anything else on a record came through `extra=` and is ours to show.
_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


@contextlib.contextmanager
def log_scope(**fields: Any) -> Iterator[dict[str, Any]]:
    """Open a scope whose fields every log line written inside it carries (inherits the enclosing scope's)."""
    scope = {**(_bound.get() or {}), **fields}
    token = _bound.set(scope)
    try:
        yield scope
    finally:
        _bound.reset(token)


def log_bind(**fields: Any) -> None:
    """Add fields to the current scope (no-op outside one): e.g. the runner binds the ticket of a step."""
    scope = _bound.get()
    if scope is not None:
        scope.update({key: value for key, value in fields.items() if value is not None})


def log_event(logger: logging.Logger, event: str, message: str, *, level: int = logging.INFO, **fields: Any) -> None:
    """Write one event line: `message` for the plain format, `event` and `fields` as keys of the JSON object."""
    if logger.isEnabledFor(level):
        logger.log(level, message, extra={"event": event, **fields})


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines inside values are escaped by JSON itself)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, tz=dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        ctx = context_get()
        if ctx is not None and ctx.correlation_id:
            out["correlation_id"] = ctx.correlation_id
        task = get_current_task()
        if task is not None and task.request.id:
            out["task"] = task.name
            out["task_id"] = task.request.id
        out.update(_bound.get() or {})
        # The event's own fields win over the context's (a step line names its ticket's correlation id).
        out.update({key: value for key, value in vars(record).items() if key not in _RESERVED})
        if record.exc_info:
            out["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


# --- HTTP requests ----------------------------------------------------------------------------------------------


def request_log(request: Any, status: int, started: float, request_id: str) -> None:
    """The request line (called by the change-context middleware, inside the request's context)."""
    level = logging.ERROR if status >= 500 else logging.INFO
    if not request_logger.isEnabledFor(level):
        return
    duration_ms = round((time.monotonic() - started) * 1000, 1)
    # DRF sets the authenticated user (token or session) on the Django request too.
    user = getattr(request, "user", None)
    username = user.get_username() if user is not None and user.is_authenticated else None
    log_event(
        request_logger,
        "http_request",
        f"{request.method} {request.path} {status} {duration_ms:.0f}ms user={username or '-'} request_id={request_id}",
        level=level,
        method=request.method,
        path=request.path,
        status=status,
        duration_ms=duration_ms,
        request_id=request_id,
        user=username,
    )


# --- Celery tasks -----------------------------------------------------------------------------------------------

_OUTCOMES = {"SUCCESS": "success", "RETRY": "retry", "FAILURE": "failure", "IGNORED": "ignored", "REJECTED": "rejected"}
# Open task runs of this process by task id: (started, the scope and context entered at prerun). A list, because an
# eager retry runs again under the same id before the first run's postrun has unwound.
_running: dict[str, list[tuple[float, contextlib.ExitStack]]] = {}


def carried_correlation_id(request: Any) -> str:
    """The correlation id a task message carries: a worker exposes message headers as request attributes, an
    eager `apply(headers=...)` as `request.headers`."""
    value = getattr(request, CORRELATION_HEADER, None) or (getattr(request, "headers", None) or {}).get(
        CORRELATION_HEADER
    )
    return str(value)[:64] if value else ""


def _on_before_publish(headers: dict[str, Any] | None = None, **_: Any) -> None:
    """Carry the publisher's correlation id (a request's id, a task's) to the task."""
    ctx = context_get()
    if headers is not None and ctx is not None and ctx.correlation_id:
        headers.setdefault(CORRELATION_HEADER, ctx.correlation_id)


def _on_task_prerun(task_id: str = "", task: Any = None, **_: Any) -> None:
    stack = contextlib.ExitStack()
    # Carried id first; else an enclosing context's (an eager task inside a request); else the task's own id.
    carried = carried_correlation_id(task.request) if task is not None else ""
    outer = context_get()
    correlation_id = carried or (outer.correlation_id if outer is not None else "") or task_id
    stack.enter_context(change_context(correlation_id=correlation_id))
    stack.enter_context(log_scope())
    _running.setdefault(task_id, []).append((time.monotonic(), stack))


def _on_task_postrun(task_id: str = "", task: Any = None, state: str | None = None, retval: Any = None, **_: Any):
    runs = _running.get(task_id)
    if not runs:
        return
    started, stack = runs.pop()
    if not runs:
        _running.pop(task_id, None)
    try:
        error: BaseException | None = None
        if state is None:
            # Eager with propagation: the tracer re-raises before it sets a state; the exception is in flight.
            error = sys.exc_info()[1]
            if isinstance(error, Retry):
                state = "RETRY"
            elif isinstance(error, Ignore | Reject):
                state = "IGNORED"
            else:
                state = "FAILURE"
        elif isinstance(retval, BaseException):
            error = retval
        outcome = _OUTCOMES.get(state, state.lower())
        duration_ms = round((time.monotonic() - started) * 1000, 1)
        ctx = context_get()
        name = getattr(task, "name", "?")
        fields: dict[str, Any] = {
            "task": name,
            "task_id": task_id,
            "outcome": outcome,
            "duration_ms": duration_ms,
            "retries": getattr(getattr(task, "request", None), "retries", 0) or 0,
            "correlation_id": ctx.correlation_id if ctx is not None else "",
        }
        if error is not None and outcome in ("failure", "retry"):
            # A Retry wraps the error that caused it.
            cause = getattr(error, "exc", None) if isinstance(error, Retry) else error
            if cause is not None:
                fields["error"] = f"{type(cause).__name__}: {cause}"[:500]
        level = {"success": logging.INFO, "retry": logging.WARNING}.get(outcome, logging.ERROR)
        log_event(
            task_logger, "task_run", f"task {name} {task_id} {outcome} in {duration_ms:.0f}ms", level=level, **fields
        )
    finally:
        stack.close()


def celery_signals_connect() -> None:
    """Connect the task line and the correlation header (gpuops/celery.py, at import: every process)."""
    signals.before_task_publish.connect(_on_before_publish, weak=False, dispatch_uid="gpuops.logs.publish")
    signals.task_prerun.connect(_on_task_prerun, weak=False, dispatch_uid="gpuops.logs.prerun")
    signals.task_postrun.connect(_on_task_postrun, weak=False, dispatch_uid="gpuops.logs.postrun")


__all__ = [
    "CORRELATION_HEADER",
    "JsonFormatter",
    "carried_correlation_id",
    "celery_signals_connect",
    "log_bind",
    "log_event",
    "log_scope",
    "request_log",
]
