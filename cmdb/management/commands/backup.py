"""manage.py backup PATH: the whole database to one file (PostgreSQL: pg_dump custom format; SQLite: backup API)."""

from __future__ import annotations

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from cmdb.management.backup_progress import LazyProgress
from gpuops.backup import BackupError, backup, engine_of


class Command(BaseCommand):
    help = (
        "Back up the whole gpuops database to PATH: PostgreSQL with pg_dump --format=custom (needs the Debian "
        "package postgresql-client), SQLite with the online backup API. Restore with `manage.py restore PATH`."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", type=Path, help="the backup file to write")
        parser.add_argument("--force", action="store_true", help="replace PATH if it exists")
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS, help="the database alias (default: default)")

    def handle(self, *args, path: Path, force: bool, database: str, **options) -> None:
        connection = connections[database]
        started = time.monotonic()
        try:
            unit = "tables" if engine_of(connection) == "postgresql" else "pages"
            description = f"backing up {connection.settings_dict['NAME']}"
            with LazyProgress(description, unit, enabled=options.get("verbosity", 1) > 0) as progress:
                backup(connection, path.expanduser().absolute(), force=force, progress=progress)
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        except DatabaseError as exc:
            raise CommandError(f"cannot use database {connection.settings_dict['NAME']}: {exc}".strip()) from exc
        size_mb = path.stat().st_size / 1e6
        self.stdout.write(
            self.style.SUCCESS(f"Backed up to {path} ({size_mb:.1f} MB) in {time.monotonic() - started:.1f} s.")
        )
