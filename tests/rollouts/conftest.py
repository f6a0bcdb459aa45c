"""Fixtures for rollout and provisioning tests: eager Celery, fake scheduler and executor, a fake node agent."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from django.utils import timezone

from cmdb import models as m
from integrations.executors import ExecTarget
from integrations.executors import registry as executor_registry
from integrations.executors.fake import FakeExecutor
from integrations.schedulers import registry as scheduler_registry
from integrations.schedulers.fake import FakeScheduler

INSTALL = re.compile(r"install-(?P<component>[\w-]+)\s+'?(?P<version>[^\s']+)'?")


@dataclass
class FakeAgent:
    """Plays the node's inventory agent: after a command that installs a version, the node 'reports' it
    (InstalledSoftware or, for firmware, the devices' FirmwareComponent rows updated, node and cards seen now),
    the way a real report after the install would.

    `silent` hosts never report; `bad_cards[host] = serial` reports that card failed; `stuck[host]` reports
    but keeps the old version (the install did not take).
    """

    silent: set[str] = field(default_factory=set)
    bad_cards: dict[str, str] = field(default_factory=dict)
    stuck: set[str] = field(default_factory=set)
    reports: list[str] = field(default_factory=list)

    def __call__(self, target: ExecTarget, command: str) -> None:
        host = target.name or target.host
        if host in self.silent:
            return
        node = m.Node.objects.get(hostname=host)
        now = timezone.now()
        match = INSTALL.search(command)
        if match and host not in self.stuck and match["component"] in m.FirmwareKind.values:
            # Firmware: every device of the component reports the new version, as the next agent report would.
            m.FirmwareComponent.objects.filter(node=node, component=match["component"]).update(version=match["version"])
        elif match and host not in self.stuck:
            # A queryset update, as ingestion does: InstalledSoftware.version (the software's) shadows the
            # TrackedModel save counter, so a plain save() would try to increment a version string.
            updated = m.InstalledSoftware.objects.filter(node=node, component=match["component"]).update(
                version=match["version"], updated_at=now
            )
            if not updated:
                m.InstalledSoftware.objects.bulk_create(
                    [m.InstalledSoftware(node=node, component=match["component"], version=match["version"])]
                )
        m.Node.objects.filter(pk=node.pk).update(last_seen_at=now)
        m.Accelerator.objects.filter(node=node).update(last_seen_at=now)
        if host in self.bad_cards:
            m.Accelerator.objects.filter(serial=self.bad_cards[host]).update(health="failed")
        self.reports.append(host)


@dataclass
class Harness:
    scheduler: FakeScheduler
    executor: FakeExecutor
    agent: FakeAgent
    capture: Callable

    def run(self, fn: Callable, *args, **kwargs):
        """Call fn, then every on-commit callback it registered (node steps, advances) and theirs, in order."""
        with self.capture(execute=True):
            return fn(*args, **kwargs)

    def sweep(self) -> dict[str, int]:
        """Make waiting steps due now and run the beat sweep (what beat does every 15 s)."""
        from workflows.rollouts.models import NodeStep
        from workflows.rollouts.runner import node_steps_sweep

        NodeStep.objects.filter(status="waiting").update(wake_at=timezone.now())
        with self.capture(execute=True):
            return node_steps_sweep()


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.CELERY_TASK_EAGER_PROPAGATES = True
    return settings


@pytest.fixture
def fakes(db, eager, django_capture_on_commit_callbacks) -> Iterator[Harness]:
    agent = FakeAgent()
    executor = FakeExecutor(on_run=[agent])
    scheduler = FakeScheduler()
    with scheduler_registry.override(scheduler), executor_registry.override(executor):
        yield Harness(scheduler=scheduler, executor=executor, agent=agent, capture=django_capture_on_commit_callbacks)


@pytest.fixture
def people(db, settings):
    """(lead, approver): an ops lead who opens and runs rollout tickets, a change approver. Notifications go to a
    fake notifier."""
    from integrations.notifiers import registry as notifier_registry
    from integrations.notifiers.fake import FakeNotifier
    from tests.factories.cmdb import UserFactory
    from workflows.permissions import group_permissions_set
    from workflows.services.bootstrap import groups_bootstrap

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    groups = groups_bootstrap()
    group_permissions_set(groups["change-approvers"], ["rollout_approve"])
    lead = UserFactory(username="lead")
    lead.groups.add(groups["ops-leads"])
    approver = UserFactory(username="approver")
    approver.groups.add(groups["change-approvers"])
    with notifier_registry.override(FakeNotifier()):
        yield lead, approver


@pytest.fixture
def demo_fleet(db):
    """The small demo fleet (48 nodes, three clusters, driver packages and baselines)."""
    from cmdb.services.demo import demo_load

    demo_load(scale="small")
    return m
