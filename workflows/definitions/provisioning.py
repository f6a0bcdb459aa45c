"""Provisioning: bring a `received` node to `active`.

    new --start--> positioning [assign_position: free U + rack power budget] --position_assigned-->
    planning_links [plan_links: HCA i -> rail leaf i of the scalable unit, next free port] --links_planned-->
    awaiting_cabling --confirm_cabling (technician)--> configuring_ports [configure_ports: switch adapter]
    --ports_configured--> installing_os [install_os: PXE hand-off, callback or poll] --os_installed-->
    installing_driver [install_driver: baseline via the executor] --driver_installed-->
    burn_in [burn_in: all expected cards healthy, topology as the model expects, over the window] --burned_in-->
    joining [join_cluster: cluster, scheduler, status active] --joined--> done
    any working state --rollback--> rolled_back [rollback: ports restored, OS job cancelled, planned links removed,
                                                 rack position released, node back to received]
    new --cancel--> cancelled

A step that fails stops the ticket where it is, with the reason and the step's log on the ticket and on the
provisioning panel; the operator retries the step (the engine's retry: effects already done are not repeated)
or rolls back what was done so far. The work itself is in workflows.rollouts.provisioning.services; the steps
here only call it once each (ctx.effect / ctx.external) and map its result to an outcome.

Ticket data: provisioning_id, node_id (on create).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from django.db import models

from ..declarations import Field, Transition, Workflow, step
from ..engine import GuardError, link_add
from ..models import LinkRole, Ticket
from ..steps import Done, Failed, StepContext, StepOutcome, WaitForEvent, node_reported_key


class ProvisioningState(models.TextChoices):
    NEW = "new", "New"
    POSITIONING = "positioning", "Assigning rack position"
    PLANNING_LINKS = "planning_links", "Planning links"
    AWAITING_CABLING = "awaiting_cabling", "Awaiting cabling"
    CONFIGURING_PORTS = "configuring_ports", "Configuring switch ports"
    INSTALLING_OS = "installing_os", "Installing OS"
    INSTALLING_DRIVER = "installing_driver", "Installing baseline driver"
    BURN_IN = "burn_in", "Burn-in"
    JOINING = "joining", "Joining the cluster"
    DONE = "done", "Done"
    ROLLED_BACK = "rolled_back", "Rolled back"
    CANCELLED = "cancelled", "Cancelled"


S = ProvisioningState
TERMINAL = frozenset({S.DONE, S.ROLLED_BACK, S.CANCELLED})
WORKING = frozenset(
    {
        S.POSITIONING,
        S.PLANNING_LINKS,
        S.AWAITING_CABLING,
        S.CONFIGURING_PORTS,
        S.INSTALLING_OS,
        S.INSTALLING_DRIVER,
        S.BURN_IN,
        S.JOINING,
    }
)


def _setting(name: str) -> Any:
    from workflows.rollouts.conf import rollouts_setting

    return rollouts_setting(name)


def _run(ctx: StepContext) -> Any:
    from workflows.rollouts.provisioning.services import provisioning_for_ticket

    return provisioning_for_ticket(ctx.ticket.pk)


def _guarded(ctx: StepContext, name: str, fn: Any) -> StepOutcome:
    """Run `fn(run)`; a ProvisioningError fails the step visibly (run marked failed, reason on the ticket)."""
    from workflows.rollouts.provisioning.services import ProvisioningError, provisioning_mark

    run = _run(ctx)
    provisioning_mark(run, step=name)
    try:
        return fn(run)
    except ProvisioningError as exc:
        provisioning_mark(run, step=name, status="failed", error=str(exc))
        ctx.log(str(exc), level="error")
        return Failed(reason=f"{exc}. Fix it, then retry the step, or roll back.")


# --- create -------------------------------------------------------------------------------------------------------


def _dedup(values: Mapping[str, Any]) -> str:
    node = values.get("node")
    return f"provisioning:node:{node.pk}" if node is not None else ""


def _on_create(ticket: Ticket, values: Mapping[str, Any]) -> None:
    """Open the provisioning run for the node (it must be `received`) and lock the node."""
    from cmdb.models import Cluster, Fabric, Rack
    from workflows.rollouts.provisioning.services import ProvisioningError, provisioning_create

    node = values["node"]
    rack = cluster = fabric = None
    if values.get("rack"):
        racks = list(Rack.objects.select_related("room").filter(room__site_id=node.site_id, name=values["rack"]))
        if len(racks) != 1:
            raise GuardError(
                f"{'No' if not racks else 'More than one'} rack named {values['rack']!r} at {node.site}.",
                field_errors={"rack": "Unknown or ambiguous rack."},
            )
        rack = racks[0]
    if values.get("cluster"):
        cluster = Cluster.objects.filter(name=values["cluster"]).first()
        if cluster is None:
            raise GuardError(f"No cluster named {values['cluster']!r}.", field_errors={"cluster": "Unknown."})
    if values.get("fabric"):
        fabric = Fabric.objects.filter(name=values["fabric"]).first()
        if fabric is None:
            raise GuardError(f"No fabric named {values['fabric']!r}.", field_errors={"fabric": "Unknown."})
    try:
        run = provisioning_create(
            node=node,
            ticket=ticket,
            rack=rack,
            position=values.get("position"),
            cluster=cluster,
            os_image=values.get("os_image") or "",
            fabric_id=fabric.pk if fabric else None,
            actor=ticket.requester,
        )
    except ProvisioningError as exc:
        raise GuardError(str(exc)) from exc
    ticket.data.update({"provisioning_id": run.pk, "node_id": node.pk})
    if cluster is not None:
        Ticket.objects.filter(pk=ticket.pk).update(cluster_id=cluster.pk)
    link_add(ticket=ticket, obj=node, role=LinkRole.SUBJECT)
    if rack is not None:
        link_add(ticket=ticket, obj=rack, role=LinkRole.RELATED)


# --- steps --------------------------------------------------------------------------------------------------------


@step("assign_position", label="Assign a rack position", time_limit_s=120)
def assign_position(ctx: StepContext) -> StepOutcome:
    """Pick a rack with free U and power budget (or check the one asked for) and record the position."""
    from workflows.rollouts.provisioning.services import provisioning_position

    def go(run: Any) -> StepOutcome:
        where = ctx.effect("position", lambda: provisioning_position(run))
        return Done(
            transition="position_assigned",
            message=f"{run.hostname} -> {where['rack']} U{where['position']} ({where['face']}); power "
            f"{where['power_after_kw']} of {where['power_budget_kw']} kW",
        )

    return _guarded(ctx, "assign_position", go)


@step("plan_links", label="Plan the links", time_limit_s=120)
def plan_links(ctx: StepContext) -> StepOutcome:
    """Write planned links for the node's HCAs from the fabric's rail design."""
    from workflows.rollouts.provisioning.services import provisioning_links

    def go(run: Any) -> StepOutcome:
        planned = ctx.effect("links", lambda: provisioning_links(run))
        kept = f"; {len(planned['existing'])} HCA(s) already cabled" if planned["existing"] else ""
        if planned.get("hcas_created"):
            kept += f"; {planned['hcas_created']} expected HCA(s) added from the fabric design"
        return Done(
            transition="links_planned",
            message=f"{len(planned['created'])} link(s) planned on {planned['fabric']} "
            f"(scalable unit {planned['scalable_unit']}){kept}; cable them, then confirm",
        )

    return _guarded(ctx, "plan_links", go)


@step("configure_ports", label="Configure switch ports", time_limit_s=600)
def configure_ports(ctx: StepContext) -> StepOutcome:
    """Mark the planned links connected (the technician confirmed them), then push each leaf port's config.

    Each port is recorded on the run as soon as the switch took it (services), not at the end: a port failing
    halfway leaves the ports already changed known to rollback. In dry-run mode the diffs go to the log only."""
    from workflows.rollouts.provisioning.services import (
        provisioning_cabling_confirmed,
        provisioning_node_links,
        provisioning_port_configure,
    )

    def go(run: Any) -> StepOutcome:
        ctx.effect("links_connected", lambda: provisioning_cabling_confirmed(run))
        pushed = []
        for link_id in provisioning_node_links(run):
            p = ctx.external(f"port_{link_id}", lambda link_id=link_id: provisioning_port_configure(run, link_id))
            if p.get("dry_run") and p.get("commands"):
                ctx.log(
                    f"dry run, not applied: {p['switch']} {p['interface']}: {'; '.join(p['commands'])}\n{p['unified']}"
                )
            pushed.append(p)
        applied = sum(1 for p in pushed if p.get("applied"))
        skipped = sum(1 for p in pushed if p.get("skipped"))
        would = sum(1 for p in pushed if p.get("dry_run") and p.get("commands"))
        right = len(pushed) - applied - skipped - would
        parts = [f"{applied} port(s) changed", f"{right} already right"]
        if any(p.get("dry_run") for p in pushed):
            ctx.log("dry run: nothing pushed (SWITCH_CONFIG_DRY_RUN)")
            parts.insert(0, "dry run: nothing pushed")
        if would:
            parts.append(f"{would} would change (dry run: SWITCH_CONFIG_DRY_RUN, nothing pushed; diffs in the log)")
        if skipped:
            parts.append(f"{skipped} skipped ({next(p['skipped'] for p in pushed if p.get('skipped'))})")
        return Done(transition="ports_configured", message=", ".join(parts))

    return _guarded(ctx, "configure_ports", go)


@step("install_os", label="Install the OS", time_limit_s=120)
def install_os(ctx: StepContext) -> StepOutcome:
    """Hand the node to the PXE/OS install system, then wait for its callback (or poll it)."""
    from workflows.conf import workflows_setting
    from workflows.rollouts.provisioning.services import (
        ProvisioningError,
        os_event_key,
        provisioning_os_poll,
        provisioning_os_start,
    )

    def go(run: Any) -> StepOutcome:
        callback = workflows_setting("BASE_URL").rstrip("/") + "/api/rollouts/os-install/callback/"
        ctx.external("os_start", lambda: provisioning_os_start(run, callback_url=callback))
        job = provisioning_os_poll(run)
        if job.succeeded:
            return Done(transition="os_installed", message=f"OS installed ({job.ref}): {job.message}")
        if job.is_finished:
            raise ProvisioningError(f"OS install {job.ref} {job.status}: {job.message}")
        deadline = ctx.deadline("os_install", dt.timedelta(minutes=_setting("OS_INSTALL_TIMEOUT_MINUTES")))
        if ctx.now >= deadline:
            raise ProvisioningError(
                f"OS install {job.ref} still {job.status} after {_setting('OS_INSTALL_TIMEOUT_MINUTES')} min"
            )
        return WaitForEvent(
            key=os_event_key(run.pk),
            message=f"OS install {job.ref} {job.status}: {job.message}",
            recheck_in=dt.timedelta(seconds=_setting("OS_INSTALL_POLL_SECONDS")),
        )

    return _guarded(ctx, "install_os", go)


@step("install_driver", label="Install the baseline driver", time_limit_s=1900)
def install_driver(ctx: StepContext) -> StepOutcome:
    """Install the baseline driver package(s) through the executor."""
    from workflows.rollouts.provisioning.services import baseline_packages, provisioning_driver_install

    def go(run: Any) -> StepOutcome:
        done = [
            ctx.external(f"driver_{p.component}", lambda p=p: provisioning_driver_install(run, p.pk))
            for p in baseline_packages(run)
        ]
        return Done(transition="driver_installed", message="; ".join(f"{d['package']}: {d['summary']}" for d in done))

    return _guarded(ctx, "install_driver", go)


@step("burn_in", label="Burn-in", time_limit_s=120)
def burn_in(ctx: StepContext) -> StepOutcome:
    """Wait until agent reports show every expected card healthy, the baseline driver and the server model's
    expected topology (each departing pair named) for the whole burn-in window; any bad report restarts the window;
    give up after BURN_IN_TIMEOUT_MINUTES."""
    from cmdb.models import NodeStatus
    from cmdb.services.nodes import nodes_set_status
    from workflows.rollouts.provisioning.services import ProvisioningError, burn_in_problems

    def go(run: Any) -> StepOutcome:
        def to_burn_in() -> dict[str, int]:
            return {
                "changed": nodes_set_status(
                    node_ids=[run.node_id], status=NodeStatus.BURN_IN, reason=f"{run.label}: burn-in"
                )
            }

        ctx.effect("status_burn_in", to_burn_in)
        started = dt.datetime.fromisoformat(ctx.state.setdefault("burn_in_started", ctx.now.isoformat()))
        window = dt.timedelta(minutes=_setting("BURN_IN_WINDOW_MINUTES"))
        notes: list[str] = []
        problems = burn_in_problems(
            run, since=started, check_versions=not run.options.get("driver_dry_run"), notes=notes
        )
        if problems:
            if ctx.state.pop("healthy_since", None):
                ctx.log(f"burn-in window restarted: {'; '.join(problems)}", level="warning")
        else:
            ctx.state.setdefault("healthy_since", ctx.now.isoformat())
        healthy_since = ctx.state.get("healthy_since")
        if healthy_since and ctx.now - dt.datetime.fromisoformat(healthy_since) >= window:
            return Done(transition="burned_in", message="; ".join([f"healthy in every report for {window}", *notes]))
        if ctx.now >= ctx.deadline("burn_in", dt.timedelta(minutes=_setting("BURN_IN_TIMEOUT_MINUTES"))):
            raise ProvisioningError(f"burn-in did not pass: {'; '.join(problems) or 'window not completed'}")
        what = "; ".join(problems) if problems else f"healthy since {healthy_since[11:19]} UTC"
        return WaitForEvent(
            key=node_reported_key(run.node_id),
            message=f"burn-in: {what}",
            recheck_in=dt.timedelta(seconds=_setting("BURN_IN_POLL_SECONDS")),
        )

    return _guarded(ctx, "burn_in", go)


@step("join_cluster", label="Join the cluster", time_limit_s=300)
def join_cluster(ctx: StepContext) -> StepOutcome:
    """Make the node schedulable in its cluster's scheduler, set its cluster and status active, release it."""
    from integrations.schedulers import SchedulerNode, scheduler_for
    from workflows.rollouts.provisioning.services import provisioning_join

    def go(run: Any) -> StepOutcome:
        cluster = run.cluster or (run.node.cluster if run.node else None)
        if cluster is not None:
            target = SchedulerNode(name=run.hostname, cluster=cluster.name, cluster_kind=cluster.kind)
            ctx.external("scheduler_resume", lambda: scheduler_for(cluster.kind).resume(target))
        joined = ctx.effect("join", lambda: provisioning_join(run))
        where = f"in {joined['cluster']}" if joined["cluster"] else "(no cluster)"
        return Done(transition="joined", message=f"{run.hostname} active {where}")

    return _guarded(ctx, "join_cluster", go)


