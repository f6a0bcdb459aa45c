"""The OS-install seam: hand a node to the PXE/OS-install system and learn when its OS is on.

Provisioning depends on the `OsInstaller` protocol only; `registry.os_installer_get()` picks the implementation
from settings (integrations.conf "OS_INSTALLER"): `webhook.WebhookOsInstaller` (HTTP API + signed callback) in
production, `fake.FakeOsInstaller` in tests and the demo. Implementations raise only TransientError (try again
later: timeouts, 5xx) or PermanentError (4xx, a reply we cannot read).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

JOB_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")


@dataclass(frozen=True)
class OsInstallRequest:
    """What the install system needs to PXE-boot and image one node. `idempotency_key` makes a repeated start
    (a retried step) return the job it started the first time."""

    hostname: str
    serial: str
    image: str
    bmc_address: str = ""
    macs: tuple[str, ...] = ()
    callback_url: str = ""
    idempotency_key: str = ""


@dataclass(frozen=True)
class OsInstallJob:
    """An install job as the install system reports it."""

    ref: str
    status: str  # one of JOB_STATUSES
    message: str = ""

    @property
    def is_finished(self) -> bool:
        return self.status in ("succeeded", "failed", "cancelled")

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


@runtime_checkable
class OsInstaller(Protocol):
    def start(self, request: OsInstallRequest) -> OsInstallJob:
        """Queue an install (idempotent by request.idempotency_key)."""
        ...

    def status(self, ref: str) -> OsInstallJob:
        """The job's current status (for polling when no callback came)."""
        ...

    def cancel(self, ref: str) -> None:
        """Stop a job (provisioning rolled back); cancelling a finished job is a no-op."""
        ...


__all__ = ["JOB_STATUSES", "OsInstallJob", "OsInstallRequest", "OsInstaller"]
