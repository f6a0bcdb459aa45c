"""Fixtures for the procurement tests: webhook secrets, approvers and rules, requests."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group

from cmdb import models as m
from integrations.procurement.fakes import FakeProcurementClient
from integrations.procurement.models import ApprovalRule
from integrations.procurement.services import requests as svc
from tests.factories.cmdb import SiteFactory, UserFactory
from tests.integrations.procurement.procurement_helpers import SECRET, request_make


@pytest.fixture(autouse=True)
def procurement_settings(settings):
    """One source with one secret, the in-memory fake client, tasks run in-process (on commit)."""
    settings.GPUOPS_PROCUREMENT = {
        "WEBHOOK_SOURCES": {"procurement": {"secrets": [SECRET]}},
        "CLIENT": "integrations.procurement.fakes.FakeProcurementClient",
    }
    settings.CELERY_TASK_ALWAYS_EAGER = True
    # The factories' users get a hashed password; the default hasher is deliberately slow.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    FakeProcurementClient.reset()
    yield settings
    FakeProcurementClient.reset()


@pytest.fixture
def site() -> m.Site:
    return SiteFactory(code="sh1")


@pytest.fixture
def approvers(db) -> dict[str, Any]:
    """Two levels: ops leads approve everything (1 vote), finance also approves 100,000 and above (1 vote)."""
    ops, finance = Group.objects.create(name="ops-leads"), Group.objects.create(name="finance")
    lead, cfo, requester = UserFactory(username="lead"), UserFactory(username="cfo"), UserFactory(username="req")
    lead.groups.add(ops)
    cfo.groups.add(finance)
    ApprovalRule.objects.create(name="ops lead", level=1, min_amount=0, approvers_required=1, group=ops)
    ApprovalRule.objects.create(
        name="finance", level=2, min_amount=Decimal("100000"), approvers_required=1, group=finance
    )
    return {"ops": ops, "finance": finance, "lead": lead, "cfo": cfo, "requester": requester}


@pytest.fixture
def part_models(db) -> dict[str, m.PartModel]:
    return {
        "cable": m.PartModel.objects.create(
            sku="CBL-DAC-400G-2M", name="400G DAC 2m", kind="cable", is_serialised=False
        ),
        "optic": m.PartModel.objects.create(
            sku="OSFP-400G-SR4", name="400G SR4 optic", kind="optic", is_serialised=True
        ),
    }


@pytest.fixture
def approved_request(db, site, approvers, part_models, django_capture_on_commit_callbacks):
    """An approved request (2 servers, 3 cards, 10 cables = 95,800 USD: one level) whose PO the fake placed."""
    req = request_make(site=site, requester=approvers["requester"], cables=10, cable_model=part_models["cable"])
    svc.request_submit(request=req)
    with django_capture_on_commit_callbacks(execute=True):
        svc.request_approve(request=req, approver=approvers["lead"])
    req.refresh_from_db()
    assert req.po_number.startswith("PO-"), req.po_error
    return req
