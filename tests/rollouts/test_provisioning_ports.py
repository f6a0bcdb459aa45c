"""Provisioning's switch port step: what is pushed (description, MTU, VLAN, PKey from the fabric settings), a real
push by default and a dry run only when asked (the demo asks), every port recorded as soon as the switch took it,
so a step failing halfway is rolled back port for port, and a retried step never pushes a verified port twice."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cmdb import models as m
from integrations.notifiers import registry as notifier_registry
from integrations.notifiers.fake import FakeNotifier
from integrations.os_install import registry as os_registry
from integrations.os_install.fake import FakeOsInstaller
from integrations.ports import CliTarget, ConfigPushResult, PortConfig
from integrations.switches.fakes import FakeSwitchConfigurator
from tests.factories.cmdb import UserFactory
from workflows.engine import step_retry, ticket_create, transition_apply
from workflows.models import StepEffect, StepLogLine, StepRun, Ticket, TimelineEntry
from workflows.rollouts.models import ProvisioningRun
from workflows.rollouts.provisioning.services import (
    ProvisioningError,
    port_config_for,
    provisioning_port_configure,
    switch_configurator_override,
)
from workflows.services.bootstrap import groups_bootstrap

ROCE_NODE = "bj2-a910b-0016"  # RoCE leaves (arista_eos)
IB_NODE = "sh1-h100-0024"  # InfiniBand leaves
REPO = Path(__file__).resolve().parents[2]


@dataclasses.dataclass
class FlakySwitches(FakeSwitchConfigurator):
    """Applies every push; the `fail_at`-th applied push then reads back wrong (verification fails)."""

    fail_at: int = 0
    applied_pushes: int = 0
    pushes: list[tuple[str, PortConfig]] = dataclasses.field(default_factory=list)

    @property
    def changes(self) -> list[PortConfig]:
        return [change for _host, change in self.pushes]

    def push(self, target: CliTarget, change: PortConfig, *, dry_run: bool = True) -> ConfigPushResult:
        self.pushes.append((target.host, change))
        result = super().push(target, change, dry_run=dry_run)
        if result.applied:
            self.applied_pushes += 1
            if self.applied_pushes == self.fail_at:
                return dataclasses.replace(result, verified=False, problems=("mtu: running config has mtu 1500",))
        return result


@pytest.fixture
def lead(demo_fleet, fakes, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.GPUOPS_ROLLOUTS = {"BURN_IN_WINDOW_MINUTES": 0, "SWITCH_CONFIG_DRY_RUN": False}
    user = UserFactory(username="lead")
    user.groups.add(groups_bootstrap()["ops-leads"])
    installer = FakeOsInstaller()
    installer.fail_hosts.add(ROCE_NODE)  # stop at install_os: what follows is not what these tests are about
    with notifier_registry.override(FakeNotifier()), os_registry.override(installer):
        yield user
    switch_configurator_override(None)


def _switches(**kw) -> FlakySwitches:
    switches = FlakySwitches(**kw)
    switch_configurator_override(switches)
    return switches


def _fresh(ticket: Ticket) -> Ticket:
    return Ticket.objects.get(pk=ticket.pk)


def _take(fakes, ticket: Ticket, name: str, user) -> Ticket:
    data = {"note": "undo the bring-up"} if name == "rollback" else {}
    fakes.run(transition_apply, ticket=_fresh(ticket), name=name, actor=user, data=data)
    return _fresh(ticket)


def _to_ports(fakes, lead, hostname: str = ROCE_NODE) -> Ticket:
    """Open, position, plan, confirm cabling: the configure_ports step has run once."""
    for link in m.Link.objects.filter(a_nic_port__nic__node__hostname=hostname):
        link.delete()
    ticket = fakes.run(
        ticket_create, type_="provisioning", title=f"Bring up {hostname}", requester=lead, inputs={"node": hostname}
    )
    ticket = _take(fakes, ticket, "start", lead)
    assert ticket.state == "awaiting_cabling"
    return _take(fakes, ticket, "confirm_cabling", lead)


def _ports(ticket: Ticket) -> list[tuple[str, str]]:
    """(switch, interface) of the node's leaf ports, in the order the step pushes them. The demo's leaves have no
    management address, so the switch's name is also the CLI host the fake configurator keys its state by."""
    run = ProvisioningRun.objects.get(ticket=ticket)
    links = m.Link.objects.filter(a_nic_port__nic__node_id=run.node_id).select_related("b_switch_port__switch")
    assert not links.filter(b_switch_port__switch__mgmt_ip__isnull=False).exists()
    return [(lk.b_switch_port.switch.name, lk.b_switch_port.name) for lk in links.order_by("pk")]


