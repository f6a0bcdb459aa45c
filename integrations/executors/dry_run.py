"""An executor that only logs what it would run: the demo default, safe on a laptop with no fleet."""

from __future__ import annotations

import logging

from .base import CommandResult, ExecTarget

logger = logging.getLogger(__name__)


class DryRunExecutor:
    """Logs each command and reports success without running anything (`CommandResult.dry_run` is True).

    Callers see `is_dry_run` and skip what only a real run can show (a rollout does not wait for the agent
    to report a version that was never installed).
    """

    is_dry_run = True

    def __init__(self, **_options: object) -> None:
        self.commands: list[tuple[str, str]] = []

    def run(self, target: ExecTarget, command: str, *, timeout_s: float = 1800.0) -> CommandResult:
        logger.info("executor (dry run) on %s would run: %s", target.label, command)
        self.commands.append((target.label, command))
        return CommandResult(
            target=target.label,
            command=command,
            exit_status=0,
            dry_run=True,
            stdout=f"dry run: would run on {target.label}: {command}",
        )

    def reboot(self, target: ExecTarget) -> CommandResult:
        return self.run(target, "reboot")


__all__ = ["DryRunExecutor"]
