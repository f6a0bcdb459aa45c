"""A driver rollout across a demo cluster, end to end with fakes (eager Celery): canary, waves, a node whose
verification fails and is rolled back, the failure budget pausing the rollout, resume, roll back all."""

from __future__ import annotations

import pytest

from cmdb import models as m
from integrations.executors import ExecTarget
from workflows.rollouts.locks import LockOwner, node_locks_acquire
from workflows.rollouts.models import NodeLock, NodeRun, NodeRunState, Rollout, RolloutStatus, WaveStatus
from workflows.rollouts.options import RolloutOptions
from workflows.rollouts.selectors import NodeSelector
from workflows.rollouts.services import (
    rollout_create,
    rollout_prepare,
    rollout_resume,
    rollout_rollback_all,
    rollout_start,
)

TARGET = "570.133.20"
BASELINE = "550.127.05"


def _package(version: str = TARGET) -> m.DriverPackage:
    return m.DriverPackage.objects.get(component="nvidia-driver", version=version)


def _options(**extra) -> RolloutOptions:
    base = {"canary_size": 1, "wave_size": 4, "max_per_rack": 1, "failure_budget": 0, "verify_timeout_minutes": 0}
    return RolloutOptions.from_dict({**base, **extra})


def _versions(hostnames) -> dict[str, str]:
    return dict(
        m.InstalledSoftware.objects.filter(node__hostname__in=list(hostnames), component="nvidia-driver").values_list(
            "node__hostname", "version"
        )
    )


def _create(selector: NodeSelector, *, package: m.DriverPackage | None = None, **options) -> Rollout:
    """Create and prepare (what the task published on commit does on a worker)."""
    rollout = rollout_create(package=package or _package(), selector=selector, options=_options(**options))
    return rollout_prepare(rollout=rollout)


def test_rollout_canary_then_waves_failure_pauses_resume_completes_and_roll_back_all(demo_fleet, fakes):
    rollout = _create(NodeSelector(clusters=("sh1-train",)))
    refused = {r["hostname"]: r["code"] for r in rollout.plan["refused"]}
    # The two demo nodes with a failed card are refused; the burn-in and received nodes are not in the cluster's
    # active set (burn_in status) or not in the cluster at all.
    assert refused == {"sh1-h100-0001": "health", "sh1-h100-0006": "health", "sh1-h100-0023": "status"}
    waves = list(rollout.waves.order_by("index"))
    assert [w.kind for w in waves] == ["canary"] + ["wave"] * (len(waves) - 1)
    assert [w.node_runs.count() for w in waves] == [1, 4, 4, 4, 4, 3]
    planned = set(rollout.node_runs.values_list("hostname", flat=True))
    assert NodeLock.objects.filter(owner_key=rollout.lock_key, released_at__isnull=True).count() == 20

    # A card of one node in the first regular wave comes back failed after the install.
    bad_run = waves[1].node_runs.order_by("position").first()
    bad_serial = m.Accelerator.objects.filter(node_id=bad_run.node_id).order_by("slot_index").first().serial
    fakes.agent.bad_cards[bad_run.hostname] = bad_serial

    fakes.run(rollout_start, rollout=rollout)
    rollout.refresh_from_db()
    # The canary passed, wave 1 ran, its failure blew the budget of 0: paused, with the reason.
    assert rollout.status == RolloutStatus.PAUSED
    assert "over the failure budget of 0" in rollout.paused_reason
    bad_run.refresh_from_db()
    assert bad_run.state == NodeRunState.FAILED and bad_run.is_flagged
    assert "card(s) not healthy" in bad_run.error
    assert [c for h, c in fakes.executor.calls if h == bad_run.hostname][-2:] == [
        "/opt/gpuops/bin/install-nvidia-driver 550.127.05",
        "reboot",
    ]  # rolled back to its previous version
    node = m.Node.objects.get(pk=bad_run.node_id)
    assert node.status == "maintenance" and node.is_cordoned and "failed" in node.cordon_reason
    assert ("drain", bad_run.hostname) in {(op, n) for op, n, _ in fakes.scheduler.log}
    assert ("resume", bad_run.hostname) not in {(op, n) for op, n, _ in fakes.scheduler.log}  # left drained
    assert waves[2].node_runs.filter(state=NodeRunState.PENDING).count() == 4  # nothing after the pause started

    # Resumed, the rollout goes on until the failed node's rack comes round again: it stays drained, so its rack
    # mates wait (at most one node per rack out at once) and the rollout pauses, saying why.
    fakes.run(rollout_resume, rollout=rollout)
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.PAUSED
    assert rollout.paused_reason.startswith("rack limit: ") and f"({bad_run.hostname})" in rollout.paused_reason
    # Looked at and returned to service by a person (here: its card reseated), the rest can go.
    m.Node.objects.filter(pk=bad_run.node_id).update(status="active", is_cordoned=False, cordon_reason="")
    fakes.run(rollout_resume, rollout=rollout)
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.COMPLETED
    assert set(rollout.waves.values_list("status", flat=True)) == {WaveStatus.DONE}
    succeeded = set(rollout.node_runs.filter(state=NodeRunState.SUCCEEDED).values_list("hostname", flat=True))
    assert succeeded == planned - {bad_run.hostname}
    assert set(_versions(succeeded).values()) == {TARGET}
    assert _versions([bad_run.hostname]) == {bad_run.hostname: BASELINE}
    assert all(n.status == "active" and not n.is_cordoned for n in m.Node.objects.filter(hostname__in=succeeded))
    # Completion released every lock.
    assert not NodeLock.objects.filter(owner_key=rollout.lock_key, released_at__isnull=True).exists()

    order_done = list(
        rollout.node_runs.filter(state=NodeRunState.SUCCEEDED)
        .order_by("-finished_at", "-id")
        .values_list("hostname", flat=True)
    )
    fakes.executor.calls.clear()
    fakes.run(rollout_rollback_all, rollout=rollout)
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.ROLLED_BACK
    assert set(_versions(planned).values()) == {BASELINE}
    reverted = [h for h, c in fakes.executor.calls if c.endswith(BASELINE)]
    assert reverted[0] == order_done[0]  # newest first
    assert sorted(reverted) == sorted(order_done)
    assert not NodeLock.objects.filter(owner_key=rollout.lock_key, released_at__isnull=True).exists()


