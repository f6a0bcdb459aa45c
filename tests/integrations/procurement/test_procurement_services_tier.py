"""Services tier: a signed delivery posted to the webhook is processed by a real Celery worker through Redis."""

from __future__ import annotations

import pytest

from cmdb import models as m
from integrations.procurement.models import InboundEvent
from tests.conftest import wait_until
from tests.integrations.procurement.procurement_helpers import event_body, signed_post

pytestmark = pytest.mark.services


def test_a_delivery_is_processed_by_a_real_worker(celery_worker_process, approved_request, client, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False  # publish to the broker; the worker process does the work
    card_line = next(line for line in approved_request.lines.all() if line.accelerator_model_id)
    data = {
        "po_number": approved_request.po_number,
        "shipment_id": "SHP-W1",
        "site": "sh1",
        "lines": [{"line_ref": card_line.line_ref, "serials": ["WRK-1", "WRK-2"]}],
    }
    assert signed_post(client, event_body("shipment.delivered", data)).status_code == 202
    assert wait_until(lambda: InboundEvent.objects.filter(status="processed").exists(), timeout=60), list(
        InboundEvent.objects.values("status", "error")
    )
    assert set(m.Accelerator.objects.filter(po_number=approved_request.po_number).values_list("serial", flat=True)) == {
        "WRK-1",
        "WRK-2",
    }
