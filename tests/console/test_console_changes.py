"""The console's change log: scoped to what the person may see, filterable (object, type, actor, source, action,
ticket, correlation id, time range) with the filters kept in the URL, a 400 with the reason for a bad value,
keyset pages, the node page's history agreeing with `?object=`, and a query count that does not grow."""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cmdb import models as m
from gpuops.context import ChangeSource, change_context
from tests.console.objects_world import build_place, scoped_user
from tests.factories.cmdb import UserFactory

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _ids(response) -> list[int]:
    return [row.record.pk for row in response.context["rows"]]


@pytest.fixture
def places(db):
    return build_place("alpha", changes=3), build_place("bravo", changes=3)


def test_a_site_a_user_sees_site_a_changes_and_nothing_of_site_b(places):
    a, _ = places
    response = _client(scoped_user("viewer-a", a.site)).get("/changes/")
    assert response.status_code == 200
    html = response.content.decode()
    reprs = {row.record.object_repr for row in response.context["rows"]}
    assert {"alpha-node", "alpha-card-00", "alpha-leaf", "alpha-site"} <= reprs
    assert "bravo" not in html
    assert 'href="/nodes/alpha-node/"' in html and 'href="/accelerators/alpha-card-00/"' in html
    # Catalog changes (models, vendors) are everyone's; a person without any grant sees only those.
    nobody = _client(UserFactory(username="nobody", is_staff=False)).get("/changes/")
    assert {row.model for row in nobody.context["rows"]} <= {"vendor", "acceleratormodel", "servermodel"}
    assert "alpha" not in nobody.content.decode() and "bravo" not in nobody.content.decode()


def test_the_global_permission_sees_every_site(places):
    root = UserFactory(username="root", is_superuser=True)
    html = _client(root).get("/changes/?" + urlencode({"object": "node:bravo-node"})).content.decode()
    assert "bravo-node" in html


def test_the_node_history_and_the_object_filter_show_the_same_rows(places):
    a, _ = places
    client = _client(scoped_user("viewer-a", a.site))
    page = client.get(f"/nodes/{a.node.hostname}/")
    history = [row.record.pk for row in page.context["history"]]
    by_name = client.get("/changes/?" + page.context["history_query"])
    by_id = client.get(f"/changes/?object=node:{a.node.pk}")
    expected = list(
        m.ChangeRecord.objects.filter(content_type__model="node", object_id=a.node.pk)
        .order_by("-at", "-id")
        .values_list("pk", flat=True)
    )
    assert history == _ids(by_name) == _ids(by_id) == expected and len(expected) == 4  # create + 3 changes
    # A site-B object named by a site-A user: no rows (and no hint it exists).
    other = client.get("/changes/?object=node:bravo-node")
    assert other.status_code == 200 and _ids(other) == [] and "bravo-site" not in other.content.decode()


def test_a_deleted_object_is_found_by_the_name_it_had(places):
    a, _ = places
    root = UserFactory(username="root", is_superuser=True)
    nic = m.Nic.objects.create(node=a.node, name="eth9")
    nic.delete()
    response = _client(root).get("/changes/?object=nic:alpha-node:eth9")
    assert [row.record.action for row in response.context["rows"]] == ["delete", "create"]


def test_filters_by_actor_source_action_type_ticket_and_correlation(places):
    a, _ = places
    changer = scoped_user("changer-a", a.site, change=True)
    client = _client(changer)
    client.post(f"/nodes/{a.node.hostname}/cordon/", {"reason": "bad fan"})
    ticket = a.tickets[0]
    with change_context(actor=None, source=ChangeSource.WORKFLOW, correlation_id=ticket.correlation_id):
        card = m.Accelerator.objects.get(pk=a.cards[1].pk)
        card.firmware_version = "96.00.99"
        card.save()

    mine = client.get("/changes/?actor=changer-a")
    assert [(r.record.object_repr, r.record.source) for r in mine.context["rows"]] == [("alpha-node", "ui")]
    assert "changer-a" in mine.content.decode() and 'value="changer-a"' in mine.content.decode()  # kept in the form
    assert {r.record.source for r in client.get("/changes/?source=workflow").context["rows"]} == {"workflow"}
    assert {r.record.action for r in client.get("/changes/?action=create").context["rows"]} == {"create"}
    assert {r.model for r in client.get("/changes/?type=accelerator").context["rows"]} == {"accelerator"}
    by_ticket = client.get(f"/changes/?ticket={ticket.reference}")
    assert [(r.record.object_repr, r.ticket_ref) for r in by_ticket.context["rows"]] == [
        ("alpha-card-01", ticket.reference)
    ]
    assert f'href="/tickets/{ticket.pk}/"' in by_ticket.content.decode()
    by_correlation = client.get("/changes/?" + urlencode({"correlation": ticket.correlation_id}))
    assert _ids(by_correlation) == _ids(by_ticket)
    # The diff names the field, the before and the after.
    line = by_ticket.context["rows"][0].lines[0]
    assert (line.field, line.before, line.after) == ("firmware_version", "96.00.1", "96.00.99")


