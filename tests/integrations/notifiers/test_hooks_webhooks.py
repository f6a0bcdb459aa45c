"""Outbound webhooks: CMDB changes and ticket events to subscribed receivers, signed, retried with backoff,
dead-lettered and redelivered - against a real HTTP receiver on loopback that verifies the signature."""

from __future__ import annotations

import json
import time

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cmdb import models as m
from gpuops.context import change_context
from integrations.models import DeliveryState, WebhookDelivery, WebhookSubscription
from integrations.notifiers import registry as notifier_registry
from integrations.tasks import webhook_deliver_task
from integrations.webhooks import services
from integrations.webhooks.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, signature, signature_valid
from tests.factories.cmdb import NodeFactory, SiteFactory, UserFactory
from tests.integrations.notifiers.hooks_peer import Received, local_peer

pytestmark = pytest.mark.django_db

SECRET = "whsec-test-1"


def verifying(secret: str = SECRET, *, fail_first: int = 0, status: int = 503):
    """A receiver that does what docs/monitoring.md tells receivers to do: 401 on a bad or stale signature."""
    failures = [fail_first]

    def check(req: Received) -> tuple[int, object]:
        ok = signature_valid(
            secret,
            timestamp=req.headers.get(TIMESTAMP_HEADER.lower(), ""),
            signature_header=req.headers.get(SIGNATURE_HEADER.lower(), ""),
            body=req.body,
        )
        if not ok:
            return 401, {"error": "bad signature"}
        if failures[0]:
            failures[0] -= 1
            return status, {"error": "busy"}
        return 200, {"ok": True}

    return check


@pytest.fixture
def hooks(settings, django_capture_on_commit_callbacks):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.CELERY_TASK_EAGER_PROPAGATES = True
    settings.GPUOPS_INTEGRATIONS = {"NOTIFIERS": [], "TICKET_WEBHOOKS": True}
    notifier_registry.cache_clear()
    yield django_capture_on_commit_callbacks
    notifier_registry.cache_clear()


def subscribe(url: str, *, sites=(), **fields) -> WebhookSubscription:
    sub = WebhookSubscription.objects.create(name=fields.pop("name", "mirror"), url=url, secret=SECRET, **fields)
    sub.sites.set(sites)
    return sub


def rename(node: m.Node, hostname: str) -> None:
    with change_context(source="api"):
        node.hostname = hostname
        node.save()


def test_a_node_change_is_delivered_signed_to_its_site_subscription(hooks):
    with hooks(execute=True):  # fixtures commit their own changes first (nobody subscribed yet)
        site_a, site_b = SiteFactory(code="sh1"), SiteFactory(code="bj2")
        node_a, node_b = NodeFactory(site=site_a, hostname="gpu-a01"), NodeFactory(site=site_b, hostname="gpu-b01")
    with local_peer(verifying()) as peer:
        sub = subscribe(f"{peer.url}/hook", sites=[site_a], object_types=["node"], events=["update"])
        with hooks(execute=True):
            rename(node_a, "gpu-a01-new")
            rename(node_b, "gpu-b01-new")  # another site: not this subscription's
    assert len(peer.received) == 1
    body = peer.received[0].json()
    assert body["type"] == "cmdb.change" and body["event"] == "update" and body["object_type"] == "node"
    assert body["site"] == "sh1" and body["data"]["object_id"] == node_a.pk
    assert body["data"]["changes"]["hostname"] == ["gpu-a01", "gpu-a01-new"]
    assert peer.received[0].headers["x-gpuops-delivery"] == body["id"]
    delivery = WebhookDelivery.objects.get(subscription=sub)
    assert (delivery.state, delivery.attempts, delivery.response_code) == (DeliveryState.DELIVERED, 1, 200)


def test_a_rolled_back_change_is_not_delivered(hooks):
    from django.db import transaction

    with hooks(execute=True):
        node = NodeFactory(site=SiteFactory(code="sh1"), hostname="gpu-r01")
    with local_peer(verifying()) as peer:
        subscribe(f"{peer.url}/hook")
        with hooks(execute=True), pytest.raises(RuntimeError), transaction.atomic():
            rename(node, "never")
            raise RuntimeError("abort")
    assert peer.received == []
    assert not WebhookDelivery.objects.exists()


def test_transient_failures_back_off_then_deliver_once(hooks, monkeypatch):
    countdowns: list[int] = []
    real = services.backoff_seconds
    monkeypatch.setattr(services, "backoff_seconds", lambda n: countdowns.append(real(n)) or countdowns[-1])
    with hooks(execute=True):
        node = NodeFactory(site=SiteFactory(code="sh1"), hostname="gpu-t01")
    with local_peer(verifying(fail_first=2)) as peer:
        sub = subscribe(f"{peer.url}/hook")
        with hooks(execute=True):
            rename(node, "gpu-t01-b")
        delivery = WebhookDelivery.objects.get(subscription=sub)
        assert (delivery.state, delivery.attempts) == (DeliveryState.DELIVERED, 3)
        assert len(peer.received) == 3
        # Exponential: the second wait is about twice the first (each with at most 10% jitter).
        assert len(countdowns) == 2 and countdowns[0] >= 10 and countdowns[1] >= 2 * 10 > countdowns[0] * 0.9
        # The same event fanned out again, or its task redelivered by the broker: nothing is sent twice.
        services.change_events_fan_out()
        webhook_deliver_task.apply(args=[delivery.pk])
        assert len(peer.received) == 3 and WebhookDelivery.objects.count() == 1


