"""Agent and enrollment tokens: issue, revoke, authenticate, and self-enrollment of new nodes.

A token is 32 random bytes (urlsafe base64) behind a short kind prefix (`gpa_` agent, `gpe_` enrollment), so a
token pasted in the wrong place is recognisable. Only its SHA-256 is stored; lookups go by that hash, which
needs no constant-time compare (the attacker does not control the stored value they are compared with).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from cmdb.models import Node, NodeStatus
from cmdb.services.changelog import tracked_update

from ..models import AgentToken, EnrollmentToken
from .identity import clean_serial

AGENT_PREFIX = "gpa_"
ENROLL_PREFIX = "gpe_"
# Nodes an enrollment may adopt: registered ahead (procurement) or received but never keyed.
ADOPTABLE_STATUSES = {NodeStatus.PLANNED, NodeStatus.RECEIVED}
UNKNOWN_SERIAL_PREFIX = "unknown:"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _token_new(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class IssuedToken:
    """The clear token (shown once) and its stored row."""

    token: str
    row: AgentToken


@transaction.atomic
def agent_token_issue(*, node: Node, description: str = "", actor=None, revoke_others: bool = True) -> IssuedToken:
    """Create a new agent token for `node`; by default revoke its other tokens (re-keying an agent).

    Side effect: a change record for the new token (and for each revoked one).
    """
    if revoke_others:
        for old in AgentToken.objects.select_for_update().filter(node=node, revoked_at__isnull=True):
            old.revoked_at = timezone.now()
            old.save(update_fields=["revoked_at", "updated_at", "version"])
    token = _token_new(AGENT_PREFIX)
    row = AgentToken.objects.create(
        node=node,
        token_hash=token_hash(token),
        prefix=token[: len(AGENT_PREFIX) + 6],
        description=description[:200],
        created_by=actor if getattr(actor, "pk", None) else None,
    )
    return IssuedToken(token=token, row=row)


@transaction.atomic
def agent_token_revoke(*, token: AgentToken) -> AgentToken:
    row = AgentToken.objects.select_for_update().get(pk=token.pk)
    if row.revoked_at is None:
        row.revoked_at = timezone.now()
        row.save(update_fields=["revoked_at", "updated_at", "version"])
    return row


AUTH_FIELDS = (
    "id",
    "node_id",
    "node__id",
    "node__hostname",
    "node__status",
    "node__is_stale",
    "node__site_id",
    "node__agent_state__node_id",
    "node__agent_state__last_hash",
    "node__agent_state__last_full_at",
    "node__agent_state__last_collected_at",
    "node__agent_state__last_report_id",
)


def agent_token_authenticate(token: str) -> AgentToken | None:
    """The active token row for `token` with its node and the node's ingest state, in one query; else None."""
    if not token.startswith(AGENT_PREFIX) or len(token) > 200:
        return None
    # No ORDER BY (the hash is unique): with one, the planner may walk another index instead of the hash's.
    # Only the columns authentication and the unchanged-report path read: the ORM compiles (and the server sends)
    # a few instead of sixty, which is a good part of an unchanged report's cost.
    rows = list(
        AgentToken.objects.select_related("node", "node__agent_state")
        .only(*AUTH_FIELDS)
        .filter(token_hash=token_hash(token), revoked_at__isnull=True)
        .order_by()[:1]
    )
    return rows[0] if rows else None


@dataclass(frozen=True)
class IssuedEnrollmentToken:
    token: str
    row: EnrollmentToken


def enrollment_token_issue(
    *, name: str, site, server_model, max_uses: int | None = None, expires_at: dt.datetime | None = None, actor=None
) -> IssuedEnrollmentToken:
    token = _token_new(ENROLL_PREFIX)
    row = EnrollmentToken.objects.create(
        name=name,
        token_hash=token_hash(token),
        prefix=token[: len(ENROLL_PREFIX) + 6],
        site=site,
        server_model=server_model,
        max_uses=max_uses,
        expires_at=expires_at,
        created_by=actor if getattr(actor, "pk", None) else None,
    )
    return IssuedEnrollmentToken(token=token, row=row)


class EnrollmentRefused(Exception):
    """The enrollment cannot proceed; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 403) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Enrollment:
    node: Node
    issued: IssuedToken
    created: bool


def _enrollment_token_lock(token: str) -> EnrollmentToken:
    row = EnrollmentToken.objects.select_for_update().filter(token_hash=token_hash(token)).first()
    if row is None or not token.startswith(ENROLL_PREFIX):
        raise EnrollmentRefused("Unknown enrollment token.", 401)
    now = timezone.now()
    if row.revoked_at is not None or (row.expires_at and row.expires_at <= now):
        raise EnrollmentRefused("This enrollment token is revoked or expired.", 401)
    if row.max_uses is not None and row.uses >= row.max_uses:
        raise EnrollmentRefused("This enrollment token has been used up.", 401)
    return row


@transaction.atomic
def node_enroll(*, enrollment_token: str, hostname: str, serial_raw: str | None) -> Enrollment:
    """Register a node by itself and give its agent a token.

    - A new hostname becomes a Node in status `received` at the token's site and server model. A junk serial
      becomes `unknown:<hostname>` until a report brings a real one (the CMDB needs a unique serial).
    - An existing hostname is adopted only while it is `planned`/`received`, holds no active agent token and
      its serial agrees (or is unknown): otherwise anyone holding the shared enrollment secret could take
      over a production node's identity. Refusals are 409; an admin then issues the token.
    Side effects: change records for the node and the token; the enrollment token's use count grows.
    """
    hostname = hostname.strip().lower()
    if not hostname or len(hostname) > 253:
        raise ValidationError({"hostname": "A hostname of 1 to 253 characters is required."})
    enroller = _enrollment_token_lock(enrollment_token)
    serial = clean_serial(serial_raw)
    node = Node.objects.select_for_update().filter(hostname=hostname).first()
    created = node is None
    if node is None:
        if serial and Node.objects.filter(serial=serial).exists():
            raise EnrollmentRefused(f"Serial {serial} belongs to another node; ask an admin to issue a token.", 409)
        try:
            with transaction.atomic():
                node = Node.objects.create(
                    hostname=hostname,
                    serial=serial or f"{UNKNOWN_SERIAL_PREFIX}{hostname}",
                    status=NodeStatus.RECEIVED,
                    site=enroller.site,
                    server_model=enroller.server_model,
                )
        except IntegrityError as exc:  # a concurrent enrollment of the same hostname or serial won
            raise EnrollmentRefused("This node was registered concurrently; retry.", 409) from exc
    else:
        if node.status not in ADOPTABLE_STATUSES:
            raise EnrollmentRefused(f"{hostname} is already in service ({node.status}); ask an admin for a token.", 409)
        if AgentToken.objects.filter(node=node, revoked_at__isnull=True).exists():
            raise EnrollmentRefused(f"{hostname} already has an agent token; ask an admin to re-key it.", 409)
        if serial and not node.serial.startswith(UNKNOWN_SERIAL_PREFIX) and node.serial != serial:
            raise EnrollmentRefused(f"{hostname} is registered with another serial.", 409)
    issued = agent_token_issue(node=node, description=f"enrolled with {enroller.name}", revoke_others=False)
    tracked_update(EnrollmentToken.objects.filter(pk=enroller.pk), uses=enroller.uses + 1)
    return Enrollment(node=node, issued=issued, created=created)
