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


def pages_time(paths: list[str], *, repeat: int, users_prefix: str) -> None:
    """GET each path `repeat` times through Django's test client (middleware and DRF included, no network) as a
    superuser and as a user with a view grant on the first site, and print the best and median time and the
    queries of one more request. The two users are `<users_prefix>-root` and `<users_prefix>-site`."""
    import statistics
    import time

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from cmdb.models import Site
    from cmdb.permissions import grant_scope

    users = get_user_model().objects
    root, _ = users.get_or_create(username=f"{users_prefix}-root", defaults={"is_superuser": True})
    viewer, _ = users.get_or_create(username=f"{users_prefix}-site")
    site = Site.objects.order_by("code").first()
    grant_scope(scope_obj=site, perms=["view_scope"], users=[viewer])
    width = max(len(p) for p in paths)
    for label, user in (("superuser", root), (f"site {site.code} viewer", viewer)):
        client = Client()
        client.force_login(user)
        for path in paths:
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                response = client.get(path)
                times.append(time.perf_counter() - started)
                assert response.status_code == 200, (path, response.status_code)
            with CaptureQueriesContext(connection) as queries:
                client.get(path)
            print(
                f"{label:>22} {path:<{width}} best {min(times) * 1000:8.1f} ms  median "
                f"{statistics.median(times) * 1000:8.1f} ms  {len(queries)} queries"
            )
