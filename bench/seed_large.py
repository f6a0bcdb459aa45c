"""Time `seed_demo --scale large` (12,500 nodes, 100,000 accelerators) into a fresh database.

Usage: python bench/seed_large.py [--database-url URL] [--keep]
Default database: a new SQLite file under var/bench/. Prints wall time, peak memory and row counts.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--keep", action="store_true", help="keep an existing SQLite file (no fresh start)")
    args = parser.parse_args()
    url = args.database_url
    if not url:
        path = REPO / "var" / "bench" / "large.sqlite3"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not args.keep:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        url = f"sqlite:///{path}"
    env = {**os.environ, "DATABASE_URL": url}
    manage = [sys.executable, str(REPO / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, check=True)
    started = time.monotonic()
    subprocess.run([*manage, "seed_demo", "--scale", "large"], env=env, check=True)
    elapsed = time.monotonic() - started
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    counts = subprocess.run(
        [
            *manage,
            "shell",
            "--no-imports",
            "-c",
            "from cmdb import models as m; print(*(f'{x.__name__}={x.objects.count()}' for x in "
            "(m.Node, m.Accelerator, m.Nic, m.Switch, m.Link, m.ChangeRecord)))",
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(f"seed_demo --scale large: {elapsed:.1f} s wall, peak RSS {peak_mib:.0f} MiB")
    print(f"database: {url.split('@')[-1]}")
    print(f"rows: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
