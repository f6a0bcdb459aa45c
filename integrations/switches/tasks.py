"""Celery tasks for discovery. Arguments are ids and JSON values; names are explicit and stable.

Beat entry (settings.CELERY_BEAT_SCHEDULE):
    "switches-poll-all": {"task": "integrations.switches.poll_all", "schedule": 900.0}
"""

from __future__ import annotations

from celery import shared_task

from cmdb.models import Switch
from gpuops.context import ChangeSource, change_context
from gpuops.tasks import BaseTask
from integrations.exceptions import TransientError

from .host_lldp import HostNeighbor, node_report_apply
from .services import switch_poll, switches_poll_all


@shared_task(name="integrations.switches.poll_all", acks_late=True, ignore_result=True)
def poll_all() -> dict[str, int]:
    """Poll every active switch (bounded concurrency inside the poller); one PollRun per switch.

    Not retried as a whole: a switch that timed out has a failed run and is polled again by the next beat.
    """
    from celery import current_task

    task_id = getattr(getattr(current_task, "request", None), "id", "") or ""
    with change_context(source=ChangeSource.INTEGRATION):
        runs = switches_poll_all(task_id=task_id)
    ok = sum(1 for r in runs if r.status == "ok")
    return {"switches": len(runs), "ok": ok, "failed": len(runs) - ok}


@shared_task(
    name="integrations.switches.poll_switch",
    bind=True,
    acks_late=True,
    ignore_result=True,
    autoretry_for=(TransientError,),
    retry_backoff=30,
    retry_backoff_max=600,
    max_retries=3,
)
def poll_switch(self, switch_id: int) -> int:
    """Poll one switch now (e.g. after provisioning). Retries only transient errors, with backoff."""
    switch = Switch.objects.get(pk=switch_id)
    with change_context(source=ChangeSource.INTEGRATION):
        return switch_poll(switch, task_id=self.request.id or "").pk


@shared_task(base=BaseTask, name="integrations.switches.node_report_observe")
def node_report_observe(
    node_id: int, report_id: str, neighbors: list[list[str]], lldp_complete: bool = True
) -> dict[str, int]:
    """After an agent report of the node committed (enqueued by workflows/glue/host_lldp.py): replace the node's
    host-LLDP observations with `neighbors` ([local_port, chassis id, system, port id, port description]) and
    re-resolve the InfiniBand observations of its HCAs. Idempotent; a task for an older report than the node's
    last applied one leaves the host view alone (host_lldp.node_report_apply)."""
    return node_report_apply(
        node_id=node_id,
        report_id=report_id,
        lldp_complete=lldp_complete,
        neighbors=[HostNeighbor.of(n) for n in neighbors],
    )
