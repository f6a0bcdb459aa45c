"""Production settings (GPUOPS_ENV=production): what the documented environment gives, and what it refuses."""

from __future__ import annotations

import ast
import secrets

import pytest

from tests.deploy.conftest import REPO, child_env, manage, read_env_file

pytestmark = pytest.mark.slow

GOOD_KEY = secrets.token_urlsafe(50)


def documented_env(tmp_path, **changes: str | None) -> dict[str, str]:
    """deploy/gpuops.env.example as an operator fills it in (a generated SECRET_KEY), with `changes` applied."""
    values = read_env_file(REPO / "deploy" / "gpuops.env.example")
    values.update(SECRET_KEY=GOOD_KEY, GPUOPS_VAR_DIR=str(tmp_path / "var"))
    for name, value in changes.items():
        if value is None:
            values.pop(name, None)
        else:
            values[name] = value
    return child_env(**values)


def test_the_documented_production_environment_passes_check_deploy_without_a_warning(tmp_path):
    env = documented_env(tmp_path)
    assert env["GPUOPS_ENV"] == "production" and env["DEBUG"] == "false"
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=env, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_without_the_production_marker_check_deploy_warns(tmp_path):
    """The same variables without GPUOPS_ENV: none of the hardening applies, and check --deploy says so."""
    result = manage("check", "--deploy", env=documented_env(tmp_path, GPUOPS_ENV=None), check=False)
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("changes", "refusal"),
    [
        ({"SECRET_KEY": None}, "SECRET_KEY must be set, 50 characters or more"),
        ({"SECRET_KEY": "too-short"}, "SECRET_KEY must be set, 50 characters or more"),
        ({"ALLOWED_HOSTS": None}, "ALLOWED_HOSTS must name the host names"),
        ({"ALLOWED_HOSTS": " , "}, "ALLOWED_HOSTS must name the host names"),
        ({"DATABASE_URL": None}, "DATABASE_URL must point at PostgreSQL"),
        ({"DATABASE_URL": "sqlite:////tmp/gpuops.sqlite3"}, "DATABASE_URL must point at PostgreSQL"),
        ({"CELERY_BROKER_URL": None}, "CELERY_BROKER_URL must point at Redis or RabbitMQ"),
        ({"DEBUG": "true"}, "DEBUG must be false"),
    ],
)
def test_production_refuses_to_start_with_a_clear_message(tmp_path, changes, refusal):
    result = manage("check", env=documented_env(tmp_path, **changes), check=False)
    assert result.returncode != 0
    message = result.stderr.split("ImproperlyConfigured: ", 1)[1]
    assert message.startswith("GPUOPS_ENV=production refuses to start:")
    # Exactly what is wrong, nothing else.
    assert [line for line in message.splitlines() if line.startswith("  - ")] == [
        next(line for line in message.splitlines() if refusal in line)
    ]
    # A production process never generates a key of its own.
    assert not (tmp_path / "var" / "secret_key").exists()


def test_csrf_trusted_origins_follow_the_allowed_hosts(tmp_path):
    env = documented_env(tmp_path, ALLOWED_HOSTS="gpuops.example.com,.ops.example.org,gpuops.example.internal")
    code = "from django.conf import settings; print(repr(settings.CSRF_TRUSTED_ORIGINS))"
    origins = ast.literal_eval(manage("shell", "-v0", "-c", code, env=env).stdout.strip())
    assert origins == ["https://gpuops.example.com", "https://*.ops.example.org", "https://gpuops.example.internal"]
    # Given explicitly, they are taken as they are.
    env["CSRF_TRUSTED_ORIGINS"] = "https://gpuops.example.com:8443"
    assert ast.literal_eval(manage("shell", "-v0", "-c", code, env=env).stdout.strip()) == [
        "https://gpuops.example.com:8443"
    ]


def test_embedded_default_needs_no_secret_key(tmp_path):
    """script/server's settings: nothing set, a key generated once into var/ (owner-only), the same next time."""
    env = child_env(GPUOPS_VAR_DIR=str(tmp_path / "var"))
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    first = manage("shell", "-v0", "-c", code, env=env).stdout.strip()
    key_file = tmp_path / "var" / "secret_key"
    assert len(first) >= 50 and key_file.read_text().strip() == first
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert manage("shell", "-v0", "-c", code, env=env).stdout.strip() == first
