"""Provisioning as a ticket, end to end with fakes (eager Celery): rack position, planned links, cabling, switch
ports, OS install, baseline driver, burn-in, join; a failed step, retry, and rollback of what was done."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from cmdb import models as m
from integrations.executors import ExecTarget
from integrations.notifiers import registry as notifier_registry
from integrations.notifiers.fake import FakeNotifier
from integrations.os_install import registry as os_registry
from integrations.os_install.fake import FakeOsInstaller
from integrations.os_install.webhook import callback_signature
from integrations.switches.fakes import FakeSwitchConfigurator
from tests.factories.cmdb import UserFactory
from workflows.engine import GuardError, step_retry, ticket_create, transition_apply
from workflows.models import StepRun, Ticket
from workflows.rollouts.models import NodeLock, ProvisioningRun
from workflows.rollouts.provisioning.services import switch_configurator_override
from workflows.runner import runs_wake_due
from workflows.services.bootstrap import groups_bootstrap


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def prov(demo_fleet, fakes, settings):
    # Switch ports applied for real (production's setting; the demo default is a dry run).
    settings.GPUOPS_ROLLOUTS = {"BURN_IN_WINDOW_MINUTES": 0, "SWITCH_CONFIG_DRY_RUN": False}
    groups = groups_bootstrap()
    lead = UserFactory(username="lead")
    lead.groups.add(groups["ops-leads"])
    installer = FakeOsInstaller()
    switches = FakeSwitchConfigurator()
    switch_configurator_override(switches)
    with notifier_registry.override(FakeNotifier()), os_registry.override(installer):
        yield lead, installer, switches
    switch_configurator_override(None)


def _uncabled(hostname: str) -> m.Node:
    """The demo's received node, as it arrives: HCAs known (the agent saw them), no cables in the CMDB yet."""
    node = m.Node.objects.get(hostname=hostname)
    assert node.status == "received" and node.rack_id is None
    for link in m.Link.objects.filter(a_nic_port__nic__node=node):
        link.delete()
    return node


def _fresh(ticket: Ticket) -> Ticket:
    return Ticket.objects.get(pk=ticket.pk)


def _take(fakes, ticket, name, user, **data) -> Ticket:
    fakes.run(transition_apply, ticket=_fresh(ticket), name=name, actor=user, data=data)
    return _fresh(ticket)


def _wake(fakes) -> None:
    StepRun.objects.filter(status="waiting").update(wake_at=timezone.now())
    with fakes.capture(execute=True):
        runs_wake_due()


