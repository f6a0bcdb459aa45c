"""Scheduler adapters (Slurm, Kubernetes, noop, fake) behind the `Scheduler` protocol."""

from .base import Scheduler, SchedulerNode, SchedulerNodeState
from .registry import override, scheduler_for

__all__ = ["Scheduler", "SchedulerNode", "SchedulerNodeState", "override", "scheduler_for"]
