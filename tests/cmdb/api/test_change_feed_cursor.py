"""The change feed by cursor (/api/cmdb/changes/?mode=cursor): every committed record exactly once, in feed
order, never skipping a row committed after a later one (cmdb/changefeed.py)."""

from __future__ import annotations

import base64
import threading

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from cmdb import models as m
from tests.factories.cmdb import SiteFactory

URL = "/api/cmdb/changes/"


def _walk(client, start: str) -> tuple[list[int], str]:
    """Follow `next` from `start`; returns the ids seen and the last page's `resume` URL."""
    ids: list[int] = []
    page_url = start
    while True:
        response = client.get(page_url)
        assert response.status_code == 200, response.content
        body = response.json()
        ids += [row["id"] for row in body["results"]]
        if body["next"] is None:
            return ids, body["resume"]
        page_url = body["next"]


@pytest.mark.django_db
def test_a_cursor_walk_returns_every_record_once_and_resumes_after_the_last(root):
    for i in range(7):
        SiteFactory(code=f"feed{i}")
    expected = list(m.ChangeRecord.objects.order_by("txid", "id").values_list("id", flat=True))
    assert len(expected) >= 7

    ids, resume = _walk(root, f"{URL}?mode=cursor&limit=3")
    assert ids == expected

    # Caught up: the resume URL answers an empty page that still says where to poll from.
    body = root.get(resume).json()
    assert body["results"] == [] and body["next"] is None and body["resume"]

    SiteFactory(code="feed-late")
    later, _ = _walk(root, resume)
    assert later == list(m.ChangeRecord.objects.filter(id__gt=expected[-1]).values_list("id", flat=True))
    assert later, "a change made after the walk is found from its resume URL"


@pytest.mark.django_db
def test_an_id_cursor_from_before_resumes_after_that_record(root):
    for i in range(4):
        SiteFactory(code=f"legacy{i}")
    ids = list(m.ChangeRecord.objects.order_by("id").values_list("id", flat=True))
    legacy = base64.urlsafe_b64encode(f"pk:{ids[1]}".encode()).decode().rstrip("=")
    walked, _ = _walk(root, f"{URL}?cursor={legacy}&limit=2")
    assert walked == ids[2:]


@pytest.mark.django_db
@pytest.mark.parametrize("token", ["garbage", base64.urlsafe_b64encode(b"tx:x:1").decode(), "cGs6OTk5OTk5"])
def test_a_bad_cursor_is_a_400_naming_the_parameter(root, token):
    response = root.get(f"{URL}?cursor={token}")
    assert response.status_code == 400
    assert "cursor" in response.json()["error"]["fields"]


@pytest.mark.django_db
def test_a_cursor_page_costs_the_same_queries_however_long_the_history(root):
    def page_queries() -> int:
        root.get(f"{URL}?mode=cursor&limit=2")  # warm the token and content type caches
        with CaptureQueriesContext(connection) as ctx:
            assert root.get(f"{URL}?mode=cursor&limit=50").status_code == 200
        return len(ctx.captured_queries)

    SiteFactory(code="small")
    small = page_queries()
    for i in range(12):
        SiteFactory(code=f"big{i}")
    assert page_queries() == small


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_row_committed_late_is_not_skipped_on_postgresql(root):
    """Transaction A takes the lower id and commits last; a reader between the two commits must not move its
    cursor past A's row (an id cursor did: it returned B's higher id and never saw A's)."""
    if connection.vendor != "postgresql":
        pytest.skip("needs concurrent writers (PostgreSQL)")
    _, start = _walk(root, f"{URL}?mode=cursor")
    inserted, release, done = threading.Event(), threading.Event(), threading.Event()
    late: dict[str, int] = {}

    def slow_writer() -> None:
        try:
            with transaction.atomic():
                SiteFactory(code="slow")
                late["id"] = m.ChangeRecord.objects.order_by("-id").values_list("id", flat=True).first()
                inserted.set()
                release.wait(30)
        finally:
            connection.close()
            done.set()

    thread = threading.Thread(target=slow_writer)
    thread.start()
    assert inserted.wait(30)
    SiteFactory(code="fast")  # commits at once, with a higher id than the slow transaction's row
    fast_id = m.ChangeRecord.objects.order_by("-id").values_list("id", flat=True).first()
    assert fast_id > late["id"]

    seen, resume = _walk(root, start)
    assert late["id"] not in seen and fast_id not in seen  # held back behind the running transaction

    release.set()
    assert done.wait(30)
    thread.join()
    after, _ = _walk(root, resume)
    assert set(after) == {late["id"], fast_id}
