"""Driver rollout: a change ticket that installs a driver package on many nodes in waves with health gates.

Opening the ticket checks the inputs and saves the rollout (workflows.rollouts.services.rollout_create); the
`prepare` step then plans it and writes the plan in one transaction: the canary and the waves, one node run per
node, the nodes refused with their reasons, the per-cluster and per-rack limits, the locks on the plan's nodes.
That write grows with the fleet, so it runs on a worker, not in the request that opens the ticket; until it is
done the ticket is `preparing` and cannot be submitted. The approver sees the plan (and the planned version
change of every node) before anything moves.

    preparing [prepare: plan and write it] --prepared--> draft
    draft --submit--> awaiting_approval --N approvals--> running [run: start, then watch]
    draft|rejected --replan--> preparing [replan: plan again from current data] --prepared--> draft
    awaiting_approval --one rejection--> rejected --revise--> draft
    running --pause--> paused [pause];  running|rolling_back --auto_paused (budget / floor)--> paused
    paused --resume--> running [run: resume, then watch]
    running --completed--> completed --close--> closed
    running|paused --abort--> aborting [abort, then watch] --aborted--> aborted --close--> closed
    paused|completed|aborted --rollback_all--> rolling_back [roll back all, then watch] --rolled_back--> rolled_back
    running --rolling_back_resumed--> rolling_back (a paused roll-back-all was resumed)
    preparing|draft|awaiting_approval|rejected --cancel--> cancelled [cancel: the plan's locks are released]

The nodes' work runs in the rollouts app (its own Celery tasks per node step); this module is the thin glue:
each step calls one rollouts service through `ctx.effect`, then *watches* the rollout, waking on the event the
rollouts app signals at every status change (and polling every minute), and takes the system transition that
mirrors the rollout's new status. Live progress: templates/rollouts/_ticket_panel.html on the ticket page.

Ticket data: rollout_id (on create).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from django.db import models

from ..declarations import ApprovalRule, Field, PlannedChange, Transition, Workflow, step
from ..engine import GuardError
from ..models import Ticket
from ..steps import Done, StepContext, StepOutcome, WaitForEvent


class RolloutState(models.TextChoices):
    PREPARING = "preparing", "Preparing the plan"
    DRAFT = "draft", "Draft (plan ready)"
    AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
    REJECTED = "rejected", "Rejected"
    RUNNING = "running", "Rolling out"
    PAUSED = "paused", "Paused"
    ABORTING = "aborting", "Aborting"
    ABORTED = "aborted", "Aborted"
    COMPLETED = "completed", "Completed"
    ROLLING_BACK = "rolling_back", "Rolling back all"
    ROLLED_BACK = "rolled_back", "Rolled back"
    CLOSED = "closed", "Closed"
    CANCELLED = "cancelled", "Cancelled"


S = RolloutState
TERMINAL = frozenset({S.ROLLED_BACK, S.CLOSED, S.CANCELLED})
WATCH_POLL = dt.timedelta(seconds=60)

# The rollout's status -> the ticket state that mirrors it, and the system transition that gets there.
MIRROR = {
    "paused": (S.PAUSED, "auto_paused"),
    "completed": (S.COMPLETED, "completed"),
    "aborted": (S.ABORTED, "aborted"),
    "rolled_back": (S.ROLLED_BACK, "rolled_back"),
    "rolling_back": (S.ROLLING_BACK, "rolling_back_resumed"),
    "running": (S.RUNNING, ""),
    "aborting": (S.ABORTING, ""),
}


def _rollout(ticket: Ticket) -> Any:
    from workflows.rollouts.models import Rollout

    return Rollout.objects.select_related("package", "ticket").get(ticket=ticket)


# --- create -------------------------------------------------------------------------------------------------------


def _on_create(ticket: Ticket, values: Mapping[str, Any]) -> None:
    """Check the inputs, save the rollout (status preparing) and queue the `prepare` step that writes its plan.

    Runs in the request that opens the ticket, so it costs a fixed number of queries whatever the selection:
    nothing here is proportional to the node count (the plan, node runs and node locks are the step's).
    """
    from workflows.rollouts.api import package_lookup
    from workflows.rollouts.options import RolloutOptions
    from workflows.rollouts.selectors import NodeSelector
    from workflows.rollouts.services import RolloutError, rollout_create

    from ..engine import run_start

    try:
        package = package_lookup(values.get("package") or "")
    except ValueError as exc:
        raise GuardError(str(exc), field_errors={"package": str(exc)}) from exc
    selector = NodeSelector.from_dict(values)
    try:
        options = RolloutOptions.from_dict(values)
        rollout = rollout_create(
            package=package, selector=selector, options=options, actor=ticket.requester, ticket=ticket
        )
    except (ValueError, RolloutError) as exc:
        raise GuardError(str(exc)) from exc
    ticket.data["rollout_id"] = rollout.pk
    rollback_plan = ticket.rollback_plan or (
        "A node that fails is rolled back to its previous version at once, left drained and flagged. Failures "
        "over a wave's budget pause the rollout. 'Roll back all' reverts every completed node, newest first, "
        f"with `{package.rollback_command}`."
    )
    scope: dict[str, Any] = {}
    if len(selector.clusters) == 1:
        from cmdb.models import Cluster

        cluster = Cluster.objects.filter(name=selector.clusters[0]).first()
        if cluster is not None:
            scope = {"cluster_id": cluster.pk, "site_id": cluster.site_id}
    # The engine saves only `data` after on_create; the rollback plan and the scope are written here, the change
    # plan (it quotes the plan's numbers) by the prepare step.
    Ticket.objects.filter(pk=ticket.pk).update(rollback_plan=rollback_plan, **scope)
    ticket.rollback_plan = rollback_plan
    for name, value in scope.items():
        setattr(ticket, name, value)
    run_start(ticket=ticket, wf=WORKFLOW, step_name="prepare", actor=ticket.requester, log=None)


def _change_plan_fill(ticket: Ticket, rollout: Any) -> None:
    """Write the change plan the approver reads from the written plan, unless the requester wrote their own."""
    from workflows.rollouts.options import RolloutOptions
    from workflows.rollouts.selectors import NodeSelector

    plan, package = rollout.plan, rollout.package
    text = (
        f"Install {package} on {plan['node_count']} node(s) selected by "
        f"{NodeSelector.from_dict(rollout.selector).describe()}, in {len(plan['wave_sizes'])} waves "
        f"({RolloutOptions.from_dict(rollout.options).describe()}). Per node: drain, install, "
        f"{'reboot, ' if package.requires_reboot else ''}verify from a fresh agent report (target version, the "
        f"same cards, all healthy), resume. {len(plan['refused'])} node(s) refused at planning, "
        f"{len(plan['skipped'])} already current."
    )
    Ticket.objects.filter(pk=ticket.pk, change_plan="").update(change_plan=text)


PREVIEW_LIMIT = 500


def _plan_preview(ticket: Ticket) -> list[PlannedChange]:
    """One line per node (the first PREVIEW_LIMIT in wave order), then a summary line."""
    from workflows.rollouts.models import NodeRun, NodeRunAction

    runs = (
        NodeRun.objects.filter(rollout__ticket=ticket, action=NodeRunAction.UPGRADE)
        .select_related("wave", "rollout")
        .order_by("wave__index", "position")
    )
    total = runs.count()
    lines = [
        PlannedChange(
            obj=f"{r.hostname} ({r.wave.get_kind_display().lower()} {r.wave.index})",
            field=r.rollout.component,
            before=r.previous_version,
            after=r.target_version,
            url=f"/admin/cmdb/node/{r.node_id}/change/" if r.node_id else "",
        )
        for r in runs[:PREVIEW_LIMIT]
    ]
    if total > PREVIEW_LIMIT:
        lines.append(PlannedChange(obj=f"… and {total - PREVIEW_LIMIT} more nodes", field="", before="", after=""))
    return lines


# --- guards -------------------------------------------------------------------------------------------------------


def plan_changes_nodes(ticket: Ticket, values: Mapping[str, Any]) -> list[str]:
    rollout = _rollout(ticket)
    if rollout.status == "preparing":
        return ["The plan is still being prepared; submit it once it is written."]
    if rollout.status != "planned":
        return [f"The rollout is {rollout.get_status_display().lower()}, not a plan."]
    if not rollout.plan.get("node_count"):
        return ["The plan changes no node (see the refused nodes and their reasons); replan or cancel."]
    return []


def nothing_in_flight(ticket: Ticket, values: Mapping[str, Any]) -> list[str]:
    from workflows.rollouts.models import IN_FLIGHT_NODE_STATES

    n = _rollout(ticket).node_runs.filter(state__in=IN_FLIGHT_NODE_STATES).count()
    return [f"{n} node(s) are still in flight; wait until they finish."] if n else []


# --- steps --------------------------------------------------------------------------------------------------------


def _watch(ctx: StepContext) -> StepOutcome:
    """Mirror the rollout's status on the ticket: wait while it moves, take the matching system transition when it
    pauses, completes, aborts or finishes rolling back."""
    from workflows.rollouts.progress import rollout_summary
    from workflows.rollouts.services import watch_event_key

    rollout = _rollout(ctx.ticket)
    target, transition = MIRROR.get(rollout.status, (None, ""))
    # "21 of 21 dry-run (nothing installed)" rather than "succeeded" when the executor only logged its commands.
    summary = rollout_summary(rollout)
    if target is not None and target != ctx.ticket.state and transition:
        reason = f": {rollout.paused_reason}" if rollout.paused_reason else ""
        return Done(
            transition=transition, message=f"rollout {rollout.get_status_display().lower()}{reason} ({summary})"
        )
    if rollout.status in ("running", "aborting", "rolling_back"):
        done = rollout.node_runs.filter(state__in=["succeeded", "failed", "cancelled"]).count()
        total = rollout.node_runs.count()
        return WaitForEvent(
            key=watch_event_key(rollout.pk),
            recheck_in=WATCH_POLL,
            message=f"{rollout.get_status_display()}: {done} of {total} node runs done ({summary})",
        )
    return Done(message=f"rollout {rollout.get_status_display().lower()} ({summary})")


def _service(ctx: StepContext, name: str, fn_name: str, **kwargs: Any) -> None:
    """Call a rollouts service once per step run; a refusal because the rollout moved on already is logged."""
    from workflows.rollouts import services

    def call() -> dict[str, Any]:
        rollout = _rollout(ctx.ticket)
        try:
            getattr(services, fn_name)(rollout=rollout, **kwargs)
        except services.RolloutError as exc:
            ctx.log(f"{fn_name}: {exc}", level="warning")
            return {"skipped": str(exc)}
        return {"done": fn_name}

    ctx.effect(name, call)


def _plan_summary(rollout: Any) -> str:
    plan = rollout.plan
    return (
        f"{plan.get('node_count', 0)} node(s) planned in {len(plan.get('wave_sizes', []))} wave(s), "
        f"{len(plan.get('refused', []))} refused, {len(plan.get('skipped', []))} already current"
    )


@step("prepare", label="Prepare the plan", time_limit_s=600)
def prepare(ctx: StepContext) -> StepOutcome:
    """Plan the rollout from current data and write the plan (waves, a run and a lock per node) and the change
    plan, all in one transaction; a retry never writes twice. Then the ticket is a draft the requester submits."""
    from workflows.rollouts.services import rollout_prepare

    def call() -> dict[str, Any]:
        rollout = rollout_prepare(rollout=_rollout(ctx.ticket))
        if rollout.status == "planned":  # not when cancelled meanwhile
            _change_plan_fill(ctx.ticket, rollout)
        return {"status": rollout.status}

    ctx.effect("prepare", call)
    return Done(transition="prepared", message=_plan_summary(_rollout(ctx.ticket)))


@step("run", label="Run the rollout", time_limit_s=120)
def run(ctx: StepContext) -> StepOutcome:
    """Start the approved plan (or resume the paused rollout), then watch it."""
    if not ctx.has_effect("start"):
        status = _rollout(ctx.ticket).status
        _service(ctx, "start", "rollout_start" if status == "planned" else "rollout_resume")
    return _watch(ctx)


@step("watch", label="Watch the rollout", time_limit_s=60)
def watch(ctx: StepContext) -> StepOutcome:
    """Follow the rollout until it stops moving."""
    return _watch(ctx)


@step("pause", label="Pause the rollout", time_limit_s=60)
def pause(ctx: StepContext) -> StepOutcome:
    """Stop starting nodes; nodes in flight finish."""
    _service(ctx, "pause", "rollout_pause", reason=f"paused on {ctx.ticket.reference} by an operator")
    return Done(message="no new node starts; nodes in flight finish")


@step("abort", label="Abort the rollout", time_limit_s=60)
def abort(ctx: StepContext) -> StepOutcome:
    """Cancel the nodes not started; wait for those in flight; release the locks."""
    _service(ctx, "abort", "rollout_abort", reason=f"aborted on {ctx.ticket.reference}")
    return _watch(ctx)


@step("rollback_all", label="Roll back all", time_limit_s=120)
def rollback_all(ctx: StepContext) -> StepOutcome:
    """Revert every completed node to its previous version, newest first, under the same limits."""
    _service(ctx, "rollback_all", "rollout_rollback_all")
    return _watch(ctx)


@step("replan", label="Plan again", time_limit_s=300)
def replan(ctx: StepContext) -> StepOutcome:
    """Rebuild the plan from current data (nodes, locks, capacity); the new plan is what approvers will see."""
    _service(ctx, "replan", "rollout_replan")
    return Done(transition="prepared", message=_plan_summary(_rollout(ctx.ticket)))


@step("cancel", label="Release the plan", time_limit_s=60)
def cancel(ctx: StepContext) -> StepOutcome:
    """Withdraw the plan and release the node locks."""
    _service(ctx, "cancel", "rollout_cancel")
    return Done(message="plan withdrawn, node locks released")


# --- the graph ----------------------------------------------------------------------------------------------------

NOTE = Field("note", "Note", kind="textarea", required=False, store=False)
ANY_PLAN = frozenset({S.PREPARING, S.DRAFT, S.AWAITING_APPROVAL, S.REJECTED})

TRANSITIONS = (
    Transition("prepared", "Plan ready", frozenset({S.PREPARING}), S.DRAFT, None),
    Transition(
        "submit",
        "Submit for approval",
        frozenset({S.DRAFT}),
        S.AWAITING_APPROVAL,
        "rollout_submit",
        guards=(plan_changes_nodes,),
        allow_requester=True,
        fields=(NOTE,),
    ),
    Transition(
        "replan",
        "Plan again",
        frozenset({S.DRAFT, S.REJECTED}),
        S.PREPARING,
        "rollout_submit",
        step="replan",
        allow_requester=True,
        style="secondary",
    ),
    Transition("approve", "Approved", frozenset({S.AWAITING_APPROVAL}), S.RUNNING, None, step="run"),
    Transition("reject", "Rejected", frozenset({S.AWAITING_APPROVAL}), S.REJECTED, None),
    Transition(
        "revise", "Revise", frozenset({S.REJECTED}), S.DRAFT, "rollout_submit", allow_requester=True, style="secondary"
    ),
    Transition(
        "pause",
        "Pause",
        frozenset({S.RUNNING}),
        S.PAUSED,
        "rollout_operate",
        step="pause",
        style="secondary",
        fields=(NOTE,),
    ),
    Transition("auto_paused", "Paused automatically", frozenset({S.RUNNING, S.ROLLING_BACK}), S.PAUSED, None),
    Transition(
        "resume",
        "Resume",
        frozenset({S.PAUSED}),
        S.RUNNING,
        "rollout_operate",
        step="run",
        fields=(NOTE,),
        description="Continue the rollout. Failures seen so far count as looked at: only new failures "
        "over a wave's budget pause it again.",
    ),
    # From aborting too: an abort that lost the race against the last node finishing finds the rollout complete.
    Transition("completed", "Completed", frozenset({S.RUNNING, S.ABORTING}), S.COMPLETED, None),
    Transition(
        "abort",
        "Abort",
        frozenset({S.RUNNING, S.PAUSED}),
        S.ABORTING,
        "rollout_abort",
        step="abort",
        style="danger",
        fields=(Field("note", "Why abort", kind="textarea", store=False),),
    ),
    Transition("aborted", "Aborted", frozenset({S.ABORTING}), S.ABORTED, None),
    Transition(
        "rollback_all",
        "Roll back all",
        frozenset({S.PAUSED, S.COMPLETED, S.ABORTED}),
        S.ROLLING_BACK,
        "rollout_rollback",
        step="rollback_all",
        guards=(nothing_in_flight,),
        style="danger",
        fields=(Field("note", "Why roll back", kind="textarea", store=False),),
        description="Revert every node this rollout completed, newest first, in waves under the same capacity limits.",
    ),
    Transition(
        "rolling_back_resumed", "Rolling back again", frozenset({S.RUNNING}), S.ROLLING_BACK, None, step="watch"
    ),
    Transition("rolled_back", "Rolled back", frozenset({S.ROLLING_BACK}), S.ROLLED_BACK, None),
    Transition(
        "close",
        "Close",
        frozenset({S.COMPLETED, S.ABORTED}),
        S.CLOSED,
        "rollout_submit",
        allow_requester=True,
        style="secondary",
        fields=(NOTE,),
    ),
    Transition(
        "cancel",
        "Cancel",
        ANY_PLAN,
        S.CANCELLED,
        "rollout_submit",
        step="cancel",
        allow_requester=True,
        allowed_when_paused=True,
        style="danger",
        fields=(Field("cancel_reason", "Why cancel", kind="textarea"),),
    ),
)


def _approvals_required() -> int:
    from workflows.rollouts.conf import rollouts_setting

    return int(rollouts_setting("APPROVALS_REQUIRED"))


def _group() -> str:
    from workflows.conf import workflows_setting

    return workflows_setting("OPS_LEADS_GROUP")


CREATE_FIELDS = (
    Field("package", "Driver package", help_text="Component and version, e.g. 'nvidia-driver 570.133.20'."),
    Field("clusters", "Clusters", required=False, help_text="Names, comma separated."),
    Field("sites", "Sites", required=False, help_text="Site codes, comma separated."),
    Field("accelerator_models", "Accelerator models", required=False, help_text="e.g. H100-SXM5-80GB."),
    Field("tags", "Node tags", required=False, help_text="Nodes with any of these tags."),
    Field("hostnames", "Explicit nodes", kind="textarea", required=False, help_text="Hostnames, one per line."),
    Field("canary_size", "Canary nodes", kind="int", required=False, help_text="Default 1."),
    Field("wave_size", "Wave size (nodes)", kind="int", required=False, help_text="Or a percentage below."),
    Field("wave_percent", "Wave size (% of nodes)", kind="int", required=False, help_text="Default 10."),
    Field(
        "max_per_cluster",
        "Max drained at once per cluster",
        kind="int",
        required=False,
        help_text="Never more than the cluster's capacity floor allows; empty or 0: the floor alone. A failed "
        "node left drained counts until it is back in service.",
    ),
    Field(
        "max_per_rack",
        "Max drained at once per rack",
        kind="int",
        required=False,
        help_text="Default 1; 0: no limit per rack. A failed node left drained counts until it is back in service.",
    ),
    Field(
        "failure_budget",
        "Failures per wave before pausing",
        kind="int",
        required=False,
        help_text="Default 1; the canary tolerates none.",
    ),
    Field("pause_after_canary", "Pause after the canary", kind="bool", required=False),
)


def _change_scope(ticket: Ticket) -> tuple[set[int], set[int]]:
    """The sites and clusters of the rollout's planned nodes (one aggregate query)."""
    from workflows.rollouts.models import NodeRun

    rows = (
        NodeRun.objects.filter(rollout_id=ticket.data.get("rollout_id"), node__isnull=False)
        .values_list("node__site_id", "node__cluster_id")
        .distinct()
    )
    sites, clusters = set(), set()
    for site_id, cluster_id in rows:
        sites.add(site_id)
        if cluster_id:
            clusters.add(cluster_id)
    return sites, clusters


WORKFLOW = Workflow(
    type="driver_rollout",
    label="Driver rollout",
    prefix="ROL",
    states=RolloutState,
    initial=S.PREPARING,
    terminal=TERMINAL,
    transitions=TRANSITIONS,
    steps=(prepare, run, watch, pause, abort, rollback_all, replan, cancel),
    approval=ApprovalRule(
        state=S.AWAITING_APPROVAL,
        required=_approvals_required,
        permission="rollout_approve",
        approve_transition="approve",
        reject_transition="reject",
    ),
    is_change=True,
    window_transitions=frozenset({"approve", "resume"}),
    change_scope=_change_scope,
    create_fields=CREATE_FIELDS,
    waiting_states=frozenset({S.PAUSED, S.AWAITING_APPROVAL}),
    editable_states=frozenset({S.DRAFT, S.REJECTED}),
    default_group=_group,
    on_create=_on_create,
    plan_preview=_plan_preview,
    description=__doc__ or "",
)
