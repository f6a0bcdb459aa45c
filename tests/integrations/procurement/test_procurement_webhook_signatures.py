"""The signed webhook: authentic events are stored and answered 202; everything else is refused, writes nothing
and leaves a line on the gpuops.security logger."""

from __future__ import annotations

import logging
import time

import pytest

from integrations.procurement.models import InboundEvent
from integrations.procurement.signatures import SignatureError, headers_sign, signature_verify
from tests.integrations.procurement.procurement_helpers import OLD_SECRET, SECRET, event_body, signed_post

pytestmark = pytest.mark.django_db

APPROVED = event_body("po.approved", {"po_number": "PO-1001"}, event_id="evt-approved-1")


def _security_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "gpuops.security"]


def test_valid_signature_is_stored_answered_202_and_processed_on_commit(client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = signed_post(client, APPROVED)
    assert response.status_code == 202, response.content
    assert response.json() == {"status": "accepted", "event_id": "evt-approved-1"}
    row = InboundEvent.objects.get()
    assert (row.source, row.event_id, row.type, row.status, row.signed_with) == (
        "procurement",
        "evt-approved-1",
        "po.approved",
        "pending",
        0,
    )
    assert row.payload == APPROVED
    assert len(callbacks) == 1  # processing is enqueued on commit, never run inside the request


@pytest.mark.parametrize(
    ("case", "kwargs", "status", "reason"),
    [
        ("invalid signature", {"headers": {"X-Gpuops-Signature": "sha256=" + "0" * 64}}, 401, "bad_signature"),
        ("tampered body", {"tamper": True}, 401, "bad_signature"),
        ("wrong secret", {"secret": "not-the-secret"}, 401, "bad_signature"),
        ("old timestamp", {"timestamp_offset": -301}, 401, "stale_timestamp"),
        ("future timestamp", {"timestamp_offset": 400}, 401, "stale_timestamp"),
        ("unknown source", {"source": "someone-else"}, 401, "unknown_source"),
        ("malformed signature", {"headers": {"X-Gpuops-Signature": "md5=abc"}}, 400, "malformed_signature"),
        ("no signature", {"headers": {"X-Gpuops-Signature": ""}}, 400, "missing_header"),
        ("bad timestamp", {"headers": {"X-Gpuops-Timestamp": "yesterday"}}, 400, "malformed_timestamp"),
    ],
)
def test_unauthentic_requests_are_refused_write_nothing_and_are_logged(client, caplog, case, kwargs, status, reason):
    caplog.set_level(logging.INFO, logger="gpuops.security")
    kwargs = dict(kwargs)
    if "timestamp_offset" in kwargs:  # relative to the request, not to collection time (the suite runs for minutes)
        kwargs["timestamp"] = int(time.time()) + kwargs.pop("timestamp_offset")
    response = signed_post(client, APPROVED, **kwargs)
    assert response.status_code == status, case
    assert response.json()["error"]["code"] in {"not_authenticated", "invalid_signature_headers"}
    assert InboundEvent.objects.count() == 0
    lines = _security_lines(caplog)
    assert len(lines) == 1 and reason in lines[0], lines


def test_replayed_event_id_answers_200_changes_nothing_and_is_logged(client, caplog):
    caplog.set_level(logging.INFO, logger="gpuops.security")
    assert signed_post(client, APPROVED).status_code == 202
    InboundEvent.objects.update(status="processed")
    again = signed_post(client, APPROVED)
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    # Same id with another payload (a replay attempt with an edited body, freshly signed): still nothing.
    edited = {**APPROVED, "data": {"po_number": "PO-9999"}}
    assert signed_post(client, edited).status_code == 200
    row = InboundEvent.objects.get()
    assert row.payload == APPROVED and row.status == "processed"
    lines = _security_lines(caplog)
    assert len(lines) == 2 and "replayed event id evt-approved-1" in lines[0] and "DIFFERENT" in lines[1]


def test_secret_rotation_accepts_both_secrets_then_only_the_new_one(client, settings):
    settings.GPUOPS_PROCUREMENT = {
        **settings.GPUOPS_PROCUREMENT,
        "WEBHOOK_SOURCES": {"procurement": {"secrets": [SECRET, OLD_SECRET]}},
    }
    assert signed_post(client, event_body("po.approved", {"po_number": "PO-1"}), secret=OLD_SECRET).status_code == 202
    assert signed_post(client, event_body("po.approved", {"po_number": "PO-2"}), secret=SECRET).status_code == 202
    assert list(InboundEvent.objects.order_by("id").values_list("signed_with", flat=True)) == [1, 0]
    # Rotation finished: the previous secret is removed from the settings.
    settings.GPUOPS_PROCUREMENT = {
        **settings.GPUOPS_PROCUREMENT,
        "WEBHOOK_SOURCES": {"procurement": {"secrets": [SECRET]}},
    }
    assert signed_post(client, event_body("po.approved", {"po_number": "PO-3"}), secret=OLD_SECRET).status_code == 401
    assert InboundEvent.objects.count() == 2


def test_secrets_are_references_resolved_at_call_time(client, settings, monkeypatch):
    settings.GPUOPS_PROCUREMENT = {
        **settings.GPUOPS_PROCUREMENT,
        "WEBHOOK_SOURCES": {"procurement": {"secrets": ["env:TEST_PROC_SECRET"]}},
    }
    monkeypatch.delenv("TEST_PROC_SECRET", raising=False)
    assert signed_post(client, event_body("po.approved", {"po_number": "PO-1"}), secret="from-env").status_code == 401
    monkeypatch.setenv("TEST_PROC_SECRET", "from-env")
    assert signed_post(client, event_body("po.approved", {"po_number": "PO-1"}), secret="from-env").status_code == 202


@pytest.mark.parametrize(
    ("event", "field"),
    [
        (event_body("po.approved", {}), "data.po_number"),
        (
            event_body(
                "shipment.delivered",
                {
                    "po_number": "PO-1",
                    "shipment_id": "S1",
                    "site": "sh1",
                    "lines": [{"line_ref": "PR-1-1", "serials": ["OK1", "bad serial"]}],
                },
            ),
            "data.lines.0.serials.1",
        ),
        (event_body("shipment.dispatched", {"po_number": "PO-1", "shipment_id": "S1", "lines": []}), "data.lines"),
        (event_body("invoice.posted", {"po_number": "PO-1", "invoice_number": "I-1", "amount": "12,5"}), "data.amount"),
        (event_body("po.teleported", {"po_number": "PO-1"}), "type"),
        ({"type": "po.approved", "data": {"po_number": "PO-1"}}, "id"),
    ],
)
def test_schema_errors_answer_400_naming_the_field_and_write_nothing(client, event, field):
    response = signed_post(client, event)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and field in error["fields"], error
    assert InboundEvent.objects.count() == 0


def test_body_that_is_not_json_is_400(client):
    response = signed_post(client, b"<xml/>")
    assert response.status_code == 400 and "body" in response.json()["error"]["fields"]


def test_only_post_is_allowed(client):
    assert client.get("/api/integrations/procurement/events/").status_code == 405


def test_verifier_tries_every_secret_and_reports_which_matched():
    body = b'{"x": 1}'
    headers = headers_sign(secret="b", source="p", body=body, timestamp=1000)
    verified = signature_verify(headers=headers, body=body, secrets_for={"p": ["a", "b"]}, window_s=300, now=1100)
    assert verified.secret_index == 1 and verified.timestamp == 1000
    with pytest.raises(SignatureError) as exc:
        signature_verify(headers=headers, body=body, secrets_for={"p": ["a", "b"]}, window_s=300, now=1301)
    assert exc.value.reason == "stale_timestamp"
