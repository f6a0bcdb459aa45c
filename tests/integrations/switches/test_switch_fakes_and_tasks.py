"""The in-memory fakes honour the Protocols; the Celery tasks and the poll-all service use them."""

from __future__ import annotations

import pytest

from cmdb.models import Switch, SwitchPort
from integrations.exceptions import TransientError
from integrations.ports import (
    CliTarget,
    DeviceCli,
    LldpNeighbor,
    PortConfig,
    SnmpPoller,
    SwitchConfigurator,
    SwitchPortInfo,
    SwitchSnapshot,
)
from integrations.switches import services, tasks
from integrations.switches.fakes import FakeDeviceCli, FakeSnmpPoller, FakeSwitchConfigurator, empty_snapshot
from integrations.switches.models import ObservedLink, PollRun


def test_fakes_implement_the_protocols():
    assert isinstance(FakeSnmpPoller(), SnmpPoller)
    assert isinstance(FakeDeviceCli(), DeviceCli)
    assert isinstance(FakeSwitchConfigurator(), SwitchConfigurator)


@pytest.mark.parametrize("platform", ["cisco_nxos", "arista_eos", "huawei", "huawei_vrpv8", "juniper_junos", "linux"])
def test_fake_configurator_push_and_rollback_every_platform(platform):
    target = CliTarget(host="leaf1", platform=platform, username="u")
    fake = FakeSwitchConfigurator()
    change = PortConfig(
        {"juniper_junos": "xe-0/0/1", "linux": "swp1"}.get(platform, "Ethernet1/1"),
        description="gpu007 mlx5_2",
        vlan=120,
        mtu=9216,
        enabled=False,
    )
    dry = fake.push(target, change)
    assert not dry.applied and dry.diff.commands and fake.applied == []
    done = fake.push(target, change, dry_run=False)
    assert done.applied and done.verified and done.rollback_commands
    assert fake.push(target, change, dry_run=False).diff.is_empty
    assert fake.rollback(target, done).verified
    assert fake.running["leaf1"][change.interface] == []


def _snapshot() -> SwitchSnapshot:
    base = empty_snapshot("leaf-a")
    port = SwitchPortInfo(
        index=1,
        name="Ethernet1/1",
        alias="gpu001",
        speed_mbps=400000,
        admin_state="up",
        oper_state="up",
        mac="02:00:00:00:00:01",
        if_type=6,
    )
    neighbor = LldpNeighbor("Ethernet1/1", "02:00:00:00:01:00", "02:00:00:00:01:00", "gpu001")
    return SwitchSnapshot(system=base.system, ports=(port,), lldp_neighbors=(neighbor,))


def test_poll_all_task_polls_active_switches(fabric_site, monkeypatch):
    site, vendor = fabric_site
    ok = Switch.objects.create(
        name="leaf-a", vendor=vendor, site=site, mgmt_ip="10.0.0.1", snmp_credential_ref="fabric-a"
    )
    down = Switch.objects.create(
        name="leaf-b", vendor=vendor, site=site, mgmt_ip="10.0.0.2", snmp_credential_ref="fabric-a"
    )
    Switch.objects.create(name="leaf-c", vendor=vendor, site=site, mgmt_ip="10.0.0.3")  # no credential: skipped
    Switch.objects.create(
        name="leaf-d", vendor=vendor, site=site, mgmt_ip="10.0.0.4", snmp_credential_ref="x", status="decommissioned"
    )
    monkeypatch.setenv("GPUOPS_CREDENTIAL_FABRIC_A", '{"version": "2c", "community": "s3cret"}')
    fake = FakeSnmpPoller({"10.0.0.1": _snapshot()})
    monkeypatch.setattr(services, "snmp_poller_get", lambda: fake)

    result = tasks.poll_all.apply().get()

    assert result == {"switches": 2, "ok": 1, "failed": 1}
    assert [t.credential.community for t in fake.polled] == ["s3cret", "s3cret"]
    assert SwitchPort.objects.get(switch=ok, name="Ethernet1/1").speed_mbps == 400000
    assert ObservedLink.objects.get(switch=ok).remote_system == "gpu001"
    failed = PollRun.objects.get(switch=down)
    assert failed.status == "failed" and "no SNMP response" in failed.error


def test_poll_switch_task_retries_transient_errors(fabric_site, monkeypatch):
    site, vendor = fabric_site
    switch = Switch.objects.create(
        name="leaf-z", vendor=vendor, site=site, mgmt_ip="10.0.0.9", snmp_credential_ref="fabric-a"
    )
    monkeypatch.setenv("GPUOPS_CREDENTIAL_FABRIC_A", '{"community": "c"}')
    monkeypatch.setattr(services, "snmp_poller_get", lambda: FakeSnmpPoller({}))
    assert TransientError in tasks.poll_switch.autoretry_for
    assert tasks.poll_switch.name == "integrations.switches.poll_switch"
    assert tasks.poll_all.name == "integrations.switches.poll_all"
    with pytest.raises(TransientError):
        tasks.poll_switch.run(switch.pk)
    assert PollRun.objects.get(switch=switch).status == "failed"


def test_unknown_credential_reference_fails_the_run_only(fabric_site, monkeypatch):
    site, vendor = fabric_site
    Switch.objects.create(name="leaf-q", vendor=vendor, site=site, mgmt_ip="10.0.0.7", snmp_credential_ref="nope")
    monkeypatch.delenv("GPUOPS_CREDENTIALS_FILE", raising=False)
    runs = services.switches_poll_all(poller=FakeSnmpPoller({}))
    assert runs[0].status == "failed" and "unknown credential reference 'nope'" in runs[0].error


def _wide_snapshot(ports: int, speed: int) -> SwitchSnapshot:
    infos = tuple(
        SwitchPortInfo(
            index=i,
            name=f"Ethernet1/{i}",
            alias="",
            speed_mbps=speed,
            admin_state="up",
            oper_state="up",
            mac=f"02:00:00:00:{i // 256:02x}:{i % 256:02x}",
            if_type=6,
        )
        for i in range(1, ports + 1)
    )
    neighbors = tuple(
        LldpNeighbor(f"Ethernet1/{i}", f"0e:00:00:00:00:{i:02x}", "eth0", f"gpu{i}") for i in range(1, ports + 1)
    )
    return SwitchSnapshot(system=empty_snapshot().system, ports=infos, lldp_neighbors=neighbors)


@pytest.mark.parametrize("ports", [8, 64])
def test_apply_query_count_does_not_grow_with_ports(fabric_site, django_assert_max_num_queries, ports):
    site, vendor = fabric_site
    switch = Switch.objects.create(name=f"leaf-{ports}", vendor=vendor, site=site, mgmt_ip="10.1.0.1")
    services.switch_snapshot_apply(
        switch=switch, snapshot=_wide_snapshot(ports, 100000), run=PollRun.objects.create(switch=switch)
    )
    # Second poll: every port changed speed, every neighbour is the same. Bulk paths: a constant query count.
    with django_assert_max_num_queries(16):
        services.switch_snapshot_apply(
            switch=switch, snapshot=_wide_snapshot(ports, 400000), run=PollRun.objects.create(switch=switch)
        )
    assert SwitchPort.objects.filter(switch=switch, speed_mbps=400000).count() == ports
