"""A scheduler that only logs what it would do: the demo default, where no Slurm or Kubernetes exists."""

from __future__ import annotations

import logging

from .base import SchedulerNode, SchedulerNodeState

logger = logging.getLogger(__name__)


class NoopScheduler:
    """Accepts every call, reports every node drained. Keeps nothing."""

    def drain(self, node: SchedulerNode, *, reason: str) -> None:
        logger.info("scheduler (noop): drain %s (%s): %s", node.name, node.cluster or "no cluster", reason)

    def resume(self, node: SchedulerNode) -> None:
        logger.info("scheduler (noop): resume %s", node.name)

    def node_state(self, node: SchedulerNode) -> SchedulerNodeState:
        return SchedulerNodeState(name=node.name, state="noop", is_schedulable=False, is_drained=True, running=0)

    def remove(self, node: SchedulerNode, *, reason: str) -> None:
        logger.info("scheduler (noop): remove %s: %s", node.name, reason)


__all__ = ["NoopScheduler"]
