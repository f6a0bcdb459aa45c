"""scope_lookups_cached: a page restricting many querysets reads each user's scope grants once, and sees the
same rows as without it."""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cmdb import models as m
from cmdb.permissions import grant_scope, restrict, scope_lookups_cached, user_scope_ids
from tests.factories.cmdb import ClusterFactory, NodeFactory, SiteFactory, TenantFactory, UserFactory


def _restricted(user) -> tuple[list[int], int]:
    with CaptureQueriesContext(connection) as ctx:
        ids = sorted(restrict(m.Node.objects.all(), user, "view").values_list("pk", flat=True))
    return ids, len(ctx.captured_queries)


def test_grants_are_read_once_per_user_inside_the_block(db):
    a, b = SiteFactory(code="sa"), SiteFactory(code="sb")
    in_a, in_b = NodeFactory(site=a), NodeFactory(site=b)
    alice, bob = UserFactory(username="alice", is_staff=False), UserFactory(username="bob", is_staff=False)
    grant_scope(scope_obj=a, perms=["view_scope"], users=[alice])
    grant_scope(scope_obj=b, perms=["change_scope"], users=[bob])
    plain_ids, plain_queries = _restricted(alice)
    with scope_lookups_cached():
        first_ids, _ = _restricted(alice)
        again_ids, again_queries = _restricted(alice)
        bob_ids, _ = _restricted(bob)  # another user's grants are their own
    assert plain_ids == first_ids == again_ids == [in_a.pk]
    assert bob_ids == [in_b.pk]
    assert again_queries == 1  # the rows only: no grant read
    assert plain_queries >= again_queries + 3  # outside the block: a grant read per scope (site, cluster, tenant)
    # Outside the block every call asks again (a grant given now is seen at once).
    grant_scope(scope_obj=b, perms=["view_scope"], users=[alice])
    assert _restricted(alice)[0] == sorted([in_a.pk, in_b.pk])


def test_one_query_reads_every_scope_grant_of_the_user_and_their_groups(db):
    a, b = SiteFactory(code="sa"), SiteFactory(code="sb")
    cluster, tenant = ClusterFactory(site=a), TenantFactory()
    carol = UserFactory(username="carol", is_staff=False)
    techs = Group.objects.create(name="techs-b")
    carol.groups.add(techs)
    grant_scope(scope_obj=a, perms=["view_scope"], users=[carol])
    grant_scope(scope_obj=b, perms=["change_scope"], groups=[techs])
    grant_scope(scope_obj=tenant, perms=["view_scope"], users=[carol])
    with scope_lookups_cached(), CaptureQueriesContext(connection) as ctx:
        seen = {
            (scope, action): user_scope_ids(carol, scope, action)
            for scope in ("site", "cluster", "tenant")
            for action in ("view", "change")
        }
    assert len(ctx.captured_queries) == 1
    assert seen == {
        ("site", "view"): sorted([a.pk, b.pk]),  # change_scope (through the group) implies view_scope
        ("site", "change"): [b.pk],
        ("cluster", "view"): [],
        ("cluster", "change"): [],
        ("tenant", "view"): [tenant.pk],
        ("tenant", "change"): [],
    }
    assert cluster.pk not in seen["cluster", "view"]
    # Outside the block, one scope at a time, the same answer.
    assert user_scope_ids(carol, "site", "change") == [b.pk]


def test_a_grant_or_group_written_inside_the_block_is_seen_at_once(db):
    from django.contrib.auth.models import Group

    from cmdb.permissions import revoke_scope

    a, b = SiteFactory(code="sa"), SiteFactory(code="sb")
    in_a, in_b = NodeFactory(site=a), NodeFactory(site=b)
    alice = UserFactory(username="alice", is_staff=False)
    grant_scope(scope_obj=a, perms=["view_scope"], users=[alice])
    b_viewers = Group.objects.create(name="site-b-viewers")
    grant_scope(scope_obj=b, perms=["view_scope"], groups=[b_viewers])
    with scope_lookups_cached():
        assert _restricted(alice)[0] == [in_a.pk]
        alice.groups.add(b_viewers)  # a membership written in the block (an admin saving a user)
        assert _restricted(alice)[0] == sorted([in_a.pk, in_b.pk])
        revoke_scope(scope_obj=a, perms=["view_scope"], users=[alice])
        assert _restricted(alice)[0] == [in_b.pk]
        alice.groups.remove(b_viewers)
        assert _restricted(alice)[0] == []
