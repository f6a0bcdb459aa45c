"""deploy/: the systemd units, the compose file, the Dockerfile and the nginx example are consistent with the code
and accepted by their tools where the tool runs here (systemd-analyze, nginx; the Docker engine does not)."""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from django.conf import settings

from tests.deploy.conftest import GUNICORN, NGINX, REPO, child_env, manage, nginx_config

DEPLOY = REPO / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
GUNICORN_COMMAND = ["gunicorn", "-c", "python:gpuops.gunicorn_conf"]


def celery_queues() -> set[str]:
    """Every queue a task can be routed to (settings.CELERY_TASK_ROUTES and the default queue)."""
    return {settings.CELERY_TASK_DEFAULT_QUEUE} | {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}


def interpolate(value: str, variables: dict[str, str]) -> str:
    """docker compose's ${VAR}, ${VAR:-default} and ${VAR:?error} (enough for our file)."""

    def one(match: re.Match) -> str:
        name, op, arg = match[1], match[2], match[3]
        if variables.get(name):
            return variables[name]
        if op == ":?":
            raise AssertionError(f"compose would stop: {arg}")
        return arg or ""

    return re.sub(r"\$\{([A-Z_][A-Z0-9_]*)(?:(:[-?])([^}]*))?\}", one, value)


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def gpuops_services(compose: dict) -> dict[str, dict]:
    return {name: svc for name, svc in compose["services"].items() if svc.get("image") == "gpuops:latest"}


def test_compose_builds_the_repository_dockerfile_and_runs_every_process(compose):
    services = gpuops_services(compose)
    assert set(compose["services"]) - set(services) == {"db", "redis"}
    for name, svc in services.items():
        context = (COMPOSE.parent / svc["build"]["context"]).resolve()
        assert context == REPO and (context / svc["build"]["dockerfile"]).is_file(), name
    assert services["web"]["command"] == GUNICORN_COMMAND
    # One worker per queue, each queue consumed, nothing consumed that no task is routed to.
    consumed = {}
    for name, svc in services.items():
        command = svc["command"]
        if command[:4] == ["celery", "-A", "gpuops", "worker"]:
            consumed[name] = command[command.index("-Q") + 1]
    assert sorted(consumed.values()) == sorted(celery_queues())
    assert all(name == f"worker-{queue}" for name, queue in consumed.items())
    # Exactly one beat, never scaled.
    beats = [name for name, svc in services.items() if svc["command"][:4] == ["celery", "-A", "gpuops", "beat"]]
    assert beats == ["beat"] and "deploy" not in services["beat"]
    # Migrations run before web, workers and beat start.
    for name in ("web", "beat", *consumed):
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    assert services["migrate"]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    # The web port is published on loopback only: the TLS proxy is the way in.
    assert services["web"]["ports"] == ["127.0.0.1:8000:8000"]


def test_compose_refuses_to_start_without_its_secrets(compose):
    env = gpuops_services(compose)["web"]["environment"]
    for name in ("SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL"):
        with pytest.raises(AssertionError, match="compose would stop: set"):
            interpolate(env[name], {})


def test_compose_environment_passes_check_deploy(compose, tmp_path):
    """The web container's environment, as compose fills it from deploy/.env: no deployment warning."""
    filled = {"SECRET_KEY": secrets.token_urlsafe(50), "POSTGRES_PASSWORD": "pw", "ALLOWED_HOSTS": "gpuops.example.com"}
    env = {k: interpolate(str(v), filled) for k, v in gpuops_services(compose)["web"]["environment"].items()}
    assert env["GPUOPS_ENV"] == "production" and env["DATABASE_URL"] == "postgres://gpuops:pw@db:5432/gpuops"
    result = manage(
        "check", "--deploy", "--fail-level", "WARNING", env=child_env(**env, GPUOPS_VAR_DIR=str(tmp_path)), check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_file_passes_docker_compose_config():
    if (
        shutil.which("docker") is None
        or subprocess.run(["docker", "compose", "version"], capture_output=True).returncode
    ):
        pytest.skip("the docker compose plugin is not installed (the structure is checked by the tests above)")
    env = child_env(SECRET_KEY="s" * 60, POSTGRES_PASSWORD="pw", ALLOWED_HOSTS="gpuops.example.com")
    result = subprocess.run(["docker", "compose", "-f", str(COMPOSE), "config", "-q"], env=env, capture_output=True)
    assert result.returncode == 0, result.stderr


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def test_dockerfile_copies_what_exists_and_runs_the_shipped_gunicorn_config():
    instructions = dockerfile_instructions()
    assert instructions[0][0] == "FROM" and instructions[0][1].startswith("python:3.11")
    for kind, args in instructions:
        if kind == "COPY":
            for source in args.split()[:-1]:
                assert (REPO / source).exists(), source
    assert instructions[-1] == ("CMD", '["gunicorn", "-c", "python:gpuops.gunicorn_conf"]')
    users = [args for kind, args in instructions if kind == "USER"]
    assert users == ["gpuops"]  # not root
    # Static files are collected into the image, outside the var volume, with a throw-away key.
    assert any("collectstatic" in args and "SECRET_KEY=" in args for kind, args in instructions if kind == "RUN")
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".git", ".venv", "var", "deploy/.env"} <= set(ignored)


