"""gunicorn with the shipped settings (gpuops/gunicorn_conf.py), for real: what script/server and production run."""

from __future__ import annotations

import os
import re

import httpx
import pytest

from tests.conftest import wait_until
from tests.deploy.conftest import NGINX, child_env, free_port, gunicorn_running, gunicorn_workers, manage, nginx_config

pytestmark = pytest.mark.slow


def login(client: httpx.Client, base: str, username: str, password: str, **headers: str) -> httpx.Response:
    page = client.get(f"{base}/accounts/login/", headers=headers)
    assert page.status_code == 200, page.text[:500]
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
    return client.post(
        f"{base}/accounts/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token},
        headers={**headers, "Referer": f"{headers.get('X-Forwarded-Proto', 'http')}://{headers.get('Host', '')}/"},
    )


def test_embedded_default_serves_probes_console_and_static_files(tmp_path):
    """script/server's web process: SQLite, 2 workers x threads, whitenoise for static files, no SECRET_KEY set."""
    env = child_env(GPUOPS_VAR_DIR=str(tmp_path / "var"), GPUOPS_ADMIN_PASSWORD="gunicorn-test-pw")
    manage("migrate", "--noinput", "-v0", env=env)
    manage("ensure_admin", env=env)
    with gunicorn_running(env, tmp_path / "gunicorn.log") as (master, base):
        # SQLite has one writer: two processes (gunicorn_conf.py says why), however many CPUs.
        assert len(wait_until(lambda: len(gunicorn_workers(master)) == 2 and gunicorn_workers(master), 30)) == 2
        health = httpx.get(f"{base}/healthz")
        assert health.status_code == 200 and health.json() == {"status": "ok"}
        with httpx.Client() as client:
            assert client.get(f"{base}/").status_code == 302  # nothing is public
            response = login(client, base, "admin", "gunicorn-test-pw", Host="127.0.0.1")
            assert response.status_code == 302, response.text[:500]
            dashboard = client.get(f"{base}/")
            assert dashboard.status_code == 200 and "<title>Dashboard · gpuops</title>" in dashboard.text
            # Static files come from gunicorn itself (whitenoise) with a long cache lifetime.
            css = client.get(f"{base}/static/admin/css/base.css")
            assert css.status_code == 200 and "text/css" in css.headers["content-type"]
        assert (tmp_path / "var" / "secret_key").stat().st_mode & 0o777 == 0o600
    assert master.returncode == 0  # SIGTERM: a graceful stop


def production_env(tmp_path, host: str) -> dict[str, str]:
    """GPUOPS_ENV=production on this test's PostgreSQL database (committed rows: transactional_db), with a user."""
    from django.db import connection

    from tests.factories.cmdb import UserFactory

    user = UserFactory(username="prod-user", is_superuser=True, is_staff=True)
    user.set_password("prod-user-pw")
    user.save()
    s = connection.settings_dict
    return child_env(
        GPUOPS_ENV="production",
        SECRET_KEY="k" * 20 + "-production-test-key-" + "z" * 20,
        ALLOWED_HOSTS=host,
        DATABASE_URL=f"postgres://{s['USER'] or 'postgres'}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}",
        CELERY_BROKER_URL=os.environ["CELERY_BROKER_URL"],
        GPUOPS_VAR_DIR=str(tmp_path / "var"),
        GPUOPS_WEB_WORKERS="2",
    )


