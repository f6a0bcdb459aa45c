"""Errors every adapter raises instead of its library's own.

They live in the project package because the base task (gpuops/tasks.py) retries TransientError and gpuops
imports no app; `integrations.exceptions` re-exports them for the adapters.

Callers (Celery tasks, workflow steps, management commands) decide on retry from the class alone: a
TransientError may succeed later (timeout, connection refused, device busy) and is retried with backoff; a
PermanentError will not (bad credentials, unknown platform, malformed reply) and fails the step at once.
"""

from __future__ import annotations


class IntegrationError(Exception):
    """Base of the adapter errors. `peer` names the remote side (a host, a URL) for the message."""

    def __init__(self, message: str, *, peer: str = "") -> None:
        super().__init__(message)
        self.peer = peer

    def __str__(self) -> str:
        base = super().__str__()
        return f"{self.peer}: {base}" if self.peer else base


class TransientError(IntegrationError):
    """May succeed if tried again later: timeouts, refused or reset connections, a busy device."""


class PermanentError(IntegrationError):
    """Will not succeed by retrying: wrong credentials, unsupported platform, a reply we cannot parse."""


__all__ = ["IntegrationError", "PermanentError", "TransientError"]
