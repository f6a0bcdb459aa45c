"""LDAP sign-on against a real OpenLDAP (slapd on loopback): the login page, the mapped site grant, a wrong
password, a disabled account (a member of the deny group) and a group change that counts at the next login."""

from __future__ import annotations

import json
import os
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.test import Client, override_settings

from cmdb import models as m
from cmdb.tasks import directory_sync_task
from gpuops.signon import backends, ldap_settings
from tests.factories.cmdb import NodeFactory, SiteFactory

from . import slapd

pytestmark = [pytest.mark.services, pytest.mark.django_db]

PEOPLE = f"ou=people,{slapd.SUFFIX}"
GROUPS = f"ou=groups,{slapd.SUFFIX}"


def _person(uid: str, password: str) -> str:
    return f"""dn: uid={uid},{PEOPLE}
objectClass: inetOrgPerson
uid: {uid}
cn: {uid.title()} Example
givenName: {uid.title()}
sn: Example
mail: {uid}@corp.example
userPassword: {password}
"""


def _group(cn: str, *members: str) -> str:
    return f"dn: cn={cn},{GROUPS}\nobjectClass: groupOfNames\ncn: {cn}\n" + "".join(
        f"member: uid={uid},{PEOPLE}\n" for uid in members
    )


DIRECTORY = "\n".join(
    [
        f"dn: {slapd.SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: gpuops\no: gpuops test\n",
        f"dn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people\n",
        f"dn: {GROUPS}\nobjectClass: organizationalUnit\nou: groups\n",
        _person("alice", "alice-pw"),
        _person("bob", "bob-pw"),
        _person("carol", "carol-pw"),
        _group("dc-sh1", "alice", "bob"),
        _group("dc-bj2", "carol"),
        _group("gpuops-technicians", "alice", "bob", "carol"),
        # Disabled accounts: GPUOPS_LDAP_DENY_GROUP names this group, so its members cannot sign in.
        _group("gpuops-disabled", "bob"),
    ]
)


@pytest.fixture
def directory(tmp_path):
    reason = slapd.missing()
    try:
        import ldap  # noqa: F401
    except ImportError:
        reason = "python-ldap is not installed (pip install -e '.[ldap]')"
    if reason:
        # .ci/run sets GPUOPS_REQUIRE_LDAP_TESTS: there these tests must run, so a missing peer is a failure.
        (pytest.fail if os.environ.get("GPUOPS_REQUIRE_LDAP_TESTS") else pytest.skip)(reason)
    with slapd.slapd_running(tmp_path, DIRECTORY) as server:
        env = {
            "GPUOPS_LDAP_SERVER_URI": server.uri,
            "GPUOPS_LDAP_BIND_DN": slapd.ROOT_DN,
            "GPUOPS_LDAP_BIND_PASSWORD": slapd.ROOT_PASSWORD,
            "GPUOPS_LDAP_USER_SEARCH_BASE": PEOPLE,
            "GPUOPS_LDAP_GROUP_SEARCH_BASE": GROUPS,
            "GPUOPS_LDAP_GROUP_TYPE": "groupOfNames",
            "GPUOPS_LDAP_DENY_GROUP": f"cn=gpuops-disabled,{GROUPS}",
        }
        with override_settings(**ldap_settings(env), AUTHENTICATION_BACKENDS=backends(ldap_on=True, oidc_on=False)):
            yield server


@pytest.fixture
def fleet():
    sh1, bj2 = SiteFactory(code="sh1"), SiteFactory(code="bj2")
    techs = Group.objects.create(name="dc-technicians")
    m.DirectoryGroupMapping.objects.create(directory_group="dc-sh1", scope_perm="change_scope", site=sh1)
    m.DirectoryGroupMapping.objects.create(directory_group="dc-bj2", scope_perm="change_scope", site=bj2)
    m.DirectoryGroupMapping.objects.create(directory_group="gpuops-technicians").groups.add(techs)
    return {
        "techs": techs,
        "sh1": NodeFactory(site=sh1, hostname="sh1-gpu-001"),
        "bj2": NodeFactory(site=bj2, hostname="bj2-gpu-001"),
    }


def _login(username: str, password: str) -> tuple[Client, int]:
    client = Client()
    response = client.post("/accounts/login/", {"username": username, "password": password})
    return client, response.status_code


def _signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_a_directory_user_signs_in_and_sees_and_changes_only_the_site_their_group_grants(directory, fleet):
    client, status = _login("alice", "alice-pw")
    assert status == 302 and _signed_in(client)
    alice = get_user_model().objects.get(username="alice")
    assert (alice.email, alice.first_name) == ("alice@corp.example", "Alice")
    assert not alice.has_usable_password()  # the directory holds the password, not gpuops
    assert list(alice.groups.all()) == [fleet["techs"]]

    assert client.get("/nodes/sh1-gpu-001/").status_code == 200
    assert client.get("/nodes/bj2-gpu-001/").status_code == 404
    listed = client.get("/api/cmdb/nodes/").json()["results"]
    assert [row["hostname"] for row in listed] == ["sh1-gpu-001"]
    patch = {"data": json.dumps({"is_cordoned": True, "cordon_reason": "fan"}), "content_type": "application/json"}
    assert client.patch(f"/api/cmdb/nodes/{fleet['sh1'].pk}/", **patch).status_code == 200
    assert client.patch(f"/api/cmdb/nodes/{fleet['bj2'].pk}/", **patch).status_code == 404
    fleet["bj2"].refresh_from_db()
    assert not fleet["bj2"].is_cordoned


