"""Alerts in: an Alertmanager notification becomes a health event graded by the health policy, a severe one on a
card opens its repair ticket (the same receiver as agent reports), a resolved one closes the event; redelivery
changes nothing; unknown hosts and cards are kept, unmatched."""

from __future__ import annotations

import json

import pytest

from cmdb import models as m
from integrations.monitoring.models import AlertSource, ReceivedAlert
from tests.integrations.monitoring.conftest import AM_URL, GENERIC_URL, UUID0, am_alert, am_body
from workflows.definitions.repair import dedup_key_for
from workflows.models import Ticket

pytestmark = pytest.mark.django_db

XID79 = {"alertname": "DCGMXidError", "Hostname": "gpu-a01", "UUID": UUID0, "gpu": "0", "xid": "79"}


def _repair(card: m.Accelerator) -> Ticket | None:
    return Ticket.objects.filter(dedup_key=dedup_key_for(card.pk), is_open=True).first()


def test_xid_79_opens_the_repair_ticket_of_the_right_card_and_resolving_closes_the_event(fleet, post):
    response = post(am_body(am_alert(XID79)))
    assert response.status_code == 200, response.content
    assert response.json()["outcomes"] == {"failed": 1}
    event = m.HealthEvent.objects.get()
    assert (event.accelerator_id, event.kind, event.code, event.source) == (fleet.card0.pk, "xid", "79", "alertmanager")
    assert (event.severity, event.action) == ("critical", "drain_repair")  # the policy's grade, as for the agent
    fleet.card0.refresh_from_db()
    assert fleet.card0.health == "failed"
    ticket = _repair(fleet.card0)
    assert ticket is not None and ticket.type == "repair"
    assert _repair(fleet.card1) is None

    resolved = post(am_body(am_alert(XID79, status="resolved"), status="resolved"))
    assert resolved.json()["outcomes"] == {"resolved": 1}
    event.refresh_from_db()
    assert event.resolved_at is not None
    alert = ReceivedAlert.objects.get()
    assert (alert.status, alert.notifications, alert.health_event_id) == ("resolved", 2, event.pk)


def test_redelivery_and_repeats_are_idempotent(fleet, post):
    body = am_body(am_alert(XID79))
    for _ in range(3):
        assert post(body).status_code == 200
    assert post(body).json()["outcomes"] == {"duplicate": 1}
    assert ReceivedAlert.objects.get().notifications == 4
    event = m.HealthEvent.objects.get()
    assert event.count == 1
    assert Ticket.objects.filter(type="repair").count() == 1
    # The same alert resolved twice closes once.
    post(am_body(am_alert(XID79, status="resolved"), status="resolved"))
    assert post(am_body(am_alert(XID79, status="resolved"), status="resolved")).json()["outcomes"] == {"duplicate": 1}


def test_a_new_occurrence_of_the_same_alert_counts_on_the_open_event(fleet, post):
    post(am_body(am_alert(XID79)))
    post(am_body(am_alert(XID79, fingerprint="a1b2c3d4e5f60718", starts_at="2026-12-02T04:00:00Z")))
    assert ReceivedAlert.objects.count() == 2
    event = m.HealthEvent.objects.get()
    assert event.count == 2 and Ticket.objects.filter(type="repair").count() == 1


@pytest.mark.parametrize(
    ("labels", "card"),
    [
        ({"instance": "gpu-a01.bj1.example.com:9400", "gpu": "1"}, "card1"),
        ({"Hostname": "GPU-A01", "pci_bus_id": "00000000:4B:00.0"}, "card1"),
        ({"instance": "gpu-a01:9400", "UUID": UUID0}, "card0"),
        ({"UUID": UUID0}, "card0"),  # the UUID alone is the card's identity
    ],
)
def test_card_matching_by_uuid_gpu_index_or_pci_bus_id(fleet, post, labels, card):
    post(am_body(am_alert({"alertname": "DCGM_FI_DEV_XID_ERRORS", **labels}, value="79.000000")))
    event = m.HealthEvent.objects.get()
    assert event.accelerator_id == getattr(fleet, card).pk and event.code == "79"


def test_warnings_degrade_while_firing_and_heal_when_resolved(fleet, post):
    hot = {"alertname": "DCGMGpuTemperatureHigh", "Hostname": "gpu-a01", "gpu": "0"}
    post(am_body(am_alert(hot, fingerprint="hot0")))
    fleet.card0.refresh_from_db()
    assert fleet.card0.health == "degraded" and _repair(fleet.card0) is None
    post(am_body(am_alert(hot, fingerprint="hot0", status="resolved"), status="resolved"))
    fleet.card0.refresh_from_db()
    assert fleet.card0.health == "ok"


def test_node_alerts_become_node_events(fleet, post):
    post(am_body(am_alert({"alertname": "NodeDown", "instance": "gpu-a01:9100", "job": "node"}, fingerprint="nd")))
    event = m.HealthEvent.objects.get()
    assert (event.node_id, event.accelerator_id, event.kind, event.severity) == (
        fleet.node.pk,
        None,
        "node_down",
        "critical",
    )
    fleet.node.refresh_from_db()
    assert fleet.node.health == "degraded"  # a node-level signal degrades the node, fails no card


@pytest.mark.parametrize(
    ("labels", "reason"),
    [
        ({"alertname": "DCGMXidError", "Hostname": "gpu-zz99", "xid": "79"}, "no node named 'gpu-zz99'"),
        ({"alertname": "DCGMXidError", "Hostname": "gpu-a01", "gpu": "7", "xid": "79"}, "no card in slot 7"),
        ({"alertname": "Heartbeat", "Hostname": "gpu-a01"}, "no alert rule for 'Heartbeat'"),
    ],
)
def test_unknown_host_card_or_alert_is_stored_unmatched_never_dropped(fleet, post, labels, reason):
    assert post(am_body(am_alert(labels))).json()["outcomes"] == {"unmatched": 1}
    alert = ReceivedAlert.objects.get()
    assert not alert.is_matched and reason in alert.unmatched_reason
    assert not m.HealthEvent.objects.exists() and not Ticket.objects.exists()


