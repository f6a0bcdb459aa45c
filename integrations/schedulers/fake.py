"""An in-memory scheduler for tests: keeps node states, counts calls, fails on demand."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field

from integrations.exceptions import PermanentError, TransientError

from .base import SchedulerAllocation, SchedulerJob, SchedulerNode, SchedulerNodeState


@dataclass
class _FakeNode:
    schedulable: bool = True
    running: int = 0
    reason: str = ""
    removed: bool = False


@dataclass
class FakeScheduler:
    """Test double of the Scheduler protocol.

    `calls` counts *successful* calls per operation (the side effects performed); `attempts` counts every
    call. `fail_next[op] = n` makes the next n calls of `op` raise TransientError. `nodes[name].running = n` keeps n
    jobs (ids 1000, 1001, ...) on a node so it stays draining until set back to 0. `history[name]` holds the jobs
    `job_history` answers from (filtered by the window), `allocation[name]` what `nodes_allocation` reports;
    `history_unavailable` makes `job_history` refuse with that message (a Slurm without accounting).
    """

    nodes: dict[str, _FakeNode] = field(default_factory=dict)
    calls: Counter = field(default_factory=Counter)
    attempts: Counter = field(default_factory=Counter)
    fail_next: Counter = field(default_factory=Counter)
    log: list[tuple[str, str, str]] = field(default_factory=list)
    history: dict[str, list[SchedulerJob]] = field(default_factory=dict)
    allocation: dict[str, SchedulerAllocation] = field(default_factory=dict)
    history_unavailable: str = ""

    def _node(self, node: SchedulerNode) -> _FakeNode:
        return self.nodes.setdefault(node.name, _FakeNode())

    def _enter(self, op: str) -> None:
        self.attempts[op] += 1
        if self.fail_next[op] > 0:
            self.fail_next[op] -= 1
            raise TransientError(f"fake {op}: controller unreachable", peer="fake-scheduler")

    def drain(self, node: SchedulerNode, *, reason: str) -> None:
        self._enter("drain")
        n = self._node(node)
        n.schedulable, n.reason = False, reason
        self.calls["drain"] += 1
        self.log.append(("drain", node.name, reason))

    def resume(self, node: SchedulerNode) -> None:
        self._enter("resume")
        n = self._node(node)
        n.schedulable, n.reason = True, ""
        self.calls["resume"] += 1
        self.log.append(("resume", node.name, ""))

    def node_state(self, node: SchedulerNode) -> SchedulerNodeState:
        self._enter("node_state")
        n = self._node(node)
        return SchedulerNodeState(
            name=node.name,
            state="drained" if not n.schedulable and not n.running else "x",
            is_schedulable=n.schedulable,
            is_drained=not n.schedulable and n.running == 0,
            running=n.running,
            reason=n.reason,
            jobs=tuple(str(1000 + i) for i in range(n.running)),
        )

    def job_history(self, node: SchedulerNode, *, start_at: dt.datetime, end_at: dt.datetime) -> list[SchedulerJob]:
        self._enter("job_history")
        if self.history_unavailable:
            raise PermanentError(self.history_unavailable, peer="fake-scheduler")
        self.calls["job_history"] += 1
        return [
            job
            for job in self.history.get(node.name, [])
            if (job.start_at is None or job.start_at <= end_at) and (job.end_at is None or job.end_at >= start_at)
        ]

    def nodes_allocation(self, nodes: list[SchedulerNode]) -> dict[str, SchedulerAllocation]:
        self._enter("nodes_allocation")
        self.calls["nodes_allocation"] += 1
        return {n.name: self.allocation[n.name] for n in nodes if n.name in self.allocation}

    def remove(self, node: SchedulerNode, *, reason: str) -> None:
        self._enter("remove")
        n = self._node(node)
        n.removed, n.schedulable = True, False
        self.calls["remove"] += 1
        self.log.append(("remove", node.name, reason))


__all__ = ["FakeScheduler"]