def test_a_wrong_password_is_refused(directory, fleet):
    client, status = _login("alice", "not-her-password")
    assert status == 200 and not _signed_in(client)
    assert not get_user_model().objects.filter(username="alice").exists()


def test_a_disabled_account_is_refused(directory, fleet):
    client, status = _login("bob", "bob-pw")
    assert status == 200 and not _signed_in(client)
    assert not m.DirectoryGrant.objects.filter(user__username="bob").exists()


def test_a_user_removed_from_the_group_loses_the_grant_at_next_login(directory, fleet):
    client, _ = _login("alice", "alice-pw")
    assert client.get("/nodes/sh1-gpu-001/").status_code == 200

    directory.modify(f"dn: cn=dc-sh1,{GROUPS}\nchangetype: modify\ndelete: member\nmember: uid=alice,{PEOPLE}\n")
    client, status = _login("alice", "alice-pw")
    assert status == 302 and _signed_in(client)
    assert client.get("/nodes/sh1-gpu-001/").status_code == 404
    alice = get_user_model().objects.get(username="alice")
    assert list(alice.groups.all()) == [fleet["techs"]]  # still a technician: that group did not change
    assert list(m.DirectoryGrant.objects.filter(user=alice).values_list("kind", flat=True)) == ["group"]


def test_a_user_deactivated_in_gpuops_stays_out_whatever_the_directory_says(directory, fleet):
    _login("carol", "carol-pw")
    get_user_model().objects.filter(username="carol").update(is_active=False)
    client, status = _login("carol", "carol-pw")
    assert status == 200 and not _signed_in(client)


def test_a_script_gets_a_token_with_its_directory_password(directory, fleet):
    client = Client()
    refused = client.post("/api/cmdb/auth/token/", {"username": "alice", "password": "wrong"}, "application/json")
    assert refused.status_code == 401
    response = client.post("/api/cmdb/auth/token/", {"username": "alice", "password": "alice-pw"}, "application/json")
    assert response.status_code == 200
    script = Client(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    assert [row["hostname"] for row in script.get("/api/cmdb/nodes/").json()["results"]] == ["sh1-gpu-001"]
    disabled = client.post("/api/cmdb/auth/token/", {"username": "bob", "password": "bob-pw"}, "application/json")
    assert disabled.status_code == 401


def test_a_directory_entry_cannot_take_over_a_local_account_of_the_same_name(directory, fleet):
    get_user_model().objects.create_superuser("carol", email="root@local", password="local-pw")
    client, status = _login("carol", "carol-pw")
    assert status == 200 and not _signed_in(client)
    assert get_user_model().objects.get(username="carol").email == "root@local"
    client, status = _login("carol", "local-pw")  # the local password still works
    assert status == 302 and _signed_in(client)


def test_directory_sync_deactivates_a_disabled_account_and_its_token_until_the_directory_takes_it_back(
    directory, fleet
):
    client = Client()
    token = client.post("/api/cmdb/auth/token/", {"username": "alice", "password": "alice-pw"}, "application/json")
    script = Client(HTTP_AUTHORIZATION=f"Token {token.json()['token']}")
    assert script.get("/api/cmdb/nodes/").status_code == 200

    directory.modify(f"dn: cn=gpuops-disabled,{GROUPS}\nchangetype: modify\nadd: member\nmember: uid=alice,{PEOPLE}\n")
    call_command("directory_sync", stdout=(out := StringIO()))
    assert "deactivated 1: alice" in out.getvalue()
    assert script.get("/api/cmdb/nodes/").status_code == 401
    assert not m.DirectoryGrant.objects.filter(user__username="alice").exists()
    assert _login("alice", "alice-pw")[1] == 200  # refused while in the deny group

    directory.modify(
        f"dn: cn=gpuops-disabled,{GROUPS}\nchangetype: modify\ndelete: member\nmember: uid=alice,{PEOPLE}\n"
    )
    client, status = _login("alice", "alice-pw")
    assert status == 302 and client.get("/nodes/sh1-gpu-001/").status_code == 200
    assert script.get("/api/cmdb/nodes/").status_code == 200  # the same token works again


def test_directory_sync_takes_back_a_group_the_user_left_and_stops_on_an_unreachable_directory(directory, fleet):
    _login("alice", "alice-pw")
    directory.modify(f"dn: cn=dc-sh1,{GROUPS}\nchangetype: modify\ndelete: member\nmember: uid=alice,{PEOPLE}\n")
    call_command("directory_sync", stdout=StringIO())
    assert list(m.DirectoryGrant.objects.filter(user__username="alice").values_list("kind", flat=True)) == ["group"]

    with override_settings(AUTH_LDAP_SERVER_URI="ldap://127.0.0.1:9"):
        with pytest.raises(CommandError, match="could not"):
            call_command("directory_sync", stdout=StringIO())
        assert directory_sync_task() == 0  # the beat task logs it and waits for the next run
    assert get_user_model().objects.get(username="alice").is_active
    assert m.DirectoryGrant.objects.filter(user__username="alice").exists()
