"""What is refused before reconciliation: size, JSON, schema, versions, contradictions."""

from __future__ import annotations

import json

import pytest

from cmdb import models as m
from inventory_agents.models import Report
from tests.inventory_agents.server.ingest_support import REPORTS_URL, report_of

pytestmark = pytest.mark.django_db


class HugeBody:
    """A 50 MB request body that is produced on demand and counts what the server reads of it."""

    def __init__(self, size: int) -> None:
        self.size, self.read_bytes = size, 0

    def read(self, n: int = -1) -> bytes:
        n = self.size - self.read_bytes if n is None or n < 0 else min(n, self.size - self.read_bytes)
        self.read_bytes += n
        return b" " * n

    def readline(self, *args) -> bytes:
        return self.read(1024)


def test_50_megabyte_body_is_413_without_being_read(node, token, client):
    body = HugeBody(50 * 1024 * 1024)
    response = client.generic(
        "POST",
        REPORTS_URL,
        b"",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {token}",
        CONTENT_LENGTH=str(body.size),
        **{"wsgi.input": body},
    )
    assert response.status_code == 413
    payload = response.json()
    assert payload["error"] == "report_too_large" and payload["max_bytes"] == 2 * 1024 * 1024
    assert body.read_bytes == 0
    assert Report.objects.get().status == "rejected"


def test_limit_comes_from_settings(node, token, post, settings):
    settings.GPUOPS = {**settings.GPUOPS, "AGENT_REPORT_MAX_BYTES": 1000}
    response = post(report_of(node), token)
    assert response.status_code == 413
    assert "1000" in response.json()["detail"]


def test_unauthenticated_huge_body_is_401_first(node, client):
    body = HugeBody(50 * 1024 * 1024)
    response = client.generic("POST", REPORTS_URL, b"", CONTENT_LENGTH=str(body.size), **{"wsgi.input": body})
    assert response.status_code == 401 and body.read_bytes == 0


@pytest.mark.parametrize("body", [b"{not json", b"", b"\xff\xfe", b"[1, 2, 3]", b'"a string"'])
def test_malformed_json_is_400(node, token, post, body):
    response = post(body, token)
    assert response.status_code == 400
    assert response.json()["error"] == "malformed_json"


def test_wrong_types_name_the_field(node, token, post):
    report = report_of(node)
    report["accelerators"][3]["index"] = "three"
    report["system"]["cpu_count"] = -2
    response = post(report, token)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid_report"
    paths = {e["path"] for e in body["errors"]}
    assert {"$.accelerators[3].index", "$.system.cpu_count"} <= paths
    stored = Report.objects.get()
    assert stored.status == "rejected" and {e["path"] for e in stored.errors} == paths


def test_missing_required_field_names_it(node, token, post):
    report = report_of(node)
    del report["accelerators"][0]["health"]
    response = post(report, token)
    assert response.status_code == 400
    assert "$.accelerators[0].health" in {e["path"] for e in response.json()["errors"]}


def test_unknown_schema_version_names_the_supported_ones(node, token, post):
    response = post(report_of(node, schema="gpuops.agent-report/2"), token)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "unsupported_schema"
    assert body["supported"] == ["gpuops.agent-report/1"]
    assert "gpuops.agent-report/2" in body["detail"]


def test_duplicate_serials_in_one_report_are_400(node, token, post):
    report = report_of(node)
    report["accelerators"][5]["serial"] = report["accelerators"][2]["serial"]
    response = post(report, token)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "duplicate_identity"
    assert body["errors"][0]["path"] == "$.accelerators[5].serial"
    assert "$.accelerators[2].serial" in body["errors"][0]["message"]
    assert m.Accelerator.objects.filter(node=node).count() == 8


def test_extra_nested_fields_are_tolerated(node, token, post):
    report = report_of(node)
    report["accelerators"][0]["nvlink_peers"] = [1, 2]
    report["system"]["tpm"] = "2.0"
    assert post(report, token).status_code == 200


def test_json_body_of_another_content_type_is_still_read(node, token, client):
    response = client.generic(
        "POST",
        REPORTS_URL,
        json.dumps(report_of(node)).encode(),
        content_type="text/plain",
        HTTP_AUTHORIZATION=f"Token {token}",
    )
    assert response.status_code == 200
