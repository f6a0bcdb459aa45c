"""On script/server a provisioning ticket reaches `active` with nothing but the demo's stand-in agents: their
reports go through real ingestion, which wakes the waiting burn-in step (no poll interval to sit out)."""

from __future__ import annotations

import pytest

from cmdb import models as m
from integrations.executors import registry as executor_registry
from integrations.executors.dry_run import DryRunExecutor
from integrations.notifiers import registry as notifier_registry
from integrations.notifiers.fake import FakeNotifier
from integrations.os_install import registry as os_registry
from integrations.os_install.fake import FakeOsInstaller
from inventory_agents.services.demo_agents import demo_agents_report
from tests.factories.cmdb import UserFactory
from workflows.engine import ticket_create, transition_apply
from workflows.models import StepRun, Ticket
from workflows.services.bootstrap import groups_bootstrap


@pytest.fixture
def lead(demo_fleet, fakes, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.GPUOPS_ROLLOUTS = {"BURN_IN_WINDOW_MINUTES": 0}
    user = UserFactory(username="lead")
    user.groups.add(groups_bootstrap()["ops-leads"])
    # The demo's adapters: dry-run executor, fake OS installer, no machine behind the node.
    with (
        executor_registry.override(DryRunExecutor()),
        notifier_registry.override(FakeNotifier()),
        os_registry.override(FakeOsInstaller()),
    ):
        yield user


def test_demo_agents_carry_a_received_node_through_burn_in_to_active(lead, fakes):
    node = m.Node.objects.get(hostname="sh1-h100-0024")
    assert node.status == "received"
    ticket = fakes.run(
        ticket_create,
        type_="provisioning",
        title="Bring up sh1-h100-0024",
        requester=lead,
        inputs={"node": node.hostname, "cluster": "sh1-train"},
    )
    for name in ("start", "confirm_cabling"):
        fakes.run(transition_apply, ticket=Ticket.objects.get(pk=ticket.pk), name=name, actor=lead, data={})
    ticket.refresh_from_db()
    assert ticket.state == "burn_in"
    waiting = StepRun.objects.get(ticket=ticket, status="waiting")
    assert waiting.wait_key == f"node:{node.pk}:reported"

    # One round of the beat task, nothing else: its report of the node wakes the step, which passes.
    round_ = fakes.run(demo_agents_report)
    assert round_.applied >= 1
    ticket.refresh_from_db()
    node.refresh_from_db()
    assert ticket.state == "done" and not ticket.is_open
    assert node.status == "active" and node.cluster.name == "sh1-train"
