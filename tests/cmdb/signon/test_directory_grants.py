"""Directory groups -> roles and scopes: the one service both sign-on paths call at every login."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from cmdb import models as m
from cmdb.permissions import can, grant_scope, restrict
from cmdb.services.directory import directory_grants_apply
from tests.factories.cmdb import ClusterFactory, NodeFactory, SiteFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    sh1, bj2 = SiteFactory(code="sh1"), SiteFactory(code="bj2")
    techs = Group.objects.create(name="dc-technicians")
    dc_sh1 = m.DirectoryGroupMapping.objects.create(directory_group="dc-sh1", scope_perm="change_scope", site=sh1)
    dc_sh1.groups.add(techs)
    return {
        "sh1": sh1,
        "bj2": bj2,
        "techs": techs,
        "node_sh1": NodeFactory(site=sh1, hostname="sh1-001"),
        "node_bj2": NodeFactory(site=bj2, hostname="bj2-001"),
    }


def _fresh(user):
    return type(user).objects.get(pk=user.pk)


def test_a_mapped_group_gives_its_role_and_its_site_only(world):
    alice = UserFactory(username="alice")
    result = directory_grants_apply(alice, ["DC-SH1", "some-other-group"], source="test")
    alice = _fresh(alice)
    assert alice.groups.filter(name="dc-technicians").exists()
    assert list(restrict(m.Node.objects.all(), alice, "view")) == [world["node_sh1"]]
    assert can(alice, "change", world["node_sh1"])
    assert not can(alice, "view", world["node_bj2"])
    assert len(result.granted) == 2
    assert set(alice.directory_grants.values_list("kind", flat=True)) == {"group", "scope"}


def test_leaving_the_directory_group_drops_the_grants_at_next_login(world):
    alice = UserFactory(username="alice")
    directory_grants_apply(alice, ["dc-sh1"], source="test")
    result = directory_grants_apply(alice, [], source="test")
    alice = _fresh(alice)
    assert not alice.groups.exists()
    assert not restrict(m.Node.objects.all(), alice, "view").exists()
    assert not alice.directory_grants.exists()
    assert len(result.revoked) == 2


def test_grants_given_by_hand_survive_leaving_the_group(world):
    bob = UserFactory(username="bob")
    bob.groups.add(world["techs"])
    grant_scope(scope_obj=world["sh1"], perms=["change_scope"], users=[bob])
    result = directory_grants_apply(bob, ["dc-sh1"], source="test")
    assert result.granted == [] and len(result.kept_by_hand) == 2
    directory_grants_apply(bob, [], source="test")
    bob = _fresh(bob)
    assert bob.groups.filter(pk=world["techs"].pk).exists()
    assert can(bob, "change", world["node_sh1"])


def test_a_hand_grant_elsewhere_is_untouched_while_the_directory_one_goes(world):
    carol = UserFactory(username="carol")
    grant_scope(scope_obj=world["bj2"], perms=["view_scope"], users=[carol])
    directory_grants_apply(carol, ["dc-sh1"], source="test")
    directory_grants_apply(carol, [], source="test")
    carol = _fresh(carol)
    assert list(restrict(m.Node.objects.all(), carol, "view")) == [world["node_bj2"]]


def test_an_edited_mapping_moves_the_grant_at_next_login(world):
    alice = UserFactory(username="alice")
    directory_grants_apply(alice, ["dc-sh1"], source="test")
    mapping = m.DirectoryGroupMapping.objects.get(directory_group="dc-sh1")
    mapping.site = world["bj2"]
    mapping.save()
    directory_grants_apply(alice, ["dc-sh1"], source="test")
    alice = _fresh(alice)
    assert list(restrict(m.Node.objects.all(), alice, "view")) == [world["node_bj2"]]


def test_cluster_and_tenant_scopes_and_view_only(world):
    cluster = ClusterFactory(site=world["bj2"])
    tenant = TenantFactory()
    in_cluster = NodeFactory(site=world["bj2"], cluster=cluster, hostname="bj2-002")
    of_tenant = NodeFactory(site=world["bj2"], tenant=tenant, hostname="bj2-003")
    m.DirectoryGroupMapping.objects.create(directory_group="train", scope_perm="view_scope", cluster=cluster)
    m.DirectoryGroupMapping.objects.create(directory_group="team-x", scope_perm="change_scope", tenant=tenant)
    dave = UserFactory(username="dave")
    directory_grants_apply(dave, ["train", "team-x"], source="test")
    dave = _fresh(dave)
    assert set(restrict(m.Node.objects.all(), dave, "view")) == {in_cluster, of_tenant}
    assert not can(dave, "change", in_cluster)
    assert can(dave, "change", of_tenant)


def test_a_second_login_with_the_same_groups_changes_nothing(world, django_assert_max_num_queries):
    alice = UserFactory(username="alice")
    directory_grants_apply(alice, ["dc-sh1"], source="test")
    for i in range(5):  # more mapping rows for other groups must not cost more queries
        m.DirectoryGroupMapping.objects.create(directory_group=f"other-{i}", scope_perm="view_scope", site=world["bj2"])
    with django_assert_max_num_queries(7):
        result = directory_grants_apply(alice, ["dc-sh1", *(f"nobody-{i}" for i in range(50))], source="test")
    assert result.granted == [] and result.revoked == []


def test_a_scope_permission_needs_exactly_one_scope(world):
    row = m.DirectoryGroupMapping(directory_group="x", scope_perm="change_scope")
    with pytest.raises(ValidationError, match="exactly one site"):
        row.full_clean()
    row = m.DirectoryGroupMapping(directory_group="x", site=world["sh1"])
    with pytest.raises(ValidationError, match="Choose view_scope"):
        row.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        m.DirectoryGroupMapping.objects.create(
            directory_group="x", scope_perm="view_scope", site=world["sh1"], cluster=ClusterFactory(site=world["sh1"])
        )


def test_mappings_are_edited_in_the_admin_with_history(world, client):
    admin = UserFactory(username="root", is_superuser=True)
    client.force_login(admin)
    response = client.post(
        "/admin/cmdb/directorygroupmapping/add/",
        {
            "directory_group": "dc-bj2",
            "groups": [world["techs"].pk],
            "scope_perm": "view_scope",
            "site": world["bj2"].pk,
            "description": "Beijing 2 technicians",
        },
    )
    assert response.status_code == 302, response.content[:2000]
    mapping = m.DirectoryGroupMapping.objects.get(directory_group="dc-bj2")
    assert list(mapping.groups.all()) == [world["techs"]]
    assert m.ChangeRecord.objects.filter(
        content_type__model="directorygroupmapping", object_id=mapping.pk, action="create"
    ).exists()
    leads = Group.objects.create(name="ops-leads")
    url = f"/admin/cmdb/directorygroupmapping/{mapping.pk}/change/"
    data = {"directory_group": "dc-bj2", "groups": [leads.pk], "scope_perm": "view_scope", "site": world["bj2"].pk}
    for inline in client.get(url).context["inline_admin_formsets"]:
        data.update({f"{inline.formset.prefix}-TOTAL_FORMS": 0, f"{inline.formset.prefix}-INITIAL_FORMS": 0})
    response = client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else response
    history = m.ChangeRecord.objects.filter(content_type__model="directorygroupmapping", object_id=mapping.pk)
    roles = [r.changes["groups"] for r in history.filter(changes__has_key="groups").order_by("id")]
    assert roles == [[[], ["dc-technicians"]], [["dc-technicians"], ["ops-leads"]]]
    assert {r.actor_repr for r in history} == {"root"}
    page = client.get(f"/admin/cmdb/directorygroupmapping/{mapping.pk}/change/")
    assert page.status_code == 200 and b"change history" in page.content.lower()


def test_a_technician_with_a_site_grant_cannot_edit_mappings(world, client):
    tech = UserFactory(username="tech")
    directory_grants_apply(tech, ["dc-sh1"], source="test")
    client.force_login(tech)
    assert client.get("/admin/cmdb/directorygroupmapping/").status_code == 403
    response = client.post("/admin/cmdb/directorygroupmapping/add/", {"directory_group": "dc-bj2", "scope_perm": ""})
    assert response.status_code == 403
    assert not m.DirectoryGroupMapping.objects.filter(directory_group="dc-bj2").exists()
