"""The demo fleet's scheduler: the no-op scheduler (logs drains, reports every node drained) that also makes up a
plausible job history per node, so a demo repair ticket shows what a real one lists. Every answer says it is made
up. `script/server` selects it (GPUOPS_DEMO_SCHEDULER); production configures Slurm or Kubernetes instead."""

from __future__ import annotations

import datetime as dt
import hashlib

from .base import SchedulerAllocation, SchedulerJob, SchedulerNode
from .noop import NoopScheduler

_TEAMS = ("llm-pretrain", "vision", "speech", "rl-research", "eval", "infra-burnin")
_NAMES = ("pretrain-70b", "sft-13b", "vit-h-finetune", "asr-conformer", "ppo-policy", "nccl-allreduce-check")


class DemoScheduler(NoopScheduler):
    """NoopScheduler plus a made-up, deterministic job history (the same node and window give the same jobs)."""

    demo_note = "Demo scheduler: these jobs are made up; configure Slurm or Kubernetes to see real ones."

    def job_history(self, node: SchedulerNode, *, start_at: dt.datetime, end_at: dt.datetime) -> list[SchedulerJob]:
        seed = int(hashlib.sha256(f"{node.name}|{end_at:%Y%m%d%H}".encode()).hexdigest(), 16)
        jobs: list[SchedulerJob] = []
        at = start_at
        for i in range(3 + seed % 4):
            pick = (seed >> (8 * i)) % len(_TEAMS)
            length = dt.timedelta(minutes=40 + (seed >> (5 * i)) % 300)
            started, ended = at, min(at + length, end_at)
            last = ended >= end_at
            jobs.append(
                SchedulerJob(
                    job_id=str(700000 + (seed >> (3 * i)) % 90000),
                    state="NODE_FAIL" if last else ("FAILED" if (seed >> i) % 7 == 0 else "COMPLETED"),
                    user=_TEAMS[pick],
                    partition="gpu",
                    name=_NAMES[pick],
                    nodes=(node.name,),
                    start_at=started,
                    end_at=ended,
                )
            )
            if last:
                break
            at = ended + dt.timedelta(minutes=2 + (seed >> (2 * i)) % 20)
        return jobs

    def nodes_allocation(self, nodes: list[SchedulerNode]) -> dict[str, SchedulerAllocation]:
        return {}  # the demo reads no allocation: the capacity figures stay the CMDB's own


__all__ = ["DemoScheduler"]
