"""gunicorn settings shared by `script/server` and production (`gunicorn -c python:gpuops.gunicorn_conf`).

Read by the gunicorn master before Django starts; every value can be overridden from the environment
(docs/operations.md, "Configuration"). Defaults are sized for a 2-core machine.
"""

from __future__ import annotations

import os


def _cpus() -> int:
    # The CPUs this process may run on (a cpuset or `taskset` narrows it); a container's CPU quota does not show
    # here: set GPUOPS_WEB_WORKERS there.
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _on_sqlite() -> bool:
    return os.environ.get("DATABASE_URL", "sqlite:").startswith("sqlite:")


wsgi_app = "gpuops.wsgi:application"
# GPUOPS_BIND (host:port, unix:/path; comma-separated) or GPUOPS_HOST + GPUOPS_PORT (what script/server sets).
_default_bind = f"{os.environ.get('GPUOPS_HOST', '127.0.0.1')}:{os.environ.get('GPUOPS_PORT', '8000')}"
bind = [item.strip() for item in (os.environ.get("GPUOPS_BIND") or _default_bind).split(",") if item.strip()]

# Threads in every worker: a request waiting on the database or on the broker does not hold a whole process.
worker_class = "gthread"
if _on_sqlite():
    # SQLite (the embedded default) has one writer at a time for the whole file, whatever the number of processes:
    # more workers add lock waits (settings: WAL, IMMEDIATE transactions, a 30 s busy timeout), not throughput.
    # Two processes so a slow page does not stall the others, four threads each for the concurrent readers WAL
    # allows.
    _workers, _threads = 2, 4
else:
    # PostgreSQL: the usual 2 x CPUs + 1 processes (5 on 2 cores), 2 threads each. Each thread keeps its own
    # database connection (DB_CONN_MAX_AGE): workers x threads x web hosts must stay under max_connections.
    _workers, _threads = 2 * _cpus() + 1, 2
workers = int(os.environ.get("GPUOPS_WEB_WORKERS", _workers))
threads = int(os.environ.get("GPUOPS_WEB_THREADS", _threads))

# A worker whose main loop is silent this long is killed and replaced (a long request on a thread does not count:
# the gthread loop keeps beating). On SIGTERM/SIGHUP, requests in flight get graceful_timeout seconds to finish.
timeout = int(os.environ.get("GPUOPS_WEB_TIMEOUT", "60"))
graceful_timeout = int(os.environ.get("GPUOPS_WEB_GRACEFUL_TIMEOUT", "30"))
# Idle keep-alive connections from the proxy are closed after this; the nginx example does not reuse upstream
# connections, so this only serves clients that talk to gunicorn directly (probes, scrapers).
keepalive = 5
# Recycle each worker after about this many requests: bounds slow memory growth without a restart of the service.
max_requests = int(os.environ.get("GPUOPS_WEB_MAX_REQUESTS", "2000"))
max_requests_jitter = max_requests // 10
# The heartbeat file lives in memory where there is one (a container's overlay /tmp can stall it).
if os.path.isdir("/dev/shm"):
    worker_tmp_dir = "/dev/shm"

# gunicorn trusts X-Forwarded-* only from these addresses (its own default: loopback). Django decides https from
# X-Forwarded-Proto in production (settings: SECURE_PROXY_SSL_HEADER), so gunicorn must be reachable only through
# the TLS proxy.
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1")

accesslog = os.environ.get("GPUOPS_WEB_ACCESS_LOG", "-") or None
errorlog = "-"
loglevel = os.environ.get("GPUOPS_WEB_LOG_LEVEL", "info")
proc_name = "gpuops-web"
# gunicorn 25+ opens a control socket in $XDG_RUNTIME_DIR or ~/.gunicorn by default: one path per user, so two
# servers of one user (script/server beside a test, two instances on a host) would fight over it. Signals and
# systemd do the controlling here (older gunicorn ignores the setting).
control_socket_disable = True
