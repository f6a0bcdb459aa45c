"""The change context: who is changing things, through what, and under which correlation id.

Every change record reads it. The web middleware sets it per request, Celery tasks per task, management
commands per run. It lives in a contextvar so threads and asyncio tasks each see their own.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any


class ChangeSource:
    """Stable values for ChangeRecord.source."""

    ADMIN = "admin"
    API = "api"
    UI = "ui"
    AGENT = "agent"
    WORKFLOW = "workflow"
    IMPORT = "import"
    INTEGRATION = "integration"
    CLI = "cli"
    SYSTEM = "system"

    CHOICES = [
        (ADMIN, "Admin"),
        (API, "API"),
        (UI, "Ticket UI"),
        (AGENT, "Inventory agent"),
        (WORKFLOW, "Workflow"),
        (IMPORT, "Import"),
        (INTEGRATION, "Integration"),
        (CLI, "Command line"),
        (SYSTEM, "System"),
    ]


@dataclass(frozen=True)
class ChangeContext:
    actor: Any = None  # a User or None
    source: str = ChangeSource.SYSTEM
    correlation_id: str = ""

    @property
    def user(self) -> Any:
        """The actor as a user object (a request's lazy actor resolved), for permission checks."""
        resolve = getattr(self.actor, "resolve", None)
        return resolve() if callable(resolve) else self.actor

    @property
    def actor_id(self) -> int | None:
        actor = self.actor
        if actor is None or not getattr(actor, "is_authenticated", False):
            return None
        return actor.pk


_current: ContextVar[ChangeContext | None] = ContextVar("gpuops_change_context", default=None)


def new_correlation_id() -> str:
    return uuid.uuid4().hex


def context_get() -> ChangeContext | None:
    """The active change context, or None outside one (log lines read it without minting an id)."""
    return _current.get()


def current_context() -> ChangeContext:
    ctx = _current.get()
    if ctx is None:
        return ChangeContext(correlation_id=new_correlation_id())
    return ctx


@contextlib.contextmanager
def change_context(
    *, actor: Any = None, source: str | None = None, correlation_id: str | None = None
) -> Iterator[ChangeContext]:
    """Run a block under a change context. Unset arguments inherit from the enclosing context."""
    outer = _current.get()
    base = outer or ChangeContext(correlation_id=new_correlation_id())
    ctx = replace(
        base,
        actor=actor if actor is not None else base.actor,
        source=source or base.source,
        correlation_id=correlation_id or base.correlation_id,
    )
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)
