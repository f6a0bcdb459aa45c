"""Outbound webhooks: fan events out to matching subscriptions (delivery rows), deliver them, redeliver, sweep.

Two sources of events:
- CMDB changes: every committed ChangeRecord, read from the change feed (cmdb/changefeed.py) with a locked
  cursor of our own (`WebhookFeedCursor`), so a change is fanned out once, also when it committed late, and a
  fan-out that never ran (a broker down at commit, a worker lost) is caught up by the beat sweep.
- Ticket events: the workflows' notification outbox sends each ticket notification through
  `SubscriptionsNotifier` (integrations/webhooks/notifier.py), which calls `ticket_event_fan_out`.

Each delivery row is sent by its own task (`integrations.webhook_deliver`), claimed by compare-and-set so a
duplicate message or a retry never sends a delivered row again; transient failures back off exponentially
up to the subscription's `max_attempts`, then the row is dead (admin: "redeliver").
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import httpx
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from cmdb.changefeed import FeedPosition, change_feed_page, feed_after, safe_horizon
from cmdb.models import ChangeRecord, Site
from cmdb.permissions import SCOPE_PATHS
from gpuops.tasks import PUBLISH_ERRORS

from ..models import DeliveryState, WebhookDelivery, WebhookFeedCursor, WebhookSubscription
from .signing import signed_headers

logger = logging.getLogger(__name__)

FAN_OUT_BATCH = 500
SWEEP_BATCH = 500
# A due row this long past its time with no worker on it lost its message (or never got one): publish again.
REPUBLISH_GRACE = dt.timedelta(seconds=30)
DELIVERED_RETENTION = dt.timedelta(days=30)
BACKOFF_BASE_S = 10
BACKOFF_MAX_S = 3600
EXCERPT_CHARS = 500
TICKET_OBJECT_TYPE = "ticket"
CURSOR_NAME = "cmdb-changes"

_client: httpx.Client | None = None  # tests may install one (e.g. on a MockTransport)


# --- matching ----------------------------------------------------------------------------------------------------


def _wants(sub: WebhookSubscription, *, object_type: str, event: str, site_id: int | None) -> bool:
    if sub.object_types and object_type not in sub.object_types:
        return False
    if sub.events and event not in sub.events:
        return False
    site_ids = {s.pk for s in sub.sites.all()}  # prefetched
    return not site_ids or site_id in site_ids


def _active_subscriptions() -> list[WebhookSubscription]:
    return list(WebhookSubscription.objects.filter(is_active=True).prefetch_related("sites"))


def _sites_of(records: Sequence[ChangeRecord]) -> dict[int, int | None]:
    """record id -> site id of the changed object: one query per object type in the batch (not per row). A deleted
    object's site comes from its delete record's before-values."""
    by_type: dict[Any, list[ChangeRecord]] = defaultdict(list)
    for record in records:
        by_type[record.content_type].append(record)
    out: dict[int, int | None] = {}
    for content_type, group in by_type.items():
        model = content_type.model_class()
        path = SCOPE_PATHS.get(f"{content_type.app_label}.{content_type.model}", {}).get("site")
        found: dict[int, int | None] = {}
        if model is not None and path == "pk":
            found = {r.object_id: r.object_id for r in group}
        elif model is not None and path:
            ids = {r.object_id for r in group}
            found = dict(model._default_manager.filter(pk__in=ids).values_list("pk", path))
        for record in group:
            site_id = found.get(record.object_id)
            if site_id is None:
                before = record.changes.get("site") or record.changes.get("site_id") or [None]
                site_id = before[0] if isinstance(before, list) and isinstance(before[0], int) else None
            out[record.pk] = site_id
    return out


def _change_payload(record: ChangeRecord, site_code: str | None) -> dict[str, Any]:
    return {
        "id": f"change-{record.pk}",
        "type": "cmdb.change",
        "event": record.action,
        "object_type": record.content_type.model,
        "occurred_at": record.at.isoformat(),
        "site": site_code,
        "data": {
            "change_id": record.pk,
            "model": f"{record.content_type.app_label}.{record.content_type.model}",
            "object_id": record.object_id,
            "object_repr": record.object_repr,
            "action": record.action,
            "changes": record.changes,
            "actor": record.actor_repr,
            "source": record.source,
            "correlation_id": record.correlation_id,
            "reason": record.reason,
        },
    }


def _deliveries_write(rows: list[WebhookDelivery]) -> list[int]:
    """Insert the rows (a row already there for its subscription and event is kept) and return the ids of the
    pending ones, to send after commit."""
    if not rows:
        return []
    WebhookDelivery.objects.bulk_create(rows, ignore_conflicts=True)
    keys = Q()
    for row in rows:
        keys |= Q(subscription_id=row.subscription_id, event_id=row.event_id)
    return list(WebhookDelivery.objects.filter(keys, state=DeliveryState.PENDING).values_list("pk", flat=True))


# --- fan-out -----------------------------------------------------------------------------------------------------


def change_events_fan_out(*, batch: int = FAN_OUT_BATCH) -> tuple[int, bool]:
    """Fan the next committed change records out to the subscriptions that want them.

    Returns (deliveries written, whether more records wait). The cursor row is locked for the whole batch, so
    concurrent fan-outs queue behind each other. While no subscription is active the cursor follows the end of
    the feed (history is not replayed to a new subscription); each subscription gets only changes made after
    it was created.
    """
    subscriptions = [s for s in _active_subscriptions() if not s.object_types or s.object_types != [TICKET_OBJECT_TYPE]]
    with transaction.atomic():
        cursor = WebhookFeedCursor.objects.select_for_update().filter(name=CURSOR_NAME).first()
        if cursor is None:
            # Made by the migration; gone only if someone deleted it: start over (subscriptions skip changes made
            # before they were created).
            WebhookFeedCursor.objects.get_or_create(name=CURSOR_NAME)
            cursor = WebhookFeedCursor.objects.select_for_update().get(name=CURSOR_NAME)
        if not subscriptions:
            _cursor_to_end(cursor)
            return 0, False
        records = ChangeRecord.objects.select_related("content_type")
        rows, position, more = change_feed_page(records, FeedPosition(cursor.txid, cursor.last_id), limit=batch)
        if not rows:
            return 0, False
        sites = _sites_of(rows)
        codes = dict(Site.objects.filter(pk__in={s for s in sites.values() if s}).values_list("pk", "code"))
        now = timezone.now()
        deliveries: list[WebhookDelivery] = []
        for record in rows:
            site_id = sites.get(record.pk)
            payload: dict[str, Any] | None = None
            for sub in subscriptions:
                if record.at < sub.created_at:
                    continue
                if not _wants(sub, object_type=record.content_type.model, event=record.action, site_id=site_id):
                    continue
                payload = payload or _change_payload(record, codes.get(site_id) if site_id else None)
                deliveries.append(
                    WebhookDelivery(
                        subscription=sub,
                        event_id=payload["id"],
                        event=record.action,
                        object_type=record.content_type.model,
                        payload=payload,
                        next_attempt_at=now,
                    )
                )
        pending = _deliveries_write(deliveries)
        WebhookFeedCursor.objects.filter(pk=cursor.pk).update(txid=position.txid, last_id=position.id, updated_at=now)
        transaction.on_commit(lambda: deliveries_publish(pending))
    return len(deliveries), more


def _cursor_to_end(cursor: WebhookFeedCursor) -> None:
    """Move the fan-out cursor to the last safe record of the feed (while nobody subscribes)."""
    last = feed_after(ChangeRecord.objects.all(), FeedPosition(), horizon=safe_horizon()).reverse().first()
    position = FeedPosition.of(last) if last else FeedPosition()
    if (cursor.txid, cursor.last_id) != (position.txid, position.id):
        WebhookFeedCursor.objects.filter(pk=cursor.pk).update(txid=position.txid, last_id=position.id)


def ticket_event_fan_out(*, event_id: str, event: str, site_id: int | None, data: dict[str, Any]) -> int:
    """Write the deliveries of one ticket event (idempotent by event id) and send them after commit."""
    subscriptions = [
        s for s in _active_subscriptions() if _wants(s, object_type=TICKET_OBJECT_TYPE, event=event, site_id=site_id)
    ]
    if not subscriptions:
        return 0
    now = timezone.now()
    site_code = Site.objects.filter(pk=site_id).values_list("code", flat=True).first() if site_id else None
    payload = {
        "id": event_id,
        "type": "ticket.event",
        "event": event,
        "object_type": TICKET_OBJECT_TYPE,
        "occurred_at": now.isoformat(),
        "site": site_code,
        "data": data,
    }
    rows = [
        WebhookDelivery(
            subscription=sub,
            event_id=event_id,
            event=event,
            object_type=TICKET_OBJECT_TYPE,
            payload=payload,
            next_attempt_at=now,
        )
        for sub in subscriptions
    ]
    with transaction.atomic():
        pending = _deliveries_write(rows)
        transaction.on_commit(lambda: deliveries_publish(pending))
    return len(rows)


# --- delivery ----------------------------------------------------------------------------------------------------


def deliveries_publish(delivery_ids: Iterable[int]) -> int:
    """One delivery task per row. A broker error is logged; the sweep publishes the rows later."""
    from ..tasks import webhook_deliver_task

    sent = 0
    for delivery_id in delivery_ids:
        try:
            webhook_deliver_task.apply_async(args=[delivery_id])
        except PUBLISH_ERRORS as exc:
            logger.warning("webhook delivery %s: publish failed (%s); the sweep will send it", delivery_id, exc)
            return sent
        sent += 1
    return sent


def backoff_seconds(attempts: int) -> int:
    """Exponential from BACKOFF_BASE_S, capped, with up to 10% jitter (receivers recovering are not stampeded)."""
    base = min(BACKOFF_BASE_S * 2 ** max(attempts - 1, 0), BACKOFF_MAX_S)
    return int(base + random.uniform(0, base / 10))


def body_bytes(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, cls=DjangoJSONEncoder, separators=(",", ":"), sort_keys=True).encode()


def delivery_attempt(delivery_id: int) -> int | None:
    """Send one delivery once. Returns the countdown to the next attempt when it failed transiently, else None
    (delivered, dead, or not ours to send: already delivered, dead, or claimed by another worker)."""
    now = timezone.now()
    row = WebhookDelivery.objects.select_related("subscription").filter(pk=delivery_id).first()
    if row is None:
        return None
    lease = now + dt.timedelta(seconds=row.subscription.timeout_s + 60)
    claimed = (
        WebhookDelivery.objects.filter(pk=delivery_id, state__in=[DeliveryState.PENDING, DeliveryState.FAILED])
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .update(claimed_until=lease, attempts=F("attempts") + 1)
    )
    if not claimed:
        return None
    row.refresh_from_db(fields=["attempts", "payload"])
    sub = row.subscription
    body = body_bytes(row.payload)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "gpuops-webhooks",
        "X-Gpuops-Event": row.event,
        "X-Gpuops-Delivery": row.event_id,
        "Idempotency-Key": row.event_id,
        **signed_headers(sub.secret, body),
    }
    code: int | None = None
    try:
        response = (_client or httpx).post(sub.url, content=body, headers=headers, timeout=sub.timeout_s)
        code, excerpt = response.status_code, response.text[:EXCERPT_CHARS]
        transient = code == 429 or code >= 500
    except httpx.HTTPError as exc:
        excerpt, transient = f"{type(exc).__name__}: {exc}"[:EXCERPT_CHARS], True
    done = timezone.now()
    fields: dict[str, Any] = {"response_code": code, "response_excerpt": excerpt, "claimed_until": None}
    countdown: int | None = None
    if code is not None and 200 <= code < 300:
        fields.update(state=DeliveryState.DELIVERED, delivered_at=done)
    elif transient and row.attempts < sub.max_attempts:
        countdown = backoff_seconds(row.attempts)
        fields.update(state=DeliveryState.FAILED, next_attempt_at=done + dt.timedelta(seconds=countdown))
    else:
        # Out of attempts, or a 4xx (a receiver that refuses this body will refuse it again): dead letter.
        fields.update(state=DeliveryState.DEAD)
    WebhookDelivery.objects.filter(pk=delivery_id).update(**fields)
    if fields["state"] != DeliveryState.DELIVERED:
        logger.warning("webhook %s to %s: %s (%s)", row.event_id, sub.name, fields["state"], code or excerpt[:80])
    return countdown


def deliveries_redeliver(delivery_ids: Sequence[int]) -> int:
    """Send these deliveries again (the admin action): back to pending with a fresh attempt budget, sent after
    commit. A delivered row is sent again too - the operator asked; receivers deduplicate by event id."""
    now = timezone.now()
    with transaction.atomic():
        ids = list(WebhookDelivery.objects.filter(pk__in=delivery_ids).values_list("pk", flat=True))
        WebhookDelivery.objects.filter(pk__in=ids).update(
            state=DeliveryState.PENDING, attempts=0, next_attempt_at=now, claimed_until=None, delivered_at=None
        )
        transaction.on_commit(lambda: deliveries_publish(ids))
    return len(ids)


def webhooks_sweep(*, now: dt.datetime | None = None) -> int:
    """Beat: fan out the changes still owed, publish deliveries whose message was lost, forget old delivered
    rows. Returns how many deliveries were published."""
    now = now or timezone.now()
    more = True
    rounds = 0
    while more and rounds < 20:
        _, more = change_events_fan_out()
        rounds += 1
    WebhookDelivery.objects.filter(state=DeliveryState.DELIVERED, delivered_at__lt=now - DELIVERED_RETENTION).delete()
    due = list(
        WebhookDelivery.objects.filter(
            state__in=[DeliveryState.PENDING, DeliveryState.FAILED], next_attempt_at__lt=now - REPUBLISH_GRACE
        )
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:SWEEP_BATCH]
    )
    return deliveries_publish(due)


__all__ = [
    "backoff_seconds",
    "body_bytes",
    "change_events_fan_out",
    "deliveries_publish",
    "deliveries_redeliver",
    "delivery_attempt",
    "ticket_event_fan_out",
    "webhooks_sweep",
]