def test_out_of_attempts_is_a_dead_letter_that_the_admin_redelivers(hooks, client):
    with hooks(execute=True):
        node = NodeFactory(site=SiteFactory(code="sh1"), hostname="gpu-d01")
    with local_peer(verifying(fail_first=1000, status=500)) as peer:
        sub = subscribe(f"{peer.url}/hook", max_attempts=3)
        with hooks(execute=True):
            rename(node, "gpu-d01-b")
        delivery = WebhookDelivery.objects.get(subscription=sub)
        assert (delivery.state, delivery.attempts, delivery.response_code) == (DeliveryState.DEAD, 3, 500)
        assert "busy" in delivery.response_excerpt

        # The dead letter is listed in the admin (filter by state) ...
        client.force_login(UserFactory(username="admin", is_superuser=True, is_staff=True))
        listing = client.get("/admin/integrations/webhookdelivery/?state__exact=dead")
        assert listing.status_code == 200 and delivery.event_id in listing.content.decode()

        # ... and once the receiver is fixed, "redeliver" sends it again.
        peer.check = verifying()
        with hooks(execute=True):
            response = client.post(
                "/admin/integrations/webhookdelivery/",
                {"action": "redeliver", "_selected_action": [delivery.pk]},
            )
        assert response.status_code == 302
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.response_code) == (DeliveryState.DELIVERED, 1, 200)


def test_a_receiver_refusing_the_signature_is_dead_at_once(hooks):
    with hooks(execute=True):
        node = NodeFactory(site=SiteFactory(code="sh1"), hostname="gpu-s01")
    with local_peer(verifying(secret="rotated")) as peer:
        sub = subscribe(f"{peer.url}/hook")
        with hooks(execute=True):
            rename(node, "gpu-s01-b")
    delivery = WebhookDelivery.objects.get(subscription=sub)
    assert (delivery.state, delivery.attempts, delivery.response_code) == (DeliveryState.DEAD, 1, 401)
    assert len(peer.received) == 1


def test_the_signature_covers_timestamp_and_body_and_rejects_replays():
    body = json.dumps({"id": "change-1"}).encode()
    now = int(time.time())
    good = signature(SECRET, now, body)
    assert good.startswith("sha256=") and len(good) == 7 + 64
    assert signature_valid(SECRET, timestamp=str(now), signature_header=good, body=body)
    assert not signature_valid(SECRET, timestamp=str(now), signature_header=good, body=body + b" ")
    assert not signature_valid(SECRET, timestamp=str(now + 1), signature_header=good, body=body)
    assert not signature_valid("other", timestamp=str(now), signature_header=good, body=body)
    replay = signature(SECRET, now - 3600, body)  # a captured request, an hour later
    assert not signature_valid(SECRET, timestamp=str(now - 3600), signature_header=replay, body=body)


def test_ticket_events_go_to_ticket_subscriptions_through_the_outbox(hooks):
    from workflows.engine import notify_on_commit
    from workflows.models import NotificationOutbox, Ticket

    site = SiteFactory(code="sh1")
    ticket = Ticket.objects.create(
        type="repair",
        title="Repair gpu-a01",
        state="new",
        site=site,
        assignee_group=Group.objects.create(name="dc-technicians"),
        correlation_id="c-ticket-1",
    )
    with local_peer(verifying()) as peer:
        subscribe(f"{peer.url}/tickets", object_types=["ticket"], events=["opened"], sites=[site])
        with hooks(execute=True):
            notify_on_commit(ticket, "opened", "Card GPU-7 failed")
            notify_on_commit(ticket, "comment", "not subscribed")
    assert NotificationOutbox.objects.filter(notifier_path__endswith="SubscriptionsNotifier").count() == 2
    assert len(peer.received) == 1
    body = peer.received[0].json()
    assert body["type"] == "ticket.event" and body["event"] == "opened" and body["site"] == "sh1"
    assert body["data"]["ticket_ref"] == ticket.reference and "recipients" not in body["data"]


def test_the_fan_out_costs_the_same_queries_for_2_and_12_changed_nodes(hooks):
    site = SiteFactory(code="sh1")

    def fan_out_queries(count: int) -> int:
        nodes = [NodeFactory(site=site, hostname=f"gpu-q{count}-{i}") for i in range(count)]
        services.change_events_fan_out()  # everything so far
        for node in nodes:
            rename(node, node.hostname + "-b")
        with CaptureQueriesContext(connection) as ctx:
            written, _ = services.change_events_fan_out()
        assert written == count
        return len(ctx.captured_queries)

    subscribe("http://127.0.0.1:9/unused", object_types=["node"], sites=[site])
    assert fan_out_queries(2) == fan_out_queries(12)


def test_a_delivery_whose_message_was_lost_is_sent_by_the_sweep(hooks, monkeypatch):
    import datetime as dt

    from django.utils import timezone
    from kombu.exceptions import OperationalError

    with hooks(execute=True):
        node = NodeFactory(site=SiteFactory(code="sh1"), hostname="gpu-l01")
    with local_peer(verifying()) as peer:
        sub = subscribe(f"{peer.url}/hook")
        with monkeypatch.context() as patch:

            def broker_down(*args, **kwargs):
                raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

            patch.setattr(webhook_deliver_task, "apply_async", broker_down)
            with hooks(execute=True):
                rename(node, "gpu-l01-b")  # committed; its delivery row is written, the message is not
        delivery = WebhookDelivery.objects.get(subscription=sub)
        assert delivery.state == DeliveryState.PENDING and peer.received == []

        assert services.webhooks_sweep(now=timezone.now() + dt.timedelta(minutes=1)) == 1
    delivery.refresh_from_db()
    assert delivery.state == DeliveryState.DELIVERED and len(peer.received) == 1
