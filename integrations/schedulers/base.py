"""The scheduler seam: what a workflow asks of Slurm or Kubernetes, and what it gets back.

Steps depend on the `Scheduler` protocol only; `registry.scheduler_for(kind)` picks the implementation from
settings (integrations.conf "SCHEDULERS"). Implementations raise only integrations.exceptions.TransientError
(try again later) or PermanentError (will not work), and every call is idempotent: draining a drained node or
resuming an active one succeeds without changing anything.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class SchedulerNode:
    """A node as the scheduler knows it. `name` is the scheduler's node name (Slurm NodeName, k8s node name),
    which for gpuops is the hostname."""

    name: str
    cluster: str = ""
    cluster_kind: str = ""


@dataclass(frozen=True)
class SchedulerNodeState:
    """What the scheduler says about a node right now."""

    name: str
    state: str  # the scheduler's own words, e.g. "IDLE+DRAIN" or "Ready,SchedulingDisabled"
    is_schedulable: bool
    is_drained: bool  # unschedulable and running no (non-daemon) work
    running: int | None = None  # jobs / pods still running, when known
    reason: str = ""
    jobs: tuple[str, ...] = ()  # ids of the jobs still running on it, when known (shown on the ticket)


@dataclass(frozen=True)
class SchedulerJob:
    """A job as the scheduler reports it (squeue now, sacct for history). Times are the scheduler's local
    time, naive, None where it has none yet."""

    job_id: str
    state: str  # the scheduler's word: RUNNING, COMPLETING, COMPLETED, FAILED, ...
    user: str = ""
    partition: str = ""
    name: str = ""
    nodes: tuple[str, ...] = ()
    start_at: dt.datetime | None = None
    end_at: dt.datetime | None = None


@dataclass(frozen=True)
class SchedulerAllocation:
    """How many of a node's accelerators the scheduler has handed to work right now. `allocated` is None where
    the scheduler does not account for them (a Slurm without gres/gpu in its TRES)."""

    name: str
    total: int
    allocated: int | None


@runtime_checkable
class Scheduler(Protocol):
    def drain(self, node: SchedulerNode, *, reason: str) -> None:
        """Stop new work landing on the node and let running work finish (Slurm DRAIN, k8s cordon+drain)."""
        ...

    def resume(self, node: SchedulerNode) -> None:
        """Make the node schedulable again (Slurm RESUME, k8s uncordon)."""
        ...

    def node_state(self, node: SchedulerNode) -> SchedulerNodeState:
        """Read the node's scheduling state (is it drained yet?)."""
        ...

    def remove(self, node: SchedulerNode, *, reason: str) -> None:
        """Take the node out of the cluster for good (decommission)."""
        ...


@runtime_checkable
class JobReader(Protocol):
    """What a scheduler can tell about the work on its nodes, where it keeps that (Slurm, Kubernetes). Workflows
    use it for the jobs a failure touched; the scheduler sync for allocation. Same errors as Scheduler."""

    def job_history(self, node: SchedulerNode, *, start_at: dt.datetime, end_at: dt.datetime) -> list[SchedulerJob]:
        """The jobs that ran on the node at any time between start_at and end_at (aware datetimes)."""
        ...

    def nodes_allocation(self, nodes: list[SchedulerNode]) -> dict[str, SchedulerAllocation]:
        """Accelerators configured and allocated per node, for the nodes the scheduler knows."""
        ...


__all__ = ["JobReader", "Scheduler", "SchedulerAllocation", "SchedulerJob", "SchedulerNode", "SchedulerNodeState"]
