"""Stand-ins for the node agents of the demo fleet, which has no machines behind it.

`script/server` enables them (GPUOPS_DEMO_AGENTS=1): a beat task posts, for every node a workflow may be waiting
on, the report its agent would send if the hardware were what the CMDB holds. The reports go through the real
ingestion service (`report_ingest`), so a provisioning burn-in, a rollout verification or a repair verification
on the demo sees genuine reports and moves on, exactly as it would with agents on real nodes.

A node with an unhealthy card is left silent: its demo "hardware" is broken until a repair swaps the card, and a
made-up healthy report would hide the failure the repair is about.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Prefetch
from django.utils import timezone

from cmdb.models import Accelerator, AcceleratorLifecycle, Node, NodeStatus

from ..models import AgentToken
from .ingest import report_ingest
from .synthetic import nodes_for_reports, report_for
from .tokens import agent_token_issue

logger = logging.getLogger(__name__)

# Powered-on nodes under a workflow: provisioning (after the OS install), burn-in, drained for a rollout or repair.
DEMO_REPORTING = (NodeStatus.PROVISIONING, NodeStatus.BURN_IN, NodeStatus.DRAINING, NodeStatus.MAINTENANCE)


@dataclass
class DemoRound:
    nodes: int = 0
    applied: int = 0
    unchanged: int = 0
    refused: int = 0


def demo_nodes(limit: int) -> list[Node]:
    sick = Accelerator.objects.filter(
        node=OuterRef("pk"), lifecycle=AcceleratorLifecycle.INSTALLED, is_missing=False
    ).exclude(health="ok")
    qs = Node.objects.filter(status__in=DEMO_REPORTING, rack__isnull=False).exclude(Exists(sick)).order_by("pk")
    active = Prefetch("agent_tokens", AgentToken.objects.filter(revoked_at__isnull=True), to_attr="active_tokens")
    return list(nodes_for_reports(qs[:limit]).select_related("agent_state").prefetch_related(active))


def _token(node: Node) -> AgentToken:
    tokens = getattr(node, "active_tokens", [])
    token = tokens[0] if tokens else agent_token_issue(node=node, description="demo agent", revoke_others=False).row
    token.node = node
    return token


def demo_agents_report(*, limit: int = 200) -> DemoRound:
    """One round: a report for each demo node a workflow may be waiting on (at most `limit`)."""
    result = DemoRound()
    for node in demo_nodes(limit):
        body = json.dumps(report_for(node, collected_at=timezone.now())).encode()
        outcome = report_ingest(token=_token(node), body=body)
        result.nodes += 1
        status = outcome.body.get("status")
        if status == "applied":
            result.applied += 1
        elif status == "unchanged":
            result.unchanged += 1
        else:
            result.refused += 1
            logger.warning("demo report for %s refused: %s", node.hostname, outcome.body)
    return result
