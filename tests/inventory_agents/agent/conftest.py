"""Fixtures for the node agent tests (helpers live in agent_helpers.py)."""

from __future__ import annotations

import jsonschema
import pytest
from agent_helpers import load_validator


@pytest.fixture(scope="session")
def report_validator() -> jsonschema.Draft202012Validator:
    return load_validator()
