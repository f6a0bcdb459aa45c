"""Deliver reports to the server, with a spool for when it cannot be reached.

POST <server>/api/agent/reports/ with `Authorization: Token <token>`. A connection error, a timeout or a 5xx
(and 408 / 429, which say "try later") leave the report in the spool directory; the spool is sent oldest first
at the start of the next run, before the new report. Any other 4xx means the server will never accept that
body: it is logged and moved to <spool>/rejected/ so it is not retried forever.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

from . import AGENT_VERSION

log = logging.getLogger(__name__)

REPORTS_PATH = "/api/agent/reports/"
ENROLL_PATH = "/api/agent/enroll/"
DEFAULT_SPOOL_DIR = "/var/spool/gpuops-agent"
MAX_SPOOLED = 500  # a node offline for weeks must not fill its disk: the oldest reports go first
_RETRYABLE_4XX = {408, 425, 429}


class TransientError(Exception):
    """The server could not be reached or asked us to come back later: spool and retry."""


class RejectedError(Exception):
    """The server refused this report for good (4xx)."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__("HTTP {}: {}".format(status, body))
        self.status = status
        self.body = body


def reports_url(server: str) -> str:
    return server.rstrip("/") + REPORTS_PATH


def enroll_url(server: str) -> str:
    return server.rstrip("/") + ENROLL_PATH


def enroll(url: str, enrollment_token: str, body: bytes, timeout: float = 30.0) -> Dict[str, Any]:
    """POST the node's report to enroll/ with the site's enrollment token; returns the server's answer (with the
    node's own agent token). Raises TransientError or RejectedError like `send`."""
    try:
        answer = json.loads(_post(url, enrollment_token, body, timeout)[1] or "{}")
    except ValueError as exc:
        raise TransientError("the server's answer is not JSON: {}".format(exc)) from exc
    if not isinstance(answer, dict) or not isinstance(answer.get("token"), str):
        raise TransientError("the server's answer holds no token")
    return answer


def send(url: str, token: str, body: bytes, timeout: float = 30.0) -> int:
    """POST one report; returns the HTTP status (2xx), raises TransientError or RejectedError."""
    return _post(url, token, body, timeout)[0]


def _post(url: str, token: str, body: bytes, timeout: float) -> Tuple[int, str]:
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Authorization": "Token {}".format(token),
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "gpuops-agent/{}".format(AGENT_VERSION),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # the URL is the operator's --server
            text = response.read(1024 * 1024).decode("utf-8", errors="replace")
            return int(response.status), text
    except urllib.error.HTTPError as exc:
        detail = _body_excerpt(exc)
        if exc.code >= 500 or exc.code in _RETRYABLE_4XX:
            raise TransientError("HTTP {}: {}".format(exc.code, detail)) from exc
        raise RejectedError(exc.code, detail) from exc
    except (urllib.error.URLError, socket.timeout, ConnectionError, OSError) as exc:
        raise TransientError(str(getattr(exc, "reason", exc))) from exc


def _body_excerpt(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read(500).decode("utf-8", errors="replace").strip()
    except Exception:  # a broken error body must not hide the status
        return ""


# --------------------------------------------------------------------------------------------- spool


def spooled_files(spool_dir: str) -> List[str]:
    """Spooled reports, oldest first (names start with a sortable UTC timestamp)."""
    try:
        names = [n for n in os.listdir(spool_dir) if n.endswith(".json") and not n.startswith(".")]
    except OSError:
        return []  # no spool yet (or not a directory: spool() will say so when it is needed)
    return [os.path.join(spool_dir, n) for n in sorted(names)]


def spool(spool_dir: str, body: bytes, subdir: Optional[str] = None) -> str:
    """Write body atomically (temp file + rename) so a crash never leaves half a report to send."""
    target = os.path.join(spool_dir, subdir) if subdir else spool_dir
    os.makedirs(target, mode=0o700, exist_ok=True)
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + "{:06d}".format(int(now * 1e6) % 1000000)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=target)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
        path = os.path.join(target, "{}-{}-{}.json".format(stamp, os.getpid(), os.path.basename(tmp)[5:]))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    if subdir is None:
        _trim(spool_dir)
    return path


def _trim(spool_dir: str) -> None:
    files = spooled_files(spool_dir)
    for path in files[: max(0, len(files) - MAX_SPOOLED)]:
        log.warning("spool full (%d reports): dropping the oldest, %s", MAX_SPOOLED, path)
        os.unlink(path)


def reject(spool_dir: str, path: str) -> str:
    target_dir = os.path.join(spool_dir, "rejected")
    os.makedirs(target_dir, mode=0o700, exist_ok=True)
    target = os.path.join(target_dir, os.path.basename(path))
    os.replace(path, target)
    return target


def flush_spool(url: str, token: str, spool_dir: str, timeout: float = 30.0) -> bool:
    """Send spooled reports oldest first. False when the server is (still) unreachable: stop and keep the rest."""
    for path in spooled_files(spool_dir):
        try:
            with open(path, "rb") as handle:
                body = handle.read()
        except OSError as exc:
            log.error("cannot read spooled report %s: %s", path, exc)
            continue
        try:
            send(url, token, body, timeout)
        except TransientError as exc:
            log.warning("server unreachable, %d spooled report(s) kept: %s", len(spooled_files(spool_dir)), exc)
            return False
        except RejectedError as exc:
            log.error("server rejected spooled report %s (%s); moved to %s", path, exc, reject(spool_dir, path))
            continue
        os.unlink(path)
        log.info("sent spooled report %s", os.path.basename(path))
    return True
