"""The OpenAPI schema: valid, warning-free for the CMDB, complete (filters, errors, ETags, bulk), and true to the
server (schemathesis drives every CMDB operation with generated requests: no 500s, responses match it)."""

from __future__ import annotations

import os
import re

import pytest
import schemathesis
from django.urls import include, path
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from cmdb.permissions import grant_scope
from tests.factories.cmdb import AcceleratorFactory, UserFactory


@pytest.fixture(scope="module")
def cmdb_schema_dict() -> dict:
    GENERATOR_STATS.reset()
    generator = SchemaGenerator(patterns=[path("api/cmdb/", include("cmdb.api.urls"))])
    schema = generator.get_schema(request=None, public=True)
    schema["warnings"] = dict(GENERATOR_STATS._warn_cache)
    return schema


def test_cmdb_schema_is_valid_and_free_of_warnings(cmdb_schema_dict):
    warnings = cmdb_schema_dict.pop("warnings")
    validate_schema(cmdb_schema_dict)
    assert warnings == {}


@pytest.mark.django_db
def test_served_schema_is_valid(root):
    response = root.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    validate_schema(response.json())


RESOURCES = [
    "sites",
    "rooms",
    "racks",
    "clusters",
    "tenants",
    "vendors",
    "accelerator-models",
    "server-models",
    "part-models",
    "tags",
    "driver-packages",
    "health-policies",
    "nodes",
    "components",
    "nics",
    "nic-ports",
    "installed-software",
    "health-events",
    "accelerators",
    "stock-locations",
    "part-items",
    "fabrics",
    "switches",
    "switch-ports",
    "links",
]


def test_every_resource_has_crud_and_bulk_operations(cmdb_schema_dict):
    paths = cmdb_schema_dict["paths"]
    for resource in RESOURCES:
        collection, item = paths[f"/api/cmdb/{resource}/"], paths[f"/api/cmdb/{resource}/{{id}}/"]
        assert set(collection) == {"get", "post", "put", "patch", "delete"}, resource
        assert set(item) == {"get", "put", "patch", "delete"}, resource
        assert collection["put"]["operationId"].endswith(f"{resource.replace('-', '_')}_bulk_update")
        assert collection["delete"]["requestBody"]["content"]["application/json"]["schema"]["type"] == "array"
        assert "oneOf" in collection["post"]["requestBody"]["content"]["application/json"]["schema"]
    for read_only in ("accelerator-placements", "changes"):
        assert set(paths[f"/api/cmdb/{read_only}/"]) == {"get"}
    assert "get" in paths["/api/cmdb/summary/"]
    assert "get" in paths["/api/cmdb/nodes/{id}/history/"]


def test_errors_etags_and_filters_are_documented(cmdb_schema_dict):
    paths = cmdb_schema_dict["paths"]
    error_ref = {"$ref": "#/components/schemas/Error"}
    detail = paths["/api/cmdb/accelerators/{id}/"]
    for code in ("400", "401", "403", "404", "412", "415", "429", "500"):
        assert detail["patch"]["responses"][code]["content"]["application/json"]["schema"] == error_ref, code
    assert "ETag" in detail["get"]["responses"]["200"]["headers"]
    assert any(p["name"] == "If-Match" and p["in"] == "header" for p in detail["patch"]["parameters"])
    names = {p["name"] for p in paths["/api/cmdb/accelerators/"]["get"]["parameters"]}
    assert {
        "site",
        "site__in",
        "model",
        "vendor",
        "health",
        "health__in",
        "lifecycle",
        "serial",
        "uuid",
        "node",
        "rack",
        "cluster",
        "tenant",
        "driver",
        "installed_version",
        "tag",
        "q",
        "ordering",
        "limit",
        "offset",
        "mode",
        "cursor",
    } <= names
    node_filters = {p["name"] for p in paths["/api/cmdb/nodes/"]["get"]["parameters"]}
    assert {"status", "status__in", "role", "hostname", "driver", "tag", "rack", "room"} <= node_filters
    change_filters = {p["name"] for p in paths["/api/cmdb/changes/"]["get"]["parameters"]}
    assert {"model", "object_id", "source", "actor", "correlation_id"} <= change_filters
    enums = cmdb_schema_dict["components"]["schemas"]
    assert {"NodeStatusEnum", "SwitchStatusEnum", "AcceleratorLifecycleEnum"} <= set(enums)


# --- schemathesis ------------------------------------------------------------------------------------------------


def _fuzz_schema() -> schemathesis.schemas.BaseSchema:
    """Every operation of the whole API (CMDB, workflows, rollouts, agent, integrations), loaded at collection time
    (schemathesis' lazy fixture loader does not run under pytest 9: it sets `Function._nodeid`, which pytest 9
    removed)."""
    from gpuops.wsgi import application

    generator = SchemaGenerator()
    with GENERATOR_STATS.silence():
        raw = generator.get_schema(request=None, public=True)
    # Fuzzing phase only, positive and negative data: the coverage phase alone would send hundreds of
    # boundary cases per operation, far beyond the suite's time budget.
    config = SchemathesisConfig.from_dict(
        {
            "phases": {"coverage": {"enabled": False}, "examples": {"enabled": False}},
            "generation": {"mode": "all", "max-examples": FUZZ_EXAMPLES, "deterministic": True},
        }
    )
    schema = schemathesis.openapi.from_dict(raw, config=config)
    schema.app = application
    # Token endpoints are excluded: fuzzing them would rotate away the token the run authenticates with.
    return schema.exclude(path_regex=r"/auth/token/")


# ~300 operations x 2 users: 2 examples each keeps the run to a few minutes on 2 cores; GPUOPS_FUZZ_EXAMPLES=25
# for a deeper run.
FUZZ_EXAMPLES = int(os.environ.get("GPUOPS_FUZZ_EXAMPLES", "2"))
fuzzed = _fuzz_schema()
CMDB_PATH = re.compile(r"^/api/cmdb/")


@pytest.fixture
def keep_test_connection():
    """Calls go straight to the WSGI app, not through Django's test client, so Django's request signals would
    close the test's database connection (its autocommit is off inside the test transaction) after the first
    request. The test client disconnects the same receiver for the same reason."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture(params=["superuser", "scoped"])
def fuzz_headers(request, db, keep_test_connection) -> dict[str, str]:
    """A superuser, and a technician with view and change scope on one site only (the site of the first card)."""
    cards = AcceleratorFactory.create_batch(3)  # a few rows, so ids 1-3 of several resources exist
    if request.param == "superuser":
        user = UserFactory(username="fuzz-root", is_superuser=True)
    else:
        user = UserFactory(username="fuzz-tech")
        grant_scope(scope_obj=cards[0].site, perms=["view_scope", "change_scope"], users=[user])
    return {"Authorization": f"Token {Token.objects.create(user=user).key}"}


@pytest.mark.slow
@fuzzed.parametrize()
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_fuzzed_requests_never_fail_on_the_server(case, fuzz_headers):
    response = case.call(headers=fuzz_headers)
    checks = [not_a_server_error]
    if CMDB_PATH.match(case.operation.path):
        # The CMDB's schema is complete (errors, ETags, bulk): its answers must match it too.
        checks += [status_code_conformance, content_type_conformance, response_schema_conformance]
    case.validate_response(response, checks=checks)


@pytest.mark.django_db
def test_swagger_ui_and_json_schema_are_served(root):
    assert root.get("/api/docs/").status_code == 200
    response = root.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    assert "/api/cmdb/accelerators/" in response.json()["paths"]
