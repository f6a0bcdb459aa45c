"""Helpers for the deployment tests: real gunicorn processes on free loopback ports."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)

REPO = Path(__file__).resolve().parents[2]
GUNICORN = Path(sys.executable).with_name("gunicorn")
# Variables of the developer's or CI's shell that would change what a child process runs on.
_INHERITED_OUT = (
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "CACHE_URL",
    "GPUOPS_ENV",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "DEBUG",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env(**overrides: str) -> dict[str, str]:
    """The environment of a child gpuops process: this one's, without its database/broker/production choices."""
    env = {k: v for k, v in os.environ.items() if k not in _INHERITED_OUT and not k.startswith(("GPUOPS_", "PYTEST"))}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.update(overrides)
    return env


def manage(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=check,
    )


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=value lines of a systemd EnvironmentFile / docker env file (comments and blank lines skipped)."""
    values = {}
    for line in path.read_text().splitlines():
        if match := re.match(r"^\s*([A-Z_][A-Z0-9_]*)=(.*)$", line):
            values[match[1]] = match[2].strip()
    return values


@contextmanager
def gunicorn_running(env: dict[str, str], log: Path) -> Iterator[tuple[subprocess.Popen, str]]:
    """gunicorn with the shipped settings (`-c python:gpuops.gunicorn_conf`) on a free loopback port.

    Yields the master process and its base URL once /healthz answers; always stopped (SIGTERM, the graceful path).
    """
    if not GUNICORN.exists():
        pytest.skip(f"gunicorn is not installed beside {sys.executable}")
    port = free_port()
    env = {**env, "GPUOPS_BIND": f"127.0.0.1:{port}"}
    handle = log.open("w")
    proc = subprocess.Popen(
        [str(GUNICORN), "-c", "python:gpuops.gunicorn_conf"], cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"gunicorn exited ({proc.returncode}): {log.read_text()[-3000:]}")
            try:
                host = env.get("ALLOWED_HOSTS", "127.0.0.1").split(",")[0]
                if httpx.get(f"{base}/healthz", headers={"Host": host}, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"gunicorn did not answer /healthz: {log.read_text()[-3000:]}")
            time.sleep(0.3)
        yield proc, base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        handle.close()


def gunicorn_workers(master: subprocess.Popen) -> list[int]:
    """Worker pids of a gunicorn master (its direct children)."""
    children = Path(f"/proc/{master.pid}/task/{master.pid}/children")
    if not children.exists():
        pytest.skip("/proc/<pid>/task/<pid>/children is not available on this kernel")
    return [int(pid) for pid in children.read_text().split()]


def nginx_config(tmp_path: Path, upstream_port: int, http_port: int, https_port: int) -> Path:
    """deploy/nginx/gpuops.conf in a minimal nginx.conf, on loopback ports, with a fresh self-signed certificate."""
    key, cert = str(tmp_path / "privkey.pem"), str(tmp_path / "fullchain.pem")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=gpuops.example.com",
            "-keyout",
            key,
            "-out",
            cert,
        ],
        check=True,
        capture_output=True,
    )
    (tmp_path / "static").mkdir(exist_ok=True)
    site = (REPO / "deploy" / "nginx" / "gpuops.conf").read_text()
    site = site.replace("/etc/ssl/gpuops/", f"{tmp_path}/").replace("/var/lib/gpuops/static/", f"{tmp_path}/static/")
    site = site.replace("server 127.0.0.1:8000;", f"server 127.0.0.1:{upstream_port};")
    site = re.sub(r"\n\s*listen \[::\]:\d+[^;]*;", "", site)  # this machine may have no IPv6
    site = site.replace("listen 80;", f"listen 127.0.0.1:{http_port};")
    site = site.replace("listen 443 ssl http2;", f"listen 127.0.0.1:{https_port} ssl http2;")
    (tmp_path / "gpuops.conf").write_text(site)
    mime = "include /etc/nginx/mime.types;" if Path("/etc/nginx/mime.types").exists() else ""
    conf = tmp_path / "nginx.conf"
    conf.write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nuser root;\nevents {{}}\n"
        f"http {{ {mime} access_log off; client_body_temp_path {tmp_path}/body; proxy_temp_path {tmp_path}/proxy;\n"
        f"  include {tmp_path}/gpuops.conf;\n}}\n"
    )
    return conf
