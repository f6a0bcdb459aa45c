"""The adapter errors (defined in gpuops/exceptions.py, where the base task retries TransientError)."""

from __future__ import annotations

from gpuops.exceptions import IntegrationError, PermanentError, TransientError

__all__ = ["IntegrationError", "PermanentError", "TransientError"]
