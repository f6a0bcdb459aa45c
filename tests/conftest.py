"""Suite-wide fixtures. The services tier runs only when DATABASE_URL / CELERY_BROKER_URL point at servers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_FIXTURES = Path(os.environ.get("GPUOPS_SHARED_FIXTURES", REPO.parent / "shared" / "fixtures"))


def services_available() -> tuple[bool, str]:
    db = os.environ.get("DATABASE_URL", "")
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not db.startswith(("postgres://", "postgresql://")):
        return False, "services tier: DATABASE_URL does not point at PostgreSQL"
    if not broker.startswith(("redis://", "amqp://", "pyamqp://")):
        return False, "services tier: CELERY_BROKER_URL does not point at Redis or RabbitMQ"
    return True, ""


def pytest_collection_modifyitems(config, items):
    ok, reason = services_available()
    if ok:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "services" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def shared_fixtures() -> Path:
    """The folder of real captured outputs (../shared/fixtures); tests skip with a reason when it is absent."""
    if not SHARED_FIXTURES.is_dir():
        pytest.skip(f"real captures folder {SHARED_FIXTURES} is absent")
    return SHARED_FIXTURES