def test_authentication_is_a_bearer_token_of_an_active_source(fleet, post, source_token):
    body = am_body(am_alert(XID79))
    assert post(body, token=None).status_code == 401
    assert post(body, token="gpm_wrong").status_code == 401
    assert post(body, token="not-even-a-prefix").status_code == 401
    AlertSource.objects.update(is_active=False)
    assert post(body).status_code == 401
    assert not ReceivedAlert.objects.exists()


def test_only_the_hash_of_a_token_is_stored(source_token):
    source = AlertSource.objects.get()
    assert source_token not in (source.token_hash, source.token_prefix) and len(source.token_hash) == 64


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", "body"),
        ([], "body"),
        ({"version": "4"}, "alerts"),
        ({"version": "3", "alerts": []}, "version"),
        ({"version": "4", "alerts": [{"labels": {"alertname": "X"}}]}, "alerts[0].startsAt"),
        ({"version": "4", "alerts": [{"labels": {"a": "b"}, "startsAt": "yesterday"}]}, "alerts[0].startsAt"),
        ({"version": "4", "alerts": [{"labels": "x", "startsAt": "2026-01-01T00:00:00Z"}]}, "alerts[0].labels"),
        (
            {"version": "4", "alerts": [{"labels": {"a": "b"}, "startsAt": "2026-01-01T00:00:00Z", "status": "x"}]},
            "alerts[0].status",
        ),
    ],
)
def test_a_malformed_body_is_a_400_naming_the_field(fleet, post, body, field):
    response = post(body)
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert not ReceivedAlert.objects.exists()


def test_the_captured_alertmanager_payloads_parse(fleet, post, shared_fixtures):
    captures = sorted((shared_fixtures / "alertmanager-webhook").glob("*.json"))
    assert captures
    for capture in captures:
        response = post(capture.read_bytes())
        assert response.status_code == 200, (capture.name, response.content)
    # Heartbeat, high_memory_load (no fingerprint, no status: from the labels and the group), 2 x CPU temperature.
    assert ReceivedAlert.objects.count() == 4
    memory = ReceivedAlert.objects.get(alertname="high_memory_load")
    assert memory.status == "firing" and len(memory.fingerprint) == 16
    assert "instance-with-hyphen_and_underscore" in memory.unmatched_reason


def test_the_generic_intake_uses_the_same_rules(fleet, post):
    body = {
        "alerts": [
            {
                "id": "zbx-4711",
                "alertname": "NodeUnhealthy",
                "status": "firing",
                "starts_at": "2026-12-02T03:00:00+08:00",
                "labels": {"host": "gpu-a01.bj1"},
                "annotations": {"summary": "IPMI: PSU 2 failed"},
            },
            {
                "id": 4712,
                "alertname": "GpuXidError",
                "status": "firing",
                "starts_at": "2026-12-02T03:00:00Z",
                "labels": {"host": "gpu-a01", "uuid": UUID0},
                "value": 79,
            },
        ]
    }
    response = post(body, url=GENERIC_URL)
    assert response.status_code == 200, response.content
    assert response.json()["outcomes"] == {"applied": 1, "failed": 1}
    assert set(m.HealthEvent.objects.values_list("kind", "code")) == {("node_unhealthy", ""), ("xid", "79")}
    assert _repair(fleet.card0) is not None
    bad = post(
        {"alerts": [{"alertname": "X", "status": "firing", "starts_at": "2026-12-02T03:00:00Z"}]}, url=GENERIC_URL
    )
    assert bad.status_code == 400 and "alerts[0].id" in bad.json()["error"]["fields"]


def test_an_agent_opened_event_is_counted_not_closed_by_the_alert(fleet, post):
    """The agent reported the Xid first: DCGM's alert counts on the same event (one ticket), and its resolution
    leaves the agent's event to the repair."""
    from cmdb.services.health_signals import health_signal_raise

    first = health_signal_raise(
        node=fleet.node, accelerator=fleet.card0, kind="xid", code="79", message="Xid 79", source="agent"
    )
    post(am_body(am_alert(XID79)))
    assert m.HealthEvent.objects.get().count == 2 and Ticket.objects.filter(type="repair").count() == 1
    post(am_body(am_alert(XID79, status="resolved"), status="resolved"))
    first.event.refresh_from_db()
    assert first.event.resolved_at is None


def test_alert_source_add_prints_the_token_on_its_last_line(db, client):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("alert_source_add", "am-sh2", stdout=out)
    token = out.getvalue().strip().splitlines()[-1]
    assert token.startswith("gpm_")
    rules_body = json.dumps(am_body()).encode()
    response = client.generic(
        "POST", AM_URL, rules_body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.status_code == 200 and response.json()["received"] == 0


def test_a_warning_on_a_failed_card_keeps_it_failed_with_its_reason(fleet, post):
    post(am_body(am_alert(XID79)))
    hot = {"alertname": "DCGMGpuTemperatureHigh", "Hostname": "gpu-a01", "gpu": "0"}
    post(am_body(am_alert(hot, fingerprint="hot1")))
    post(am_body(am_alert(hot, fingerprint="hot1", status="resolved"), status="resolved"))
    fleet.card0.refresh_from_db()
    assert fleet.card0.health == "failed" and "xid 79" in fleet.card0.health_detail
