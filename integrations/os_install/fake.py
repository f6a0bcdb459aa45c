"""An in-memory OS installer for tests and the demo: jobs finish after a set number of status polls."""

from __future__ import annotations

import itertools
import logging

from .base import OsInstallJob, OsInstallRequest

logger = logging.getLogger(__name__)
_ids = itertools.count(1)


class FakeOsInstaller:
    """Test double of OsInstaller.

    A started job is `running`; it reports `succeeded` after `polls_to_finish` status calls (0: at the first one),
    or `failed` when its hostname is in `fail_hosts`. `started` lists every request; a repeated idempotency key
    returns the same job.
    """

    def __init__(self, polls_to_finish: int = 0, **_options: object) -> None:
        self.polls_to_finish = polls_to_finish
        self.fail_hosts: set[str] = set()
        self.started: list[OsInstallRequest] = []
        self.cancelled: list[str] = []
        self._jobs: dict[str, dict] = {}
        self._by_key: dict[str, str] = {}

    def start(self, request: OsInstallRequest) -> OsInstallJob:
        if request.idempotency_key and request.idempotency_key in self._by_key:
            return self.status(self._by_key[request.idempotency_key], count=False)
        ref = f"fake-os-{next(_ids)}"
        self._jobs[ref] = {"request": request, "polls": 0, "status": "running"}
        if request.idempotency_key:
            self._by_key[request.idempotency_key] = ref
        self.started.append(request)
        logger.info("os install (fake): %s with %s -> %s", request.hostname, request.image, ref)
        return OsInstallJob(ref=ref, status="running", message=f"PXE boot of {request.hostname} queued")

    def status(self, ref: str, *, count: bool = True) -> OsInstallJob:
        job = self._jobs.get(ref)
        if job is None:
            return OsInstallJob(ref=ref, status="failed", message="unknown job")
        if job["status"] == "running" and count:
            job["polls"] += 1
            if job["polls"] > self.polls_to_finish:
                failed = job["request"].hostname in self.fail_hosts
                job["status"] = "failed" if failed else "succeeded"
        message = {"failed": "installer: disk not found", "succeeded": "OS installed"}.get(job["status"], "imaging")
        return OsInstallJob(ref=ref, status=job["status"], message=message)

    def cancel(self, ref: str) -> None:
        if ref in self._jobs and self._jobs[ref]["status"] == "running":
            self._jobs[ref]["status"] = "cancelled"
        self.cancelled.append(ref)


__all__ = ["FakeOsInstaller"]
