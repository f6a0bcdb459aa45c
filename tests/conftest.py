"""Suite-wide fixtures. The services tier runs only when DATABASE_URL / CELERY_BROKER_URL point at servers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_FIXTURES = Path(os.environ.get("GPUOPS_SHARED_FIXTURES", REPO.parent / "shared" / "fixtures"))


def services_available() -> tuple[bool, str]:
    db = os.environ.get("DATABASE_URL", "")
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not db.startswith(("postgres://", "postgresql://")):
        return False, "services tier: DATABASE_URL does not point at PostgreSQL"
    if not broker.startswith(("redis://", "amqp://", "pyamqp://")):
        return False, "services tier: CELERY_BROKER_URL does not point at Redis or RabbitMQ"
    return True, ""


def pytest_configure(config):
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["tests.hashers.FastPBKDF2PasswordHasher"]  # see tests/hashers.py
    # Dashboard figures are counted at every view unless a test turns the cache on (test_console_dashboard_cache).
    settings.GPUOPS_CONSOLE = {**getattr(settings, "GPUOPS_CONSOLE", {}), "DASHBOARD_CACHE_SECONDS": 0}


def pytest_collection_modifyitems(config, items):
    ok, reason = services_available()
    if ok:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "services" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def shared_fixtures() -> Path:
    """The folder of real captured outputs (../shared/fixtures); tests skip with a reason when it is absent."""
    if not SHARED_FIXTURES.is_dir():
        pytest.skip(f"real captures folder {SHARED_FIXTURES} is absent")
    return SHARED_FIXTURES


def pytest_report_header(config):
    ok, reason = services_available()
    if ok:
        return [
            f"services tier: ENABLED (database {_redact(os.environ['DATABASE_URL'])}, "
            f"broker {_redact(os.environ['CELERY_BROKER_URL'])})"
        ]
    return [f"services tier: skipped ({reason})"]


def _redact(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}:{parts.port or ''}{parts.path}"


@pytest.fixture
def celery_worker_process(transactional_db, tmp_path):
    """A real `celery worker` process on the configured broker, writing to this test's database.

    The test must commit what the worker reads (transactional_db). The worker gets the test database's
    URL, so it sees the same rows. Yields the Popen; the worker is always terminated.
    """
    import subprocess
    import sys
    import time

    from django.db import connection

    s = connection.settings_dict
    if s["ENGINE"] != "django.db.backends.postgresql":
        pytest.skip("the worker process needs a shared PostgreSQL test database")
    db_url = f"postgres://{s['USER'] or 'postgres'}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"
    env = {**os.environ, "DATABASE_URL": db_url, "CELERY_TASK_ALWAYS_EAGER": "0", "GPUOPS_VAR_DIR": str(tmp_path)}
    log = open(tmp_path / "worker.log", "w")  # noqa: SIM115  (closed below)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "gpuops",
            "worker",
            "--pool=solo",
            "--loglevel=INFO",
            "-Q",
            "default,ingest,workflows,integrations",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-n",
            f"test-{os.getpid()}@%h",
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if "ready." in (tmp_path / "worker.log").read_text():
            break
        if proc.poll() is not None:
            pytest.fail(f"celery worker exited: {(tmp_path / 'worker.log').read_text()[-2000:]}")
        time.sleep(0.3)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def wait_until(predicate, timeout: float = 60.0, interval: float = 0.3):
    """Poll `predicate` until it returns a truthy value or the timeout passes (for cross-process tests)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


CHROMIUM = "/usr/bin/chromium"  # Debian's package (.ci/run installs it)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def browser(monkeypatch):
    """Headless Chromium through Playwright, for the tests marked `browser`; skipped when it is not installed."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"browser test: {CHROMIUM} is absent (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an asyncio loop on this thread; Django refuses ORM calls from a thread with a
    # running loop unless told it is safe. It is: the test thread only sets up data and checks results.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def json_logs(monkeypatch, capsys):
    """Logging configured as `GPUOPS_LOG_FORMAT=json` configures it (the settings module's own LOGGING, built with
    the variable set); yields a reader of what went to stdout, each line parsed as JSON. Restores the plain setup."""
    import json
    import logging
    import logging.config
    import runpy

    from django.conf import settings

    monkeypatch.setenv("GPUOPS_LOG_FORMAT", "json")
    config = runpy.run_path(str(REPO / "gpuops" / "settings.py"))["LOGGING"]
    assert config["root"]["handlers"] == ["json"]
    levels = {name: logging.getLogger(name).level for name in config["loggers"]}
    capsys.readouterr()
    logging.config.dictConfig(config)
    # pytest gives each test phase a new captured stdout; the handler resolved `ext://sys.stdout` during setup.
    handler = logging.getLogger().handlers[0]
    handler.setStream(_CurrentStdout())

    def read() -> list[dict]:
        out = capsys.readouterr().out
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    try:
        yield read
    finally:
        logging.config.dictConfig(settings.LOGGING)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


class _CurrentStdout:
    """Writes to whatever sys.stdout is at the time of the write."""

    def write(self, text: str) -> int:
        import sys

        return sys.stdout.write(text)

    def flush(self) -> None:
        import sys

        sys.stdout.flush()
