"""Slurm through `scontrol`, run locally or over SSH on a host that can reach slurmctld.

    drain   scontrol update NodeName=<n> State=DRAIN Reason=<reason>
    resume  scontrol update NodeName=<n> State=RESUME
    state   scontrol show node <n> --oneliner
    remove  scontrol update NodeName=<n> State=DOWN Reason=<reason>

State words (Slurm 23.x `scontrol show node`): a base state plus flags joined by "+", e.g. IDLE+DRAIN
(drained: nothing runs), MIXED+DRAIN / ALLOCATED+DRAIN (draining: jobs still run), DOWN+DRAIN+NOT_RESPONDING.
Removing a node from slurm.conf is a configuration change outside this adapter; `remove` marks it DOWN
with the reason so no job lands on it meanwhile.
"""

from __future__ import annotations

import re

from integrations.exceptions import PermanentError, TransientError

from .base import SchedulerNode, SchedulerNodeState
from .runners import CommandResult, CommandRunner, runner_build

# scontrol's words for "the controller is unreachable or busy": worth retrying.
_TRANSIENT = (
    "unable to contact slurm controller",
    "socket timed out",
    "connection refused",
    "communication connection failure",
    "slurm backup controller in standby mode",
    "resource temporarily unavailable",
)
_BUSY = {"ALLOCATED", "ALLOC", "MIXED", "MIX", "COMPLETING", "COMP"}
_STATE = re.compile(r"(?:^|\s)State=(\S+)")
_REASON = re.compile(r"(?:^|\s)Reason=(.*?)(?=\s+[A-Za-z]+=|$)")


def slurm_state_parse(name: str, text: str) -> SchedulerNodeState:
    """Parse `scontrol show node <n> --oneliner` output."""
    match = _STATE.search(text)
    if match is None:
        raise PermanentError(f"no State= in scontrol output for {name}: {text[:200]!r}")
    raw = match.group(1)
    words = {w.rstrip("*").upper() for w in raw.split("+")}
    reason_match = _REASON.search(text)
    draining = bool(words & {"DRAIN", "DRAINING", "DRAINED"})
    down = bool(words & {"DOWN", "FAIL", "FUTURE"})
    busy = bool(words & _BUSY)
    return SchedulerNodeState(
        name=name,
        state=raw,
        is_schedulable=not (draining or down),
        is_drained=(draining or down) and not busy,
        running=None,
        reason=reason_match.group(1).strip() if reason_match else "",
    )


class SlurmScheduler:
    """The Scheduler protocol on Slurm's scontrol."""

    def __init__(
        self,
        runner: CommandRunner | None = None,
        *,
        scontrol: str = "scontrol",
        timeout_s: float = 30.0,
        **runner_options: object,
    ) -> None:
        self.runner = runner or runner_build(**runner_options)  # type: ignore[arg-type]
        self.scontrol = scontrol
        self.timeout_s = timeout_s

    def _run(self, *args: str) -> CommandResult:
        result = self.runner.run([self.scontrol, *args], timeout_s=self.timeout_s)
        if not result.ok:
            text = result.output.lower()
            error_class = TransientError if any(t in text for t in _TRANSIENT) else PermanentError
            raise error_class(f"{' '.join(result.argv[:3])}: {result.output[:300]}", peer=self.runner.peer)
        return result

    def drain(self, node: SchedulerNode, *, reason: str) -> None:
        """Idempotent: draining a drained node only refreshes its reason."""
        self._run("update", f"NodeName={node.name}", "State=DRAIN", f"Reason={_one_line(reason)}")

    def resume(self, node: SchedulerNode) -> None:
        """Idempotent: Slurm refuses RESUME on a node that is not drained/down; that counts as done."""
        try:
            self._run("update", f"NodeName={node.name}", "State=RESUME")
        except PermanentError as exc:
            if "invalid node state" not in str(exc).lower() or not self.node_state(node).is_schedulable:
                raise

    def node_state(self, node: SchedulerNode) -> SchedulerNodeState:
        return slurm_state_parse(node.name, self._run("show", "node", node.name, "--oneliner").stdout)

    def remove(self, node: SchedulerNode, *, reason: str) -> None:
        self._run("update", f"NodeName={node.name}", "State=DOWN", f"Reason={_one_line(reason)}")


def _one_line(text: str) -> str:
    # Slurm keeps reasons on one line; "=" is fine inside the value but newlines are not.
    return " ".join(text.split())[:200] or "gpuops"


__all__ = ["SlurmScheduler", "slurm_state_parse"]
