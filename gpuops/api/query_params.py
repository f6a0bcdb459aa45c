"""Unknown query parameters are a 400, and what is known is exactly what the OpenAPI schema documents.

A typo (`?helth=failed`) or an unsupported filter (`?warranty_end__lte=...`) used to be ignored, so a script
that filtered and then bulk-edited the result touched the whole fleet. Every API view (through
`ApiViewMixin.initial`, after authentication) checks the query string against the query parameters the schema
lists for the operation: filterset fields, pagination (limit, offset, mode, cursor), ordering, search (`q`)
and what a view declares with `@extend_schema(parameters=...)`. One source of truth, so a new endpoint gets
the check, and the schema cannot drift from what the server accepts.

The schema is generated once per process (about a second for the whole API) on the first request that needs it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.request import Request

logger = logging.getLogger("gpuops.api")

#: accepted everywhere: DRF's renderer override (`?format=json`)
ALWAYS_ALLOWED = frozenset({getattr(settings, "URL_FORMAT_OVERRIDE", None) or "format"})

_lock = threading.Lock()
_by_operation: dict[tuple[type, str | None, str], frozenset[str]] | None = None


def _operation_key(view: Any, method: str) -> tuple[type, str | None, str]:
    return type(view), getattr(view, "action", None), method.upper()


def _build() -> dict[tuple[type, str | None, str], frozenset[str]]:
    from drf_spectacular.drainage import GENERATOR_STATS
    from drf_spectacular.generators import SchemaGenerator

    generator = SchemaGenerator()
    with GENERATOR_STATS.silence():
        schema = generator.get_schema(request=None, public=True)
    out: dict[tuple[type, str | None, str], frozenset[str]] = {}
    # The generator keeps the view instance of every (path, method) it documented: map them back.
    for path, _regex, method, view in generator._get_paths_and_endpoints():
        operation = schema["paths"].get(path if path.startswith("/") else f"/{path}", {}).get(method.lower())
        if operation is None:
            continue
        names = {p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"}
        key = _operation_key(view, method)
        out[key] = out.get(key, frozenset()) | frozenset(names)
    return out


def allowed_query_params(view: Any, method: str) -> frozenset[str] | None:
    """The query parameters the schema documents for this view's operation; None if it is not in the schema."""
    global _by_operation
    if _by_operation is None:
        with _lock:
            if _by_operation is None:
                try:
                    _by_operation = _build()
                except Exception:
                    # A schema bug must not take every endpoint down: check nothing, loudly (the schema tests
                    # fail on the same bug).
                    logger.exception("OpenAPI schema generation failed; query parameters are not checked")
                    _by_operation = {}
    method = "GET" if method.upper() == "HEAD" else method
    names = _by_operation.get(_operation_key(view, method))
    return None if names is None else names | ALWAYS_ALLOWED


def check_query_params(request: Request, view: Any) -> None:
    """400 for a NUL in a value, or naming the unknown parameter(s) and listing the allowed ones."""
    if not request.query_params:
        return
    # PostgreSQL refuses NUL in text ("A string literal cannot contain NUL"), which was a 500 on every filter.
    nul = sorted(
        {name for name, values in request.query_params.lists() if "\x00" in name or any("\x00" in v for v in values)}
    )
    if nul:
        raise exceptions.ValidationError(
            {name.replace("\x00", "\\x00"): ["NUL characters are not allowed."] for name in nul}
        )
    if request.method == "OPTIONS":
        return
    allowed = allowed_query_params(view, request.method or "GET")
    if allowed is None:
        # Not in the schema (excluded from the docs): nothing to check against. The route walk in the test
        # suite makes sure every list endpoint is documented.
        return
    unknown = sorted(set(request.query_params) - allowed)
    if not unknown:
        return
    listed = ", ".join(sorted(allowed)) or "none"
    reason = f"Unknown query parameter; allowed: {listed}."
    raise exceptions.ValidationError({name: [reason] for name in unknown})
