"""Driver rollout services: create, prepare, start, advance, pause, resume, abort, roll back all, cancel.

Each public function is a transaction boundary that locks the Rollout row, checks the status it acts on,
writes, and registers what must follow (publishing node steps, advancing the rollout, waking the ticket's
watcher step) with `transaction.on_commit`. The state machine of a rollout:

    preparing --prepare (waves, node runs, node locks written)--> planned
    planned --start--> running --wave done--> running (next wave) ... --last wave done--> completed
    running --failures over the wave's budget / nothing pending fits the limits--> paused (with the reason)
    running --pause--> paused --resume--> running
    running|paused --abort--> aborting (nodes in flight finish) --> aborted
    paused|completed|aborted --roll back all--> rolling_back --> rolled_back
    preparing|planned --cancel--> cancelled

Creating a rollout (in the web request that opens its ticket) saves its inputs only, in a fixed number of
queries; everything proportional to the node count (node runs, node locks) is written by `rollout_prepare`, in
one transaction, in a Celery task or the ticket's `prepare` step. Node locks are taken when the plan is written
and released when the rollout completes, is aborted, rolled back or cancelled. Node-level work (drain, install,
...) is workflows.rollouts.runner's.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from cmdb.models import Cluster, DriverPackage, NodeStatus
from cmdb.services.nodes import nodes_set_status
from gpuops.context import new_correlation_id

from .locks import LockOwner, node_locks_acquire, node_locks_held, node_locks_release
from .models import (
    IN_FLIGHT_NODE_STATES,
    NodeRun,
    NodeRunAction,
    NodeRunState,
    NodeStep,
    Rollout,
    RolloutStatus,
    RolloutWave,
    WaveKind,
    WaveStatus,
)
from .options import RolloutOptions
from .planning import (
    WAIT_CLUSTER,
    WAIT_RACK,
    NodeFacts,
    Plan,
    Refusal,
    RefusalCode,
    nodes_admit,
    plan_build,
    revert_waves,
)
from .selectors import IN_SERVICE_STATUSES, NodeSelector, cluster_facts, node_facts, nodes_select, package_facts

# Rows per INSERT of fleet-sized bulk writes: a bounded statement on PostgreSQL (Django lowers it further on SQLite,
# to its limit of bound variables).
BULK_BATCH_SIZE = 2000


class RolloutError(Exception):
    """A request the rollout refuses; `errors` are for people."""

    def __init__(self, errors: str | Sequence[str]) -> None:
        self.errors = [errors] if isinstance(errors, str) else list(errors)
        super().__init__("; ".join(self.errors))


# --- helpers ------------------------------------------------------------------------------------------------------


def _lock(rollout: Rollout | int) -> Rollout:
    pk = rollout.pk if isinstance(rollout, Rollout) else rollout
    # of=("self",): the ticket join is an outer one, which PostgreSQL refuses to lock.
    return Rollout.objects.select_for_update(of=("self",)).select_related("package", "ticket").get(pk=pk)


def _owner(rollout: Rollout) -> LockOwner:
    return LockOwner(key=rollout.lock_key, label=rollout.label, ticket_id=rollout.ticket_id)


def drain_reason(rollout: Rollout) -> str:
    """The reason written on nodes this rollout drains ("ROL-12: nvidia-driver 570.133.20")."""
    return f"{rollout.label}: {rollout.component} {rollout.target_version}"[:200]


def _advance_on_commit(rollout: Rollout) -> None:
    from .tasks import rollout_advance_task

    transaction.on_commit(functools.partial(rollout_advance_task.apply_async, args=[rollout.pk]))


def _watchers_wake_on_commit(rollout: Rollout) -> None:
    """Tell the ticket's watcher step (workflows/definitions/rollout.py) that the rollout changed status, so the
    ticket follows at once instead of at its next poll."""
    if rollout.ticket_id:
        from workflows.runner import runs_wake_for_event

        transaction.on_commit(functools.partial(runs_wake_for_event, watch_event_key(rollout.pk)))


def watch_event_key(rollout_id: int) -> str:
    return f"rollout:{rollout_id}:status"


def _status_set(rollout: Rollout, status: str, *, reason: str = "") -> None:
    rollout.status = status
    rollout.paused_reason = reason[:500] if status in (RolloutStatus.PAUSED, RolloutStatus.ABORTING) else ""
    if status in (RolloutStatus.COMPLETED, RolloutStatus.ABORTED, RolloutStatus.ROLLED_BACK, RolloutStatus.CANCELLED):
        rollout.finished_at = timezone.now()
        node_locks_release(owner_key=rollout.lock_key)
    rollout.save(update_fields=["status", "paused_reason", "finished_at", "updated_at"])
    _watchers_wake_on_commit(rollout)


# --- planning -----------------------------------------------------------------------------------------------------


def rollout_plan_preview(*, package: DriverPackage, selector: NodeSelector, options: RolloutOptions) -> Plan:
    """The plan these inputs would give now, without saving or locking anything (the API's dry run)."""
    facts, clusters = node_facts(nodes_select(selector), package)
    return plan_build(facts, clusters, package_facts(package), options.plan)


def _check_inputs(package: DriverPackage, selector: NodeSelector, options: RolloutOptions) -> None:
    problems = selector.problems() + options.plan.problems()
    if selector.is_empty:
        problems.append("select nodes: a cluster, site, accelerator model, tag or an explicit list of hostnames")
    if not package.install_command.strip():
        problems.append(f"{package} has no install command")
    if not package.rollback_command.strip():
        problems.append(f"{package} has no rollback command: a rollout needs a way back")
    if problems:
        raise RolloutError(problems)


@transaction.atomic
def rollout_create(
    *,
    package: DriverPackage,
    selector: NodeSelector,
    options: RolloutOptions,
    actor: AbstractBaseUser | None = None,
    ticket: Any = None,
) -> Rollout:
    """Save a rollout of `package` over the selected nodes with its inputs checked, status preparing.

    A fixed number of queries whatever the selection (it runs in the web request that opens the ticket); the
    plan and its rows are written by `rollout_prepare`: for a rollout with a ticket, by the ticket's `prepare`
    step (workflows/definitions/rollout.py), where a failure shows and can be retried; without a ticket, by the
    task `workflows.rollouts.prepare`, published on commit.
    Raises RolloutError for unusable inputs (unknown cluster, no install or rollback command, bad options).
    """
    _check_inputs(package, selector, options)
    rollout = Rollout.objects.create(
        ticket=ticket,
        package=package,
        component=package.component,
        target_version=package.version,
        selector=selector.as_dict(),
        options=options.as_dict(),
        status=RolloutStatus.PREPARING,
        correlation_id=getattr(ticket, "correlation_id", "") or new_correlation_id(),
        created_by=actor if getattr(actor, "is_authenticated", False) else None,
    )
    if ticket is None:
        _prepare_on_commit(rollout.pk)
    return rollout


def _prepare_on_commit(rollout_id: int) -> None:
    from .tasks import rollout_prepare_task

    transaction.on_commit(functools.partial(rollout_prepare_task.apply_async, args=[rollout_id]))


@transaction.atomic
def rollout_prepare(*, rollout: Rollout | int) -> Rollout:
    """Plan a preparing rollout from current data and write the plan: its waves, one node run per planned node,
    the node locks and the plan summary; status planned.

    One transaction, so all of it or none. Idempotent: a rollout no longer preparing (prepared by an earlier
    attempt, or cancelled meanwhile) is returned unchanged, so a retried task or step never writes a row twice.
    A plan with no node to change is written too: the approver sees why every node was refused.
    """
    locked = _lock(rollout)
    if locked.status != RolloutStatus.PREPARING:
        return locked
    _plan_write(locked, NodeSelector.from_dict(locked.selector), RolloutOptions.from_dict(locked.options))
    _status_set(locked, RolloutStatus.PLANNED)
    return locked


def rollouts_prepare_stalled(*, older_than_s: float = 300.0) -> int:
    """Beat safety net: publish the prepare task again for rollouts without a ticket still preparing after
    `older_than_s` (the first message was lost). Ticket-owned rollouts are prepared by a ticket step, which the
    workflows app's reaper looks after. Returns how many were published."""
    since = timezone.now() - dt.timedelta(seconds=older_than_s)
    ids = list(
        Rollout.objects.filter(status=RolloutStatus.PREPARING, ticket__isnull=True, created_at__lt=since).values_list(
            "pk", flat=True
        )
    )
    for pk in ids:
        with transaction.atomic():
            _prepare_on_commit(pk)
    return len(ids)


@transaction.atomic
def rollout_replan(*, rollout: Rollout) -> Rollout:
    """Plan again from current data (a planned rollout waiting for approval while the fleet moved on)."""
    locked = _lock(rollout)
    if locked.status == RolloutStatus.PREPARING:
        raise RolloutError(f"{locked.label} is still preparing its plan; plan again once it is written.")
    if locked.status != RolloutStatus.PLANNED:
        raise RolloutError(f"{locked.label} is {locked.get_status_display().lower()}; only a plan can be redone.")
    locked.waves.all().delete()  # cascades to node runs
    node_locks_release(owner_key=locked.lock_key)
    _plan_write(locked, NodeSelector.from_dict(locked.selector), RolloutOptions.from_dict(locked.options))
    return locked


def _plan_write(rollout: Rollout, selector: NodeSelector, options: RolloutOptions) -> None:
    """Plan from current data and write it: node locks, waves, node runs (bulk, batched), the plan summary.
    Proportional to the node count, so only on a worker (prepare, replan), inside the caller's transaction."""
    package = rollout.package
    facts, clusters = node_facts(
        nodes_select(selector), package, own_lock_key=rollout.lock_key, own_ticket_id=rollout.ticket_id
    )
    plan = plan_build(facts, clusters, package_facts(package), options.plan)
    refused = [r.as_dict() for r in plan.refused]
    known = {f.hostname for f in facts}
    refused += [
        Refusal(0, h, "unknown", "no node with this hostname").as_dict() for h in selector.hostnames if h not in known
    ]
    lost = node_locks_acquire(node_ids=plan.node_ids, owner=_owner(rollout), reason=drain_reason(rollout))
    by_id = {f.id: f for f in facts}
    # A node another change locked between our read and our write leaves the plan with that change's name.
    refused += [
        Refusal(n, by_id[n].hostname, RefusalCode.LOCKED, f"locked by another open change: {who}").as_dict()
        for n, who in lost.items()
    ]
    waves = [(w, [n for n in w.node_ids if n not in lost]) for w in plan.waves]
    waves = [(w, ids) for w, ids in waves if ids]
    wave_rows = RolloutWave.objects.bulk_create(
        [
            RolloutWave(
                rollout=rollout,
                index=i,
                kind=w.kind,
                failure_budget=w.failure_budget,
                failure_allowance=w.failure_budget,
            )
            for i, (w, _ids) in enumerate(waves)
        ]
    )
    NodeRun.objects.bulk_create(
        [
            NodeRun(
                rollout=rollout,
                wave=row,
                node_id=n,
                hostname=by_id[n].hostname,
                position=pos,
                previous_version=by_id[n].installed_version or "",
                target_version=package.version,
            )
            for row, (_w, ids) in zip(wave_rows, waves, strict=True)
            for pos, n in enumerate(ids)
        ],
        batch_size=BULK_BATCH_SIZE,
    )
    names = {c.id: c.name for c in clusters}
    rollout.plan = {
        "node_count": sum(len(ids) for _w, ids in waves),
        "wave_sizes": [len(ids) for _w, ids in waves],
        "refused": refused,
        "skipped": [r.as_dict() for r in plan.skipped],
        # Nodes outside any cluster have no floor: shown only when max_per_cluster bounds them.
        "cluster_limits": {
            names.get(c, "no cluster"): lim
            for c, lim in plan.cluster_limits.items()
            if c in names or (c is None and options.plan.max_per_cluster is not None)
        },
        "max_per_rack": plan.max_per_rack,
        "planned_at": timezone.now().isoformat(),
    }
    rollout.save(update_fields=["plan", "updated_at"])


# --- running ------------------------------------------------------------------------------------------------------


@transaction.atomic
def rollout_start(*, rollout: Rollout) -> Rollout:
    """Start a planned rollout: its first wave (the canary) begins on commit."""
    locked = _lock(rollout)
    if locked.status == RolloutStatus.PREPARING:
        raise RolloutError(f"{locked.label} is still preparing its plan; it can start once the plan is written.")
    if locked.status != RolloutStatus.PLANNED:
        raise RolloutError(f"{locked.label} is {locked.get_status_display().lower()}, not planned.")
    locked.started_at = timezone.now()
    locked.save(update_fields=["started_at", "updated_at"])
    _status_set(locked, RolloutStatus.RUNNING)
    _advance_on_commit(locked)
    return locked


@transaction.atomic
def rollout_pause(*, rollout: Rollout, reason: str = "paused by an operator") -> Rollout:
    """Stop starting nodes. Nodes in flight finish their pipeline (an install is never cut in half)."""
    locked = _lock(rollout)
    if locked.status != RolloutStatus.RUNNING:
        raise RolloutError(f"{locked.label} is {locked.get_status_display().lower()}; only a running rollout pauses.")
    _status_set(locked, RolloutStatus.PAUSED, reason=reason)
    return locked


@transaction.atomic
def rollout_resume(*, rollout: Rollout) -> Rollout:
    """Continue a paused rollout. The failures that paused it count as seen: each running wave's allowance rises
    to its failures so far, so only a new failure over budget pauses it again."""
    locked = _lock(rollout)
    if locked.status != RolloutStatus.PAUSED:
        raise RolloutError(f"{locked.label} is {locked.get_status_display().lower()}, not paused.")
    for wave in locked.waves.filter(status=WaveStatus.RUNNING).annotate(
        failed=Count("node_runs", filter=Q(node_runs__state=NodeRunState.FAILED))
    ):
        if wave.failed > wave.failure_allowance:
            RolloutWave.objects.filter(pk=wave.pk).update(failure_allowance=wave.failed)
    reverting = locked.waves.filter(kind=WaveKind.REVERT).exclude(status=WaveStatus.DONE).exists()
    _status_set(locked, RolloutStatus.ROLLING_BACK if reverting else RolloutStatus.RUNNING)
    _advance_on_commit(locked)
    return locked


@transaction.atomic
def rollout_abort(*, rollout: Rollout, reason: str = "aborted by an operator") -> Rollout:
    """Stop for good: nodes not started are cancelled; nodes in flight finish; then locks are released."""
    locked = _lock(rollout)
    if locked.status not in (RolloutStatus.RUNNING, RolloutStatus.PAUSED, RolloutStatus.ROLLING_BACK):
        raise RolloutError(f"{locked.label} is {locked.get_status_display().lower()}; it cannot be aborted.")
    now = timezone.now()
    locked.node_runs.filter(state=NodeRunState.PENDING).update(state=NodeRunState.CANCELLED, finished_at=now)
    locked.waves.filter(status=WaveStatus.PENDING).update(status=WaveStatus.CANCELLED)
    _status_set(locked, RolloutStatus.ABORTING, reason=reason)
    _advance_on_commit(locked)
    return locked


@transaction.atomic
def rollout_cancel(*, rollout: Rollout) -> Rollout:
    """Withdraw a plan that never started (rejected or cancelled ticket): release its locks. A rollout still
    preparing is cancelled as it is (it holds nothing yet; its pending preparation then finds it cancelled)."""
    locked = _lock(rollout)
    if locked.status not in (RolloutStatus.PREPARING, RolloutStatus.PLANNED):
        raise RolloutError(f"{locked.label} is {locked.get_status_display().lower()}; only a plan can be cancelled.")
    locked.node_runs.update(state=NodeRunState.CANCELLED)
    locked.waves.update(status=WaveStatus.CANCELLED)
    _status_set(locked, RolloutStatus.CANCELLED)
    return locked


@transaction.atomic
def rollout_rollback_all(*, rollout: Rollout) -> Rollout:
    """Revert every node this rollout upgraded, newest first, in waves under the same capacity limits.

    Allowed once nothing is in flight (paused, completed or aborted). Nodes that failed were rolled back
    already. Nodes another change has locked since are left out and listed in the plan's `revert_refused`.
    """
    locked = _lock(rollout)
    if locked.status not in (RolloutStatus.PAUSED, RolloutStatus.COMPLETED, RolloutStatus.ABORTED):
        raise RolloutError(
            f"{locked.label} is {locked.get_status_display().lower()}; roll back all needs it paused, "
            "completed or aborted."
        )
    in_flight = locked.node_runs.filter(state__in=IN_FLIGHT_NODE_STATES).count()
    if in_flight:
        raise RolloutError(f"{in_flight} node(s) are still in flight; wait for them to finish.")
    if locked.waves.filter(kind=WaveKind.REVERT).exists():
        raise RolloutError(f"{locked.label} was rolled back already.")
    done = list(
        locked.node_runs.filter(action=NodeRunAction.UPGRADE, state=NodeRunState.SUCCEEDED, node__isnull=False)
        .select_related("node")
        .order_by("-finished_at", "-id")
    )
    # Never-started waves will not run now.
    locked.node_runs.filter(state=NodeRunState.PENDING).update(state=NodeRunState.CANCELLED, finished_at=timezone.now())
    locked.waves.filter(status__in=[WaveStatus.PENDING, WaveStatus.RUNNING]).update(status=WaveStatus.CANCELLED)
    lost = node_locks_acquire(
        node_ids=[r.node_id for r in done if r.node_id not in node_locks_held(locked.lock_key)],
        owner=_owner(locked),
        reason=f"{drain_reason(locked)} (roll back all)",
    )
    runs = [r for r in done if r.node_id not in lost]
    options = RolloutOptions.from_dict(locked.options)
    facts = [
        NodeFacts(
            id=r.node_id,
            hostname=r.hostname,
            cluster_id=r.node.cluster_id,
            rack_id=r.node.rack_id,
            accelerator_model_ids=(),
            installed_version=r.target_version,
        )
        for r in runs
    ]
    from .planning import cluster_limits_for

    limits = cluster_limits_for(cluster_facts({f.cluster_id for f in facts}), options.plan)
    # A cluster at its floor still gets its nodes reverted, one at a time (a revert is a repair, not a choice).
    limits = {c: max(1, v) for c, v in limits.items()}
    target = options.plan.wave_target(len(facts) or 1)
    groups = revert_waves(facts, target, limits, options.plan.max_per_rack)
    base = (locked.waves.order_by("-index").values_list("index", flat=True).first() or 0) + 1
    by_node = {r.node_id: r for r in runs}
    for i, ids in enumerate(groups):
        wave = RolloutWave.objects.create(rollout=locked, index=base + i, kind=WaveKind.REVERT)
        NodeRun.objects.bulk_create(
            [
                NodeRun(
                    rollout=locked,
                    wave=wave,
                    node_id=n,
                    hostname=by_node[n].hostname,
                    position=pos,
                    action=NodeRunAction.REVERT,
                    previous_version=by_node[n].target_version,
                    target_version=by_node[n].previous_version,
                    reverts=by_node[n],
                )
                for pos, n in enumerate(ids)
            ],
            batch_size=BULK_BATCH_SIZE,
        )
    names = {r.node_id: r.hostname for r in done}
    locked.plan = {
        **locked.plan,
        "revert_refused": [
            {"node_id": n, "hostname": names.get(n, str(n)), "reason": f"locked by another open change: {w}"}
            for n, w in lost.items()
        ],
    }
    locked.save(update_fields=["plan", "updated_at"])
    _status_set(locked, RolloutStatus.ROLLING_BACK if groups else RolloutStatus.ROLLED_BACK)
    if groups:
        _advance_on_commit(locked)
    return locked


# --- the orchestrator ---------------------------------------------------------------------------------------------


def rollout_advance(rollout_id: int) -> str:
    """Move the rollout along: start what may start, pause on a blown failure budget, finish waves and the rollout.

    Called (as a task) after every node finishes, after start/resume/abort, and by the beat sweep; idempotent.
    Returns what it did, for logs and tests.
    """
    with transaction.atomic():
        rollout = _lock(rollout_id)
        if rollout.status not in (RolloutStatus.RUNNING, RolloutStatus.ABORTING, RolloutStatus.ROLLING_BACK):
            return f"nothing to do ({rollout.status})"
        if rollout.status == RolloutStatus.ABORTING:
            if rollout.node_runs.filter(state__in=IN_FLIGHT_NODE_STATES).exists():
                return "aborting: waiting for nodes in flight"
            rollout.waves.filter(status=WaveStatus.RUNNING).update(status=WaveStatus.DONE, finished_at=timezone.now())
            _status_set(rollout, RolloutStatus.ABORTED, reason=rollout.paused_reason)
            return "aborted"
        return _advance_running(rollout)


def _wave_counts(wave: RolloutWave) -> dict[str, int]:
    rows = wave.node_runs.values("state").annotate(n=Count("id"))
    counts = {row["state"]: row["n"] for row in rows}
    return {
        "pending": counts.get(NodeRunState.PENDING, 0),
        "in_flight": sum(counts.get(s, 0) for s in IN_FLIGHT_NODE_STATES),
        "failed": counts.get(NodeRunState.FAILED, 0),
    }


def _advance_running(rollout: Rollout) -> str:
    now = timezone.now()
    wave = rollout.waves.exclude(status__in=[WaveStatus.DONE, WaveStatus.CANCELLED]).order_by("index").first()
    while wave is not None:
        if wave.status == WaveStatus.PENDING:
            wave.status, wave.started_at = WaveStatus.RUNNING, now
            wave.save(update_fields=["status", "started_at"])
        counts = _wave_counts(wave)
        if wave.kind != WaveKind.REVERT and counts["failed"] > wave.failure_allowance:
            reason = (
                f"{wave.get_kind_display()} {wave.index}: {counts['failed']} node(s) failed, over the failure "
                f"budget of {wave.failure_allowance}; look at the failures, then resume or abort"
            )
            _status_set(rollout, RolloutStatus.PAUSED, reason=reason)
            return f"paused: {reason}"
        if counts["pending"]:
            started, blocked = _nodes_start(rollout, wave)
            if not started and not counts["in_flight"] and blocked:
                # Nothing moves until a person acts: say what holds the wave back rather than wait silently.
                reason = blocked[0] + (f" (and {len(blocked) - 1} more)" if len(blocked) > 1 else "")
                if any(b.startswith((WAIT_RACK, WAIT_CLUSTER)) for b in blocked):
                    reason += "; return the failed nodes to service (or to repair/RMA), then resume"
                _status_set(rollout, RolloutStatus.PAUSED, reason=reason)
                return f"paused: {reason}"
            return f"wave {wave.index}: started {len(started)}, blocked {len(blocked)}"
        if counts["in_flight"]:
            return f"wave {wave.index}: {counts['in_flight']} node(s) in flight"
        wave.status, wave.finished_at = WaveStatus.DONE, now
        wave.save(update_fields=["status", "finished_at"])
        following = rollout.waves.filter(index__gt=wave.index, status=WaveStatus.PENDING).order_by("index").first()
        if (
            following is not None
            and wave.kind == WaveKind.CANARY
            and RolloutOptions.from_dict(rollout.options).pause_after_canary
        ):
            _status_set(rollout, RolloutStatus.PAUSED, reason="canary done: check the canary nodes, then resume")
            return "paused after canary"
        wave = following
    final = RolloutStatus.ROLLED_BACK if rollout.status == RolloutStatus.ROLLING_BACK else RolloutStatus.COMPLETED
    _status_set(rollout, final)
    return final


def _out_of_service(rollout: Rollout, wave: RolloutWave) -> list[NodeFacts]:
    """This rollout's nodes that are out of service now and count against its cluster and rack limits: nodes in
    flight, and nodes that failed and were left drained, until a person returns them to service (active and not
    cordoned) or takes them out of it (rma, decommissioned). A revert wave counts only the nodes in flight: the
    failed nodes are back at their previous version already, and "roll back all" must not wait on their repair."""
    counted = Q(state__in=IN_FLIGHT_NODE_STATES)
    if wave.kind != WaveKind.REVERT:
        unschedulable = Q(node__status__in=[s for s in IN_SERVICE_STATUSES if s != NodeStatus.ACTIVE]) | Q(
            node__status=NodeStatus.ACTIVE, node__is_cordoned=True
        )
        counted |= Q(state=NodeRunState.FAILED) & unschedulable
    rows = rollout.node_runs.filter(counted, node__isnull=False).values_list(
        "node_id", "hostname", "node__cluster_id", "node__rack_id"
    )
    return [
        NodeFacts(id=n, hostname=h, cluster_id=c, rack_id=r, accelerator_model_ids=(), installed_version=None)
        for n, h, c, r in rows
    ]


def _nodes_start(rollout: Rollout, wave: RolloutWave) -> tuple[list[NodeRun], list[str]]:
    """Start the wave's pending nodes that the live limits allow (`planning.nodes_admit`: capacity floor, nodes of
    this rollout out of service per cluster and per rack); return (started, why the others wait).

    The clusters' rows are locked (in id order, so two rollouts cannot deadlock) while we count schedulable
    nodes and mark ours draining: two rollouts in the same cluster cannot both take the last node above the
    floor. The plan promised the wave fits; this re-check holds the promise when failed nodes stay drained or
    other changes drained nodes since. The rollout row is locked by the caller, so our own counts cannot race.
    """
    from .runner import step_publish_on_commit

    runs = list(wave.node_runs.filter(state=NodeRunState.PENDING).select_related("node__rack").order_by("position"))
    gone = [r for r in runs if r.node is None]
    if gone:
        NodeRun.objects.filter(pk__in=[r.pk for r in gone]).update(
            state=NodeRunState.CANCELLED, error="node deleted", finished_at=timezone.now()
        )
    runs = [r for r in runs if r.node is not None]
    if not runs:
        return [], []
    cluster_ids = sorted({r.node.cluster_id for r in runs if r.node.cluster_id is not None})
    list(Cluster.objects.select_for_update().filter(pk__in=cluster_ids).order_by("pk"))
    facts = cluster_facts(cluster_ids)
    headroom = {c.id: c.headroom for c in facts}
    names = {c.id: c.name for c in facts}
    racks = {r.node.rack_id: r.node.rack.name for r in runs if r.node.rack_id is not None}
    pending = [
        NodeFacts(
            id=r.node_id,
            hostname=r.hostname,
            cluster_id=r.node.cluster_id,
            rack_id=r.node.rack_id,
            accelerator_model_ids=(),
            installed_version=None,
            status=r.node.status,
            is_cordoned=r.node.is_cordoned,
        )
        for r in runs
    ]
    admission = nodes_admit(
        pending,
        _out_of_service(rollout, wave),
        headroom,
        RolloutOptions.from_dict(rollout.options).plan,
        cluster_names=names,
        rack_names=racks,
    )
    admitted = set(admission.started)
    started = [r for r in runs if r.node_id in admitted]
    if not started:
        return started, list(admission.waiting)
    now = timezone.now()
    reason = drain_reason(rollout)
    for run in started:
        run.status_before = run.node.status
    nodes_set_status(node_ids=[r.node_id for r in started], status=NodeStatus.DRAINING, reason=reason)
    for run in started:
        NodeRun.objects.filter(pk=run.pk).update(
            state=NodeRunState.DRAINING, started_at=now, status_before=run.status_before
        )
    steps = NodeStep.objects.bulk_create([NodeStep(node_run=r, name="drain") for r in started])
    for step in steps:
        step_publish_on_commit(step)
    return started, list(admission.waiting)


def rollouts_advance_active() -> int:
    """Beat safety net: advance every running, aborting or rolling-back rollout (a lost advance message must not
    leave a rollout stalled between waves). Returns how many were looked at."""
    ids = list(
        Rollout.objects.filter(
            status__in=[RolloutStatus.RUNNING, RolloutStatus.ABORTING, RolloutStatus.ROLLING_BACK]
        ).values_list("pk", flat=True)
    )
    for pk in ids:
        rollout_advance(pk)
    return len(ids)


__all__ = [
    "RolloutError",
    "drain_reason",
    "rollout_abort",
    "rollout_advance",
    "rollout_cancel",
    "rollout_create",
    "rollout_pause",
    "rollout_plan_preview",
    "rollout_prepare",
    "rollout_replan",
    "rollout_resume",
    "rollout_rollback_all",
    "rollout_start",
    "rollouts_advance_active",
    "rollouts_prepare_stalled",
    "watch_event_key",
]