def test_provisioning_end_to_end(prov, fakes):
    lead, installer, _ = prov
    node = _uncabled("sh1-h100-0024")
    ticket = fakes.run(
        ticket_create,
        type_="provisioning",
        title="Bring up sh1-h100-0024",
        requester=lead,
        inputs={"node": "sh1-h100-0024", "cluster": "sh1-train"},
    )
    run = ProvisioningRun.objects.get(ticket=ticket)
    assert NodeLock.objects.get(node=node, released_at__isnull=True).owner_key == run.lock_key
    with pytest.raises(GuardError, match="already open"):
        fakes.run(ticket_create, type_="provisioning", title="twice", requester=lead, inputs={"node": "sh1-h100-0024"})

    ticket = _take(fakes, ticket, "start", lead)
    assert ticket.state == "awaiting_cabling"
    node.refresh_from_db()
    run.refresh_from_db()
    # r001..r005 hold four 10.2 kW nodes (40.8 kW): a fifth would exceed the 45 kW budget. r006 has three.
    assert node.rack.name == "sh1-h100-r006" and node.position == 25 and node.status == "provisioning"
    links = list(
        m.Link.objects.filter(a_nic_port__nic__node=node)
        .select_related("b_switch_port__switch", "a_nic_port__nic")
        .order_by("a_nic_port__nic__rail")
    )
    assert len(links) == 8 and {link.status for link in links} == {"planned"}
    assert sorted(run.planned_link_ids) == sorted(link.pk for link in links)
    # Rail-aligned: HCA i on rail leaf i of the unit, on the leaf's next free port.
    for link in links:
        assert link.b_switch_port.switch.rail == link.a_nic_port.nic.rail
        assert link.b_switch_port.name == "p24"

    ticket = _take(fakes, ticket, "confirm_cabling", lead, note="racked and cabled by shift B")
    # Ports (InfiniBand: skipped), OS (fake: done at the first poll), baseline driver, then burn-in waits for a
    # report newer than its start.
    assert ticket.state == "burn_in"
    assert installer.started[0].hostname == "sh1-h100-0024" and installer.started[0].image == "ubuntu-22.04-gpu"
    assert fakes.executor.commands_for("sh1-h100-0024") == ["/opt/gpuops/bin/install-nvidia-driver 550.127.05"]
    assert {link.status for link in m.Link.objects.filter(pk__in=run.planned_link_ids)} == {"connected"}
    assert m.Node.objects.get(pk=node.pk).status == "burn_in"

    fakes.agent(ExecTarget(host="sh1-h100-0024", name="sh1-h100-0024"), "report")
    _wake(fakes)
    ticket = _fresh(ticket)
    assert ticket.state == "done" and not ticket.is_open
    node.refresh_from_db()
    assert node.status == "active" and node.cluster.name == "sh1-train"
    assert ("resume", "sh1-h100-0024", "") in fakes.scheduler.log
    run.refresh_from_db()
    assert run.status == "done" and run.baseline == [["nvidia-driver", "550.127.05"]]
    assert not NodeLock.objects.filter(node=node, released_at__isnull=True).exists()
    records = m.ChangeRecord.objects.filter(correlation_id=ticket.correlation_id)
    assert records.filter(object_repr=str(node)).exists()


def test_failed_step_retry_then_rollback_releases_position_and_links(prov, fakes, client):
    lead, installer, switches = prov
    node = _uncabled("bj2-a910b-0016")
    installer.fail_hosts.add("bj2-a910b-0016")
    ticket = fakes.run(
        ticket_create,
        type_="provisioning",
        title="Bring up bj2-a910b-0016",
        requester=lead,
        inputs={"node": "bj2-a910b-0016", "cluster": "bj2-ascend"},
    )
    ticket = _take(fakes, ticket, "start", lead)
    node.refresh_from_db()
    assert node.rack.name == "bj2-a910b-r001" and node.position == 17
    planned = list(ProvisioningRun.objects.get(ticket=ticket).planned_link_ids)
    assert len(planned) == 8

    ticket = _take(fakes, ticket, "confirm_cabling", lead)
    # The RoCE leaf ports were configured; the OS install failed: the ticket stops where it is, visibly.
    assert len(switches.applied) == 8
    assert ticket.state == "installing_os"
    failed = StepRun.objects.get(ticket=ticket, step="install_os")
    assert failed.status == "failed" and "disk not found" in failed.error
    run = ProvisioningRun.objects.get(ticket=ticket)
    assert run.status == "failed" and run.current_step == "install_os"

    # The panel shows the failure with its log.
    client.force_login(lead)
    panel = client.get(f"/rollouts/tickets/{ticket.pk}/progress/", HTTP_HX_REQUEST="true")
    assert panel.status_code == 286 and b"disk not found" in panel.content

    # Retrying does not repeat the start (same job); the job is still failed, so the step fails again.
    fakes.run(step_retry, run=failed, actor=lead)
    assert len(installer.started) == 1
    assert StepRun.objects.get(pk=failed.pk).status == "failed"

    ticket = _take(fakes, ticket, "rollback", lead, note="bad disk; RMA the node")
    assert ticket.state == "rolled_back" and not ticket.is_open
    node.refresh_from_db()
    assert node.rack_id is None and node.position is None and node.status == "received"
    assert not m.RackUnit.objects.filter(node=node).exists()
    assert not m.Link.objects.filter(pk__in=planned).exists()
    assert len(switches.applied) == 16  # each push restored
    assert all(lines == [] for lines in switches.running[next(iter(switches.running))].values())
    assert not NodeLock.objects.filter(node=node, released_at__isnull=True).exists()


