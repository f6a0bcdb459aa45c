"""Scheduler adapters (Slurm, Kubernetes, noop, fake) behind the `Scheduler` protocol."""

from .base import Scheduler, SchedulerJob, SchedulerNode, SchedulerNodeState
from .registry import override, scheduler_for

__all__ = ["Scheduler", "SchedulerJob", "SchedulerNode", "SchedulerNodeState", "override", "scheduler_for"]