def test_incompatible_model_is_refused_at_planning(demo_fleet, fakes):
    rollout = _create(NodeSelector(hostnames=("sh1-h100-0002", "bj2-a910b-0002", "no-such-node")))
    refused = {r["hostname"]: r for r in rollout.plan["refused"]}
    assert refused["bj2-a910b-0002"]["code"] == "incompatible"
    assert "does not support Ascend 910B3" in refused["bj2-a910b-0002"]["reason"]
    assert refused["no-such-node"]["code"] == "unknown"
    assert list(rollout.node_runs.values_list("hostname", flat=True)) == ["sh1-h100-0002"]


def test_node_locked_by_another_change_is_refused(demo_fleet, fakes):
    node = m.Node.objects.get(hostname="sh1-h100-0003")
    assert node_locks_acquire(node_ids=[node.pk], owner=LockOwner(key="ticket:999", label="REP-999")) == {}
    rollout = _create(NodeSelector(hostnames=("sh1-h100-0002", "sh1-h100-0003")))
    refused = {r["hostname"]: r for r in rollout.plan["refused"]}
    assert refused["sh1-h100-0003"]["reason"] == "locked by another open change: REP-999"
    # The other rollout cannot take the node this one holds either.
    second = _create(NodeSelector(hostnames=("sh1-h100-0002",)))
    assert {r["hostname"]: r["reason"] for r in second.plan["refused"]} == {
        "sh1-h100-0002": f"locked by another open change: {rollout.label}"
    }
    assert NodeLock.objects.filter(node__hostname="sh1-h100-0002", released_at__isnull=True).count() == 1


def test_already_current_nodes_are_skipped_not_refused(demo_fleet, fakes):
    rollout = _create(NodeSelector(hostnames=("sh1-h100-0002",)), package=_package(BASELINE))
    assert rollout.plan["refused"] == []
    assert [s["code"] for s in rollout.plan["skipped"]] == ["already_current"]
    assert rollout.plan["node_count"] == 0


