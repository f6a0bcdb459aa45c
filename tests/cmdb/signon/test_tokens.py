"""API tokens belong to a user and die with them: refused once the user is deactivated, gone when it is deleted."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from cmdb import models as m
from cmdb.permissions import grant_scope
from cmdb.services.directory import directory_grants_apply
from tests.factories.cmdb import NodeFactory, SiteFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def scripted():
    site = SiteFactory(code="sh1")
    NodeFactory(site=site, hostname="sh1-gpu-001")
    user = UserFactory(username="agent-runner")
    grant_scope(scope_obj=site, perms=["view_scope"], users=[user])
    token = Token.objects.create(user=user)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert api.get("/api/cmdb/nodes/").json()["count"] == 1
    return user, token, api


def test_a_deactivated_users_token_is_refused(scripted):
    user, _, api = scripted
    user.is_active = False
    user.save()
    response = api.get("/api/cmdb/nodes/")
    assert response.status_code == 401
    assert "sh1-gpu-001" not in response.content.decode()


def test_a_deleted_users_token_is_deleted_and_refused(scripted):
    user, token, api = scripted
    user.delete()
    assert not Token.objects.filter(key=token.key).exists()
    assert api.get("/api/cmdb/nodes/").status_code == 401


def test_a_token_sees_what_the_directory_grants_now(scripted):
    """A token acts as its user, so a scope the directory took back at the user's last sign-on is gone for it too."""
    user, _, api = scripted
    m.DirectoryGroupMapping.objects.create(
        directory_group="dc-bj2", scope_perm="view_scope", site=SiteFactory(code="bj2")
    )
    NodeFactory(site=m.Site.objects.get(code="bj2"), hostname="bj2-gpu-001")
    directory_grants_apply(user, ["dc-bj2"], source="test")
    assert api.get("/api/cmdb/nodes/").json()["count"] == 2
    directory_grants_apply(user, [], source="test")
    hosts = [row["hostname"] for row in api.get("/api/cmdb/nodes/").json()["results"]]
    assert hosts == ["sh1-gpu-001"]  # the hand grant on sh1 stays
