"""JSON Schemas of inbound events, and validation that names the offending field.

Every event is an envelope ``{"id", "type", "occurred_at", "data"}``; `data` has one schema per type. A bad
event is answered 400 with ``fields`` mapping a dotted path (``data.lines.0.serials``) to the reasons, so the
peer's developers see exactly which field to fix. Unknown properties are allowed (peers add fields over
time) but every property we read is typed.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker

# jsonschema checks `date-time` only when rfc3339-validator is installed; without it "yesterday" passed and was
# stored as null, and "2026-13-45T25:61:00Z" passed and failed later (a 500). An explicit RFC 3339 check here
# needs no extra dependency: date, 'T', time, and a zone (Z or +hh:mm), each part in range.
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
FORMAT_CHECKER = FormatChecker(formats=())


@FORMAT_CHECKER.checks("date-time", raises=ValueError)
def _is_datetime(value: object) -> bool:
    if not isinstance(value, str):
        return True  # the `type` keyword reports non-strings
    if not _RFC3339.match(value):
        return False
    dt.datetime.fromisoformat(value.upper().replace("Z", "+00:00"))  # ValueError for month 13, hour 25, ...
    return True


def nul_paths(value: Any, path: tuple[Any, ...] = ()) -> list[str]:
    """Dotted paths of every string (key or value) holding a NUL: PostgreSQL refuses NUL in text and JSONB."""
    if isinstance(value, str):
        return [_path(path) or "body"] if "\x00" in value else []
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if "\x00" in key:
                found.append(_path((*path, key.replace("\x00", "\\x00"))))
            found.extend(nul_paths(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(nul_paths(item, (*path, index)))
    return found


_STR = {"type": "string", "minLength": 1, "maxLength": 200}
_SERIAL = {"type": "string", "minLength": 1, "maxLength": 100, "pattern": r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$"}
_SERIALS = {"type": "array", "items": _SERIAL, "maxItems": 10000, "uniqueItems": True}
_DATETIME = {"type": "string", "format": "date-time"}
_MONEY = {"type": ["number", "string"], "pattern": r"^-?[0-9]+(\.[0-9]{1,2})?$"}

ENVELOPE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "type", "data"],
    "properties": {
        "id": {"type": "string", "minLength": 1, "maxLength": 128},
        "type": {"type": "string", "minLength": 1, "maxLength": 64},
        "occurred_at": _DATETIME,
        "data": {"type": "object"},
    },
}

_PO = {"po_number": _STR}

PROCUREMENT_DATA_SCHEMAS: dict[str, dict[str, Any]] = {
    "po.created": {
        "type": "object",
        "required": ["po_number", "request_ref"],
        "properties": {
            **_PO,
            "request_ref": {"type": "string", "pattern": r"^PR-[0-9]+$"},
            "supplier": {"type": "string", "maxLength": 200},
            "total_amount": _MONEY,
            "currency": {"type": "string", "minLength": 3, "maxLength": 3},
            "lines": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["line_ref"],
                    "properties": {
                        "line_ref": _STR,
                        "po_line_ref": _STR,
                        "quantity": {"type": "integer", "minimum": 1},
                        "unit_price": _MONEY,
                    },
                },
            },
        },
    },
    "po.approved": {"type": "object", "required": ["po_number"], "properties": {**_PO, "approved_by": _STR}},
    "po.cancelled": {
        "type": "object",
        "required": ["po_number"],
        "properties": {**_PO, "reason": {"type": "string", "maxLength": 500}},
    },
    "shipment.dispatched": {
        "type": "object",
        "required": ["po_number", "shipment_id", "lines"],
        "properties": {
            **_PO,
            "shipment_id": _STR,
            "carrier": {"type": "string", "maxLength": 100},
            "tracking": {"type": "string", "maxLength": 100},
            "expected_at": _DATETIME,
            "lines": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["line_ref"],
                    "properties": {
                        "line_ref": _STR,
                        "serials": _SERIALS,
                        "quantity": {"type": "integer", "minimum": 0},
                    },
                    "anyOf": [{"required": ["serials"]}, {"required": ["quantity"]}],
                },
            },
        },
    },
    "shipment.delivered": {
        "type": "object",
        "required": ["po_number", "shipment_id", "site", "lines"],
        "properties": {
            **_PO,
            "shipment_id": _STR,
            "site": {"type": "string", "minLength": 1, "maxLength": 32},
            "delivered_at": _DATETIME,
            "lines": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["line_ref"],
                    "properties": {
                        "line_ref": _STR,
                        "serials": _SERIALS,
                        "quantity": {"type": "integer", "minimum": 0},
                        "warranty_months": {"type": "integer", "minimum": 0, "maximum": 240},
                    },
                    "anyOf": [{"required": ["serials"]}, {"required": ["quantity"]}],
                },
            },
        },
    },
    "invoice.posted": {
        "type": "object",
        "required": ["po_number", "invoice_number", "amount"],
        "properties": {
            **_PO,
            "invoice_number": _STR,
            "amount": _MONEY,
            "currency": {"type": "string", "minLength": 3, "maxLength": 3},
            "posted_at": _DATETIME,
        },
    },
}


def _path(parts: Any) -> str:
    return ".".join(str(p) for p in parts)


def _errors(validator: Draft202012Validator, instance: Any, prefix: str = "") -> dict[str, list[str]]:
    fields: dict[str, list[str]] = {}
    for error in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))):
        path = list(error.absolute_path)
        if error.validator == "required":
            # jsonschema reports a missing property at its parent; name the property itself.
            missing = error.message.split("'")[1] if "'" in error.message else ""
            path = [*path, missing] if missing else path
            message = "This field is required."
        else:
            message = error.message if len(error.message) < 300 else error.message[:297] + "..."
        key = ".".join(filter(None, [prefix, _path(path)])) or prefix or "body"
        fields.setdefault(key, []).append(message)
    return fields


_ENVELOPE = Draft202012Validator(ENVELOPE_SCHEMA, format_checker=FORMAT_CHECKER)


def event_validate(event: Any, data_schemas: Mapping[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Field errors of an event against the envelope and its type's data schema ({} when valid)."""
    nul = nul_paths(event)
    if nul:
        return {path: ["NUL characters are not allowed."] for path in nul}
    errors = _errors(_ENVELOPE, event)
    if errors:
        return errors
    schema = data_schemas.get(event["type"])
    if schema is None:
        return {"type": [f"Unknown event type {event['type']!r}; expected one of {', '.join(sorted(data_schemas))}."]}
    validator = Draft202012Validator(schema, format_checker=FORMAT_CHECKER)
    return _errors(validator, event["data"], prefix="data")


__all__ = ["ENVELOPE_SCHEMA", "FORMAT_CHECKER", "PROCUREMENT_DATA_SCHEMAS", "event_validate", "nul_paths"]
