"""Backup and restore of the whole gpuops database (`manage.py backup PATH`, `manage.py restore PATH`).

PostgreSQL: `pg_dump --format=custom` of the configured database, and `pg_restore` into it in one transaction
(`--single-transaction --exit-on-error`), so a restore that fails half-way leaves the database as it was. The client
tools come from the Debian package `postgresql-client`; their major version must be at least the server's.
SQLite: the sqlite3 online backup API, which copies a consistent snapshot while the web process and the worker keep
running; a restore copies the backup into the database file the same way (the destination is rewritten in one
write transaction).

Both write a backup to a temporary file beside PATH and rename it into place only when it is complete, and both
check a file before they touch the database: a damaged file, a file of the other engine or a file that is not a
gpuops database is refused with a message that says so. A restore into a database that holds tables is refused
unless `force` is set.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

# progress(total or None, completed): the command draws it.
Progress = Callable[[int | None, int], None]

PG_MAGIC = b"PGDMP"
SQLITE_MAGIC = b"SQLite format 3\x00"
# A table every gpuops database has (Django's migration ledger): what tells our backup from any other database.
MARKER_TABLE = "django_migrations"
SQLITE_PAGES_PER_STEP = 1024

_PG_DUMPING = re.compile(r'dumping contents of table "')
_PG_RESTORING = re.compile(r'processing data for table "')


class BackupError(Exception):
    """A backup or restore that cannot go on; the message says why and what to do."""


def _noop(total: int | None, completed: int) -> None:
    return None


def file_kind(path: Path) -> str:
    """'postgresql' (a pg_dump custom-format archive), 'sqlite' (a SQLite database file) or 'unknown'."""
    with path.open("rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    if head.startswith(PG_MAGIC):
        return "postgresql"
    if head == SQLITE_MAGIC:
        return "sqlite"
    return "unknown"


def _readable_backup(path: Path, engine: str) -> None:
    if not path.is_file():
        raise BackupError(f"{path}: no such file")
    kind = file_kind(path)
    if kind == "unknown":
        raise BackupError(
            f"{path} is not a gpuops backup: it is neither a PostgreSQL custom-format dump nor a SQLite database"
        )
    if kind != engine:
        raise BackupError(
            f"{path} is a {_ENGINE_NAMES[kind]} backup but this database is {_ENGINE_NAMES[engine]}: restore it "
            f"where DATABASE_URL points at {_ENGINE_NAMES[kind]}"
        )


_ENGINE_NAMES = {"postgresql": "PostgreSQL", "sqlite": "SQLite"}


def _target_ready(path: Path, force: bool) -> Path:
    if path.is_dir():
        raise BackupError(f"{path} is a directory; give the path of the backup file")
    if not path.parent.is_dir():
        raise BackupError(f"{path.parent} does not exist; create the directory first")
    if path.exists() and not force:
        raise BackupError(f"{path} exists; pass --force to replace it")
    return path.with_name(f".{path.name}.partial-{os.getpid()}")


def engine_of(connection: Any) -> str:
    if connection.vendor == "postgresql":
        return "postgresql"
    if connection.vendor == "sqlite":
        return "sqlite"
    raise BackupError(f"backup and restore support PostgreSQL and SQLite, not {connection.vendor}")


def user_tables(connection: Any) -> list[str]:
    """Tables in the database (any schema but the system ones): a restore refuses a database that has some."""
    return sorted(connection.introspection.table_names())


# --- PostgreSQL -------------------------------------------------------------------------------------------------


def _pg_tool(name: str, connection: Any) -> str:
    """Path of pg_dump / pg_restore, refused when absent or older than the server (it would refuse to dump it)."""
    path = shutil.which(name)
    server_major = connection.pg_version // 10000 if connection.pg_version else None
    wanted = f" {server_major} or newer" if server_major else ""
    if path is None:
        raise BackupError(
            f"{name} was not found on PATH: install the PostgreSQL client tools{wanted} "
            "(Debian/Ubuntu: apt-get install postgresql-client)"
        )
    version = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
    match = re.search(r"(\d+)(?:\.\d+)?", version)
    if match and server_major and int(match.group(1)) < server_major:
        raise BackupError(
            f"{name} is version {match.group(1)} but the server is PostgreSQL {server_major}: install "
            f"postgresql-client-{server_major} (or newer) and put its {name} first on PATH"
        )
    return path


def _pg_conninfo(settings_dict: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """Connection arguments and environment (the password and SSL options never go on the command line)."""
    args = [f"--dbname={settings_dict['NAME']}"]
    if settings_dict.get("HOST"):
        args.append(f"--host={settings_dict['HOST']}")
    if settings_dict.get("PORT"):
        args.append(f"--port={settings_dict['PORT']}")
    if settings_dict.get("USER"):
        args.append(f"--username={settings_dict['USER']}")
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    if settings_dict.get("PASSWORD"):
        env["PGPASSWORD"] = str(settings_dict["PASSWORD"])
    options = settings_dict.get("OPTIONS") or {}
    for option, variable in (("sslmode", "PGSSLMODE"), ("sslrootcert", "PGSSLROOTCERT")):
        if options.get(option):
            env[variable] = str(options[option])
    return args, env


def _run_streaming(cmd: list[str], env: dict[str, str], on_line: Callable[[str], None]) -> tuple[int, list[str]]:
    """Run a pg tool, feeding each stderr line (its --verbose progress) to on_line; returns (rc, error lines)."""
    errors: list[str] = []
    with subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.rstrip()
            on_line(line)
            if "error:" in line or "FATAL" in line or "ERROR" in line or "DETAIL" in line or "HINT" in line:
                errors.append(line)
    return proc.returncode, errors


def pg_backup(connection: Any, path: Path, *, force: bool = False, progress: Progress = _noop) -> Path:
    """Dump the database of `connection` to `path` (pg_dump custom format). Returns the path."""
    tool = _pg_tool("pg_dump", connection)
    partial = _target_ready(path, force)
    total = len(user_tables(connection))
    args, env = _pg_conninfo(connection.settings_dict)
    done = 0
    progress(total, 0)

    def on_line(line: str) -> None:
        nonlocal done
        if _PG_DUMPING.search(line):
            done += 1
            progress(total, done)

    try:
        rc, errors = _run_streaming([tool, "--format=custom", "--verbose", f"--file={partial}", *args], env, on_line)
        if rc != 0:
            raise BackupError("pg_dump failed:\n  " + "\n  ".join(errors or [f"exit status {rc}"]))
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    progress(total, total)
    return path


def _pg_archive_tables(tool: str, path: Path) -> list[str]:
    """The tables whose data the archive holds (`pg_restore --list`), which also proves it is readable."""
    listed = subprocess.run([tool, "--list", str(path)], capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        reason = listed.stderr.strip().replace("pg_restore: error: ", "") or f"exit status {listed.returncode}"
        raise BackupError(f"{path} is damaged: pg_restore cannot read its table of contents ({reason})")
    tables = []
    for line in listed.stdout.splitlines():
        # "3344; 0 26840 TABLE DATA public cmdb_node postgres"
        parts = line.split()
        if not line.startswith(";") and parts[3:5] == ["TABLE", "DATA"] and len(parts) >= 7:
            tables.append(parts[6])
    return tables


def pg_restore(connection: Any, path: Path, *, force: bool = False, progress: Progress = _noop) -> int:
    """Restore `path` into the database of `connection` in one transaction. Returns the number of tables restored.

    Refused unless the database has no tables, or `force` is set: then every object the backup holds is dropped and
    recreated (`--clean --if-exists`) in the same transaction.
    """
    _readable_backup(path, "postgresql")
    tool = _pg_tool("pg_restore", connection)
    tables = _pg_archive_tables(tool, path)
    if MARKER_TABLE not in tables:
        raise BackupError(f"{path} is a PostgreSQL dump but not of a gpuops database (it has no {MARKER_TABLE})")
    existing = user_tables(connection)
    if existing and not force:
        raise BackupError(
            f"database {connection.settings_dict['NAME']} is not empty ({len(existing)} tables): restore into a new "
            "database (createdb, then point DATABASE_URL at it) or pass --force to replace what the backup holds"
        )
    connection.close()  # our own session must not hold locks on what the restore drops
    args, env = _pg_conninfo(connection.settings_dict)
    cmd = [tool, "--single-transaction", "--exit-on-error", "--no-owner", "--no-acl", "--verbose", *args]
    if force:
        cmd += ["--clean", "--if-exists"]
    total, done = len(tables), 0
    progress(total, 0)

    def on_line(line: str) -> None:
        nonlocal done
        if _PG_RESTORING.search(line):
            done += 1
            progress(total, done)

    rc, errors = _run_streaming([*cmd, str(path)], env, on_line)
    if rc != 0:
        raise BackupError(
            "pg_restore failed; nothing was changed (the restore runs in one transaction):\n  "
            + "\n  ".join(errors or [f"exit status {rc}"])
        )
    progress(total, total)
    return total


# --- SQLite -----------------------------------------------------------------------------------------------------


_SQLITE_BUSY = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED: Python's backup sleeps 250 ms and tries again, forever
_SQLITE_BUSY_STEPS_MAX = 120  # about 30 s


def _sqlite_progress(progress: Progress) -> Callable[[int, int, int], None]:
    busy = 0

    def step(status: int, remaining: int, total: int) -> None:
        nonlocal busy
        busy = busy + 1 if status in _SQLITE_BUSY else 0
        if busy > _SQLITE_BUSY_STEPS_MAX:
            # Raising from the callback makes sqlite3 abort the backup (the destination is rolled back).
            raise BackupError("the database stayed locked for 30 s; try again when the writer is done")
        progress(total, total - remaining)

    return step


def sqlite_backup(connection: Any, path: Path, *, force: bool = False, progress: Progress = _noop) -> Path:
    """Copy the database of `connection` to `path` with the online backup API (a consistent snapshot)."""
    if connection.in_atomic_block:
        raise BackupError("cannot back up inside a transaction: the copy would wait for it forever")
    partial = _target_ready(path, force)
    connection.ensure_connection()
    try:
        target = sqlite3.connect(partial)
        try:
            connection.connection.backup(target, pages=SQLITE_PAGES_PER_STEP, progress=_sqlite_progress(progress))
            # One self-contained file: the copy of a WAL database would otherwise want -wal/-shm files beside it.
            target.execute("PRAGMA journal_mode=DELETE")
        finally:
            target.close()
        os.replace(partial, path)
    except sqlite3.Error as exc:
        raise BackupError(f"SQLite backup failed: {exc}") from exc
    finally:
        partial.unlink(missing_ok=True)
    return path


def _sqlite_check(path: Path) -> list[str]:
    """Open the backup read-only, prove it whole (quick_check) and a gpuops database; returns its tables."""
    try:
        source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            verdict = source.execute("PRAGMA quick_check").fetchone()[0]
            tables = [
                row[0]
                for row in source.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
                )
            ]
        finally:
            source.close()
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"{path} is damaged: SQLite cannot read it ({exc})") from exc
    if verdict != "ok":
        raise BackupError(f"{path} is damaged: SQLite's integrity check says {verdict}")
    if MARKER_TABLE not in tables:
        raise BackupError(f"{path} is a SQLite database but not a gpuops one (it has no {MARKER_TABLE})")
    return tables


def sqlite_restore(connection: Any, path: Path, *, force: bool = False, progress: Progress = _noop) -> int:
    """Copy the backup at `path` over the database of `connection` (backup API; one write transaction).
    Returns the number of tables restored. Refused into a database with tables unless `force`."""
    _readable_backup(path, "sqlite")
    tables = _sqlite_check(path)
    existing = user_tables(connection)
    if existing and not force:
        raise BackupError(
            f"database {connection.settings_dict['NAME']} is not empty ({len(existing)} tables): restore into a new "
            "database file (point DATABASE_URL at it) or pass --force to replace its contents"
        )
    if connection.in_atomic_block:
        raise BackupError("cannot restore inside a transaction")
    connection.ensure_connection()
    try:
        source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            source.backup(connection.connection, pages=SQLITE_PAGES_PER_STEP, progress=_sqlite_progress(progress))
        finally:
            source.close()
    except sqlite3.Error as exc:
        raise BackupError(f"SQLite restore failed; the database was left as it was: {exc}") from exc
    return len(tables)


def backup(connection: Any, path: Path, *, force: bool = False, progress: Progress = _noop) -> Path:
    """Back up the database of `connection` to `path` (the engine's own tool)."""
    if engine_of(connection) == "postgresql":
        return pg_backup(connection, path, force=force, progress=progress)
    return sqlite_backup(connection, path, force=force, progress=progress)


def restore(connection: Any, path: Path, *, force: bool = False, progress: Progress = _noop) -> int:
    """Restore `path` into the database of `connection`; returns how many tables the backup held."""
    if engine_of(connection) == "postgresql":
        return pg_restore(connection, path, force=force, progress=progress)
    return sqlite_restore(connection, path, force=force, progress=progress)


__all__ = ["BackupError", "backup", "file_kind", "restore"]
