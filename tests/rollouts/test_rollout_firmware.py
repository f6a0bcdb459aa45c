"""A rollout that targets a firmware component (GPU VBIOS) instead of a driver: the same planning, waves, gates
and rollback, with the current version read from what the node's devices report, and a node counted as done only
when every device reports the target."""

from __future__ import annotations

from cmdb import models as m
from cmdb.selectors import component_versions
from workflows.rollouts.models import NodeRunState, RolloutStatus
from workflows.rollouts.options import RolloutOptions
from workflows.rollouts.selectors import NodeSelector
from workflows.rollouts.services import rollout_create, rollout_prepare, rollout_start

TARGET = "96.00.89.00.01"
CURRENT = "96.00.74.00.01"
OLDER = "96.00.61.00.01"


def _rollout(**options):
    package = m.DriverPackage.objects.get(component="gpu_vbios", version=TARGET)
    base = {"canary_size": 1, "wave_size": 8, "max_per_rack": 8, "failure_budget": 1, "verify_timeout_minutes": 0}
    rollout = rollout_create(
        package=package, selector=NodeSelector(clusters=("sh1-train",)), options=RolloutOptions.from_dict(base)
    )
    return rollout_prepare(rollout=rollout)


def test_current_version_is_the_oldest_device_and_planning_reads_it(demo_fleet):
    node = m.Node.objects.get(hostname="sh1-h100-0002")  # healthy, active, in the cluster
    rows = m.FirmwareComponent.objects.filter(node=node, component="gpu_vbios").order_by("device")
    assert rows.count() == 8
    m.FirmwareComponent.objects.filter(pk=rows[3].pk).update(version=OLDER)
    assert component_versions([node.pk], "gpu_vbios") == {node.pk: OLDER}
    assert component_versions([node.pk], "nvidia-driver") == {node.pk: "550.127.05"}

    rollout = _rollout()
    planned = set(rollout.node_runs.values_list("hostname", flat=True))
    assert node.hostname in planned
    run = rollout.node_runs.get(hostname=node.hostname)
    assert run.previous_version == OLDER and run.target_version == TARGET


def test_firmware_rollout_flashes_each_node_and_waits_for_every_device(demo_fleet, fakes):
    rollout = _rollout()
    hosts = list(rollout.node_runs.values_list("hostname", flat=True))
    # One node's flash does not take: its cards keep the old VBIOS, so verification fails and it is rolled back.
    stuck = hosts[-1]
    fakes.agent.stuck.add(stuck)

    fakes.run(rollout_start, rollout=rollout)
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.COMPLETED, rollout.paused_reason
    commands = {h: c for h, c in fakes.executor.calls if c.startswith("/opt/gpuops/bin/install-gpu_vbios")}
    assert commands[hosts[0]] == f"/opt/gpuops/bin/install-gpu_vbios {TARGET}"
    done = [h for h in hosts if h != stuck]
    versions = component_versions(m.Node.objects.filter(hostname__in=hosts).values("pk"), "gpu_vbios")
    by_host = dict(m.Node.objects.filter(hostname__in=hosts).values_list("pk", "hostname"))
    assert {by_host[pk] for pk, v in versions.items() if v == TARGET} == set(done)
    failed = rollout.node_runs.get(hostname=stuck)
    assert failed.state == NodeRunState.FAILED
    assert f"gpu_vbios reported {CURRENT}, want {TARGET}" in failed.error
    assert [c for h, c in fakes.executor.calls if h == stuck][-2:] == [
        f"/opt/gpuops/bin/install-gpu_vbios {CURRENT}",
        "reboot",
    ]  # rolled back to the version its devices had


def test_the_package_api_takes_firmware_components(demo_fleet, client):
    from tests.factories.cmdb import UserFactory

    client.force_login(UserFactory(username="root", is_superuser=True))
    listed = client.get("/api/cmdb/driver-packages/?component=gpu_vbios").json()
    assert [p["version"] for p in listed["results"]] == [TARGET]
    bad = client.get("/api/cmdb/driver-packages/?component=bogus")
    assert bad.status_code == 400 and "component" in bad.json()["error"]["fields"]