def test_a_foreign_key_in_a_diff_is_shown_by_name(places):
    a, _ = places
    response = _client(scoped_user("viewer-a", a.site)).get("/changes/?object=accelerator:alpha-card-00")
    create = response.context["rows"][-1]
    node_line = next(line for line in create.lines if line.field == "node")
    assert node_line.after == a.node.pk and node_line.after_label == "alpha-node"
    assert all(line.after not in ("", None) for line in create.lines)  # a create lists only the fields it set
    assert "(alpha-node)" in response.content.decode()


def test_time_range(places):
    a, _ = places
    client = _client(scoped_user("viewer-a", a.site))
    today = timezone.now().date()
    assert _ids(client.get(f"/changes/?from={today}&to={today}"))
    assert _ids(client.get(f"/changes/?to={today - dt.timedelta(days=1)}")) == []
    assert _ids(client.get(f"/changes/?from={today + dt.timedelta(days=1)}")) == []
    moment = (timezone.now() + dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M")
    assert _ids(client.get(f"/changes/?to={moment}")) and _ids(client.get(f"/changes/?from={moment}")) == []


@pytest.mark.parametrize(
    ("query", "field", "reason"),
    [
        ({"source": "bogus"}, "source", "Unknown source 'bogus'"),
        ({"action": "rename"}, "action", "Unknown action 'rename'"),
        ({"type": "spaceship"}, "type", "Unknown object type 'spaceship'"),
        ({"object": "sh1-h100-0001"}, "object", "Give a type and an id or name"),
        ({"object": "spaceship:1"}, "object", "Unknown object type 'spaceship'"),
        ({"from": "yesterday"}, "from", "not a date"),
        ({"to": "2026-13-45"}, "to", "not a date"),
        ({"from": "2026-05-02", "to": "2026-05-01"}, "to", "before its start"),
        ({"ticket": "REP-999999"}, "ticket", "No ticket 'REP-999999'"),
        ({"ticket": "not a ticket"}, "ticket", "No ticket"),
        ({"before": "garbage"}, "before", "Not a page cursor"),
        ({"before": "2026-13-01T00:00:00|5"}, "before", "Not a page cursor"),
    ],
)
def test_a_bad_filter_value_is_a_400_naming_the_field_and_the_reason(places, query, field, reason):
    a, _ = places
    response = _client(scoped_user("viewer-a", a.site)).get("/changes/?" + urlencode(query))
    assert response.status_code == 400
    html = response.content.decode()
    assert f"<strong>{field}</strong>" in html and reason.replace("'", "&#x27;") in html


def test_a_ticket_of_site_b_is_no_filter_for_a_site_a_user(places):
    a, b = places
    response = _client(scoped_user("viewer-a", a.site)).get(f"/changes/?ticket={b.tickets[0].reference}")
    assert response.status_code == 400 and "bravo" not in response.content.decode()


def _make_changes(node: m.Node, count: int) -> None:
    for i in range(count):
        node.refresh_from_db()
        node.asset_tag = f"AT-{i}"
        node.save()


def test_keyset_pages_cover_every_row_once_and_keep_the_filters(places):
    a, _ = places
    _make_changes(a.node, 60)
    client = _client(scoped_user("viewer-a", a.site))
    first = client.get("/changes/?object=node:alpha-node")
    assert len(_ids(first)) == 50
    next_query = first.context["next_query"]
    assert "object=node%3Aalpha-node" in next_query and "before=" in next_query
    second = client.get("/changes/?" + next_query)
    assert second.status_code == 200 and "next_query" not in second.context
    expected = list(
        m.ChangeRecord.objects.filter(content_type__model="node", object_id=a.node.pk)
        .order_by("-at", "-id")
        .values_list("pk", flat=True)
    )
    assert _ids(first) + _ids(second) == expected


def _count(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    return len(ctx.captured_queries)


def test_the_change_log_runs_the_same_queries_for_a_short_and_a_full_page(places):
    a, _ = places
    client = _client(scoped_user("viewer-a", a.site))
    _count(client, "/changes/")  # warm the content-type and permission caches
    short = _count(client, "/changes/?object=node:alpha-node")
    everything_before = _count(client, "/changes/")
    _make_changes(a.node, 60)
    full = _count(client, "/changes/?object=node:alpha-node")
    everything = _count(client, "/changes/")
    assert short == full, (short, full)
    assert everything_before == everything, (everything_before, everything)
    print(f"queries: change log page {everything}, with an object filter {full}")