def test_os_install_callback_wakes_the_step(prov, fakes, client, monkeypatch, settings):
    lead, installer, _ = prov
    installer.polls_to_finish = 99  # only the callback will tell
    monkeypatch.setenv("GPUOPS_OS_INSTALL_CALLBACK_SECRET", "shh")
    _uncabled("bj2-k100-0008")
    ticket = fakes.run(
        ticket_create,
        type_="provisioning",
        title="k100",
        requester=lead,
        inputs={"node": "bj2-k100-0008", "cluster": "bj2-dcu"},
    )
    ticket = _take(fakes, ticket, "start", lead)
    ticket = _take(fakes, ticket, "confirm_cabling", lead)
    assert ticket.state == "installing_os"
    run = ProvisioningRun.objects.get(ticket=ticket)
    body = json.dumps({"id": run.os_install_ref, "status": "succeeded", "message": "imaged"}).encode()
    bad = client.post(
        "/api/rollouts/os-install/callback/", body, content_type="application/json", HTTP_X_GPUOPS_SIGNATURE="sha256=00"
    )
    assert bad.status_code == 403
    with fakes.capture(execute=True):
        ok = client.post(
            "/api/rollouts/os-install/callback/",
            body,
            content_type="application/json",
            HTTP_X_GPUOPS_SIGNATURE=callback_signature(body, "shh"),
        )
    assert ok.status_code == 202
    assert _fresh(ticket).state == "burn_in"


def test_only_received_nodes_and_power_budget(prov, fakes):
    lead, _, _ = prov
    with pytest.raises(GuardError, match="provisioning starts from received"):
        fakes.run(ticket_create, type_="provisioning", title="x", requester=lead, inputs={"node": "sh1-h100-0002"})
    _uncabled("sh1-h100-0024")
    ticket = fakes.run(
        ticket_create,
        type_="provisioning",
        title="full rack",
        requester=lead,
        inputs={"node": "sh1-h100-0024", "rack": "sh1-h100-r001"},
    )
    ticket = _take(fakes, ticket, "start", lead)
    step = StepRun.objects.get(ticket=ticket, step="assign_position")
    assert ticket.state == "positioning" and step.status == "failed"
    assert "exceeds its budget of 45.00 kW" in step.error


def test_a_server_fresh_from_the_dock_gets_its_hcas_from_the_fabric_design(prov, fakes):
    """Procurement opens provisioning tickets for delivered servers (system requester, node only); such a node has
    no HCAs in the CMDB yet. Planning adds one per rail, named as the agent will report them, and cables them."""
    lead, _, _ = prov
    demo_node = m.Node.objects.get(hostname="sh1-h100-0024")
    node = m.Node.objects.create(
        hostname="sh1-new-0001",
        serial="NEW0001",
        server_model=demo_node.server_model,
        site=demo_node.site,
        status="received",
    )
    ticket = fakes.run(
        ticket_create, type_="provisioning", title="Provision sh1-new-0001", requester=None, inputs={"node": node}
    )
    ticket = _take(fakes, ticket, "start", lead)
    assert ticket.state == "awaiting_cabling"
    nics = list(m.Nic.objects.filter(node=node).order_by("rail"))
    assert [n.name for n in nics] == [f"mlx5_{i}" for i in range(8)] and {n.kind for n in nics} == {"infiniband"}
    links = m.Link.objects.filter(a_nic_port__nic__node=node).select_related("b_switch_port__switch", "a_nic_port__nic")
    assert {(lk.a_nic_port.nic.rail, lk.b_switch_port.switch.rail, lk.b_switch_port.name) for lk in links} == {
        (i, i, "p25") for i in range(8)
    }  # p24 is still the demo's received node's
