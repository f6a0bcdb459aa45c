"""script/server's second person: an `approver` beside `admin`, so a change ticket can be approved by someone
other than its requester (the engine refuses a requester's own approval)."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from cmdb.permissions import restrict
from tests.factories.cmdb import NodeFactory, SiteFactory

pytestmark = pytest.mark.django_db


def bootstrap(**kwargs) -> str:
    out = io.StringIO()
    call_command("workflows_bootstrap", "--demo-approver", stdout=out, **kwargs)
    return out.getvalue()


def test_the_demo_approver_is_made_once_and_its_password_printed_only_then(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    NodeFactory(site=SiteFactory(code="sh1"), hostname="sh1-gpu-0001")
    printed = bootstrap(verbosity=0)
    password = (tmp_path / "approver-password").read_text().strip()
    where = tmp_path / "approver-password"
    assert f"Log in as 'approver' with the password in {where} (shown this once: {password})" in printed
    assert (tmp_path / "approver-password").stat().st_mode & 0o777 == 0o600
    assert "never its requester's" in printed and "groups:" not in printed  # -v0: only the login hint
    user = get_user_model().objects.get(username="approver")
    assert user.check_password(password) and not user.is_superuser and not user.is_staff
    assert user.has_perm("workflows.rollout_approve") and user.has_perm("workflows.decommission_approve")
    # Read-only on the demo's sites: sees the nodes a change touches, changes none.
    assert restrict(NodeFactory._meta.model.objects.all(), user, "view").count() == 1
    assert not restrict(NodeFactory._meta.model.objects.all(), user, "change").exists()
    # Idempotent: the same user and password the next time script/server starts, and the password stays off screen.
    again = bootstrap(verbosity=0)
    assert f"Log in as 'approver' with the password in {tmp_path / 'approver-password'} -" in again
    assert password not in again
    assert get_user_model().objects.get(username="approver").check_password(password)
    assert get_user_model().objects.filter(username="approver").count() == 1


def test_a_requester_cannot_approve_their_own_change(settings, tmp_path):
    from workflows.engine import ForbiddenError, approval_record
    from workflows.models import Ticket

    settings.VAR_DIR = tmp_path
    bootstrap(verbosity=0)
    approver = get_user_model().objects.get(username="approver")
    ticket = Ticket(type="driver_rollout", state="awaiting_approval", requester=approver, title="mine")
    ticket.save()
    with pytest.raises(ForbiddenError, match="cannot approve their own"):
        approval_record(ticket=ticket, actor=approver, decision="approved")
