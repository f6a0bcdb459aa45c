"""What the provisioning panel and API show: where the node is going, the links planned, the ports pushed, the OS
job, the baseline, and each step with its status and the tail of its log (the engine's step runs)."""

from __future__ import annotations

from typing import Any

from cmdb.models import Link

from ..models import ProvisioningRun, ProvisioningStatus
from ..selectors import provisioning_dry_run_texts

STEP_ORDER = (
    "assign_position",
    "plan_links",
    "configure_ports",
    "install_os",
    "install_driver",
    "burn_in",
    "join_cluster",
)
LOG_TAIL = 30


def provisioning_progress(run: ProvisioningRun) -> dict[str, Any]:
    links = [
        {
            "id": link.pk,
            "nic": link.a_nic_port.nic.name if link.a_nic_port_id else "",
            "switch": link.b_switch_port.switch.name,
            "port": link.b_switch_port.name,
            "status": link.status,
            "planned_now": link.pk in run.planned_link_ids,
        }
        for link in Link.objects.filter(a_nic_port__nic__node_id=run.node_id)
        .select_related("a_nic_port__nic", "b_switch_port__switch")
        .order_by("a_nic_port__nic__rail", "pk")
    ]
    steps: list[dict[str, Any]] = []
    ticket_state = ""
    if run.ticket_id:
        from workflows.models import StepLogLine, StepRun
        from workflows.registry import workflow_or_none

        ticket_state = run.ticket.state
        wf = workflow_or_none(run.ticket.type)
        latest: dict[str, StepRun] = {}
        for sr in StepRun.objects.filter(ticket_id=run.ticket_id).order_by("created_at"):
            latest[sr.step] = sr
        lines: dict[Any, list[StepLogLine]] = {}
        for line in StepLogLine.objects.filter(run_id__in=[r.pk for r in latest.values()]).order_by("at", "id"):
            lines.setdefault(line.run_id, []).append(line)
        for name in (*STEP_ORDER, "rollback"):
            sr = latest.get(name)
            if sr is None and name == "rollback":
                continue
            steps.append(
                {
                    "name": name,
                    "label": wf.step_spec(name).label if wf else name,
                    "status": sr.status if sr else "not started",
                    "error": sr.error if sr else "",
                    "log": [
                        {"at": x.at.isoformat(), "level": x.level, "message": x.message}
                        for x in lines.get(sr.pk, [])[-LOG_TAIL:]
                    ]
                    if sr
                    else [],
                }
            )
    return {
        "id": run.pk,
        "label": run.label,
        "hostname": run.hostname,
        "status": run.status,
        "status_label": run.get_status_display(),
        "current_step": run.current_step,
        "error": run.error,
        "ticket_state": ticket_state,
        "is_moving": run.is_open and run.status != ProvisioningStatus.FAILED,
        "rack": str(run.rack) if run.rack_id else "",
        "position": run.position,
        "face": run.face,
        "cluster": run.cluster.name if run.cluster_id else "",
        "links": links,
        "configured_ports": run.configured_ports,
        "os_install": {"ref": run.os_install_ref, "status": run.os_install_status, "message": run.os_install_message},
        "baseline": [f"{c} {v}" for c, v in run.baseline],
        "steps": steps,
        # What ran dry (switch pushes under GPUOPS_SWITCH_CONFIG_DRY_RUN, a dry-run executor's driver install).
        "dry_run_notes": provisioning_dry_run_texts(run),
    }


__all__ = ["STEP_ORDER", "provisioning_progress"]
