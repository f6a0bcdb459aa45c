"""The signature on every outbound webhook, and the check a receiver runs (copy it, it is stdlib only).

    X-Gpuops-Timestamp: 1764686400                      (Unix seconds when this attempt was sent)
    X-Gpuops-Signature: sha256=<hex HMAC-SHA256(secret, f"{timestamp}.{raw body}")>

The timestamp is part of what is signed, so a receiver that rejects timestamps older than a few minutes rejects
replays of a captured request; `X-Gpuops-Delivery` / the body's `id` identify the event for deduplication.
"""

from __future__ import annotations

import hashlib
import hmac
import time

TIMESTAMP_HEADER = "X-Gpuops-Timestamp"
SIGNATURE_HEADER = "X-Gpuops-Signature"
DEFAULT_TOLERANCE_S = 300


def signature(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def signed_headers(secret: str, body: bytes, *, now: float | None = None) -> dict[str, str]:
    timestamp = int(now if now is not None else time.time())
    return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: signature(secret, timestamp, body)}


def signature_valid(
    secret: str,
    *,
    timestamp: str,
    signature_header: str,
    body: bytes,
    now: float | None = None,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
) -> bool:
    """The receiver's check: a fresh timestamp and a matching signature (constant-time compare)."""
    try:
        ts = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs((now if now is not None else time.time()) - ts) > tolerance_s:
        return False
    return hmac.compare_digest(signature(secret, ts, body), signature_header or "")


__all__ = ["SIGNATURE_HEADER", "TIMESTAMP_HEADER", "signature", "signature_valid", "signed_headers"]
