"""HMAC-SHA256 signatures of inbound webhooks (procurement system, WMS) and of what the simulator sends.

Scheme (the peer computes, we verify)::

    X-Gpuops-Source:    procurement                      which shared secret(s) to use
    X-Gpuops-Timestamp: 1767225600                       unix seconds when the peer signed
    X-Gpuops-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + raw body)>

The timestamp is inside the MAC, so an attacker cannot refresh an old request; requests outside the replay
window are refused even with a valid MAC, and the event id (idempotency key) stops replays inside it.
Several secrets may be valid at once (rotation: the new one and the previous one); every candidate is
compared in constant time (`hmac.compare_digest`), and all of them are tried, so the time taken does not
reveal which secret, if any, nearly matched.
This module has no Django imports: the simulator and the tests' fake peers use it as is.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SOURCE_HEADER = "X-Gpuops-Source"
TIMESTAMP_HEADER = "X-Gpuops-Timestamp"
SIGNATURE_HEADER = "X-Gpuops-Signature"
SCHEME = "sha256"
_HEX = re.compile(r"[0-9a-fA-F]{64}")
_UNIX_SECONDS = re.compile(r"[0-9]{1,12}")


class SignatureError(Exception):
    """The request is not authentic. `reason` is a stable code for logs; `status` the HTTP answer."""

    def __init__(self, reason: str, message: str, *, status: int = 401) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = status


@dataclass(frozen=True)
class Verified:
    """A verified request: its source, its signing time, and which of the source's secrets matched."""

    source: str
    timestamp: int
    secret_index: int


def signature_compute(secret: str, timestamp: int | str, body: bytes) -> str:
    """The hex HMAC-SHA256 of `timestamp + "." + body` under `secret`."""
    message = str(timestamp).encode("ascii") + b"." + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def headers_sign(*, secret: str, source: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """The three headers a peer sends with `body` (used by the simulator and tests)."""
    ts = int(time.time()) if timestamp is None else timestamp
    return {
        SOURCE_HEADER: source,
        TIMESTAMP_HEADER: str(ts),
        SIGNATURE_HEADER: f"{SCHEME}={signature_compute(secret, ts, body)}",
    }


def signature_verify(
    *,
    headers: Mapping[str, str],
    body: bytes,
    secrets_for: Mapping[str, Sequence[str]],
    window_s: int,
    now: float | None = None,
) -> Verified:
    """Check the source, the timestamp window and the MAC of a request. Returns what matched.

    Args:
        headers: the request headers (case-insensitive mapping, e.g. Django's `request.headers`).
        body: the raw body exactly as received (never a re-serialised JSON).
        secrets_for: source name -> its currently valid secrets (new first during rotation).
        window_s: largest accepted |now - timestamp| in seconds.
    Raises:
        SignatureError: missing/malformed headers (400), unknown source, stale timestamp or no matching
            secret (401).
    """
    source = (headers.get(SOURCE_HEADER) or "").strip()
    raw_ts = (headers.get(TIMESTAMP_HEADER) or "").strip()
    raw_sig = (headers.get(SIGNATURE_HEADER) or "").strip()
    if not source or not raw_ts or not raw_sig:
        missing = [
            h for h, v in ((SOURCE_HEADER, source), (TIMESTAMP_HEADER, raw_ts), (SIGNATURE_HEADER, raw_sig)) if not v
        ]
        raise SignatureError("missing_header", f"Missing header(s): {', '.join(missing)}.", status=400)
    scheme, _, digest = raw_sig.partition("=")
    # Only ASCII hex: hmac.compare_digest raises TypeError on non-ASCII text (a header such as 'sha256=é...').
    if scheme != SCHEME or len(digest) != 64 or not _HEX.fullmatch(digest):
        raise SignatureError(
            "malformed_signature", f"{SIGNATURE_HEADER} must be '{SCHEME}=<64 hex digits>'.", status=400
        )
    try:
        if not _UNIX_SECONDS.fullmatch(raw_ts):  # int() would also take '١٧٦٧' and '1_767'
            raise ValueError(raw_ts)
        ts = int(raw_ts)
    except ValueError:
        raise SignatureError("malformed_timestamp", f"{TIMESTAMP_HEADER} must be unix seconds.", status=400) from None
    secrets = [s for s in secrets_for.get(source, ()) if s]
    if not secrets:
        # Same status as a bad MAC: an unauthenticated caller learns nothing about which sources exist.
        raise SignatureError("unknown_source", f"Unknown or unconfigured source {source!r}.")
    current = time.time() if now is None else now
    if abs(current - ts) > window_s:
        raise SignatureError("stale_timestamp", f"Timestamp outside the {window_s}s replay window.")
    matched = -1
    for index, secret in enumerate(secrets):
        expected = signature_compute(secret, ts, body)
        # No early exit: try every secret so timing does not depend on which one matched.
        if hmac.compare_digest(expected, digest.lower()) and matched < 0:
            matched = index
    if matched < 0:
        raise SignatureError("bad_signature", "Signature does not match (wrong secret or altered body).")
    return Verified(source=source, timestamp=ts, secret_index=matched)


__all__ = [
    "SIGNATURE_HEADER",
    "SOURCE_HEADER",
    "TIMESTAMP_HEADER",
    "SignatureError",
    "Verified",
    "headers_sign",
    "signature_compute",
    "signature_verify",
]
