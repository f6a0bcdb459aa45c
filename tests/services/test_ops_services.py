"""Services tier: backup and restore on PostgreSQL (pg_dump / pg_restore against the real server), and the JSON
task lines of a real worker carrying the id of the request that enqueued the task."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection

from cmdb import models as m
from tests.conftest import REPO, wait_until
from workflows.models import Ticket

pytestmark = pytest.mark.services

TABLES = {"nodes": m.Node, "cards": m.Accelerator, "tickets": Ticket, "changes": m.ChangeRecord}


def _server_url(dbname: str) -> str:
    s = connection.settings_dict
    return f"postgres://{s['USER'] or 'postgres'}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{dbname}"


@pytest.fixture
def fresh_database():
    """An empty database beside the test database, created and dropped here (never the test database itself)."""
    if shutil.which("pg_dump") is None or shutil.which("pg_restore") is None:
        pytest.skip("pg_dump/pg_restore are not installed (Debian package postgresql-client)")
    name = f"{connection.settings_dict['NAME']}_restore_{uuid.uuid4().hex[:6]}"
    admin_url = _server_url("postgres")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _restore(path: Path, dbname: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": _server_url(dbname), "GPUOPS_VAR_DIR": str(tmp_path / "var")}
    return subprocess.run(
        [sys.executable, "manage.py", "restore", str(path), *extra],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _fetch(dbname: str, sql: str) -> list[tuple]:
    with psycopg.connect(_server_url(dbname)) as conn:
        return conn.execute(sql).fetchall()


def test_demo_fleet_backed_up_and_restored_into_a_fresh_database(transactional_db, settings, fresh_database, tmp_path):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    call_command("seed_demo", "--scale", "small", verbosity=0)
    call_command("workflows_bootstrap", "--open-repairs", verbosity=0)  # tickets, and the changes their steps made
    counts = {name: model.objects.count() for name, model in TABLES.items()}
    assert counts["nodes"] == 48 and counts["tickets"] > 0 and counts["changes"] > counts["nodes"]

    backup = tmp_path / "gpuops.dump"
    call_command("backup", str(backup), verbosity=0)  # pg_dump of the database this test's connection uses
    assert backup.read_bytes()[:5] == b"PGDMP"

    done = _restore(backup, fresh_database, tmp_path)
    assert done.returncode == 0, done.stderr
    for name, model in TABLES.items():
        assert _fetch(fresh_database, f"SELECT count(*) FROM {model._meta.db_table}")[0][0] == counts[name], name
    hostnames = {h for (h,) in _fetch(fresh_database, f"SELECT hostname FROM {m.Node._meta.db_table}")}
    assert hostnames == set(m.Node.objects.values_list("hostname", flat=True))
    serials = {s for (s,) in _fetch(fresh_database, f"SELECT serial FROM {m.Accelerator._meta.db_table}")}
    assert serials == set(m.Accelerator.objects.values_list("serial", flat=True))
    tickets = set(_fetch(fresh_database, f"SELECT id, correlation_id, state FROM {Ticket._meta.db_table}"))
    assert tickets == set(Ticket.objects.values_list("id", "correlation_id", "state"))
    changes = m.ChangeRecord._meta.db_table
    ours = set(m.ChangeRecord.objects.values_list("id", "correlation_id", "object_id"))
    assert set(_fetch(fresh_database, f"SELECT id, correlation_id, object_id FROM {changes}")) == ours
    # Sequences came along: the next row gets a new id, not one the backup already holds.
    with psycopg.connect(_server_url(fresh_database)) as conn:
        next_id = conn.execute(f"SELECT nextval(pg_get_serial_sequence('{changes}', 'id'))").fetchone()[0]
    assert next_id > max(row[0] for row in ours)

    # Now it has tables: refused without --force (non-zero exit, the reason), replaced with it.
    refused = _restore(backup, fresh_database, tmp_path)
    assert refused.returncode != 0 and "is not empty" in refused.stderr and "--force" in refused.stderr
    forced = _restore(backup, fresh_database, tmp_path, "--force")
    assert forced.returncode == 0, forced.stderr
    assert _fetch(fresh_database, f"SELECT count(*) FROM {Ticket._meta.db_table}")[0][0] == counts["tickets"]

    # A damaged dump is refused and the database is left as it was.
    damaged = tmp_path / "damaged.dump"
    damaged.write_bytes(backup.read_bytes()[:2000])
    failed = _restore(damaged, fresh_database, tmp_path, "--force")
    assert failed.returncode != 0 and "is damaged" in failed.stderr
    assert _fetch(fresh_database, f"SELECT count(*) FROM {m.Node._meta.db_table}")[0][0] == counts["nodes"]


@pytest.fixture
def json_worker(monkeypatch, request):
    """A real worker process writing JSON logs (GPUOPS_LOG_FORMAT=json) to its log file (stdout and stderr)."""
    monkeypatch.setenv("GPUOPS_LOG_FORMAT", "json")
    request.getfixturevalue("celery_worker_process")
    return request.getfixturevalue("tmp_path") / "worker.log"


def test_a_real_workers_task_line_carries_the_id_of_the_request_that_enqueued_it(transactional_db, json_worker):
    from rest_framework.test import APIClient

    from tests.factories.cmdb import AcceleratorFactory, ClusterFactory, NodeFactory, SiteFactory, UserFactory

    site = SiteFactory(code="sv1")
    node = NodeFactory(hostname="sv1-h100-0001", site=site, cluster=ClusterFactory(site=site), status="active")
    failed = AcceleratorFactory(node=node, slot_index=0, serial="SVC-FAILED-0")
    m.Accelerator.objects.filter(pk=failed.pk).update(health="failed")
    client = APIClient()
    client.force_authenticate(UserFactory(username="ops-ben", is_superuser=True, is_staff=True))

    # The ticket's first step is published to the broker when the request's transaction commits.
    response = client.post(
        "/api/workflows/tickets/",
        {"type": "repair", "title": "XID 79", "inputs": {"accelerator": failed.serial}, "start": True},
        format="json",
        HTTP_X_REQUEST_ID="req-worker-1",
    )
    assert response.status_code == 201, response.json()
    ticket = Ticket.objects.get(pk=response.json()["id"])

    def lines() -> list[dict]:
        return [json.loads(raw) for raw in json_worker.read_text().splitlines() if raw.startswith("{")]

    def step_task_line():
        return next((x for x in lines() if x.get("event") == "task_run" and x["task"] == "workflows.step_run"), None)

    task = wait_until(step_task_line, timeout=90)
    assert task, json_worker.read_text()[-3000:]
    assert task["correlation_id"] == "req-worker-1"  # carried in the message from the request
    assert task["ticket"] == ticket.reference and task["outcome"] == "success"
    step = next(x for x in lines() if x.get("event") == "step_run" and x["run_id"] == task["task_id"])
    assert step["ticket"] == ticket.reference and step["step"] == "drain" and step["outcome"] == "succeeded"
