"""The executor seam: run a command on a node (a driver install or rollback, a reboot) and get its result.

Callers depend on the `CommandExecutor` protocol only; `registry.executor_get()` picks the implementation from
settings (integrations.conf "EXECUTOR"): `ssh.SshExecutor` (paramiko) in production, `dry_run.DryRunExecutor`
(logs what it would run) in the demo, `fake.FakeExecutor` in tests. Implementations raise only
integrations.exceptions.TransientError (could not reach the host: try again later) or PermanentError
(authentication, host key, a command that outlived its timeout). A command that ran and exited non-zero is
not an exception: it is a `CommandResult` with `ok == False`, and the caller decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class ExecTarget:
    """Where to run: `host` is what to connect to (a name or an address); `name` is the node as people know it."""

    host: str
    name: str = ""
    port: int | None = None  # None: the executor's configured port

    @property
    def label(self) -> str:
        return self.name or self.host


@dataclass(frozen=True)
class CommandResult:
    """What a command did. Output is truncated to the executor's limit (the end is kept: errors are there)."""

    target: str
    command: str
    exit_status: int
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    def summary(self, limit: int = 400) -> str:
        """One line for a log: exit status and the tail of stderr (else stdout)."""
        tail = (self.stderr.strip() or self.stdout.strip())[-limit:]
        prefix = "dry run" if self.dry_run else f"exit {self.exit_status}"
        return f"{prefix} in {self.duration_s:.1f} s" + (f": {tail}" if tail else "")


@runtime_checkable
class CommandExecutor(Protocol):
    """Runs shell commands on nodes. Every method is safe to call again after a lost worker: the commands it
    is given (package installs) are idempotent by contract, and `reboot` of a node that is already rebooting
    is harmless."""

    is_dry_run: bool

    def run(self, target: ExecTarget, command: str, *, timeout_s: float = 1800.0) -> CommandResult:
        """Run `command` through the target's shell and wait for it (at most `timeout_s`)."""
        ...

    def reboot(self, target: ExecTarget) -> CommandResult:
        """Ask the node to reboot and return at once (the node goes away shortly after)."""
        ...


__all__ = ["CommandExecutor", "CommandResult", "ExecTarget"]
