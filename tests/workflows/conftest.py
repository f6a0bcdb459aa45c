"""Fixtures for the workflow tests: eager Celery, fake adapters, the usual people, a node with a failed card."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from cmdb import models as m
from integrations.notifiers import registry as notifier_registry
from integrations.notifiers.fake import FakeNotifier
from integrations.schedulers import registry as scheduler_registry
from integrations.schedulers.fake import FakeScheduler
from tests.factories.cmdb import (
    AcceleratorFactory,
    AcceleratorModelFactory,
    ClusterFactory,
    NodeFactory,
    RackFactory,
    RoomFactory,
    SiteFactory,
    StockLocationFactory,
    UserFactory,
)
from workflows.models import StepRun, StepStatus
from workflows.runner import runs_wake_due
from workflows.services.bootstrap import groups_bootstrap


@pytest.fixture
def eager(settings):
    """Run Celery tasks in-process (the engine reads the live Django setting)."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.CELERY_TASK_EAGER_PROPAGATES = True
    return settings


@pytest.fixture
def scheduler() -> Iterator[FakeScheduler]:
    fake = FakeScheduler()
    with scheduler_registry.override(fake):
        yield fake


@pytest.fixture
def notifier() -> Iterator[FakeNotifier]:
    fake = FakeNotifier()
    with notifier_registry.override(fake):
        yield fake


@pytest.fixture
def wf(db, eager, scheduler, notifier, django_capture_on_commit_callbacks):
    """Everything a workflow test needs; `wf.run(fn)` runs fn and then every on-commit callback (steps)."""
    return WorkflowHarness(scheduler=scheduler, notifier=notifier, capture=django_capture_on_commit_callbacks)


@dataclass
class WorkflowHarness:
    scheduler: FakeScheduler
    notifier: FakeNotifier
    capture: Callable

    def run(self, fn: Callable, *args, **kwargs):
        """Call fn inside a capture of on-commit callbacks, then run them (and the ones they register)."""
        with self.capture(execute=True):
            return fn(*args, **kwargs)

    @contextlib.contextmanager
    def committing(self):
        with self.capture(execute=True):
            yield

    def wake(self) -> int:
        """Make every waiting run due now and run the waker (what beat does every 30 s)."""
        StepRun.objects.filter(status=StepStatus.WAITING).update(wake_at=timezone.now())
        with self.capture(execute=True):
            return runs_wake_due()


@pytest.fixture
def groups(db) -> dict[str, Group]:
    return groups_bootstrap()


@pytest.fixture
def lead(groups):
    """An ops lead: every ticket; opening one still needs change rights where it acts (here site 'sh9')."""
    from cmdb.permissions import grant_scope

    user = UserFactory(username="lead", email="lead@example.com")
    user.groups.add(groups["ops-leads"])
    grant_scope(scope_obj=SiteFactory(code="sh9"), perms=["change_scope"], users=[user])
    return user


@pytest.fixture
def tech(groups):
    """A dc-technicians member working at site 'sh9' (the group gives the role, the scope grant the place)."""
    from cmdb.permissions import grant_scope

    user = UserFactory(username="tech", email="tech@example.com")
    user.groups.add(groups["dc-technicians"])
    grant_scope(scope_obj=SiteFactory(code="sh9"), perms=["change_scope"], users=[user])
    return user


@pytest.fixture
def approvers(groups):
    users = [UserFactory(username=f"approver{i}", email=f"approver{i}@example.com") for i in (1, 2, 3)]
    for user in users:
        user.groups.add(groups["change-approvers"])
    return users


@pytest.fixture
def outsider(db):
    return UserFactory(username="outsider", is_staff=False)


@dataclass
class Fleet:
    site: m.Site
    cluster: m.Cluster
    node: m.Node
    cards: list[m.Accelerator]
    warehouse: m.StockLocation
    model: m.AcceleratorModel

    @property
    def failed(self) -> m.Accelerator:
        return self.cards[3]

    def reservation_for(self, ticket) -> m.StockReservation:
        """An active reservation of a fresh spare (serial SP-1) held by `ticket`."""
        spare = self.spare("SP-1")
        now = timezone.now()
        return m.StockReservation.objects.create(
            accelerator=spare,
            site=self.site,
            reserved_for=f"ticket:{ticket.pk}",
            reserved_at=now,
            expires_at=now + dt.timedelta(hours=72),
        )

    def spare(self, serial: str = "SPARE-0001") -> m.Accelerator:
        return AcceleratorFactory(
            model=self.model,
            serial=serial,
            lifecycle="in_stock",
            node=None,
            slot_index=None,
            stock_location=self.warehouse,
            site=self.site,
            health="ok",
        )


@pytest.fixture
def fleet(db) -> Fleet:
    """A racked Slurm node of 8 H100s at site 'sh9' with card 3 failed, and an empty warehouse."""
    site = SiteFactory(code="sh9")
    cluster = ClusterFactory(name="sh9-train", site=site, kind="slurm")
    rack = RackFactory(room=RoomFactory(site=site))
    model = AcceleratorModelFactory()
    node = NodeFactory(hostname="sh9-h100-0001", site=site, cluster=cluster, rack=rack, position=1, status="active")
    cards = [AcceleratorFactory(model=model, node=node, slot_index=i, serial=f"1654SH9{i:05d}") for i in range(8)]
    m.Accelerator.objects.filter(pk=cards[3].pk).update(health="failed", health_detail="XID 79")
    cards[3].refresh_from_db()
    warehouse = StockLocationFactory(site=site, name="warehouse")
    return Fleet(site=site, cluster=cluster, node=node, cards=cards, warehouse=warehouse, model=model)


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    """Users are made by the dozen here; real password hashing would dominate the run time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
