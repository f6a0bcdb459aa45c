"""OpenID Connect sign-on through the real authorization-code flow against a local provider that signs RS256 ID
tokens: the groups claim goes through the same directory mapping as LDAP."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client, override_settings

from cmdb import models as m
from gpuops.signon import backends, oidc_settings
from tests.factories.cmdb import NodeFactory, SiteFactory

from .oidc_provider import ProviderServer

pytestmark = pytest.mark.django_db

ALICE = {"sub": "0a1b", "preferred_username": "alice", "email": "alice@corp.example", "given_name": "Alice"}


@pytest.fixture
def provider():
    server = ProviderServer()
    provider = server.start()
    try:
        with override_settings(
            **oidc_settings(provider.env()), AUTHENTICATION_BACKENDS=backends(ldap_on=False, oidc_on=True)
        ):
            yield provider
    finally:
        server.stop()


@pytest.fixture
def fleet():
    sh1, bj2 = SiteFactory(code="sh1"), SiteFactory(code="bj2")
    techs = Group.objects.create(name="dc-technicians")
    m.DirectoryGroupMapping.objects.create(directory_group="dc-sh1", scope_perm="change_scope", site=sh1)
    m.DirectoryGroupMapping.objects.create(directory_group="gpuops-technicians").groups.add(techs)
    NodeFactory(site=sh1, hostname="sh1-gpu-001")
    NodeFactory(site=bj2, hostname="bj2-gpu-001")
    return {"techs": techs}


def _sign_in(provider, client: Client):
    """The browser's part of the flow: gpuops -> the provider's authorize page -> back to gpuops' callback."""
    start = client.get("/accounts/oidc/authenticate/")
    assert start.status_code == 302 and start["Location"].startswith(f"{provider.base}/authorize?")
    back = httpx.get(start["Location"], follow_redirects=False)
    assert back.status_code == 302, back.text
    callback = urlsplit(back.headers["location"])
    assert callback.path == "/accounts/oidc/callback/"
    return client.get(f"{callback.path}?{callback.query}")


def _signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_sign_in_maps_the_groups_claim_to_role_and_site(provider, fleet):
    provider.user = {**ALICE, "groups": ["dc-sh1", "gpuops-technicians", "unmapped"]}
    client = Client()
    done = _sign_in(provider, client)
    assert done.status_code == 302 and done["Location"] == "/tickets/"
    assert _signed_in(client)
    alice = get_user_model().objects.get(username="alice")
    assert (alice.email, alice.first_name, alice.has_usable_password()) == ("alice@corp.example", "Alice", False)
    assert list(alice.groups.all()) == [fleet["techs"]]
    assert client.get("/nodes/sh1-gpu-001/").status_code == 200
    assert client.get("/nodes/bj2-gpu-001/").status_code == 404


def test_a_group_removed_at_the_provider_drops_the_grant_at_next_sign_in(provider, fleet):
    provider.user = {**ALICE, "groups": ["dc-sh1"]}
    _sign_in(provider, Client())
    provider.user = {**ALICE, "groups": []}
    client = Client()
    _sign_in(provider, client)
    assert _signed_in(client)
    assert client.get("/nodes/sh1-gpu-001/").status_code == 404
    assert not m.DirectoryGrant.objects.filter(user__username="alice").exists()


@pytest.mark.parametrize("forgery", ["another key", "another audience"])
def test_an_id_token_that_is_not_ours_signs_nobody_in(provider, fleet, forgery):
    if forgery == "another key":
        provider.signing_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    else:
        provider.audience = "some-other-client"
    provider.user = {**ALICE, "groups": ["dc-sh1"]}
    client = Client()
    done = _sign_in(provider, client)
    assert done.status_code == 302 and done["Location"] == "/accounts/login/?sso=failed"
    assert not _signed_in(client)
    assert not get_user_model().objects.filter(username="alice").exists()
    assert b"Single sign-on did not complete" in client.get(done["Location"]).content


def test_a_user_deactivated_in_gpuops_is_refused(provider, fleet):
    provider.user = {**ALICE, "groups": ["dc-sh1"]}
    _sign_in(provider, Client())
    get_user_model().objects.filter(username="alice").update(is_active=False)
    client = Client()
    _sign_in(provider, client)
    assert not _signed_in(client)


def test_the_login_page_offers_the_provider(provider):
    page = Client().get("/accounts/login/")
    assert b"/accounts/oidc/authenticate/" in page.content


def test_oidc_urls_are_absent_while_it_is_off(client):
    assert client.get("/accounts/oidc/authenticate/").status_code == 404
    assert client.get("/accounts/oidc/callback/?code=x&state=y").status_code == 404
    assert b"/accounts/oidc/authenticate/" not in client.get("/accounts/login/").content


def test_a_signed_in_user_gets_an_api_token_for_scripts(provider, fleet):
    provider.user = {**ALICE, "groups": ["dc-sh1"]}
    client = Client()
    _sign_in(provider, client)
    token = client.post("/api/cmdb/auth/token/", {}, content_type="application/json").json()["token"]
    script = Client(HTTP_AUTHORIZATION=f"Token {token}")
    assert [row["hostname"] for row in script.get("/api/cmdb/nodes/").json()["results"]] == ["sh1-gpu-001"]


def test_a_provider_user_cannot_take_over_a_local_account_of_the_same_name(provider, fleet):
    get_user_model().objects.create_superuser("admin", password="local-pw")
    provider.user = {"sub": "x", "preferred_username": "Admin", "groups": ["dc-sh1"]}
    client = Client()
    done = _sign_in(provider, client)
    assert done["Location"] == "/accounts/login/?sso=failed" and not _signed_in(client)
    assert not m.DirectoryGrant.objects.exists()