def _timeline(ticket: Ticket) -> str:
    return "\n".join(TimelineEntry.objects.filter(ticket=ticket).values_list("message", flat=True))


def _log(ticket: Ticket, step: str) -> str:
    return "\n".join(StepLogLine.objects.filter(run__ticket=ticket, run__step=step).values_list("message", flat=True))


def test_a_port_failing_verification_is_rolled_back_with_every_port_touched_before_it(lead, fakes):
    switches = _switches(fail_at=3)
    ticket = _to_ports(fakes, lead)
    ports = _ports(ticket)
    assert len(ports) == 8
    assert ticket.state == "configuring_ports"
    step = StepRun.objects.get(ticket=ticket, step="configure_ports")
    assert step.status == "failed" and "pushed but the running config differs" in step.error
    run = ProvisioningRun.objects.get(ticket=ticket)
    assert run.status == "failed" and run.current_step == "configure_ports"
    # Ports 1 and 2 (verified) and port 3 (applied, verification failed) are on record with their rollback lines.
    assert [(p["switch"], p["interface"]) for p in run.configured_ports] == ports[:3]
    assert [p["verified"] for p in run.configured_ports] == [True, True, False]
    assert all(p["applied"] and p["rollback_commands"] for p in run.configured_ports)
    touched = {(h, i) for h, ifaces in switches.running.items() for i, lines in ifaces.items() if lines}
    assert touched == set(ports[:3])

    ticket = _take(fakes, ticket, "rollback", lead)
    assert ticket.state == "rolled_back"
    assert all(lines == [] for ifaces in switches.running.values() for lines in ifaces.values())
    assert len(switches.applied) == 6  # three pushes, three restores
    run.refresh_from_db()
    assert [p["restored"] for p in run.configured_ports] == [True, True, True]
    assert "3 switch port(s) restored" in _timeline(ticket)
    assert m.Node.objects.get(hostname=ROCE_NODE).status == "received"


def test_rollback_restores_the_lines_a_port_had_before(lead, fakes):
    switches = _switches(fail_at=3)
    ticket = fakes.run(ticket_create, type_="provisioning", title="x", requester=lead, inputs={"node": ROCE_NODE})
    for link in m.Link.objects.filter(a_nic_port__nic__node__hostname=ROCE_NODE):
        link.delete()
    ticket = _take(fakes, ticket, "start", lead)
    host, iface = _ports(ticket)[2]
    switches.running.setdefault(host, {})[iface] = ["description spare", "mtu 1500", "shutdown"]
    ticket = _take(fakes, ticket, "confirm_cabling", lead)
    assert StepRun.objects.get(ticket=ticket, step="configure_ports").status == "failed"
    assert "mtu 9000" in switches.running[host][iface] and "shutdown" not in switches.running[host][iface]
    _take(fakes, ticket, "rollback", lead)
    assert switches.running[host][iface] == ["description spare", "mtu 1500", "shutdown"]


