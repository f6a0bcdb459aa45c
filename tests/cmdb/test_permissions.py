"""Guardian grants on a Site, Cluster or Tenant cover what is under them; superusers see all."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission

from cmdb import models as m
from cmdb.permissions import can, grant_scope, restrict
from tests.factories.cmdb import (
    AcceleratorFactory,
    ClusterFactory,
    NodeFactory,
    RackFactory,
    SiteFactory,
    TenantFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_sites():
    a, b = SiteFactory(code="site-a"), SiteFactory(code="site-b")
    node_a = NodeFactory(site=a, hostname="a-001")
    node_b = NodeFactory(site=b, hostname="b-001")
    return a, b, node_a, node_b


def test_site_grant_covers_nodes_cards_and_racks_of_that_site_only(two_sites):
    a, b, node_a, node_b = two_sites
    tech = UserFactory(username="tech-a")
    grant_scope(scope_obj=a, perms=["change_scope"], users=[tech])
    card_a, card_b = AcceleratorFactory(node=node_a), AcceleratorFactory(node=node_b)
    rack_a, rack_b = RackFactory(room__site=a), RackFactory(room__site=b)
    assert list(restrict(m.Node.objects.all(), tech, "view")) == [node_a]
    assert list(restrict(m.Node.objects.all(), tech, "change")) == [node_a]
    assert list(restrict(m.Accelerator.objects.all(), tech)) == [card_a]
    assert list(restrict(m.Rack.objects.all(), tech)) == [rack_a]
    assert can(tech, "change", node_a) and not can(tech, "view", node_b)
    assert not can(tech, "change", card_b) and not can(tech, "view", rack_b)


def test_view_scope_does_not_allow_changes(two_sites):
    a, _, node_a, _ = two_sites
    viewer = UserFactory()
    grant_scope(scope_obj=a, perms=["view_scope"], users=[viewer])
    assert can(viewer, "view", node_a)
    assert not can(viewer, "change", node_a)
    assert not restrict(m.Node.objects.all(), viewer, "change").exists()


def test_cannot_move_an_object_into_a_site_without_a_grant(two_sites):
    a, b, node_a, _ = two_sites
    tech = UserFactory()
    grant_scope(scope_obj=a, perms=["change_scope"], users=[tech])
    new_node = NodeFactory.build(site=a)
    assert can(tech, "add", new_node)
    node_a.site = b
    assert not can(tech, "change", node_a)
    assert not can(tech, "add", NodeFactory.build(site=b))


def test_cluster_and_tenant_grants_through_groups(two_sites):
    a, b, node_a, node_b = two_sites
    cluster, tenant = ClusterFactory(site=b), TenantFactory()
    node_b.cluster = cluster
    node_b.save()
    node_c = NodeFactory(site=a, tenant=tenant)
    team = Group.objects.create(name="train-ops")
    user = UserFactory()
    user.groups.add(team)
    grant_scope(scope_obj=cluster, perms=["view_scope"], groups=[team])
    grant_scope(scope_obj=tenant, perms=["view_scope"], users=[user])
    assert set(restrict(m.Node.objects.all(), user)) == {node_b, node_c}
    assert node_a not in restrict(m.Node.objects.all(), user)


def test_global_permission_and_superuser_see_everything(two_sites):
    *_, node_a, node_b = two_sites
    lead = UserFactory()
    lead.user_permissions.add(Permission.objects.get(codename="view_node"))
    root = UserFactory(is_superuser=True)
    assert set(restrict(m.Node.objects.all(), lead)) == {node_a, node_b}
    assert set(restrict(m.Node.objects.all(), root, "delete")) == {node_a, node_b}
    assert not restrict(m.Node.objects.all(), lead, "change").exists()


def test_direct_object_grant(two_sites):
    from guardian.shortcuts import assign_perm

    *_, _node_a, node_b = two_sites
    user = UserFactory()
    assign_perm("cmdb.change_node", user, node_b)
    assert list(restrict(m.Node.objects.all(), user, "change")) == [node_b]


def test_inactive_and_anonymous_users_see_nothing(two_sites):
    from django.contrib.auth.models import AnonymousUser

    a, *_ = two_sites
    user = UserFactory(is_active=False)
    grant_scope(scope_obj=a, perms=["change_scope"], users=[user])
    assert not restrict(m.Node.objects.all(), user).exists()
    assert not restrict(m.Node.objects.all(), AnonymousUser()).exists()


def test_catalog_is_readable_by_all_but_writable_only_globally():
    from tests.factories.cmdb import AcceleratorModelFactory

    model = AcceleratorModelFactory()
    user = UserFactory()
    assert list(restrict(m.AcceleratorModel.objects.all(), user)) == [model]
    assert not can(user, "change", model)
