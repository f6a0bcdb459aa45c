"""Signal receivers of the switches app (connected in SwitchesConfig.ready)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .tasks import node_report_observe

if TYPE_CHECKING:
    from cmdb.models import Node
    from inventory_agents.services.normalize import Observed


def on_report_applied(sender: Any, *, node: Node, report_id: Any, observed: Observed, **kwargs: Any) -> None:
    """`inventory_agents.signals.report_applied`: give the host's LLDP view (and the chance to re-resolve its HCAs'
    InfiniBand links) to a task once the report has committed.

    Runs inside the reconciliation transaction, whose query count is asserted: it reads only what it was handed
    and sends plain data.
    """
    neighbors = [[n.local_port, n.remote_chassis_id, n.remote_system, n.remote_port, n.remote_port_description]
                 for n in observed.lldp]
    # A failed lldp collector says nothing about the cables: the last host view is kept, not erased.
    lldp_complete = not any("lldp" in name for name in observed.collector_errors)
    node_report_observe.delay_on_commit(node.pk, str(report_id), neighbors, lldp_complete)
