"""Which ProcurementClient to use: the dotted path in settings (GPUOPS_PROCUREMENT["CLIENT"]), or a test override."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.utils.module_loading import import_string

from .conf import procurement_setting
from .ports import ProcurementClient

_override: ProcurementClient | None = None


def procurement_client() -> ProcurementClient:
    """A client instance per call (cheap; the REST one opens its connection pool lazily)."""
    if _override is not None:
        return _override
    return import_string(procurement_setting("CLIENT"))()


@contextlib.contextmanager
def procurement_client_override(client: ProcurementClient) -> Iterator[ProcurementClient]:
    """Use `client` for the duration of the block (tests)."""
    global _override
    previous, _override = _override, client
    try:
        yield client
    finally:
        _override = previous
