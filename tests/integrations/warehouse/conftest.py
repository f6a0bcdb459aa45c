"""Fixtures for the warehouse tests: two sites with stock locations, models, and the fake WMS."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Group

from cmdb import models as m
from integrations.procurement.models import ApprovalRule
from integrations.warehouse.fakes import FakeWarehouseClient
from tests.factories.cmdb import AcceleratorModelFactory, NodeFactory, SiteFactory

WMS_SECRET = "wms-secret-1"


@pytest.fixture(autouse=True)
def warehouse_settings(settings):
    settings.GPUOPS_WAREHOUSE = {"WEBHOOK_SOURCES": {"wms": {"secrets": [WMS_SECRET]}}}
    settings.GPUOPS_PROCUREMENT = {"CLIENT": "integrations.procurement.fakes.FakeProcurementClient"}
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    FakeWarehouseClient.reset()
    yield settings
    FakeWarehouseClient.reset()


@dataclass
class Stock:
    sh1: m.Site
    bj2: m.Site
    wh1: m.StockLocation
    shelf1: m.StockLocation
    wh2: m.StockLocation
    h100: m.AcceleratorModel
    cable: m.PartModel
    optic: m.PartModel
    node1: m.Node


@pytest.fixture
def stock(db) -> Stock:
    sh1, bj2 = SiteFactory(code="sh1"), SiteFactory(code="bj2")
    wh1 = m.StockLocation.objects.create(site=sh1, name="warehouse", kind="warehouse")
    shelf1 = m.StockLocation.objects.create(site=sh1, name="shelf-a", kind="shelf", parent=wh1)
    wh2 = m.StockLocation.objects.create(site=bj2, name="warehouse", kind="warehouse")
    return Stock(
        sh1=sh1,
        bj2=bj2,
        wh1=wh1,
        shelf1=shelf1,
        wh2=wh2,
        h100=AcceleratorModelFactory(),
        cable=m.PartModel.objects.create(sku="CBL-DAC-400G-2M", name="400G DAC 2m", kind="cable", is_serialised=False),
        optic=m.PartModel.objects.create(sku="OSFP-400G-SR4", name="400G SR4", kind="optic", is_serialised=True),
        node1=NodeFactory(site=sh1, hostname="sh1-gpu-0001"),
    )


@pytest.fixture
def refill_rule(db) -> ApprovalRule:
    """Refills need an approval chain to be submitted."""
    return ApprovalRule.objects.create(
        name="spares", level=1, min_amount=0, approvers_required=1, group=Group.objects.create(name="spares-approvers")
    )
