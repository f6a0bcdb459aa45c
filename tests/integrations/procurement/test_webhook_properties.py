"""Property tests of both signed webhooks (procurement and WMS): any JSON, any strings (NULs included), any dates,
signed with the right secret so the body reaches validation, is never a 5xx; and a valid event still applies
afterwards. Plus the named regressions: non-ASCII signature headers, impossible and free-text dates, NULs."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from integrations.procurement.models import InboundEvent
from integrations.procurement.signatures import headers_sign
from tests.integrations.procurement.procurement_helpers import SECRET

WMS_SECRET = "wms-secret-prop"
ENDPOINTS = {
    "procurement": ("/api/integrations/procurement/events/", SECRET, "procurement"),
    "wms": ("/api/integrations/warehouse/events/", WMS_SECRET, "wms"),
}
EVENT_TYPES = {
    "procurement": ["po.approved", "po.created", "shipment.delivered", "invoice.posted", "nope"],
    "wms": ["stock.counted", "movement.recorded", "nope"],
}
VALID_DATA = {
    "procurement": {"po_number": "PO-2026-0001"},
    "wms": {"site": "sh1", "location": "warehouse", "sku": "H100", "quantity": 2},
}


@pytest.fixture(autouse=True)
def wms_source(settings):
    settings.GPUOPS_WAREHOUSE = {"WEBHOOK_SOURCES": {"wms": {"secrets": [WMS_SECRET]}}}


def _post(client, channel: str, body: bytes, **extra: str):
    url, secret, source = ENDPOINTS[channel]
    headers = headers_sign(secret=secret, source=source, body=body, timestamp=int(time.time()))
    sent = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in {**headers, **extra}.items()}
    return client.post(url, data=body, content_type="application/json", **sent)


def _fields(response) -> dict:
    return json.loads(response.content)["error"].get("fields", {})


text = st.text(alphabet=st.characters(codec="utf-8"), max_size=20) | st.sampled_from(
    ["", "\x00", "a\x00b", "2026-13-45T25:61:00Z", "yesterday", "2026-01-05T10:00:00Z", "9" * 40, "é"]
)
dates = (
    st.sampled_from(
        [
            "2026-13-45T25:61:00Z",
            "yesterday",
            "2026-02-30T00:00:00Z",
            "2026-01-05T10:00:00",
            "2026-01-05T10:00:00+25:00",
            "0000-00-00T00:00:00Z",
            "2026-01-05T10:00:00Z",
            "",
        ]
    )
    | text
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=12,
)


def _events(channel: str):
    data = st.dictionaries(
        st.sampled_from(
            [
                "po_number",
                "reference",
                "lines",
                "serials",
                "site",
                "location",
                "sku",
                "quantity",
                "kind",
                "serial",
                "ref",
                "delivered_at",
                "at",
                "invoice_number",
                "amount",
                "request",
            ]
        )
        | text,
        json_values | dates,
        max_size=6,
    )
    return (
        st.fixed_dictionaries(
            {"id": text, "type": st.sampled_from(EVENT_TYPES[channel]) | text},
            optional={"occurred_at": dates, "data": data | json_values},
        )
        | json_values
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=False)
@pytest.mark.parametrize("channel", ["procurement", "wms"])
def test_any_signed_body_is_never_a_server_error(client, channel, django_capture_on_commit_callbacks):
    @settings(
        max_examples=100,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(event=_events(channel))
    def check(event) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            response = _post(client, channel, json.dumps(event).encode())
        assert response.status_code < 500, response.content[:300]
        assert response["Content-Type"].startswith("application/json")

    check()
    # Whatever was thrown at it, a valid event still gets through.
    event = {
        "id": "evt-after-fuzz",
        "type": EVENT_TYPES[channel][0],
        "occurred_at": "2026-01-05T10:00:00Z",
        "data": VALID_DATA[channel],
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = _post(client, channel, json.dumps(event).encode())
    assert response.status_code == 202, response.content
    assert InboundEvent.objects.get(event_id="evt-after-fuzz").status != "pending"  # it was processed


@pytest.mark.django_db
@pytest.mark.parametrize("channel", ["procurement", "wms"])
@pytest.mark.parametrize("signature", ["sha256=" + "é" * 64, "sha256=" + "\uff46" * 64, "sha256=" + "g" * 64])
def test_a_non_ascii_or_non_hex_signature_is_a_400(client, channel, signature):
    response = _post(client, channel, b"{}", X_Gpuops_Signature=signature)
    assert response.status_code == 400
    assert json.loads(response.content)["error"]["code"] == "invalid_signature_headers"


@pytest.mark.django_db
@pytest.mark.parametrize("channel", ["procurement", "wms"])
@pytest.mark.parametrize(
    "occurred_at",
    ["2026-13-45T25:61:00Z", "yesterday", "2026-02-30T10:00:00Z", "2026-01-05 10:00", "2026-01-05T10:00:00"],
)
def test_an_impossible_or_free_text_date_is_a_400_naming_the_field(client, channel, occurred_at):
    event = {"id": f"evt-{occurred_at}", "type": EVENT_TYPES[channel][0], "occurred_at": occurred_at, "data": {}}
    response = _post(client, channel, json.dumps(event).encode())
    assert response.status_code == 400 and "occurred_at" in _fields(response)
    assert not InboundEvent.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("channel", ["procurement", "wms"])
def test_a_nul_in_any_string_is_a_400_naming_the_path(client, channel):
    event = {"id": "evt-nul", "type": EVENT_TYPES[channel][0], "data": {"lines": [{"sku": "a\x00b"}]}}
    response = _post(client, channel, json.dumps(event).encode())
    assert response.status_code == 400
    assert _fields(response) == {"data.lines.0.sku": ["NUL characters are not allowed."]}
    assert not InboundEvent.objects.exists()
