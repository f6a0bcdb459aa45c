"""Alert sources and their bearer tokens. A token is `gpm_` + 32 random bytes (urlsafe base64); only its SHA-256
is stored and looked up (no constant-time compare needed: the attacker does not control the stored value)."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from ..models import AlertSource, SourceKind

TOKEN_PREFIX = "gpm_"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class IssuedSource:
    source: AlertSource
    token: str  # the clear token: shown once, never stored


def _token_new() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


@transaction.atomic
def alert_source_add(*, name: str, kind: str = SourceKind.ALERTMANAGER, description: str = "") -> IssuedSource:
    name = name.strip()
    if not name:
        raise ValidationError({"name": "A source needs a name."})
    if kind not in SourceKind.values:
        raise ValidationError({"kind": f"One of {', '.join(SourceKind.values)}."})
    if AlertSource.objects.filter(name=name).exists():
        raise ValidationError({"name": f"An alert source named {name!r} exists already."})
    token = _token_new()
    source = AlertSource.objects.create(
        name=name[:100],
        kind=kind,
        description=description[:300],
        token_hash=token_hash(token),
        token_prefix=token[:10],
    )
    return IssuedSource(source=source, token=token)


@transaction.atomic
def alert_source_rekey(*, source: AlertSource) -> IssuedSource:
    """A new token for the source; the old one stops working at once."""
    token = _token_new()
    AlertSource.objects.filter(pk=source.pk).update(token_hash=token_hash(token), token_prefix=token[:10])
    source.refresh_from_db()
    return IssuedSource(source=source, token=token)


def alert_source_authenticate(authorization: str) -> AlertSource | None:
    """The active source whose token is in `Authorization: Bearer <token>`, or None."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    source = AlertSource.objects.filter(token_hash=token_hash(token), is_active=True).first()
    if source is not None:
        now = timezone.now()
        if source.last_used_at is None or (now - source.last_used_at).total_seconds() > 60:
            AlertSource.objects.filter(pk=source.pk).update(last_used_at=now)  # a stamp, at most once a minute
    return source
