"""`ensure_admin` (script/server, first admin of a deployment): the password is shown once, when it is made."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def ensure_admin() -> str:
    out = io.StringIO()
    call_command("ensure_admin", stdout=out)
    return out.getvalue()


def test_generated_password_is_printed_once_and_kept_owner_only(settings, tmp_path, monkeypatch):
    monkeypatch.delenv("GPUOPS_ADMIN_PASSWORD", raising=False)
    settings.VAR_DIR = tmp_path
    first = ensure_admin()
    password_file = tmp_path / "admin-password"
    password = password_file.read_text().strip()
    assert password in first and "shown this once" in first
    assert password_file.stat().st_mode & 0o777 == 0o600
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(password)
    # Every later start: where the password is, never the password.
    second = ensure_admin()
    assert password not in second
    assert f"Log in as 'admin' with the password in {password_file}." in second
    assert get_user_model().objects.filter(username="admin").count() == 1


def test_an_existing_file_with_a_loose_mode_is_tightened(settings, tmp_path, monkeypatch):
    monkeypatch.delenv("GPUOPS_ADMIN_PASSWORD", raising=False)
    settings.VAR_DIR = tmp_path
    stale = tmp_path / "admin-password"
    stale.write_text("old\n")
    stale.chmod(0o644)
    ensure_admin()
    assert stale.stat().st_mode & 0o777 == 0o600 and stale.read_text().strip() != "old"


def test_a_password_from_the_environment_is_neither_printed_nor_written(settings, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_ADMIN_PASSWORD", "chosen-by-the-operator")
    settings.VAR_DIR = tmp_path
    printed = ensure_admin() + ensure_admin()
    assert "chosen-by-the-operator" not in printed
    assert "GPUOPS_ADMIN_PASSWORD" in printed and "password set elsewhere" in printed
    assert not (tmp_path / "admin-password").exists()
    assert get_user_model().objects.get(username="admin").check_password("chosen-by-the-operator")