@step("rollback", label="Roll back provisioning", time_limit_s=600)
def rollback(ctx: StepContext) -> StepOutcome:
    """Undo what was done: stop the OS install, restore switch ports, remove the planned links, release the rack
    position, put the node back to received, release its lock."""
    from workflows.rollouts.provisioning.services import (
        provisioning_os_cancel,
        provisioning_ports_rollback,
        provisioning_undo_cmdb,
    )

    run = _run(ctx)
    ctx.external("os_cancel", lambda: provisioning_os_cancel(run))
    # configured_ports holds every port a push changed (recorded as each was applied), so this restores exactly
    # the ports touched, also when configure_ports failed halfway. Newest first; entries are only ever appended
    # (or updated in place), so an index names the same port in every attempt.
    restored = 0
    for i, pushed in reversed(list(enumerate(run.configured_ports))):
        done = ctx.external(f"port_restore_{i}", lambda pushed=pushed: provisioning_ports_rollback(run, pushed))
        if done["restored"] is True:
            restored += 1
        elif done["restored"] is False:
            ctx.log(
                f"{done['switch']} {done['interface']} not as it was after the restore: "
                f"{'; '.join(done.get('problems', [])) or 'running config differs'}",
                level="warning",
            )
    undone = ctx.effect("undo_cmdb", lambda: provisioning_undo_cmdb(run))
    return Done(
        message=f"{restored} switch port(s) restored, {undone['links_removed']} planned link(s) removed, "
        f"rack position {'released' if undone['position_released'] else 'not ours (kept)'}; "
        "node back to received"
    )


