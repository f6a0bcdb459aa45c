"""The per-node pipeline of a driver rollout: drain -> install -> reboot (if the package needs it) -> verify ->
resume, and rollback when an upgrade fails after it may have touched the driver.

Each step is a function of a NodeStepContext returning Next / Wait / Fail (workflows.rollouts.runner). Adapter
calls go through `ctx.external` and CMDB writes through `ctx.effect`, so a step run again (a poll, a retry, a
requeue after a lost worker) never repeats one it finished.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cmdb.models import Accelerator, AcceleratorLifecycle, Node, NodeStatus
from cmdb.selectors import component_versions
from cmdb.services.nodes import node_uncordon, nodes_set_status
from cmdb.services.topology import node_topology_check
from integrations.executors import CommandResult, ExecTarget, command_render, executor_get
from integrations.schedulers import SchedulerNode, scheduler_for
from inventory_agents.services.liveness import cards_last_seen

from .conf import rollouts_setting
from .models import NodeRun, NodeRunAction, NodeRunState
from .options import RolloutOptions
from .runner import Fail, Next, NodeStepContext, Outcome, Wait
from .services import drain_reason

# Statuses a resumed node goes back to; anything else comes back active.
RESTORABLE = {NodeStatus.ACTIVE, NodeStatus.BURN_IN}


def exec_target(node: Node) -> ExecTarget:
    """Where to run commands for a node: its `ssh_host` label if set (an address on the management network),
    else its hostname."""
    host = str((node.labels or {}).get("ssh_host") or node.hostname)
    return ExecTarget(host=host, name=node.hostname)


def scheduler_node(node: Node) -> SchedulerNode:
    cluster = node.cluster
    return SchedulerNode(
        name=node.hostname, cluster=cluster.name if cluster else "", cluster_kind=cluster.kind if cluster else ""
    )


def _node(ctx: NodeStepContext) -> Node:
    node = ctx.run.node
    if node is None:
        raise RuntimeError(f"{ctx.run.hostname} no longer exists in the CMDB")
    return node


def _result_json(result: CommandResult) -> dict[str, Any]:
    return {
        "exit_status": result.exit_status,
        "summary": result.summary(),
        "dry_run": result.dry_run,
        "stdout_tail": result.stdout[-2000:],
        "stderr_tail": result.stderr[-2000:],
    }


def _command(ctx: NodeStepContext, *, rollback: bool) -> str:
    """The command of this run: the package's install template for an upgrade; its rollback template to go back
    (a failed upgrade's rollback, or a revert of a completed node)."""
    run, package = ctx.run, ctx.rollout.package
    if rollback or run.action == NodeRunAction.REVERT:
        back_to = run.previous_version if run.action == NodeRunAction.UPGRADE else run.target_version
        return command_render(
            package.rollback_command, previous_version=back_to, version=back_to, component=package.component
        )
    return command_render(
        package.install_command,
        version=run.target_version,
        previous_version=run.previous_version,
        component=package.component,
    )


def _set_run(run: NodeRun, **fields: Any) -> None:
    for name, value in fields.items():
        setattr(run, name, value)
    NodeRun.objects.filter(pk=run.pk).update(**fields)


# --- steps ------------------------------------------------------------------------------------------------------


def drain(ctx: NodeStepContext) -> Outcome:
    """Drain the node in its scheduler and wait until it runs no jobs (at most the drain timeout); then remember
    which cards it has, so verification can insist on the same cards."""
    node = _node(ctx)
    target = scheduler_node(node)
    scheduler = scheduler_for(target.cluster_kind)
    ctx.external("scheduler_drain", lambda: scheduler.drain(target, reason=drain_reason(ctx.rollout)))
    state = scheduler.node_state(target)
    if not state.is_drained:
        timeout_s = RolloutOptions.from_dict(ctx.rollout.options).drain_timeout_s
        deadline = ctx.deadline("drain", timeout_s)
        left = f"{state.running} job(s)" if state.running is not None else f"work ({state.state})"
        if ctx.now >= deadline:
            return Fail(f"drain: {node} still runs {left} after {timeout_s / 60:.0f} min; nothing was installed")
        return Wait(rollouts_setting("DRAIN_POLL_SECONDS"), f"{node} still runs {left}")
    if not ctx.run.expected_serials:
        serials = sorted(
            s
            for s in Accelerator.objects.filter(node=node, lifecycle=AcceleratorLifecycle.INSTALLED).values_list(
                "serial", flat=True
            )
            if s
        )
        _set_run(ctx.run, expected_serials=serials)
    return Next("install", f"{node} drained ({len(ctx.run.expected_serials)} cards)")


def install(ctx: NodeStepContext) -> Outcome:
    """Run the install (or, for a revert, the rollback) command through the executor."""
    node = _node(ctx)
    command = _command(ctx, rollback=False)
    if not ctx.done("command"):
        # Reports older than this do not count: set before the command runs, so a report that raced it is ignored.
        _set_run(ctx.run, verify_since=ctx.now)
    ctx.log(f"running: {command}")
    timeout = float(rollouts_setting("COMMAND_TIMEOUT_SECONDS"))
    result = ctx.external(
        "command", lambda: _result_json(executor_get().run(exec_target(node), command, timeout_s=timeout))
    )
    ctx.log(f"result: {result['summary']}", level="info" if result["exit_status"] == 0 else "error")
    if result["dry_run"]:
        _set_run(ctx.run, is_dry_run=True)
    if result["exit_status"] != 0:
        return Fail(f"install: {result['summary']}", rollback=ctx.run.action == NodeRunAction.UPGRADE)
    if ctx.rollout.package.requires_reboot:
        return Next("reboot", f"installed {ctx.run.target_version}; reboot needed")
    return Next("verify", f"installed {ctx.run.target_version}")


def reboot(ctx: NodeStepContext) -> Outcome:
    """Reboot the node (the package needs it). Verification then waits for its first report after the reboot."""
    node = _node(ctx)
    result = ctx.external("reboot", lambda: _result_json(executor_get().reboot(exec_target(node))))
    if result["exit_status"] != 0:
        return Fail(f"reboot: {result['summary']}", rollback=ctx.run.action == NodeRunAction.UPGRADE)
    _set_run(ctx.run, verify_since=max(ctx.run.verify_since or ctx.now, ctx.now))
    return Next("verify", f"reboot requested ({result['summary']})")


def verification_problems(run: NodeRun, component: str, notes: list[str] | None = None) -> list[str]:
    """What keeps a fresh agent report from confirming the run: the node reported after `verify_since`, with the
    target version of the component, every card it had when drained present, each seen since and healthy, and
    the topology its server model expects (cmdb.services.topology.node_topology_check: each departing pair
    named). What was not checked (a model without an expected topology) is appended to `notes`."""
    node = Node.objects.select_related("server_model", "topology").get(pk=run.node_id)
    since = run.verify_since
    problems = []
    if node.last_seen_at is None or since is None or node.last_seen_at <= since:
        problems.append("no agent report since the install")
        return problems
    installed = component_versions([node.pk], component).get(node.pk)
    if installed != run.target_version:
        problems.append(f"{component} reported {installed or 'absent'}, want {run.target_version}")
    cards = {c.serial: c for c in Accelerator.objects.filter(node=node, lifecycle=AcceleratorLifecycle.INSTALLED)}
    missing = [s for s in run.expected_serials if s not in cards or cards[s].is_missing]
    if missing:
        problems.append(f"card(s) missing: {', '.join(missing)}")
    seen = cards_last_seen(node, cards.values())  # an unchanged re-report confirms the cards too
    stale = [
        s for s in run.expected_serials if s in cards and (seen[cards[s].pk] is None or seen[cards[s].pk] <= since)
    ]
    if stale:
        problems.append(f"card(s) not seen since the install: {', '.join(stale)}")
    sick = [f"{s} ({cards[s].health})" for s in run.expected_serials if s in cards and cards[s].health != "ok"]
    if sick:
        problems.append(f"card(s) not healthy: {', '.join(sick)}")
    topology = node_topology_check(node)
    problems.extend(topology.problems)
    if topology.note and notes is not None:
        notes.append(topology.note)
    return problems


def verify(ctx: NodeStepContext) -> Outcome:
    """Wait for a fresh agent report confirming the install (see `verification_problems`), within the timeout."""
    run = ctx.run
    if run.is_dry_run:
        return Next("resume", "dry run: nothing was installed, so nothing to verify")
    notes: list[str] = []
    problems = verification_problems(run, ctx.rollout.component, notes)
    if not problems:
        confirmed = f"agent confirms {ctx.rollout.component} {run.target_version}, {len(run.expected_serials)} cards"
        return Next("resume", "; ".join([f"{confirmed} healthy", *notes]))
    timeout_s = RolloutOptions.from_dict(ctx.rollout.options).verify_timeout_s
    deadline = ctx.deadline("verify", timeout_s)
    if ctx.now >= deadline:
        return Fail(
            f"verify: {'; '.join(problems)} (after {timeout_s / 60:.1f} min)",
            rollback=run.action == NodeRunAction.UPGRADE,
        )
    return Wait(rollouts_setting("VERIFY_POLL_SECONDS"), "; ".join(problems))


def resume(ctx: NodeStepContext) -> Outcome:
    """Resume the node in its scheduler, restore its status and lift a cordon this rollout set."""
    node = _node(ctx)
    target = scheduler_node(node)
    ctx.external("scheduler_resume", lambda: scheduler_for(target.cluster_kind).resume(target))

    def cmdb_resume() -> dict[str, Any]:
        fresh = Node.objects.get(pk=node.pk)
        status = ctx.run.status_before if ctx.run.status_before in RESTORABLE else NodeStatus.ACTIVE
        nodes_set_status(node_ids=[fresh.pk], status=status, reason=drain_reason(ctx.rollout))
        ours = fresh.is_cordoned and fresh.cordon_reason.startswith(f"{ctx.rollout.label}:")
        if ours:
            node_uncordon(node=fresh)
        return {"status": status, "uncordoned": ours}

    ctx.effect("cmdb_resume", cmdb_resume)
    return Next(None, f"{node} back in service at {ctx.rollout.component} {ctx.run.target_version}")


def rollback(ctx: NodeStepContext) -> Outcome:
    """Put the previous version back after a failed upgrade (and reboot if the package needs it). The node stays
    drained and flagged either way: a person looks at it before it takes work again."""
    node = _node(ctx)
    command = _command(ctx, rollback=True)
    ctx.log(f"rolling back: {command}")
    result = ctx.external(
        "command",
        lambda: _result_json(
            executor_get().run(exec_target(node), command, timeout_s=float(rollouts_setting("COMMAND_TIMEOUT_SECONDS")))
        ),
    )
    ctx.log(f"rollback result: {result['summary']}", level="info" if result["exit_status"] == 0 else "error")
    if result["exit_status"] != 0:
        NodeRun.objects.filter(pk=ctx.run.pk).update(
            error=f"{ctx.run.error}\nrollback failed too: {result['summary']}".strip()
        )
        ctx.run.refresh_from_db(fields=["error"])
        return Next(None, "rollback failed: the node needs a person", final_state=NodeRunState.FAILED)
    if ctx.rollout.package.requires_reboot:
        reboot_result = ctx.external("reboot", lambda: _result_json(executor_get().reboot(exec_target(node))))
        ctx.log(f"reboot after rollback: {reboot_result['summary']}")
    return Next(
        None, f"rolled back to {ctx.run.previous_version}; left drained and flagged", final_state=NodeRunState.FAILED
    )


STEPS: dict[str, Callable[[NodeStepContext], Outcome]] = {
    "drain": drain,
    "install": install,
    "reboot": reboot,
    "verify": verify,
    "resume": resume,
    "rollback": rollback,
}

__all__ = ["STEPS", "exec_target", "scheduler_node", "verification_problems"]