@pytest.mark.services
def test_production_behind_a_tls_proxy(transactional_db, tmp_path):
    """GPUOPS_ENV=production on PostgreSQL: https enforced, secure cookies, HSTS, probes still plain HTTP."""
    env = production_env(tmp_path, "gpuops.test")
    with gunicorn_running(env, tmp_path / "gunicorn.log") as (_master, base):
        host = {"Host": "gpuops.test"}
        assert httpx.get(f"{base}/healthz", headers=host).status_code == 200  # no redirect for probes
        # The wrong host name is refused; plain HTTP is sent to https.
        assert httpx.get(f"{base}/healthz", headers={"Host": "evil.test"}).status_code == 400
        plain = httpx.get(f"{base}/tickets/", headers=host)
        assert plain.status_code == 301 and plain.headers["location"] == "https://gpuops.test/tickets/"
        # Through the proxy (X-Forwarded-Proto: https). The cookies are Secure: a client sends them only over https,
        # so this test carries them itself from gunicorn's plain-HTTP answers.
        via_proxy = {**host, "X-Forwarded-Proto": "https"}
        page = httpx.get(f"{base}/accounts/login/", headers=via_proxy)
        assert page.headers["strict-transport-security"] == "max-age=31536000; includeSubDomains; preload"
        csrf_cookie = set_cookie(page, "csrftoken")
        assert "Secure" in csrf_cookie
        csrf = csrf_cookie.split(";")[0].split("=", 1)[1]
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
        form = {"username": "prod-user", "password": "prod-user-pw", "csrfmiddlewaretoken": token}
        # A form posted from another origin is refused (CSRF trusted origins: https://gpuops.test only).
        forged = httpx.post(
            f"{base}/accounts/login/",
            data=form,
            headers={**via_proxy, "Cookie": f"csrftoken={csrf}", "Origin": "https://evil.test"},
        )
        assert forged.status_code == 403
        response = httpx.post(
            f"{base}/accounts/login/",
            data=form,
            headers={**via_proxy, "Cookie": f"csrftoken={csrf}", "Origin": "https://gpuops.test"},
        )
        assert response.status_code == 302, response.text[:500]
        session_cookie = set_cookie(response, "sessionid")
        assert "Secure" in session_cookie and "HttpOnly" in session_cookie
        session = session_cookie.split(";")[0]
        dashboard = httpx.get(f"{base}/", headers={**via_proxy, "Cookie": session})
        assert dashboard.status_code == 200 and "<title>Dashboard · gpuops</title>" in dashboard.text


def set_cookie(response: httpx.Response, name: str) -> str:
    return next(c for c in response.headers.get_list("set-cookie") if c.startswith(f"{name}="))


@pytest.mark.services
def test_production_through_the_nginx_example(transactional_db, tmp_path):
    """deploy/nginx/gpuops.conf in front of production gunicorn: TLS, the redirect, static files, a login."""
    import shutil
    import subprocess

    if NGINX is None or shutil.which("openssl") is None:
        pytest.skip("nginx or openssl is not installed (.ci/run installs nginx)")
    env = production_env(tmp_path, "gpuops.example.com")
    with gunicorn_running(env, tmp_path / "gunicorn.log") as (_master, base):
        http_port, https_port = free_port(), free_port()
        conf = nginx_config(tmp_path, int(base.rsplit(":", 1)[1]), http_port, https_port)
        (tmp_path / "static" / "probe.txt").write_text("served by nginx")
        subprocess.run([NGINX, "-p", str(tmp_path), "-c", str(conf), "-e", str(tmp_path / "error.log")], check=True)
        try:
            host = {"Host": "gpuops.example.com"}
            plain = httpx.get(f"http://127.0.0.1:{http_port}/tickets/", headers=host)
            assert plain.status_code == 301 and plain.headers["location"] == "https://gpuops.example.com/tickets/"
            with httpx.Client(base_url=f"https://127.0.0.1:{https_port}", verify=False, headers=host) as client:
                assert client.get("/static/probe.txt").text == "served by nginx"
                page = client.get("/accounts/login/")
                assert page.status_code == 200 and "strict-transport-security" in page.headers
                token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
                response = client.post(
                    "/accounts/login/",
                    data={"username": "prod-user", "password": "prod-user-pw", "csrfmiddlewaretoken": token},
                    headers={"Referer": "https://gpuops.example.com/accounts/login/"},
                )
                # Django saw https through X-Forwarded-Proto: the redirect stays on https, the session is Secure.
                assert response.status_code == 302, response.text[:500]
                assert "Secure" in next(c for c in response.headers.get_list("set-cookie") if c.startswith("sessionid"))
                dashboard = client.get("/")
                assert dashboard.status_code == 200 and "<title>Dashboard · gpuops</title>" in dashboard.text
        finally:
            subprocess.run(
                [NGINX, "-p", str(tmp_path), "-c", str(conf), "-e", str(tmp_path / "error.log"), "-s", "stop"]
            )
