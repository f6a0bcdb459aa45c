"""An in-memory executor for tests: records commands, answers from rules, fails on demand, and can play the
node's side (a hook that "reports" the new driver, as the node's agent would after a real install)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from integrations.exceptions import PermanentError, TransientError

from .base import CommandResult, ExecTarget

Hook = Callable[[ExecTarget, str], None]


@dataclass
class FakeRule:
    """Answer commands on `host` ("" = any) containing `contains` with this exit status / output, `times`
    times (None = always)."""

    host: str = ""
    contains: str = ""
    exit_status: int = 1
    stdout: str = ""
    stderr: str = "fake failure"
    times: int | None = None

    def matches(self, target: ExecTarget, command: str) -> bool:
        return (not self.host or self.host in (target.host, target.name)) and self.contains in command


@dataclass
class FakeExecutor:
    """Test double of CommandExecutor.

    `calls` lists (host, command) of every command that ran (reboots appear as "reboot"). `rules` decide the
    result (first match wins; default: exit 0). `unreachable[host] = n` makes the next n calls to the host
    raise TransientError; `forbidden` hosts raise PermanentError (authentication). `on_run` hooks run after each
    successful command: tests use one to update the CMDB the way the node's agent report would.
    """

    rules: list[FakeRule] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    unreachable: Counter = field(default_factory=Counter)
    forbidden: set[str] = field(default_factory=set)
    on_run: list[Hook] = field(default_factory=list)
    is_dry_run: bool = False

    def fail(
        self,
        *,
        host: str = "",
        contains: str = "",
        exit_status: int = 1,
        stderr: str = "fake failure",
        times: int | None = None,
    ) -> FakeRule:
        """Add a failing rule (convenience for tests)."""
        rule = FakeRule(host=host, contains=contains, exit_status=exit_status, stderr=stderr, times=times)
        self.rules.append(rule)
        return rule

    def commands_for(self, host: str) -> list[str]:
        return [c for h, c in self.calls if h == host]

    def run(self, target: ExecTarget, command: str, *, timeout_s: float = 1800.0) -> CommandResult:
        key = target.name or target.host
        if key in self.forbidden:
            raise PermanentError("authentication failed (fake)", peer=key)
        if self.unreachable[key] > 0:
            self.unreachable[key] -= 1
            raise TransientError("connection refused (fake)", peer=key)
        self.calls.append((key, command))
        for rule in self.rules:
            if rule.matches(target, command) and (rule.times is None or rule.times > 0):
                if rule.times is not None:
                    rule.times -= 1
                return CommandResult(
                    target=key,
                    command=command,
                    exit_status=rule.exit_status,
                    stdout=rule.stdout,
                    stderr=rule.stderr,
                    duration_s=0.01,
                )
        for hook in self.on_run:
            hook(target, command)
        return CommandResult(target=key, command=command, exit_status=0, stdout="ok", duration_s=0.01)

    def reboot(self, target: ExecTarget) -> CommandResult:
        return self.run(target, "reboot")


__all__ = ["FakeExecutor", "FakeRule"]
