"""The planner as a pure function: unit cases, and properties over random fleets and limits (hypothesis)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workflows.rollouts.planning import (
    ClusterFacts,
    NodeFacts,
    PackageFacts,
    PlanOptions,
    RefusalCode,
    nodes_admit,
    plan_build,
    revert_waves,
)

SUPPORTED, UNSUPPORTED = 1, 2
PACKAGE = PackageFacts("nvidia-driver", "570", frozenset({SUPPORTED}), {SUPPORTED: "H100", UNSUPPORTED: "MI300X"})


def node(i: int, cluster: int | None = 1, rack: int | None = None, **kw) -> NodeFacts:
    base = {"accelerator_model_ids": (SUPPORTED,), "installed_version": "550"}
    return NodeFacts(
        id=i, hostname=f"n{i:04d}", cluster_id=cluster, rack_id=rack if rack is not None else i // 4, **{**base, **kw}
    )


def cluster(cid: int = 1, in_service: int = 100, available: int = 100, floor: int = 80) -> ClusterFacts:
    return ClusterFacts(id=cid, name=f"c{cid}", in_service=in_service, available=available, floor_percent=floor)


def test_canary_then_waves_respect_cluster_floor_and_rack_limit():
    nodes = [node(i) for i in range(40)]
    plan = plan_build(
        nodes,
        [cluster(in_service=40, available=40, floor=80)],
        PACKAGE,
        PlanOptions(canary_size=2, wave_size=50, max_per_rack=2),
    )
    # Floor: 40 in service, 80% -> 32 must stay, so 8 at once; each rack of 4 gives at most 2.
    assert plan.cluster_limits[1] == 8
    assert [w.kind for w in plan.waves][:2] == ["canary", "wave"]
    assert len(plan.waves[0].node_ids) == 2
    assert all(len(w.node_ids) <= 8 for w in plan.waves)
    assert sorted(plan.node_ids) == list(range(40))


def test_refusals_say_why():
    nodes = [
        node(1, accelerator_model_ids=(UNSUPPORTED,)),
        node(2, accelerator_model_ids=()),
        node(3, locked_by="REP-7"),
        node(4, status="maintenance"),
        node(5, health="failed"),
        node(6, is_cordoned=True),
        node(7, installed_version=None),
        node(8, installed_version="570"),
        node(9),
    ]
    plan = plan_build(nodes, [cluster()], PACKAGE, PlanOptions(canary_size=1))
    codes = {r.node_id: r.code for r in plan.refused}
    assert codes == {
        1: RefusalCode.INCOMPATIBLE,
        2: RefusalCode.NO_MODEL,
        3: RefusalCode.LOCKED,
        4: RefusalCode.STATUS,
        5: RefusalCode.HEALTH,
        6: RefusalCode.CORDONED,
        7: RefusalCode.NO_VERSION,
    }
    assert "does not support MI300X" in next(r.reason for r in plan.refused if r.node_id == 1)
    assert [s.node_id for s in plan.skipped] == [8]
    assert plan.node_ids == [9]


def test_cluster_at_floor_refuses_its_nodes():
    plan = plan_build(
        [node(1, cluster=1), node(2, cluster=2)],
        [cluster(1, in_service=10, available=8, floor=80), cluster(2)],
        PACKAGE,
        PlanOptions(),
    )
    assert [(r.node_id, r.code) for r in plan.refused] == [(1, RefusalCode.FLOOR)]
    assert "c1 is at its capacity floor (80%: 8 of 10" in plan.refused[0].reason
    assert plan.node_ids == [2]


def test_canary_prefers_tagged_then_one_per_model_and_cluster():
    nodes = [node(i, cluster=1 + i % 3, rack=i) for i in range(30)] + [node(99, cluster=1, tags=frozenset({"canary"}))]
    plan = plan_build(nodes, [cluster(1), cluster(2), cluster(3)], PACKAGE, PlanOptions(canary_size=4))
    canary = plan.waves[0].node_ids
    assert canary[0] == 99
    assert {n.cluster_id for n in nodes if n.id in canary[1:]} == {1, 2, 3}


def test_percentage_waves_and_budget_percent():
    plan = plan_build(
        [node(i, rack=i) for i in range(100)],
        [cluster(in_service=1000, available=1000)],
        PACKAGE,
        PlanOptions(canary_size=0, wave_percent=25, failure_budget_percent=10, max_per_rack=None),
    )
    assert [len(w.node_ids) for w in plan.waves] == [25, 25, 25, 25]
    assert [w.failure_budget for w in plan.waves] == [2, 2, 2, 2]


def test_bad_options_raise():
    with pytest.raises(ValueError, match="wave size must be at least 1"):
        plan_build([], [], PACKAGE, PlanOptions(wave_size=0))


def test_revert_waves_keep_order_within_limits():
    nodes = [node(i, rack=i // 2) for i in range(8)]
    waves = revert_waves(nodes, target=3, cluster_limits={1: 3, None: 99}, max_per_rack=1)
    assert waves == [[0, 2, 4], [1, 3, 5], [6], [7]]


def test_twelve_thousand_nodes_plan_quickly():
    import time

    nodes = [node(i, cluster=i % 100, rack=i // 4) for i in range(12_500)]
    clusters = [cluster(c, in_service=125, available=125) for c in range(100)]
    started = time.perf_counter()
    plan = plan_build(nodes, clusters, PACKAGE, PlanOptions(canary_size=10, wave_percent=5, max_per_rack=1))
    assert time.perf_counter() - started < 3.0
    assert plan.node_count == 12_500


# --- properties -------------------------------------------------------------------------------------------------


NODE_ROW = st.tuples(
    st.integers(0, 5),  # cluster (0: none), clipped to the fleet's cluster count
    st.one_of(st.none(), st.integers(1, 25)),  # rack
    st.sampled_from([(SUPPORTED,), (SUPPORTED,), (SUPPORTED,), (UNSUPPORTED,), (SUPPORTED, UNSUPPORTED), ()]),
    st.sampled_from(["550", "550", "550", "570", None]),
    st.sampled_from(["active"] * 6 + ["maintenance", "burn_in"]),
    st.sampled_from(["ok"] * 8 + ["failed", "degraded"]),
    st.sampled_from([False] * 4 + [True]),  # cordoned
    st.sampled_from([""] * 9 + ["REP-1"]),  # locked by
    st.sampled_from([frozenset()] * 5 + [frozenset({"canary"})]),
)


@st.composite
def fleets(draw):
    n_clusters = draw(st.integers(1, 5))
    rows = draw(st.lists(NODE_ROW, max_size=120))
    nodes = [
        NodeFacts(
            id=i,
            hostname=f"n{i:04d}",
            cluster_id=(c % (n_clusters + 1)) or None,
            rack_id=rack,
            accelerator_model_ids=models,
            installed_version=version,
            status=status,
            health=health,
            is_cordoned=cordoned,
            locked_by=locked,
            tags=tags,
        )
        for i, (c, rack, models, version, status, health, cordoned, locked, tags) in enumerate(rows)
    ]
    clusters = []
    for c in range(1, n_clusters + 1):
        members = [n for n in nodes if n.cluster_id == c]
        extra, extra_available, floor = draw(st.tuples(st.integers(0, 60), st.integers(0, 60), st.integers(0, 100)))
        in_service = len(members) + extra
        available = min(
            in_service, sum(1 for n in members if n.status == "active" and not n.is_cordoned) + extra_available
        )
        clusters.append(
            ClusterFacts(id=c, name=f"c{c}", in_service=in_service, available=available, floor_percent=floor)
        )
    return nodes, clusters


options_strategy = st.builds(
    PlanOptions,
    canary_size=st.integers(0, 6),
    wave_size=st.one_of(st.none(), st.integers(1, 40)),
    wave_percent=st.floats(1, 100),
    max_per_cluster=st.one_of(st.none(), st.integers(1, 12)),
    max_per_rack=st.one_of(st.none(), st.integers(1, 4)),
    failure_budget=st.integers(0, 3),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleet=fleets(), options=options_strategy)
def test_capacity_limits_hold_in_every_wave(fleet, options):
    nodes, clusters = fleet
    plan = plan_build(nodes, clusters, PACKAGE, options)
    by_id = {n.id: n for n in nodes}
    facts = {c.id: c for c in clusters}

    # Every node is accounted for exactly once: in one wave, refused, or skipped.
    placed = plan.node_ids
    assert len(placed) == len(set(placed))
    left_out = [r.node_id for r in plan.refused] + [s.node_id for s in plan.skipped]
    assert sorted(placed + left_out) == sorted(by_id)
    assert all(w.node_ids for w in plan.waves)

    for wave in plan.waves:
        members = [by_id[i] for i in wave.node_ids]
        per_cluster = Counter(n.cluster_id for n in members)
        for cid, count in per_cluster.items():
            if options.max_per_cluster is not None:
                assert count <= options.max_per_cluster
            if cid is not None:
                # Draining this wave never takes the cluster below its floor.
                c = facts[cid]
                assert c.available - count >= c.required_available, (cid, count, c)
        if options.max_per_rack is not None:
            per_rack = Counter(n.rack_id for n in members if n.rack_id is not None)
            assert max(per_rack.values(), default=0) <= options.max_per_rack
        if wave.kind == "canary":
            assert len(members) <= options.canary_size
        else:
            assert len(members) <= options.wave_target(len(placed))

    # Whatever is planned is compatible, unlocked, eligible and not yet at the target.
    for n in (by_id[i] for i in placed):
        assert set(n.accelerator_model_ids) <= PACKAGE.supported_model_ids and n.accelerator_model_ids
        assert not n.locked_by and n.status == "active" and n.health != "failed" and not n.is_cordoned
        assert n.installed_version not in (None, PACKAGE.version)
    # Planning is deterministic.
    assert plan_build(nodes, clusters, PACKAGE, options) == plan


# --- run time: failed nodes stay drained ------------------------------------------------------------------------


def test_admission_counts_failed_nodes_left_drained_against_rack_and_cluster():
    pending = [node(10, rack=1), node(11, rack=2), node(12, rack=3)]
    failed = [node(1, rack=1, status="maintenance", is_cordoned=True)]
    options = PlanOptions(max_per_rack=1, max_per_cluster=2)
    admission = nodes_admit(pending, failed, {1: 10}, options, cluster_names={1: "c1"}, rack_names={1: "r1"})
    # Rack 1 holds the failed node; the cluster has room for one more beside it.
    assert admission.started == (11,)
    assert admission.waiting == (
        "rack limit: n0010 waits: rack r1 has 1 node(s) of this rollout out of service (n0001), at most 1 at once",
        "cluster limit: n0012 waits: c1 has 2 node(s) of this rollout out of service (n0001, n0011), at most 2 at once",
    )
    # The floor: node 11 takes the last node of headroom, node 12 waits for it.
    floor = nodes_admit(pending[1:], [], {1: 1}, PlanOptions(max_per_rack=None))
    assert floor.started == (11,) and floor.waiting[0].startswith("capacity floor: n0012 waits")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleet=fleets(), options=options_strategy, data=st.data())
def test_run_time_limits_hold_while_failed_nodes_stay_drained(fleet, options, data):
    """Run the plan the way the runner does: before each start, `nodes_admit` with the rollout's nodes out of
    service (in flight, or failed and left drained); nodes finish in random batches, each succeeding (back in
    service) or failing (left drained). At every moment: per rack and per cluster no more of the rollout's nodes
    out than the limits, no cluster below its floor. When nothing can move, a person either gives up (abort) or
    returns the failed nodes to service, after which the wave always goes on."""
    nodes, clusters = fleet
    plan = plan_build(nodes, clusters, PACKAGE, options)
    by_id = {n.id: n for n in nodes}
    facts = {c.id: c for c in clusters}
    available = {c.id: c.available for c in clusters}
    drained: dict[int, NodeFacts] = {}  # the rollout's nodes out of service: in flight or failed
    in_flight: set[int] = set()

    def check() -> None:
        out = list(drained.values())
        if options.max_per_rack is not None:
            per_rack = Counter(n.rack_id for n in out if n.rack_id is not None)
            assert max(per_rack.values(), default=0) <= options.max_per_rack
        if options.max_per_cluster is not None:
            assert max(Counter(n.cluster_id for n in out).values(), default=0) <= options.max_per_cluster
        for cid, c in facts.items():
            assert available[cid] >= min(c.available, c.required_available), (cid, available[cid], c)

    for wave in plan.waves:
        pending = list(wave.node_ids)
        for _guard in range(4 * len(pending) + 8):
            if not pending and not in_flight:
                break
            headroom = {cid: max(0, available[cid] - facts[cid].required_available) for cid in facts}
            admission = nodes_admit([by_id[i] for i in pending], list(drained.values()), headroom, options)
            for i in admission.started:
                n = by_id[i]
                drained[i] = dataclasses.replace(n, status="draining")
                in_flight.add(i)
                if n.cluster_id is not None:
                    available[n.cluster_id] -= 1  # planned nodes are active and uncordoned
            pending = [i for i in pending if i not in set(admission.started)]
            assert len(admission.waiting) == len(pending)
            check()
            if in_flight:
                finishing = data.draw(st.sets(st.sampled_from(sorted(in_flight)), min_size=1))
                for i in finishing:
                    in_flight.discard(i)
                    if data.draw(st.booleans()):  # succeeded: back in service
                        del drained[i]
                        if by_id[i].cluster_id is not None:
                            available[by_id[i].cluster_id] += 1
                check()
            elif pending:
                # Stuck: the runner pauses with the first waiting line. A person aborts, or returns the failed
                # nodes to service and resumes: then the wave fits again, as planned.
                assert admission.waiting and not admission.started
                if data.draw(st.booleans()):
                    return
                for i in list(drained):
                    del drained[i]
                    if by_id[i].cluster_id is not None:
                        available[by_id[i].cluster_id] += 1
                headroom = {cid: max(0, available[cid] - facts[cid].required_available) for cid in facts}
                assert nodes_admit([by_id[i] for i in pending], [], headroom, options).started
        else:
            raise AssertionError("the simulated wave did not finish")