def test_retry_pushes_each_port_once_and_keeps_the_first_rollback_lines(lead, fakes):
    switches = _switches(fail_at=3)
    ticket = _to_ports(fakes, lead)
    ports = _ports(ticket)
    assert switches.applied_pushes == 3
    step = StepRun.objects.get(ticket=ticket, step="configure_ports")
    first = ProvisioningRun.objects.get(ticket=ticket).configured_ports[2]

    fakes.run(step_retry, run=step, actor=lead)
    ticket = _fresh(ticket)
    assert StepRun.objects.get(pk=step.pk).status == "succeeded"
    assert ticket.state == "installing_os"  # the fake installer fails this node: the ticket stops there
    # Ports 1-2 were not pushed again; port 3 was re-checked (nothing left to change); ports 4-8 pushed once.
    assert switches.applied_pushes == 8
    assert [sum(1 for h, c in switches.pushes if (h, c.interface) == port) for port in ports] == [
        1,
        1,
        2,
        1,
        1,
        1,
        1,
        1,
    ]
    run = ProvisioningRun.objects.get(ticket=ticket)
    assert len(run.configured_ports) == 8 and all(p["verified"] for p in run.configured_ports)
    third = run.configured_ports[2]
    assert third["rollback_commands"] == first["rollback_commands"] and third["before"] == first["before"]

    # Even without the step's checkpoint, the service does not push a port recorded as applied and verified.
    link_id = third["link_id"]
    again = provisioning_port_configure(run, link_id)
    assert again["already_done"] and switches.applied_pushes == 8

    _take(fakes, ticket, "rollback", lead)
    assert all(lines == [] for ifaces in switches.running.values() for lines in ifaces.values())


def test_roce_ports_get_description_mtu_and_the_fabric_vlan(lead, fakes, settings):
    fabric = m.Link.objects.filter(a_nic_port__nic__node__hostname="bj2-a910b-0001").first().fabric
    settings.GPUOPS_ROLLOUTS = {**settings.GPUOPS_ROLLOUTS, "SWITCH_PORT_FABRICS": {fabric.name: {"vlan": 120}}}
    switches = _switches()
    ticket = _to_ports(fakes, lead)
    assert StepRun.objects.get(ticket=ticket, step="configure_ports").status == "succeeded"
    host, iface = _ports(ticket)[0]
    assert sorted(switches.running[host][iface]) == sorted(
        [f"description {ROCE_NODE}:hccn0", "switchport access vlan 120", "mtu 9000"]
    )
    assert {(c.mtu, c.vlan, c.enabled, c.pkey) for c in switches.changes} == {(9000, 120, True, None)}


def test_port_settings_by_fabric_kind(lead, fakes, settings):
    roce = (
        m.Link.objects.select_related("fabric", "b_switch_port", "a_nic_port__nic").filter(fabric__kind="roce").first()
    )
    ib = (
        m.Link.objects.select_related("fabric", "b_switch_port", "a_nic_port__nic")
        .filter(fabric__kind="infiniband")
        .first()
    )
    # Defaults: RoCE gets MTU 9000 and no VLAN; InfiniBand is left to the subnet manager.
    assert port_config_for(roce, "h") == PortConfig(
        interface=roce.b_switch_port.name, description=f"h:{roce.a_nic_port.nic.name}", enabled=True, mtu=9000
    )
    assert port_config_for(ib, "h") is None
    settings.GPUOPS_ROLLOUTS = {
        "SWITCH_PORT_MTU": {},
        "SWITCH_PORT_FABRICS": {roce.fabric.name: {"mtu": 9216}, ib.fabric.name: {"pkey": "0x8001"}},
    }
    assert port_config_for(roce, "h").mtu == 9216
    assert port_config_for(ib, "h") == PortConfig(interface=ib.b_switch_port.name, pkey="0x8001")
    # A PKey on Ethernet, a VLAN or an MTU on InfiniBand: a setting mistake, said as such.
    for fabric, wrong in (
        (roce.fabric.name, {"pkey": "0x8001"}),
        (ib.fabric.name, {"vlan": 5}),
        (ib.fabric.name, {"mtu": 4096}),
        (roce.fabric.name, {"vlam": 5}),
    ):
        settings.GPUOPS_ROLLOUTS = {"SWITCH_PORT_FABRICS": {fabric: wrong}}
        link = roce if fabric == roce.fabric.name else ib
        with pytest.raises(ProvisioningError, match=f"sets {next(iter(wrong))}, which does not apply"):
            port_config_for(link, "h")


