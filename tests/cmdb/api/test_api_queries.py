"""A list page costs the same number of queries for 10 rows as for 500 (no N+1), for any kind of user."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from cmdb.permissions import grant_scope
from tests.cmdb.api.support import bulk_fleet, url
from tests.factories.cmdb import UserFactory

pytestmark = pytest.mark.django_db

# Bounds per list page. Superuser: token, COUNT, page (+1 prefetch for tags). Scoped users add the guardian
# lookups of their grants (a fixed number per scope kind), never anything per row.
BOUNDS = {
    ("accelerators", "superuser"): 3,
    ("nodes", "superuser"): 4,
    ("links", "superuser"): 3,
    ("accelerators", "scoped"): 13,
    ("nodes", "scoped"): 14,
    ("links", "scoped"): 9,
}


@pytest.fixture
def fleet500():
    return bulk_fleet(500)


def _client(who: str, fleet: dict, client_for):
    if who == "superuser":
        return client_for(UserFactory(username="root", is_superuser=True))
    user = UserFactory(username="scoped")
    grant_scope(scope_obj=fleet["site"], perms=["view_scope"], users=[user])
    # A grant on the cluster and a direct object grant too: more grant kinds, still a fixed cost.
    grant_scope(scope_obj=fleet["cluster"], perms=["change_scope"], users=[user])
    user.user_permissions.add(Permission.objects.get(codename="view_tag"))
    return client_for(user)


@pytest.mark.parametrize("who", ["superuser", "scoped"])
def test_list_queries_do_not_grow_with_page_size(who, fleet500, client_for, django_assert_max_num_queries):
    client = _client(who, fleet500, client_for)
    # One fleet for the three resources: building 500 cabled nodes is the slow part of this test.
    for resource in ("accelerators", "nodes", "links"):
        bound = BOUNDS[(resource, who)]
        for limit in (10, 500):
            with django_assert_max_num_queries(bound):
                response = client.get(url(resource), {"limit": limit})
            assert response.status_code == 200
            assert len(response.json()["results"]) == limit
            # A cursor page has no COUNT: one query fewer, at any size.
            with django_assert_max_num_queries(bound - 1):
                response = client.get(url(resource), {"limit": limit, "mode": "cursor"})
            assert len(response.json()["results"]) == limit


def test_accelerator_page_query_count_is_pinned(fleet500, client_for, django_assert_num_queries):
    """Pin the superuser accelerator page exactly, so a regression shows up as a diff, not a silent +1."""
    client = _client("superuser", fleet500, client_for)
    with django_assert_num_queries(3):  # token, COUNT, page with its joins
        client.get(url("accelerators"), {"limit": 500})
