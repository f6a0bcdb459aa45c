"""What the benches share: pointing Django at the bench database before it starts."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def django_configure(database_url: str, **env: str) -> str:
    """Use `database_url` (else DATABASE_URL, else the large SQLite fleet under var/bench/), set `env`, start
    Django; returns the URL in use."""
    url = database_url or os.environ.get("DATABASE_URL", "")
    if not url:
        url = f"sqlite:///{REPO / 'var' / 'bench' / 'large.sqlite3'}"
    os.environ["DATABASE_URL"] = url
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpuops.settings")
    import django

    django.setup()
    return url