@step("cancel_run", label="Release the node", time_limit_s=60)
def cancel_run(ctx: StepContext) -> StepOutcome:
    """Close the run and release the node lock (nothing was done yet)."""
    from workflows.rollouts.provisioning.services import provisioning_cancel

    ctx.effect("cancel", lambda: provisioning_cancel(_run(ctx)) or {"cancelled": True})
    return Done(message="node released")


# --- the graph ----------------------------------------------------------------------------------------------------

NOTE = Field("note", "Note", kind="textarea", required=False, store=False)

TRANSITIONS = (
    Transition(
        "start",
        "Start provisioning",
        frozenset({S.NEW}),
        S.POSITIONING,
        "provisioning_start",
        step="assign_position",
        allow_requester=True,
        fields=(NOTE,),
    ),
    Transition(
        "position_assigned",
        "Rack position assigned",
        frozenset({S.POSITIONING}),
        S.PLANNING_LINKS,
        None,
        step="plan_links",
    ),
    Transition("links_planned", "Links planned", frozenset({S.PLANNING_LINKS}), S.AWAITING_CABLING, None),
    Transition(
        "confirm_cabling",
        "Confirm cabling",
        frozenset({S.AWAITING_CABLING}),
        S.CONFIGURING_PORTS,
        "provisioning_cabling",
        step="configure_ports",
        fields=(NOTE,),
        description="The node is racked at the planned position and every planned cable is plugged in.",
    ),
    Transition(
        "ports_configured",
        "Switch ports configured",
        frozenset({S.CONFIGURING_PORTS}),
        S.INSTALLING_OS,
        None,
        step="install_os",
    ),
    Transition(
        "os_installed", "OS installed", frozenset({S.INSTALLING_OS}), S.INSTALLING_DRIVER, None, step="install_driver"
    ),
    Transition(
        "driver_installed", "Driver installed", frozenset({S.INSTALLING_DRIVER}), S.BURN_IN, None, step="burn_in"
    ),
    Transition("burned_in", "Burn-in passed", frozenset({S.BURN_IN}), S.JOINING, None, step="join_cluster"),
    Transition("joined", "Joined the cluster", frozenset({S.JOINING}), S.DONE, None),
    Transition(
        "rollback",
        "Roll back",
        WORKING,
        S.ROLLED_BACK,
        "provisioning_rollback",
        step="rollback",
        allowed_when_paused=True,
        style="danger",
        fields=(Field("note", "Why roll back", kind="textarea", store=False),),
        description="Undo the steps done so far: switch ports restored, OS install stopped, planned links "
        "removed, rack position released, node back to received.",
    ),
    Transition(
        "cancel",
        "Cancel",
        frozenset({S.NEW}),
        S.CANCELLED,
        "provisioning_start",
        step="cancel_run",
        allow_requester=True,
        style="danger",
        fields=(Field("cancel_reason", "Why cancel", kind="textarea"),),
    ),
)