def installed_units(tmp_path: Path) -> Path:
    """The units as docs/operations.md installs them, with this checkout and venv in place of /opt/gpuops."""
    target = tmp_path / "units"
    target.mkdir()
    (tmp_path / "gpuops.env").write_text("")
    for unit in (DEPLOY / "systemd").iterdir():
        text = unit.read_text().replace("/opt/gpuops/.venv/bin", str(GUNICORN.parent))
        text = text.replace("/opt/gpuops", str(REPO)).replace("/etc/gpuops/gpuops.env", str(tmp_path / "gpuops.env"))
        (target / unit.name).write_text(text)
    return target


def test_systemd_units_verify(tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    if not GUNICORN.exists():
        pytest.skip(f"gunicorn is not installed beside {GUNICORN.parent}/python")
    units = installed_units(tmp_path)
    names = ["gpuops-web.service", "gpuops-beat.service", "gpuops.target"]
    names += [f"gpuops-worker@{queue}.service" for queue in sorted(celery_queues())]
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *[f"./{name}" for name in names]],
        cwd=units,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr


def test_systemd_units_run_the_shipped_commands():
    web = (DEPLOY / "systemd" / "gpuops-web.service").read_text()
    assert "ExecStart=/opt/gpuops/.venv/bin/" + " ".join(GUNICORN_COMMAND) in web
    worker = (DEPLOY / "systemd" / "gpuops-worker@.service").read_text()
    assert "celery -A gpuops worker -Q %i -n %i@%H" in worker
    # Every queue has its instance named in the unit and enabled in the operations guide.
    operations = (REPO / "docs" / "operations.md").read_text()
    for queue in celery_queues():
        assert f"gpuops-worker@{queue}" in worker and f"gpuops-worker@{queue}" in operations
    for unit in ("gpuops-web", "gpuops-beat", "gpuops-worker@"):
        text = (DEPLOY / "systemd" / f"{unit}.service").read_text()
        assert "EnvironmentFile=/etc/gpuops/gpuops.env" in text and "User=gpuops" in text


def test_nginx_example_is_accepted_by_nginx(tmp_path):
    if NGINX is None or shutil.which("openssl") is None:
        pytest.skip("nginx or openssl is not installed (.ci/run installs nginx)")
    conf = nginx_config(tmp_path, 8000, 8080, 8443)
    result = subprocess.run(
        [NGINX, "-t", "-p", str(tmp_path), "-c", str(conf), "-e", str(tmp_path / "error.log")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "test is successful" in result.stderr


def test_gpuops_manage_runs_manage_py_with_the_environment_file(tmp_path):
    """deploy/gpuops-manage: what an operator runs for migrate / ensure_admin; sees the services' environment."""
    import getpass
    import secrets as _secrets

    env_file = tmp_path / "gpuops.env"
    example = (DEPLOY / "gpuops.env.example").read_text()
    env_file.write_text(
        example.replace("SECRET_KEY=\n", f"SECRET_KEY={_secrets.token_urlsafe(50)}\n").replace(
            "GPUOPS_VAR_DIR=/var/lib/gpuops", f"GPUOPS_VAR_DIR={tmp_path / 'var'}"
        )
    )
    venv = GUNICORN.parent.parent
    home = tmp_path / "home"
    home.mkdir()
    (home / ".venv").symlink_to(venv)
    for name in (
        "manage.py",
        "gpuops",
        "cmdb",
        "workflows",
        "integrations",
        "inventory_agents",
        "console",
        "templates",
    ):
        (home / name).symlink_to(REPO / name)
    result = subprocess.run(
        [str(DEPLOY / "gpuops-manage"), "check", "--deploy", "--fail-level", "WARNING"],
        env=child_env(GPUOPS_HOME=str(home), GPUOPS_ENV_FILE=str(env_file), GPUOPS_USER=getpass.getuser()),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout
    missing = subprocess.run(
        [str(DEPLOY / "gpuops-manage"), "check"],
        env=child_env(GPUOPS_ENV_FILE=str(tmp_path / "absent.env")),
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "cannot read" in missing.stderr
