"""Pagination (offset and cursor walk), the fleet summary, and API tokens."""

from __future__ import annotations

from collections import Counter

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from cmdb import models as m
from cmdb.permissions import grant_scope
from tests.cmdb.api.support import url
from tests.factories.cmdb import UserFactory

pytestmark = pytest.mark.django_db


# --- pagination --------------------------------------------------------------------------------------------------


def walk(client: APIClient, first: str, params: dict) -> tuple[list[int], int]:
    ids: list[int] = []
    pages = 0
    response = client.get(first, params)
    while True:
        assert response.status_code == 200, response.content
        body = response.json()
        assert "count" not in body and body["previous"] is None
        ids += [row["id"] for row in body["results"]]
        pages += 1
        if not body["next"]:
            return ids, pages
        response = client.get(body["next"])


def test_cursor_walk_returns_every_row_exactly_once(root, fleet):
    ids, pages = walk(root, url("accelerators"), {"mode": "cursor", "limit": 50})
    assert Counter(ids).most_common(1)[0][1] == 1
    assert set(ids) == set(m.Accelerator.objects.values_list("pk", flat=True))
    assert ids == sorted(ids)
    assert pages == -(-len(ids) // 50)


def test_cursor_walk_is_stable_while_rows_are_added_and_deleted(root, fleet):
    """Offset pages would skip or repeat rows when others write meanwhile; a keyset walk does not."""
    before = set(m.Accelerator.objects.values_list("pk", flat=True))
    body = root.get(url("nodes"), {"mode": "cursor", "limit": 10}).json()
    seen = [row["id"] for row in body["results"]]
    m.Node.objects.filter(pk=seen[0]).update(status="maintenance")  # changes nothing for the walk
    deleted = m.Tag.objects.create(slug="tmp")  # unrelated write
    deleted.delete()
    rest, _ = walk(root, body["next"], {})
    assert sorted(seen + rest) == sorted(m.Node.objects.values_list("pk", flat=True))
    assert before  # the fleet is there


def test_cursor_walk_respects_filters_and_permissions(client_for, fleet):
    user = UserFactory(username="bj2-viewer")
    grant_scope(scope_obj=m.Site.objects.get(code="bj2"), perms=["view_scope"], users=[user])
    ids, _ = walk(client_for(user), url("accelerators"), {"mode": "cursor", "limit": 37, "health": "ok"})
    assert set(ids) == set(m.Accelerator.objects.filter(site__code="bj2", health="ok").values_list("pk", flat=True))


def test_bad_cursor_is_400(root, fleet):
    response = root.get(url("nodes"), {"cursor": "garbage!"})
    assert response.status_code == 400
    assert "cursor" in response.json()["error"]["fields"]


def test_offset_pages_and_limit_cap(root, fleet):
    assert m.ChangeRecord.objects.count() > 1000
    body = root.get(url("changes"), {"limit": 5000}).json()
    assert len(body["results"]) == 1000  # capped
    body = root.get(url("accelerators"), {"limit": 10, "offset": 10}).json()
    assert body["count"] == m.Accelerator.objects.count()
    assert "offset=20" in body["next"]
    assert "offset" not in body["previous"]  # the first page


# --- summary -----------------------------------------------------------------------------------------------------


def test_summary_counts_match_the_fleet(root, fleet, django_assert_max_num_queries):
    with django_assert_max_num_queries(8):  # token + one GROUP BY per breakdown
        body = root.get(url("summary")).json()
    cards = body["accelerators"]
    assert cards["total"] == m.Accelerator.objects.count()
    assert cards["by_site"] == dict(Counter(m.Accelerator.objects.values_list("site__code", flat=True)))
    assert cards["by_vendor"] == dict(Counter(m.Accelerator.objects.values_list("model__vendor__slug", flat=True)))
    assert cards["by_model"]["Hygon K100"] == m.Accelerator.objects.filter(model__name="Hygon K100").count()
    assert cards["by_health"]["failed"] == m.Accelerator.objects.filter(health="failed").count() > 0
    assert cards["by_lifecycle"] == dict(Counter(m.Accelerator.objects.values_list("lifecycle", flat=True)))
    assert body["nodes"]["by_status"] == dict(Counter(m.Node.objects.values_list("status", flat=True)))
    assert body["nodes"]["total"] == m.Node.objects.count()


def test_summary_counts_only_what_the_user_may_see(client_for, fleet):
    user = UserFactory(username="sh1-viewer")
    grant_scope(scope_obj=m.Site.objects.get(code="sh1"), perms=["view_scope"], users=[user])
    body = client_for(user).get(url("summary")).json()
    assert set(body["accelerators"]["by_site"]) == {"sh1"}
    assert body["accelerators"]["by_vendor"] == {"nvidia": m.Accelerator.objects.filter(site__code="sh1").count()}
    assert body["nodes"]["total"] == m.Node.objects.filter(site__code="sh1").count()


def test_summary_for_a_user_without_grants_is_empty(nobody, fleet):
    body = nobody.get(url("summary")).json()
    assert body["accelerators"]["total"] == 0 and body["nodes"]["total"] == 0


# --- tokens ------------------------------------------------------------------------------------------------------


def test_obtain_a_token_with_username_and_password_then_use_it(api, db):
    user = UserFactory(username="ops")  # password "pw"
    response = api.post(url("auth/token"), {"username": "ops", "password": "pw"}, format="json")
    assert response.status_code == 200
    token = response.json()["token"]
    assert Token.objects.get(user=user).key == token
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert api.get(url("nodes")).status_code == 200


def test_wrong_password_is_401(api, db):
    UserFactory(username="ops")
    response = api.post(url("auth/token"), {"username": "ops", "password": "nope"}, format="json")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"


def test_logged_in_user_gets_rotates_and_revokes_their_token(db):
    user = UserFactory(username="ops")
    client = APIClient(enforce_csrf_checks=False)
    client.force_login(user)
    first = client.post(url("auth/token"), {}, format="json").json()["token"]
    assert client.post(url("auth/token"), {}, format="json").json()["token"] == first
    rotated = client.post(url("auth/token"), {"rotate": True}, format="json").json()["token"]
    assert rotated != first
    assert client.delete(url("auth/token")).status_code == 204
    assert not Token.objects.filter(user=user).exists()


def test_anonymous_token_request_without_credentials_is_401(api, db):
    assert api.post(url("auth/token"), {}, format="json").status_code == 401


@pytest.fixture
def fresh_throttle():
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()  # the throttle keys on the client address, shared by every test in this process


def test_password_guessing_is_throttled_with_the_error_shape(api, db, fresh_throttle):
    UserFactory(username="ops")
    for _ in range(30):
        api.post(url("auth/token"), {"username": "ops", "password": "guess"}, format="json")
    response = api.post(url("auth/token"), {"username": "ops", "password": "pw"}, format="json")
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "throttled"
    assert int(response["Retry-After"]) > 0