def _group() -> str:
    from workflows.conf import workflows_setting

    return workflows_setting("REPAIR_ASSIGNEE_GROUP")


def _default_plans(ticket: Ticket) -> tuple[str, str]:
    """What the automation will do and how the `rollback` transition undoes it."""
    node = ticket.data.get("node") or "the node"
    plan = (
        f"Provision {node}: assign a rack position within the rack's power budget, plan its links to the rail "
        "leaves, cable them (technician), configure the switch ports, install the OS and the baseline driver, "
        "burn in, then join the cluster and set it active."
    )
    rollback = (
        "Take 'Roll back': switch ports restored to their previous configuration, the OS install stopped, the "
        f"planned links removed, the rack position released and {node} back to received."
    )
    return plan, rollback


WORKFLOW = Workflow(
    type="provisioning",
    label="Provisioning",
    prefix="PRV",
    states=ProvisioningState,
    initial=S.NEW,
    terminal=TERMINAL,
    transitions=TRANSITIONS,
    steps=(
        assign_position,
        plan_links,
        configure_ports,
        install_os,
        install_driver,
        burn_in,
        join_cluster,
        rollback,
        cancel_run,
    ),
    create_fields=(
        Field("node", "Node (hostname)", kind="node", help_text="A node in status received."),
        Field("cluster", "Cluster to join", required=False),
        Field("rack", "Rack", required=False, help_text="Empty: the first rack at the site with room and power."),
        Field("position", "Lowest U", kind="int", required=False, help_text="Empty: the lowest free position."),
        Field(
            "fabric",
            "Compute fabric",
            required=False,
            help_text="Empty: the fabric the cluster is cabled to, or the site's only rail-optimised one.",
        ),
        Field("os_image", "OS image", required=False, help_text="Empty: the default image for the card vendor."),
    ),
    waiting_states=frozenset({S.AWAITING_CABLING, S.INSTALLING_OS, S.BURN_IN}),
    is_change=True,
    window_transitions=frozenset({"start"}),
    default_plans=_default_plans,
    default_group=_group,
    dedup=_dedup,
    on_create=_on_create,
    description=__doc__ or "",
)
