"""ETags from a row's `version` (bumped on every tracked save) and the If-Match / If-None-Match checks.

The tag is a strong validator `"<version>"`: the version changes whenever any stored field changes, which is
exactly when a client holding the old representation would overwrite someone else's edit.
"""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request

from .exceptions import PreconditionFailed


def etag_for(obj: Any) -> str | None:
    version = getattr(obj, "version", None)
    return f'"{version}"' if isinstance(version, int) else None


def _tags(header: str) -> list[str]:
    # Weak validators (W/"3") compare by their opaque part for If-Match on our strong tags.
    return [t.strip().removeprefix("W/") for t in header.split(",") if t.strip()]


def if_match_ok(header: str | None, current: str | None) -> bool:
    """Whether an If-Match header allows writing a row whose ETag is `current` (no header: always)."""
    if header is None or current is None:
        return True
    tags = _tags(header)
    return "*" in tags or current in tags


def if_none_match_hit(header: str | None, current: str | None) -> bool:
    """Whether a GET can answer 304: the client already holds the current representation."""
    if not header or current is None:
        return False
    tags = _tags(header)
    return "*" in tags or current in tags


def check_if_match(request: Request, obj: Any, *, expected_version: int | None = None, row: int | None = None) -> None:
    """Raise 412 when If-Match (or a `version` carried in the body) does not match the row's current version.

    Call with the row locked (select_for_update) inside the write's transaction, so nobody can slip a write in
    between the check and ours.
    """
    current = etag_for(obj)
    if current is None:
        return
    header = request.headers.get("If-Match") if row is None else None
    if not if_match_ok(header, current):
        raise PreconditionFailed(
            f"If-Match {header} does not match the current ETag {current}.", current_version=obj.version, row=row
        )
    if expected_version is not None and expected_version != obj.version:
        raise PreconditionFailed(
            f"version {expected_version} is stale; the current version is {obj.version}.",
            current_version=obj.version,
            row=row,
        )