@pytest.mark.parametrize("fails", ["install", "silent"])
def test_canary_failure_pauses_before_any_wave(demo_fleet, fakes, fails):
    rollout = _create(NodeSelector(clusters=("sh1-train",)))
    canary = NodeRun.objects.get(rollout=rollout, wave__kind="canary")
    if fails == "install":
        fakes.executor.fail(host=canary.hostname, contains="install-nvidia-driver 570", stderr="dkms build failed")
    else:
        fakes.agent.silent.add(canary.hostname)
    fakes.run(rollout_start, rollout=rollout)
    rollout.refresh_from_db()
    canary.refresh_from_db()
    assert rollout.status == RolloutStatus.PAUSED and "Canary 0" in rollout.paused_reason
    assert canary.state == NodeRunState.FAILED
    expected = "dkms build failed" if fails == "install" else "no agent report since the install"
    assert expected in canary.error
    assert rollout.node_runs.exclude(pk=canary.pk).filter(state=NodeRunState.PENDING).count() == 19


def test_one_active_lock_per_node_is_held_by_the_database(demo_fleet):
    from django.db import IntegrityError, transaction
    from django.utils import timezone

    node = m.Node.objects.get(hostname="sh1-h100-0002")
    NodeLock.objects.create(node=node, owner_key="a", owner_label="A", acquired_at=timezone.now())
    with pytest.raises(IntegrityError), transaction.atomic():
        NodeLock.objects.create(node=node, owner_key="b", owner_label="B", acquired_at=timezone.now())


def test_planning_reads_a_fixed_number_of_queries(demo_fleet, django_assert_max_num_queries):
    from workflows.rollouts.selectors import node_facts, nodes_select

    for selector in (NodeSelector(hostnames=("sh1-h100-0002",)), NodeSelector(sites=("sh1", "bj2"))):
        with django_assert_max_num_queries(10):
            node_facts(nodes_select(selector), _package())


def test_live_floor_check_holds_nodes_back_when_capacity_shrank_after_planning(demo_fleet, fakes):
    hosts = ("sh1-h100-0002", "sh1-h100-0003", "sh1-h100-0004", "sh1-h100-0005")
    rollout = _create(NodeSelector(hostnames=hosts), canary_size=0, max_per_rack=0)
    assert rollout.plan["wave_sizes"] == [4]  # 22 schedulable, 18 needed (80 %): 4 at once
    # Meanwhile three other nodes went out of service: only one may be drained at a time now.
    for hostname in ("sh1-h100-0009", "sh1-h100-0010", "sh1-h100-0011"):
        m.Node.objects.filter(hostname=hostname).update(is_cordoned=True, cordon_reason="fan failure")
    fakes.run(rollout_start, rollout=rollout)
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.COMPLETED
    # The scheduler saw the nodes one after another: never two drained at once.
    ops = [op for op, _host, _reason in fakes.scheduler.log]
    assert ops == ["drain", "resume"] * 4


def test_floor_reached_pauses_with_the_reason(demo_fleet, fakes):
    rollout = _create(NodeSelector(hostnames=("sh1-h100-0002", "sh1-h100-0003")), canary_size=0)
    m.Node.objects.filter(cluster__name="sh1-train", hostname__in=[f"sh1-h100-{i:04d}" for i in range(7, 11)]).update(
        status="maintenance"
    )
    fakes.run(rollout_start, rollout=rollout)
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.PAUSED
    assert rollout.paused_reason.startswith("capacity floor: sh1-h100-0002 waits")
    assert not fakes.scheduler.log


