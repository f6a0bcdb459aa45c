"""Contract tests: the real httpx client against a real local HTTP server playing the procurement system."""

from __future__ import annotations

from decimal import Decimal

import pytest

from integrations.exceptions import PermanentError, TransientError
from integrations.procurement.adapter import HttpProcurementClient
from integrations.procurement.fake_server import FakeProcurementServer
from integrations.procurement.ports import OrderDraft, OrderLineDraft
from integrations.procurement.services import requests as svc
from integrations.procurement.services.orders import order_place
from tests.integrations.procurement.procurement_helpers import request_make

DRAFT = OrderDraft(
    request_ref="PR-7",
    title="t",
    budget_code="CAPEX",
    currency="USD",
    justification="j",
    lines=(
        OrderLineDraft(
            line_ref="PR-7-1",
            sku="H100-SXM5-80GB",
            description="H100",
            quantity=4,
            unit_price=Decimal("25000.00"),
            site_code="sh1",
        ),
    ),
)


@pytest.fixture
def fake():
    with FakeProcurementServer(token="t0ken", timeout_delay_s=1.0) as server:
        yield server


def client_for(fake: FakeProcurementServer, **kwargs) -> HttpProcurementClient:
    options = {
        "base_url": fake.url,
        "token": "t0ken",
        "timeout_s": 0.3,
        "connect_timeout_s": 0.3,
        "attempts": 3,
        "backoff_s": 0.01,
        "backoff_max_s": 0.05,
    }
    return HttpProcurementClient(**{**options, **kwargs})


def test_create_retried_after_a_timeout_creates_one_po(fake):
    fake.state.faults.append("timeout")  # the PO is created, the answer comes too late
    po = client_for(fake).order_create(DRAFT, idempotency_key="gpuops-PR-7-r1")
    assert po.po_number == "PO-5001" and po.lines[0].po_line_ref == "PO-5001-1"
    assert len(fake.state.orders) == 1
    assert fake.state.key_hits == {"gpuops-PR-7-r1": 2}  # two requests reached it, one PO exists


@pytest.mark.parametrize("fault", ["500", "502", "429", "reset"])
def test_transient_answers_are_retried(fake, fault):
    fake.state.faults.append(fault)
    assert client_for(fake).order_create(DRAFT, idempotency_key="k1").po_number == "PO-5001"
    assert len(fake.state.orders) == 1


def test_still_failing_after_the_attempts_is_a_transient_error(fake):
    fake.state.faults.extend(["503", "503", "503"])
    with pytest.raises(TransientError, match="after 3 attempts: HTTP 503"):
        client_for(fake).order_create(DRAFT, idempotency_key="k1")
    assert fake.state.orders == {}


def test_a_4xx_is_permanent_and_not_retried(fake):
    with pytest.raises(PermanentError, match="401"):
        client_for(fake, token="wrong").order_create(DRAFT, idempotency_key="k1")
    with pytest.raises(PermanentError, match="404"):
        client_for(fake).order_get("PO-404")


def test_unreachable_peer_is_transient():
    client = HttpProcurementClient(
        base_url="http://127.0.0.1:9", token="", attempts=2, backoff_s=0.0, timeout_s=0.3, connect_timeout_s=0.3
    )
    with pytest.raises(TransientError, match="transport error"):
        client.order_create(DRAFT, idempotency_key="k1")


def test_get_and_cancel(fake):
    client = client_for(fake)
    po = client.order_create(DRAFT, idempotency_key="k1")
    assert client.order_get(po.po_number).request_ref == "PR-7"
    assert client.order_cancel(po.po_number, reason="dup", idempotency_key="c1").state == "cancelled"


@pytest.mark.django_db
def test_approval_places_one_po_through_the_rest_client_despite_a_timeout_and_a_task_retry(
    fake, settings, site, approvers
):
    settings.GPUOPS_PROCUREMENT = {
        **settings.GPUOPS_PROCUREMENT,
        "CLIENT": "integrations.procurement.adapter.HttpProcurementClient",
        "BASE_URL": fake.url,
        "API_TOKEN": "t0ken",
        "TIMEOUT_S": 0.3,
        "CONNECT_TIMEOUT_S": 0.3,
        "ATTEMPTS": 2,
        "BACKOFF_S": 0.01,
        "BACKOFF_MAX_S": 0.05,
    }
    req = svc.request_approve(
        request=svc.request_submit(request=request_make(site=site, requester=approvers["requester"])),
        approver=approvers["lead"],
    )
    fake.state.faults.extend(["timeout", "503"])  # both attempts of the first task run fail; the PO exists
    with pytest.raises(TransientError):
        order_place(request_id=req.pk)
    req = order_place(request_id=req.pk)  # the Celery retry, same Idempotency-Key
    assert req.po_number == "PO-5001" and req.supplier == "Simulated Supplier GmbH"
    assert len(fake.state.orders) == 1 and fake.state.key_hits == {req.po_idempotency_key: 2}


def test_simulate_serve_is_the_fake_the_real_client_talks_to(tmp_path):
    import os
    import socket
    import subprocess
    import sys
    from pathlib import Path

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    repo = Path(__file__).resolve().parents[3]
    env = {**os.environ, "GPUOPS_VAR_DIR": str(tmp_path)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "procurement_simulate",
            "serve",
            "--port",
            str(port),
            "--token",
            "t0ken",
            "--fail",
            "500",
        ],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        from tests.conftest import wait_until

        def listening() -> bool:
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.1", port)) == 0

        assert wait_until(listening, timeout=60, interval=0.2), "procurement_simulate serve did not start"
        client = HttpProcurementClient(
            base_url=f"http://127.0.0.1:{port}",
            token="t0ken",
            attempts=3,
            backoff_s=0.05,
            backoff_max_s=0.1,
            timeout_s=2,
        )
        po = client.order_create(DRAFT, idempotency_key="serve-1")  # the scripted 500, then the PO
        assert po.po_number == "PO-5001"
        assert client.order_create(DRAFT, idempotency_key="serve-1").po_number == "PO-5001"
    finally:
        proc.terminate()
        output = proc.communicate(timeout=10)[0]
    assert "Fake procurement API on" in output
