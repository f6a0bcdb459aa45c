"""Agent reports to the switches app: each applied report's host LLDP view becomes observed links
(integrations/switches/host_lldp.py). Ingestion and the switches integration do not know each other; this glue,
connected in WorkflowsConfig.ready, joins them.
"""

from __future__ import annotations

import uuid
from typing import Any

from cmdb.models import Node
from integrations.switches import host_lldp
from integrations.switches.tasks import node_report_observe
from inventory_agents.models import AgentState
from inventory_agents.services.normalize import Observed
from inventory_agents.signals import report_applied


def on_report_applied(sender: Any, *, node: Node, report_id: Any, observed: Observed, **kwargs: Any) -> None:
    """`inventory_agents.signals.report_applied`: give the host's LLDP view (and the chance to re-resolve its HCAs'
    InfiniBand links) to a task once the report has committed.

    Runs inside the reconciliation transaction, whose query count is asserted: it reads only what it was handed
    and sends plain data. A report without LLDP or InfiniBand data after one without either queues nothing: the
    task would find no host view to replace and no port to resolve.
    """
    if kwargs.get("host_view_still_empty"):
        return
    neighbors = [
        [n.local_port, n.remote_chassis_id, n.remote_system, n.remote_port, n.remote_port_description]
        for n in observed.lldp
    ]
    # A failed lldp collector says nothing about the cables: the last host view is kept, not erased.
    lldp_complete = not any("lldp" in name for name in observed.collector_errors)
    node_report_observe.delay_on_commit(node.pk, str(report_id), neighbors, lldp_complete)


def report_is_latest(node_id: int, report_id: str) -> bool:
    """Whether `report_id` is the node's last applied report (unknown ones count as the latest)."""
    last = AgentState.objects.filter(node_id=node_id).values_list("last_report_id", flat=True).first()
    if last is None:
        return True
    try:
        return uuid.UUID(str(report_id)) == last
    except ValueError:
        return True


def register() -> None:
    report_applied.connect(on_report_applied, dispatch_uid="switches_observe_agent_report")
    host_lldp.latest_report_check_set(report_is_latest)


__all__ = ["on_report_applied", "register", "report_is_latest"]
