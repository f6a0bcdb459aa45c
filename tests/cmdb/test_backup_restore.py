"""`manage.py backup` / `restore` on SQLite (the default tier): a round trip of the demo fleet into a fresh database
file, refusals of non-empty targets and of damaged or foreign files, and the PostgreSQL tool checks."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.management import CommandError, call_command

from cmdb import models as m
from gpuops.backup import BackupError, _pg_tool
from tests.conftest import REPO
from workflows.models import Ticket

# These tests back up the test database itself, so they need it on SQLite; on PostgreSQL the services tier's
# round trip (tests/services/test_ops_services.py) covers the same ground.
sqlite_only = pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "sqlite").startswith("sqlite"),
    reason="the default database is PostgreSQL here: tests/services/test_ops_services.py covers backup and restore",
)

TABLES = {"nodes": m.Node, "cards": m.Accelerator, "tickets": Ticket, "changes": m.ChangeRecord}


@pytest.fixture
def demo_fleet(transactional_db, settings):
    """The small demo fleet with a repair ticket per failed card (what script/server loads), committed."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    call_command("seed_demo", "--scale", "small", verbosity=0)
    call_command("workflows_bootstrap", "--open-repairs", verbosity=0)
    counts = {name: model.objects.count() for name, model in TABLES.items()}
    assert counts["nodes"] == 48 and counts["tickets"] > 0 and counts["changes"] > counts["nodes"]
    return counts


def manage(*args: str, database_url: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url, "GPUOPS_VAR_DIR": str(tmp_path / "var")}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )


def rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


@sqlite_only
def test_sqlite_round_trip_into_a_fresh_database_finds_every_row_again(demo_fleet, tmp_path):
    backup = tmp_path / "gpuops.backup"
    call_command("backup", str(backup), verbosity=0)
    assert backup.read_bytes()[:16] == b"SQLite format 3\x00"

    fresh = tmp_path / "fresh.sqlite3"
    done = manage("restore", str(backup), database_url=f"sqlite:///{fresh}", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Restored" in done.stdout

    for name, model in TABLES.items():
        (count,) = rows(fresh, f"SELECT count(*) FROM {model._meta.db_table}")[0]
        assert count == demo_fleet[name], name
    hostnames = {h for (h,) in rows(fresh, f"SELECT hostname FROM {m.Node._meta.db_table}")}
    assert hostnames == set(m.Node.objects.values_list("hostname", flat=True))
    serials = {s for (s,) in rows(fresh, f"SELECT serial FROM {m.Accelerator._meta.db_table}")}
    assert serials == set(m.Accelerator.objects.values_list("serial", flat=True))
    tickets = set(rows(fresh, f"SELECT id, correlation_id, state FROM {Ticket._meta.db_table}"))
    assert tickets == set(Ticket.objects.values_list("id", "correlation_id", "state"))
    changes = m.ChangeRecord._meta.db_table
    last = m.ChangeRecord.objects.order_by("-pk").values_list("pk", "correlation_id", "object_id").first()
    assert rows(fresh, f"SELECT id, correlation_id, object_id FROM {changes} WHERE id = {last[0]}") == [tuple(last)]

    # The fresh database now has tables: a second restore is refused, with a message and a non-zero exit.
    again = manage("restore", str(backup), database_url=f"sqlite:///{fresh}", tmp_path=tmp_path)
    assert again.returncode != 0
    assert "is not empty" in again.stderr and "--force" in again.stderr


def test_restore_refuses_a_database_with_tables_unless_forced_and_force_brings_the_backup_back(demo_fleet, tmp_path):
    backup = tmp_path / "gpuops.backup"
    call_command("backup", str(backup), verbosity=0)
    node = m.Node.objects.order_by("pk").first()
    m.Node.objects.filter(pk=node.pk).update(hostname="renamed-after-the-backup")
    Ticket.objects.all().delete()

    with pytest.raises(CommandError, match=r"is not empty .* pass --force"):
        call_command("restore", str(backup), verbosity=0)
    assert Ticket.objects.count() == 0  # refused before anything was touched

    call_command("restore", str(backup), "--force", verbosity=0)
    assert Ticket.objects.count() == demo_fleet["tickets"]
    assert m.Node.objects.get(pk=node.pk).hostname == node.hostname
    assert {name: model.objects.count() for name, model in TABLES.items()} == demo_fleet


@sqlite_only
def test_damaged_foreign_and_missing_files_are_refused_with_a_reason(transactional_db, tmp_path):
    good = tmp_path / "good.backup"
    call_command("backup", str(good), verbosity=0)
    truncated = tmp_path / "truncated.backup"
    truncated.write_bytes(good.read_bytes()[:5000])
    not_ours = tmp_path / "other.sqlite3"
    with sqlite3.connect(not_ours) as conn:
        conn.execute("CREATE TABLE t (a)")
    pg_dump_file = tmp_path / "gpuops.dump"
    pg_dump_file.write_bytes(b"PGDMP\x01\x0f\x00" + b"\x00" * 100)
    junk = tmp_path / "notes.txt"
    junk.write_text("not a backup\n")

    cases = {
        truncated: "is damaged",
        not_ours: "not a gpuops one",
        pg_dump_file: "is a PostgreSQL backup but this database is SQLite",
        junk: "is not a gpuops backup",
        tmp_path / "absent.backup": "no such file",
    }
    for path, reason in cases.items():
        with pytest.raises(CommandError, match=reason):
            call_command("restore", str(path), "--force", verbosity=0)


@sqlite_only
def test_backup_does_not_overwrite_unless_forced_and_needs_an_existing_directory(transactional_db, tmp_path):
    path = tmp_path / "gpuops.backup"
    path.write_text("yesterday's backup")
    with pytest.raises(CommandError, match="exists; pass --force"):
        call_command("backup", str(path), verbosity=0)
    assert path.read_text() == "yesterday's backup"
    call_command("backup", str(path), "--force", verbosity=0)
    assert path.read_bytes()[:6] == b"SQLite"
    with pytest.raises(CommandError, match="does not exist; create the directory"):
        call_command("backup", str(tmp_path / "no-such-dir" / "x.backup"), verbosity=0)
    assert [p.name for p in tmp_path.iterdir()] == ["gpuops.backup"]  # no partial file left behind


def test_missing_or_old_postgresql_client_tools_are_named(tmp_path, monkeypatch):
    server15 = SimpleNamespace(pg_version=150004)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BackupError, match=r"pg_dump was not found .*apt-get install postgresql-client"):
        _pg_tool("pg_dump", server15)

    old = tmp_path / "pg_restore"
    old.write_text("#!/bin/sh\necho 'pg_restore (PostgreSQL) 13.14'\n")
    old.chmod(0o755)
    with pytest.raises(
        BackupError, match=r"pg_restore is version 13 but the server is PostgreSQL 15.*postgresql-client-15"
    ):
        _pg_tool("pg_restore", server15)
