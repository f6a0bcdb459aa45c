"""Property: whatever an agent posts (any JSON shape, NULs, surrogates, any dates), the answer is never a 5xx,
and a valid report after it still applies."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.inventory_agents.server.ingest_support import report_of

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _real_clock_skew(settings) -> None:
    settings.GPUOPS = {**settings.GPUOPS, "AGENT_MAX_CLOCK_SKEW_MINUTES": 10}


TEXT = st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=20)
DATES = st.one_of(
    st.datetimes().map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%SZ")),
    st.from_regex(r"\A\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\Z"),
    TEXT,
)
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), TEXT, DATES)
JSON = st.recursive(
    LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=12,
)
PATHS = [
    "collected_at",
    "hostname",
    "agent_version",
    "system",
    "system.cpu_model",
    "system.serial",
    "accelerators",
    "accelerators.0",
    "accelerators.0.serial",
    "accelerators.0.index",
    "accelerators.0.health",
    "accelerators.0.health.xid_events",
    "nics",
    "infiniband",
    "software",
    "collector_errors",
    "lldp_neighbors",
]


def _put(report: dict, path: str, value) -> None:
    *parents, last = path.split(".")
    target = report
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(changes=st.lists(st.tuples(st.sampled_from(PATHS), JSON), max_size=3), whole=st.none() | JSON)
def test_any_report_is_never_a_5xx_and_a_valid_one_applies_after(node, token, post, changes, whole):
    if whole is not None:
        body = json.dumps(whole).encode()
    else:
        report = report_of(node)
        for path, value in changes:
            with contextlib.suppress(KeyError, IndexError, TypeError, ValueError):
                _put(report, path, value)  # a path the earlier changes removed: skipped
        body = json.dumps(report).encode()
    assert post(body, token).status_code < 500
    response = post(report_of(node), token)
    assert response.status_code == 200 and response.json()["status"] in ("applied", "unchanged")
