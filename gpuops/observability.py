"""/metrics (Prometheus), /healthz (liveness) and /readyz (readiness) for scrapers, load balancers and
Kubernetes probes. Mounted by gpuops/urls.py; none of them needs a session.

/metrics access: `Authorization: Bearer <GPUOPS_METRICS_TOKEN>`, or a client address inside
GPUOPS_METRICS_ALLOW_FROM (CIDRs, matched on REMOTE_ADDR - behind a proxy, the proxy's address); anything else
is 403. With neither set, /metrics answers 403 to everyone: the fleet's shape is not public.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .metrics import scrape_registry

logger = logging.getLogger(__name__)
security_log = logging.getLogger("gpuops.security")
_migrations_applied = False  # once true it stays true for the life of the process (migrations only go forward)


def _networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    out = []
    for item in getattr(settings, "GPUOPS_METRICS_ALLOW_FROM", []) or []:
        try:
            out.append(ipaddress.ip_network(str(item).strip(), strict=False))
        except ValueError:
            logger.warning("GPUOPS_METRICS_ALLOW_FROM: %r is not an address or network; ignored", item)
    return out


def metrics_access_allowed(request: HttpRequest) -> bool:
    token = getattr(settings, "GPUOPS_METRICS_TOKEN", "") or ""
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if token and scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
        return True
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in network for network in _networks())


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not metrics_access_allowed(request):
        security_log.info("metrics scrape refused from %s", request.META.get("REMOTE_ADDR", "?"))
        return HttpResponse("Forbidden: a bearer token or an allowed address is needed.\n", status=403)
    registry = scrape_registry(float(getattr(settings, "GPUOPS_METRICS_CACHE_SECONDS", 15)))
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """The process answers (no database, no broker: a liveness probe must not restart web processes because
    the database is away)."""
    return JsonResponse({"status": "ok"})


def _check_database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return "ok"


def _check_migrations() -> str:
    global _migrations_applied
    if _migrations_applied:
        return "ok"
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        raise RuntimeError(f"{len(plan)} migration(s) not applied, e.g. {plan[0][0].app_label}.{plan[0][0].name}")
    _migrations_applied = True
    return "ok"


def _check_broker() -> str:
    from .celery import app

    timeout = float(getattr(settings, "GPUOPS_READYZ_BROKER_TIMEOUT_SECONDS", 2))
    options = {"socket_connect_timeout": timeout, "socket_timeout": timeout}
    with app.connection_for_read(transport_options=options) as conn:
        conn.ensure_connection(max_retries=1, timeout=timeout)
        client = getattr(conn.default_channel, "client", None)
        if client is not None and hasattr(client, "ping"):
            client.ping()  # the Redis transport connects lazily: ask it something
    return "ok"


@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    """Ready to serve: the database answers, every migration is applied, the Celery broker answers (short
    timeouts). 200 with each check's "ok", or 503 naming what failed."""
    checks: dict[str, str] = {}
    for name, check in (("database", _check_database), ("migrations", _check_migrations), ("broker", _check_broker)):
        if name == "migrations" and checks["database"] != "ok":
            checks[name] = "not checked: no database"
            continue
        try:
            checks[name] = check()
        except Exception as exc:  # any failure of a dependency: not ready, never a 500
            checks[name] = f"failed: {type(exc).__name__}: {exc}"[:300]
    ready = all(value == "ok" for value in checks.values())
    return JsonResponse({"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503)
