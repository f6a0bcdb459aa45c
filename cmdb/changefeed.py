"""The change feed: change records in an order a poller can follow without ever missing a row committed late.

An id cursor (`id > last`) skips rows: transaction A takes id 10, transaction B takes id 11 and commits, a reader
gets 11 and moves its cursor past it, then A commits id 10 - behind the cursor, never seen. Ids are handed out
at insert, visibility comes at commit, and the two orders differ.

The feed therefore pages by `(txid, id)`, where `txid` is the writing transaction's id stamped by the database
(`ChangeRecord.txid`), and only up to a safe horizon:

- PostgreSQL: the horizon is the oldest *other* transaction still running (the smallest id in the snapshot's
  in-progress list, else the snapshot's xmax). Every other transaction below it has committed or rolled back, so
  no row with `txid < horizon` can appear later (the reader's own uncommitted rows, if any, are visible to it);
  rows of transactions at or above it wait for a later page. A late commit always has a txid at or above the
  horizon every earlier reader used, hence above their cursors: it is returned, never skipped.
- SQLite: one write transaction at a time (IMMEDIATE transactions, gpuops/settings.py), so the id order is the
  commit order; `txid` is 0 and there is no horizon.

The horizon is read before the rows, so the rows' snapshot is at least as new. A long-running writing
transaction anywhere in the database holds the horizon (and so the feed) back until it ends - rows are late,
never lost. Records written before the column existed have txid 0 and come first, in id order.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from django.db import connection
from django.db.models import Q, QuerySet

from .models import ChangeRecord

TOKEN_PREFIX = "tx"


@dataclass(frozen=True, order=True)
class FeedPosition:
    """Just after the record (txid, id); the start of the feed is (-1, 0)."""

    txid: int = -1
    id: int = 0

    def encode(self) -> str:
        raw = f"{TOKEN_PREFIX}:{self.txid}:{self.id}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def of(cls, record: ChangeRecord) -> FeedPosition:
        return cls(txid=record.txid, id=record.pk)


class InvalidPosition(ValueError):
    """Not a token of ours (or a legacy id cursor for a record that no longer exists)."""


def position_decode(token: str) -> FeedPosition:
    """A `next` token of the feed. A legacy id token (`pk:<id>`, from before the feed paged by transaction)
    resumes just after that record."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        kind, _, rest = raw.partition(":")
        if kind == TOKEN_PREFIX:
            txid, _, pk = rest.partition(":")
            position = FeedPosition(txid=int(txid), id=int(pk))
            if position.txid < -1 or position.id < 0:
                raise ValueError(raw)
            return position
        if kind == "pk":
            record = ChangeRecord.objects.filter(pk=int(rest)).only("pk", "txid").first()
            if record is None:
                raise ValueError(raw)
            return FeedPosition.of(record)
        raise ValueError(raw)
    except (ValueError, UnicodeDecodeError, binascii.Error) as exc:
        raise InvalidPosition(token) from exc


def safe_horizon() -> int | None:
    """The txid below which every transaction has ended (PostgreSQL), or None where ids are commit-ordered."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT LEAST((SELECT min(x::text::bigint) FROM pg_snapshot_xip(s) AS x),"
            " pg_snapshot_xmax(s)::text::bigint), pg_current_xact_id_if_assigned()::text::bigint"
            " FROM pg_current_snapshot() AS s"
        )
        horizon, own = cursor.fetchone()
    # The snapshot's xmax can be the reader's own (running, visible to itself) transaction: nothing else can sit
    # between it and the next id, so the reader's own rows are safe too.
    return int(own) + 1 if own is not None and int(horizon) == int(own) else int(horizon)


def feed_after(queryset: QuerySet, position: FeedPosition, *, horizon: int | None) -> QuerySet:
    """The rows of `queryset` after `position` that can no longer be overtaken, in feed order."""
    qs = queryset.filter(Q(txid__gt=position.txid) | Q(txid=position.txid, id__gt=position.id))
    if horizon is not None:
        qs = qs.filter(txid__lt=horizon)
    return qs.order_by("txid", "id")


def change_feed_page(
    queryset: QuerySet, position: FeedPosition, *, limit: int
) -> tuple[list[ChangeRecord], FeedPosition, bool]:
    """One page: (rows, the position after them, whether more safe rows follow). The position is where to poll
    from next, also when the page is empty (then it is `position` itself)."""
    horizon = safe_horizon()
    rows = list(feed_after(queryset, position, horizon=horizon)[: limit + 1])
    has_more = len(rows) > limit
    rows = rows[:limit]
    return rows, (FeedPosition.of(rows[-1]) if rows else position), has_more


__all__ = ["FeedPosition", "InvalidPosition", "change_feed_page", "feed_after", "position_decode", "safe_horizon"]
