"""The node page's firmware section: each component with its status and the baseline it was held to."""

from __future__ import annotations

import pytest
from django.test import Client

from cmdb import models as m
from cmdb.services.firmware import firmware_baseline_save, firmware_canonical, node_firmware_record
from tests.factories.cmdb import NodeFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_node_page_shows_firmware_against_baselines():
    node = NodeFactory(hostname="fw-0001")
    entries = [
        {"component": "bios", "device": "system", "model": "x", "version": "1.9.2"},
        {"component": "nic", "device": "0000:3b:00.0", "model": "ConnectX6DX", "version": "22.39.1002"},
    ]
    node_firmware_record(node, firmware_canonical(entries), None)
    firmware_baseline_save(m.FirmwareBaseline(component="bios", model=node.server_model.name, versions=["2.1.6"]))
    client = Client()
    client.force_login(UserFactory(username="root", is_superuser=True))
    page = client.get(f"/nodes/{node.hostname}/").content.decode()
    section = page[page.index('id="firmware"') :]
    section = section[: section.index("</section>")]
    assert "1.9.2" in section and "outdated" in section and "minimum" in section and "2.1.6" in section
    assert "22.39.1002" in section and "not in baseline" in section
