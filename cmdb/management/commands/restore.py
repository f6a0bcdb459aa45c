"""manage.py restore PATH: a backup made by `manage.py backup` into the configured (empty) database."""

from __future__ import annotations

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from cmdb.management.backup_progress import LazyProgress
from gpuops.backup import BackupError, engine_of, restore


class Command(BaseCommand):
    help = (
        "Restore a backup made by `manage.py backup` into the configured database, in one transaction. The database "
        "must have no tables (a new one: createdb) unless --force, which replaces everything the backup holds."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", type=Path, help="the backup file to read")
        parser.add_argument(
            "--force", action="store_true", help="restore into a database that has tables, replacing their contents"
        )
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS, help="the database alias (default: default)")

    def handle(self, *args, path: Path, force: bool, database: str, **options) -> None:
        connection = connections[database]
        started = time.monotonic()
        try:
            unit = "tables" if engine_of(connection) == "postgresql" else "pages"
            description = f"restoring into {connection.settings_dict['NAME']}"
            with LazyProgress(description, unit, enabled=options.get("verbosity", 1) > 0) as progress:
                tables = restore(connection, path.expanduser().absolute(), force=force, progress=progress)
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        except DatabaseError as exc:
            raise CommandError(f"cannot use database {connection.settings_dict['NAME']}: {exc}".strip()) from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"Restored {path} ({tables} tables) in {time.monotonic() - started:.1f} s. "
                "Run `manage.py migrate` if this code is newer than the backup."
            )
        )
