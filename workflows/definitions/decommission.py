"""Decommission a node: a change, so it needs a plan, a rollback plan and N approvals before anything moves.

    draft --submit (plans required: the engine's rule for change tickets)--> awaiting_approval
    awaiting_approval --N approvals (requester excluded)--> draining [drain] --drained--> removing_from_cluster
    awaiting_approval --one rejection--> rejected --revise--> draft
    removing_from_cluster [remove_from_cluster] --removed--> awaiting_wipe
    awaiting_wipe --confirm_wipe--> awaiting_unrack
    awaiting_unrack --confirm_unrack (cards: to stock or scrap)--> finalizing [finalize] --finalized--> closed
    draft..awaiting_unrack --cancel--> cancelled

`finalize` clears the node's rack position, returns its cards to the site warehouse or scraps them (the
operator's choice at unrack) and sets the node `decommissioned`. Approvers see the plans and the planned
changes (`plan_preview`), and their approval keeps a snapshot of exactly that.

Ticket data: node_id, node_hostname (create); node_status_before, drain_reason (drain); wipe_method,
wipe_evidence; card_disposition; cancel_reason.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from django.db import models

from cmdb.models import Accelerator, AcceleratorLifecycle, MovementKind, Node, NodeStatus
from cmdb.services.nodes import node_cluster_clear, node_unrack, nodes_set_status
from cmdb.services.stock import accelerator_out_of_stock, accelerator_to_stock
from integrations.schedulers import scheduler_for

from ..conf import workflows_setting
from ..declarations import ApprovalRule, Field, PlannedChange, Transition, Workflow, step
from ..models import Ticket
from ..services.cmdb_writes import warehouse_for
from ..steps import Done, Failed, StepContext, StepOutcome
from .common import drain_reason, holdings_release, node_drain, reservation_ref, scheduler_node


class DecommissionState(models.TextChoices):
    DRAFT = "draft", "Draft"
    AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
    REJECTED = "rejected", "Rejected"
    DRAINING = "draining", "Draining node"
    REMOVING_FROM_CLUSTER = "removing_from_cluster", "Removing from cluster"
    AWAITING_WIPE = "awaiting_wipe", "Awaiting data wipe"
    AWAITING_UNRACK = "awaiting_unrack", "Awaiting unrack"
    FINALIZING = "finalizing", "Finalizing"
    CLOSED = "closed", "Closed"
    CANCELLED = "cancelled", "Cancelled"


class CardDisposition(models.TextChoices):
    STOCK = "stock", "Return to stock"
    SCRAP = "scrap", "Scrap"


class WipeMethod(models.TextChoices):
    PURGE = "nist_purge", "NIST 800-88 purge"
    CRYPTO_ERASE = "crypto_erase", "Cryptographic erase"
    DESTROY = "destroy", "Drives physically destroyed"


S = DecommissionState


# --- create and guards --------------------------------------------------------------------------------------------


def _on_create(ticket: Ticket, values: Mapping[str, Any]) -> None:
    node: Node = values["node"]
    ticket.data.update({"node_id": node.pk, "node_hostname": node.hostname})


def _dedup(values: Mapping[str, Any]) -> str:
    node = values.get("node")
    return f"decommission:node:{node.pk}" if isinstance(node, Node) else ""


def node_not_decommissioned(ticket: Ticket, values: Mapping[str, Any]) -> list[str]:
    node = Node.objects.filter(pk=ticket.data.get("node_id")).first()
    if node is None:
        return ["The node no longer exists."]
    if node.status == NodeStatus.DECOMMISSIONED:
        return [f"{node} is decommissioned already."]
    return []


def plan_preview(ticket: Ticket) -> list[PlannedChange]:
    """What the CMDB will look like afterwards, object by object (what approvers approve)."""
    node = Node.objects.select_related("cluster", "rack").filter(pk=ticket.data.get("node_id")).first()
    if node is None:
        return []
    url = f"/admin/cmdb/node/{node.pk}/change/"
    changes = [
        PlannedChange(str(node), "status", node.status, NodeStatus.DECOMMISSIONED, url),
        PlannedChange(
            str(node),
            "schedulable",
            "yes" if not node.is_cordoned else "no (cordoned)",
            "drained, then removed from its scheduler",
            url,
        ),
        PlannedChange(str(node), "cluster", str(node.cluster or "-"), "-", url),
        PlannedChange(str(node), "rack / position", f"{node.rack} U{node.position}" if node.rack_id else "-", "-", url),
    ]
    cards = list(Accelerator.objects.filter(node=node).select_related("model").order_by("slot_index"))
    if cards:
        models_ = sorted({str(c.model) for c in cards})
        changes.append(
            PlannedChange(
                f"{len(cards)} accelerator(s) ({', '.join(models_)})",
                "lifecycle",
                AcceleratorLifecycle.INSTALLED,
                "in stock at the site warehouse, or scrapped (chosen at unrack)",
            )
        )
    return changes


# --- steps --------------------------------------------------------------------------------------------------------


@step("drain", label="Drain the node", time_limit_s=300)
def drain(ctx: StepContext) -> StepOutcome:
    """Drain the node in its scheduler; mark it draining and cordoned; maintenance once drained."""
    node = ctx.subject_node()
    assert node is not None, "a decommission ticket always has a subject node"
    before, waiting = node_drain(ctx, node)
    if waiting is not None:
        return waiting
    return Done(
        transition="drained",
        message=f"{node} drained",
        data={"node_status_before": before["status_before"], "drain_reason": before["drain_reason"]},
    )


@step("remove_from_cluster", label="Remove from the cluster", time_limit_s=300)
def remove_from_cluster(ctx: StepContext) -> StepOutcome:
    """Remove the node from its scheduler (Slurm: DOWN with the reason; k8s: delete the node object) and clear
    its cluster in the CMDB."""
    node = ctx.subject_node()
    assert node is not None
    target = scheduler_node(node)
    if node.cluster_id:
        ctx.external(
            "scheduler_remove",
            lambda: scheduler_for(target.cluster_kind).remove(target, reason=drain_reason(ctx.ticket)),
        )
    ctx.effect("cmdb_cluster_clear", lambda: node_cluster_clear(node=node) and {"cluster": target.cluster})
    return Done(transition="removed", message=f"{node} removed from {target.cluster or 'no cluster'}")


@step("finalize", label="Unrack, dispose of cards, decommission", time_limit_s=300)
def finalize(ctx: StepContext) -> StepOutcome:
    """Per card (each its own checkpoint): to the site warehouse (ledger return) or scrap (ledger scrap); then
    clear rack and position; then set the node decommissioned."""
    node = ctx.subject_node()
    assert node is not None
    disposition = ctx.ticket.data.get("card_disposition", CardDisposition.STOCK)
    ref = reservation_ref(ctx.ticket)
    warehouse = warehouse_for(node.site)
    if disposition == CardDisposition.STOCK and warehouse is None:
        return Failed(reason=f"no warehouse at {node.site}; create one in the admin, then retry the step")
    prefix = ctx.run.effect_prefix
    cards = list(Accelerator.objects.filter(node=node).order_by("slot_index"))
    for card in cards:
        if disposition == CardDisposition.STOCK:
            ctx.effect(
                f"card_{card.pk}",
                lambda card=card: (
                    accelerator_to_stock(
                        accelerator=card,
                        location=warehouse,
                        kind=MovementKind.RETURN,
                        ticket_ref=ref,
                        key=f"{prefix}:card:{card.pk}",
                        reason=f"{ctx.ticket.reference}: {node} decommissioned",
                    ).lifecycle
                ),
            )
        else:
            ctx.effect(
                f"card_{card.pk}",
                lambda card=card: (
                    accelerator_out_of_stock(
                        accelerator=card,
                        kind=MovementKind.SCRAP,
                        ticket_ref=ref,
                        key=f"{prefix}:card:{card.pk}",
                        reason=f"{ctx.ticket.reference}: {node} decommissioned",
                    ).lifecycle
                ),
            )
    ctx.effect("unrack", lambda: node_unrack(node=node) and None)
    ctx.effect(
        "status",
        lambda: nodes_set_status(node_ids=[node.pk], status=NodeStatus.DECOMMISSIONED, reason=drain_reason(ctx.ticket)),
    )
    verb = "returned to stock" if disposition == CardDisposition.STOCK else "scrapped"
    return Done(transition="finalized", message=f"{node} decommissioned; {len(cards)} card(s) {verb}")


@step("release", label="Release what the ticket holds", time_limit_s=120)
def release(ctx: StepContext) -> StepOutcome:
    """On cancel: nothing is rolled back automatically (the rollback plan is for people); holdings released."""
    return Done(message=holdings_release(ctx))


# --- the graph ----------------------------------------------------------------------------------------------------

NOTE = Field("note", "Note", kind="textarea", required=False, store=False)
CANCELLABLE = frozenset(
    {S.DRAFT, S.AWAITING_APPROVAL, S.REJECTED, S.DRAINING, S.REMOVING_FROM_CLUSTER, S.AWAITING_WIPE, S.AWAITING_UNRACK}
)

TRANSITIONS = (
    Transition(
        "submit",
        "Submit for approval",
        frozenset({S.DRAFT}),
        S.AWAITING_APPROVAL,
        "decommission_submit",
        guards=(node_not_decommissioned,),
        allow_requester=True,
        fields=(NOTE,),
        description="The engine refuses it until the change plan and the rollback plan are written.",
    ),
    Transition("approve", "Approved", frozenset({S.AWAITING_APPROVAL}), S.DRAINING, None, step="drain"),
    Transition("reject", "Rejected", frozenset({S.AWAITING_APPROVAL}), S.REJECTED, None),
    Transition(
        "revise",
        "Revise",
        frozenset({S.REJECTED}),
        S.DRAFT,
        "decommission_submit",
        allow_requester=True,
        style="secondary",
        fields=(NOTE,),
    ),
    Transition(
        "drained", "Node drained", frozenset({S.DRAINING}), S.REMOVING_FROM_CLUSTER, None, step="remove_from_cluster"
    ),
    Transition("removed", "Removed from cluster", frozenset({S.REMOVING_FROM_CLUSTER}), S.AWAITING_WIPE, None),
    Transition(
        "confirm_wipe",
        "Confirm data wipe",
        frozenset({S.AWAITING_WIPE}),
        S.AWAITING_UNRACK,
        "decommission_wipe",
        fields=(
            Field("wipe_method", "Wipe method", kind="choice", choices=tuple(WipeMethod.choices)),
            Field("wipe_evidence", "Evidence (certificate id, log reference)"),
            NOTE,
        ),
    ),
    Transition(
        "confirm_unrack",
        "Confirm unracked",
        frozenset({S.AWAITING_UNRACK}),
        S.FINALIZING,
        "decommission_unrack",
        step="finalize",
        fields=(
            Field("card_disposition", "Accelerator cards", kind="choice", choices=tuple(CardDisposition.choices)),
            NOTE,
        ),
    ),
    Transition("finalized", "Decommissioned", frozenset({S.FINALIZING}), S.CLOSED, None),
    Transition(
        "cancel",
        "Cancel",
        CANCELLABLE,
        S.CANCELLED,
        "decommission_cancel",
        step="release",
        allow_requester=True,
        allowed_when_paused=True,
        style="danger",
        fields=(Field("cancel_reason", "Why cancel", kind="textarea"),),
    ),
)

WORKFLOW = Workflow(
    type="decommission",
    label="Decommission",
    prefix="DEC",
    states=DecommissionState,
    initial=S.DRAFT,
    terminal=frozenset({S.CLOSED, S.CANCELLED}),
    transitions=TRANSITIONS,
    drain_timeout=dt.timedelta(hours=24),
    steps=(drain, remove_from_cluster, finalize, release),
    approval=ApprovalRule(
        state=S.AWAITING_APPROVAL,
        required=lambda: int(workflows_setting("DECOMMISSION_APPROVALS_REQUIRED")),
        permission="decommission_approve",
        approve_transition="approve",
        reject_transition="reject",
    ),
    is_change=True,
    window_transitions=frozenset({"approve"}),
    create_fields=(Field("node", "Node (hostname)", kind="node"),),
    waiting_states=frozenset({S.AWAITING_WIPE, S.AWAITING_UNRACK, S.REJECTED}),
    editable_states=frozenset({S.DRAFT, S.REJECTED}),
    default_group=lambda: workflows_setting("DECOMMISSION_ASSIGNEE_GROUP"),
    dedup=_dedup,
    on_create=_on_create,
    plan_preview=plan_preview,
    sla={
        "critical": dt.timedelta(days=2),
        "high": dt.timedelta(days=7),
        "normal": dt.timedelta(days=14),
        "low": dt.timedelta(days=30),
    },
    description=__doc__ or "",
)