def test_abort_lets_nodes_in_flight_finish_then_releases_locks(demo_fleet, fakes):
    from workflows.rollouts.runner import node_steps_sweep
    from workflows.rollouts.services import rollout_abort

    rollout = _create(NodeSelector(clusters=("sh1-train",)), verify_timeout_minutes=60)
    canary = NodeRun.objects.get(rollout=rollout, wave__kind="canary")
    fakes.agent.silent.add(canary.hostname)  # its agent has not reported yet: verify waits
    fakes.run(rollout_start, rollout=rollout)
    canary.refresh_from_db()
    assert canary.state == NodeRunState.VERIFYING
    fakes.run(rollout_abort, rollout=rollout)
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.ABORTING
    assert rollout.node_runs.filter(state=NodeRunState.CANCELLED).count() == 19
    # The agent reports; the next sweep lets the canary finish, and the abort completes.
    fakes.agent.silent.clear()
    fakes.agent(ExecTarget(host=canary.hostname, name=canary.hostname), "install-nvidia-driver 570.133.20")
    fakes.sweep()
    rollout.refresh_from_db()
    canary.refresh_from_db()
    assert canary.state == NodeRunState.SUCCEEDED
    assert rollout.status == RolloutStatus.ABORTED
    assert not NodeLock.objects.filter(owner_key=rollout.lock_key, released_at__isnull=True).exists()
    assert node_steps_sweep() == {"due": 0, "stuck": 0, "lost": 0}


def _most_drained_per_rack(log) -> int:
    """Replay the scheduler's drain/resume log: the most nodes of one rack out of service at any moment."""
    rack_of = dict(m.Node.objects.values_list("hostname", "rack__name"))
    drained: set[str] = set()
    most = 0
    for op, host, _reason in log:
        (drained.add if op == "drain" else drained.discard)(host)
        per_rack: dict[str, int] = {}
        for h in drained:
            per_rack[rack_of[h]] = per_rack.get(rack_of[h], 0) + 1
        most = max([most, *per_rack.values()])
    return most


def test_a_failed_node_left_drained_keeps_counting_against_its_rack(demo_fleet, fakes):
    """max_per_rack=1 and a failure budget of 1: sh1-h100-0003 fails and stays in maintenance. Later waves must not
    drain another node of its rack while it is out; the rollout pauses saying so, and goes on once the node is
    back in service."""
    rollout = _create(NodeSelector(clusters=("sh1-train",)), failure_budget=1)
    bad = NodeRun.objects.get(rollout=rollout, hostname="sh1-h100-0003")
    rack = m.Node.objects.get(hostname="sh1-h100-0003").rack
    mates = set(m.Node.objects.filter(rack=rack).exclude(hostname="sh1-h100-0003").values_list("hostname", flat=True))
    later = set(
        rollout.node_runs.filter(wave__index__gt=bad.wave.index, hostname__in=mates).values_list("hostname", flat=True)
    )
    assert later, "the plan must put a rack mate of the failing node in a later wave"
    fakes.agent.bad_cards["sh1-h100-0003"] = (
        m.Accelerator.objects.filter(node__hostname="sh1-h100-0003").order_by("slot_index").first().serial
    )

    fakes.run(rollout_start, rollout=rollout)
    rollout.refresh_from_db()
    bad.refresh_from_db()
    assert bad.state == NodeRunState.FAILED
    assert m.Node.objects.get(hostname="sh1-h100-0003").status == "maintenance"
    assert _most_drained_per_rack(fakes.scheduler.log) == 1
    assert rollout.status == RolloutStatus.PAUSED
    assert rollout.paused_reason.startswith("rack limit: ")
    assert f"rack {rack.name} has 1 node(s) of this rollout out of service (sh1-h100-0003)" in rollout.paused_reason
    assert "return the failed nodes to service" in rollout.paused_reason
    waiting = set(rollout.node_runs.filter(state=NodeRunState.PENDING).values_list("hostname", flat=True))
    assert waiting & later

    # Resuming changes nothing while the node is still out: the rollout pauses again with the same reason.
    fakes.run(rollout_resume, rollout=rollout)
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.PAUSED and rollout.paused_reason.startswith("rack limit: ")

    # A person repairs it and returns it to service: the rack has room, the rollout finishes.
    m.Node.objects.filter(hostname="sh1-h100-0003").update(status="active", is_cordoned=False, cordon_reason="")
    returned_at = len(fakes.scheduler.log)
    fakes.run(rollout_resume, rollout=rollout)
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.COMPLETED
    log = list(fakes.scheduler.log)
    log.insert(returned_at, ("resume", "sh1-h100-0003", "returned to service by a person"))
    assert _most_drained_per_rack(log) == 1
    assert later <= set(rollout.node_runs.filter(state=NodeRunState.SUCCEEDED).values_list("hostname", flat=True))
