"""Slurm through its own commands, run locally or over SSH on a host that can reach slurmctld.

    drain    scontrol update NodeName=<n> State=DRAIN Reason=<reason>
    resume   scontrol update NodeName=<n> State=RESUME
    state    scontrol show node <n> --oneliner, plus squeue -h -w <n> for the jobs still on it
    states   sinfo -h -N -o "%N|%T|%E" (every node of the cluster at once)
    jobs     squeue -h -w <n> -o "%i|%T|%u|%P|%S|%N|%j"
    alloc    sinfo -h -N -O "NodeList:|,Gres:|,GresUsed:|" (every node: GPUs configured and handed to jobs)
    history  sacct -P -n -X -a -N <n> -S <start> -E <end> -o JobID,State,User,Partition,Start,End,NodeList,JobName
    remove   scontrol update NodeName=<n> State=DOWN Reason=<reason>

State words (`scontrol show node`): a base state plus flags joined by "+", e.g. IDLE+DRAIN (drained: nothing
runs), MIXED+DRAIN / ALLOCATED+DRAIN (draining: jobs still run), DOWN+DRAIN+NOT_RESPONDING. Removing a node
from slurm.conf is a configuration change outside this adapter; `remove` marks it DOWN with the reason so no
job lands on it meanwhile. `sacct` needs slurmdbd (accounting); without it sacct fails and `job_history` raises
PermanentError with sacct's message. Only this module runs Slurm commands; parsing is in slurm_parse.
"""

from __future__ import annotations

import datetime as dt

from integrations.exceptions import PermanentError, TransientError

from .base import SchedulerAllocation, SchedulerJob, SchedulerNode, SchedulerNodeState
from .runners import CommandResult, CommandRunner, runner_build
from .slurm_parse import (
    SACCT_FIELDS,
    SINFO_FORMAT,
    SINFO_GRES_FIELDS,
    SQUEUE_FORMAT,
    node_state_from,
    sacct_parse,
    sinfo_allocation_parse,
    sinfo_nodes_parse,
    slurm_state_parse,
    squeue_parse,
)

# The commands' words for "the controller is unreachable or busy": worth retrying.
_TRANSIENT = (
    "unable to contact slurm controller",
    "socket timed out",
    "connection refused",
    "communication connection failure",
    "slurm backup controller in standby mode",
    "resource temporarily unavailable",
    "zero bytes were transmitted or received",
    "munge",  # the auth daemon is down or restarting (munge_encode failed): fixed by waiting/restarting
)
# Jobs that still hold a node: a drain waits for these.
_ACTIVE_JOB_STATES = {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "CONFIGURING", "RESIZING", "SIGNALING"}


class SlurmScheduler:
    """The Scheduler protocol on Slurm's scontrol."""

    def __init__(
        self,
        runner: CommandRunner | None = None,
        *,
        scontrol: str = "scontrol",
        sinfo: str = "sinfo",
        squeue: str = "squeue",
        sacct: str = "sacct",
        timeout_s: float = 30.0,
        **runner_options: object,
    ) -> None:
        """`runner_options` (ssh_host, ssh_user, ssh_port, ssh_identity_file) pick SSH over local; the command
        names may be full paths (or a wrapper that sets SLURM_CONF) on the host they run on."""
        self.runner = runner or runner_build(**runner_options)  # type: ignore[arg-type]
        self.commands = {"scontrol": scontrol, "sinfo": sinfo, "squeue": squeue, "sacct": sacct}
        self.timeout_s = timeout_s

    def _run(self, command: str, *args: str) -> CommandResult:
        result = self.runner.run([self.commands.get(command, command), *args], timeout_s=self.timeout_s)
        if not result.ok:
            text = result.output.lower()
            error_class = TransientError if any(t in text for t in _TRANSIENT) else PermanentError
            raise error_class(f"{' '.join(result.argv[:3])}: {result.output[:300]}", peer=self.runner.peer)
        return result

    def drain(self, node: SchedulerNode, *, reason: str) -> None:
        """Idempotent: draining a drained node only refreshes its reason."""
        self._run("scontrol", "update", f"NodeName={node.name}", "State=DRAIN", f"Reason={_one_line(reason)}")

    def resume(self, node: SchedulerNode) -> None:
        """Idempotent: Slurm refuses RESUME on a node that is not drained/down; that counts as done."""
        try:
            self._run("scontrol", "update", f"NodeName={node.name}", "State=RESUME")
        except PermanentError as exc:
            if "invalid node state" not in str(exc).lower() or not self.node_state(node).is_schedulable:
                raise

    def node_state(self, node: SchedulerNode) -> SchedulerNodeState:
        """The node's state and reason, with the ids of the jobs still on it (a drained node has none)."""
        state = slurm_state_parse(node.name, self._run("scontrol", "show", "node", node.name, "--oneliner").stdout)
        if state.is_schedulable:
            return state
        jobs = tuple(job.job_id for job in self.node_jobs(node) if job.state in _ACTIVE_JOB_STATES)
        return node_state_from(node.name, state.state, state.reason, jobs)

    def nodes_state(self, nodes: list[SchedulerNode]) -> dict[str, SchedulerNodeState]:
        """The state of `nodes` from one sinfo call for the whole cluster (the scheduler sync's read). A node in
        several partitions is listed once; nodes Slurm does not know are absent from the answer."""
        wanted = {n.name for n in nodes}
        states = sinfo_nodes_parse(self._run("sinfo", "-h", "-N", "-o", SINFO_FORMAT).stdout)
        return {s.name: s for s in states if s.name in wanted}

    def nodes_allocation(self, nodes: list[SchedulerNode]) -> dict[str, SchedulerAllocation]:
        """GPUs configured and allocated per node, from one sinfo call for the whole cluster."""
        wanted = {n.name for n in nodes}
        text = self._run("sinfo", "-h", "-N", "-O", SINFO_GRES_FIELDS).stdout
        return {a.name: a for a in sinfo_allocation_parse(text) if a.name in wanted}

    def node_jobs(self, node: SchedulerNode) -> list[SchedulerJob]:
        """The jobs on the node now (squeue), every user's."""
        return squeue_parse(self._run("squeue", "-h", "-a", "-w", node.name, "-o", SQUEUE_FORMAT).stdout)

    def job_history(self, node: SchedulerNode, *, start_at: dt.datetime, end_at: dt.datetime) -> list[SchedulerJob]:
        """The jobs that ran on the node between start_at and end_at (sacct; needs Slurm accounting).

        Times go to sacct as the controller's local time without zone, as sacct reads them."""
        argv = ["-P", "-n", "-X", "-a", "-N", node.name, "-S", _slurm_time(start_at), "-E", _slurm_time(end_at)]
        return sacct_parse(self._run("sacct", *argv, "-o", ",".join(SACCT_FIELDS)).stdout)

    def remove(self, node: SchedulerNode, *, reason: str) -> None:
        self._run("scontrol", "update", f"NodeName={node.name}", "State=DOWN", f"Reason={_one_line(reason)}")


def _one_line(text: str) -> str:
    # Slurm keeps reasons on one line; "=" is fine inside the value but newlines are not.
    return " ".join(text.split())[:200] or "gpuops"


def _slurm_time(at: dt.datetime) -> str:
    if at.tzinfo is not None:
        at = at.astimezone().replace(tzinfo=None)
    return at.strftime("%Y-%m-%dT%H:%M:%S")


__all__ = ["SlurmScheduler", "slurm_state_parse"]
