"""Command runners: how the Slurm adapter runs `scontrol`, `sinfo`, `squeue` and `sacct`, locally or over SSH.

A runner takes an argument vector (never a shell string) and returns the exit code and output. Adapters
decide what an exit code means; runners map *their own* failures: a timeout or an SSH connection failure
(ssh exits 255) is a TransientError, a missing binary a PermanentError.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from integrations.exceptions import PermanentError, TransientError


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def output(self) -> str:
        return (self.stdout + ("\n" if self.stdout and self.stderr else "") + self.stderr).strip()


@runtime_checkable
class CommandRunner(Protocol):
    peer: str

    def run(self, argv: Sequence[str], *, timeout_s: float = 60.0) -> CommandResult:
        """Run `argv`; raise TransientError on timeout or lost connection, PermanentError if it cannot start."""
        ...


class LocalRunner:
    """Runs commands on this host with subprocess (no shell)."""

    peer = "localhost"

    def run(self, argv: Sequence[str], *, timeout_s: float = 60.0) -> CommandResult:
        try:
            proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise TransientError(f"{argv[0]} timed out after {timeout_s:.0f} s", peer=self.peer) from exc
        except FileNotFoundError as exc:
            raise PermanentError(f"{argv[0]} is not installed", peer=self.peer) from exc
        except OSError as exc:
            raise PermanentError(f"cannot run {argv[0]}: {exc}", peer=self.peer) from exc
        return CommandResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr)


class SshRunner:
    """Runs commands on another host through the OpenSSH client (key auth, no prompts).

    The remote side gets one shell-quoted command line (shlex.join), so an argument such as a drain reason
    with spaces reaches scontrol as one argument. Credentials are the SSH agent's/keys', never ours.
    """

    def __init__(
        self,
        host: str,
        *,
        user: str = "",
        port: int = 22,
        identity_file: str = "",
        connect_timeout_s: int = 10,
        ssh: str = "ssh",
    ) -> None:
        self.host, self.user, self.port = host, user, port
        self.identity_file, self.connect_timeout_s, self.ssh = identity_file, connect_timeout_s, ssh
        self.peer = f"{user + '@' if user else ''}{host}"

    def ssh_argv(self, argv: Sequence[str]) -> list[str]:
        base = [self.ssh, "-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.connect_timeout_s}", "-p", str(self.port)]
        if self.identity_file:
            base += ["-i", self.identity_file]
        return [*base, self.peer, "--", shlex.join(argv)]

    def run(self, argv: Sequence[str], *, timeout_s: float = 60.0) -> CommandResult:
        result = LocalRunner().run(self.ssh_argv(argv), timeout_s=timeout_s)
        if result.returncode == 255:  # ssh's own failure: unreachable, refused, auth
            raise TransientError(f"ssh failed: {result.stderr.strip()[:300]}", peer=self.peer)
        return CommandResult(tuple(argv), result.returncode, result.stdout, result.stderr)


def runner_build(
    *, ssh_host: str = "", ssh_user: str = "", ssh_port: int = 22, ssh_identity_file: str = ""
) -> CommandRunner:
    """A local runner, or an SSH runner when `ssh_host` is given (adapter options from settings)."""
    if ssh_host:
        return SshRunner(ssh_host, user=ssh_user, port=ssh_port, identity_file=ssh_identity_file)
    return LocalRunner()


__all__ = ["CommandResult", "CommandRunner", "LocalRunner", "SshRunner", "runner_build"]