def test_infiniband_pkey_goes_to_the_configurator_which_may_refuse_it_visibly(lead, fakes, settings):
    fabric = m.Link.objects.filter(a_nic_port__nic__node__hostname="sh1-h100-0002").first().fabric
    settings.GPUOPS_ROLLOUTS = {**settings.GPUOPS_ROLLOUTS, "SWITCH_PORT_FABRICS": {fabric.name: {"pkey": "0x8001"}}}
    switches = _switches()
    ticket = _to_ports(fakes, lead, IB_NODE)
    assert {c.pkey for c in switches.changes} == {"0x8001"}
    assert {c.description for c in switches.changes} == {None}
    # The configurators of integrations.switches refuse it (partitions live on the subnet manager; the demo's IB
    # leaves have no port template at all): the step stops, saying which port and why.
    step = StepRun.objects.get(ticket=ticket, step="configure_ports")
    switch, port = _ports(ticket)[0]
    assert step.status == "failed" and step.error.startswith(f"{switch} {port}: ")
    assert "retry the step, or roll back" in step.error
    assert ProvisioningRun.objects.get(ticket=ticket).configured_ports == []


def _port_results(ticket: Ticket) -> list[dict]:
    """What each port's push returned, as the step recorded it."""
    return list(
        StepEffect.objects.filter(ticket=ticket, name__startswith="port_")
        .order_by("at", "pk")
        .values_list("result", flat=True)
    )


def test_the_default_pushes_for_real(lead, fakes, settings):
    # A deployment that names a real configurator and nothing else must get its ports configured.
    settings.GPUOPS_ROLLOUTS = {"BURN_IN_WINDOW_MINUTES": 0}
    switches = _switches()
    ticket = _to_ports(fakes, lead)
    assert StepRun.objects.get(ticket=ticket, step="configure_ports").status == "succeeded"
    assert len(switches.applied) == 8 and "8 port(s) changed" in _timeline(ticket)
    run = ProvisioningRun.objects.get(ticket=ticket)
    assert len(run.configured_ports) == 8 and all(p["applied"] and p["verified"] for p in run.configured_ports)
    assert {(p["dry_run"], p["outcome"]) for p in _port_results(ticket)} == {(False, "pushed")}


def test_dry_run_shows_the_diff_and_changes_nothing(lead, fakes, settings):
    settings.GPUOPS_ROLLOUTS = {"BURN_IN_WINDOW_MINUTES": 0, "SWITCH_CONFIG_DRY_RUN": True}
    switches = _switches()
    ticket = _to_ports(fakes, lead)
    step = StepRun.objects.get(ticket=ticket, step="configure_ports")
    assert step.status == "succeeded"
    assert "dry run: nothing pushed, 0 port(s) changed, 0 already right, 8 would change (dry run" in _timeline(ticket)
    assert switches.applied == [] and switches.running == {}
    assert {c.mtu for c in switches.changes} == {9000}
    log = _log(ticket, "configure_ports")
    assert "dry run: nothing pushed (SWITCH_CONFIG_DRY_RUN)" in log
    assert "dry run, not applied" in log and "+mtu 9000" in log and f"+description {ROCE_NODE}:hccn0" in log
    run = ProvisioningRun.objects.get(ticket=ticket)
    assert run.configured_ports == []
    results = _port_results(ticket)
    assert len(results) == 8 and {p["outcome"] for p in results} == {"dry run: nothing pushed"}

    ticket = _take(fakes, ticket, "rollback", lead)
    assert ticket.state == "rolled_back"
    assert switches.applied == []
    assert "0 switch port(s) restored" in _timeline(ticket)


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("0", False), ("", None)])
def test_the_demo_turns_dry_run_on_through_the_environment(value, expected):
    env = {**os.environ, "GPUOPS_SWITCH_CONFIG_DRY_RUN": value}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from gpuops import settings; print(settings.GPUOPS_ROLLOUTS.get('SWITCH_CONFIG_DRY_RUN'))",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == str(expected)
    assert (
        'export GPUOPS_SWITCH_CONFIG_DRY_RUN="${GPUOPS_SWITCH_CONFIG_DRY_RUN:-1}"'
        in (REPO / "script" / "server").read_text()
    )
