"""Parsing and validating a report body before anything touches the database.

The contract is the versioned JSON Schema in `inventory_agents/schema/agent-report-v1.json` (written with the
agent). It is compiled once per process (Draft 2020-12) and reloaded only if the file changes: into a fast
yes/no check (`schema_check.py`) for the common valid report, and a `jsonschema` validator that lists the
field-level errors of an invalid one. When the file
is absent (a checkout without it) a built-in minimal schema checks the fields reconciliation relies on.
Extra fields are always tolerated by the server: newer agents may send more than this server knows.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaError

from .schema_check import Check, Unsupported, schema_compile

logger = logging.getLogger(__name__)
SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schema"
SUPPORTED_SCHEMAS: dict[str, str] = {"gpuops.agent-report/1": "agent-report-v1.json"}
MAX_ERRORS = 50

_str = {"type": ["string", "null"]}
_int = {"type": ["integer", "null"]}
_num = {"type": ["number", "null"]}
FALLBACK_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["schema", "collected_at", "hostname", "system", "accelerators"],
    "properties": {
        "schema": {"type": "string"},
        "collected_at": {"type": "string", "minLength": 10},
        "agent_version": _str,
        "hostname": {"type": "string", "minLength": 1, "maxLength": 253},
        "system": {
            "type": "object",
            "properties": {
                "vendor": _str,
                "product": _str,
                "serial": _str,
                "serial_raw": _str,
                "bios_version": _str,
                "os_name": _str,
                "os_version": _str,
                "kernel": _str,
                "cpu_model": _str,
                "cpu_count": _int,
                "memory_gib": _num,
            },
        },
        "accelerators": {
            "type": "array",
            "maxItems": 256,
            "items": {
                "type": "object",
                "required": ["vendor"],
                "properties": {
                    "vendor": {"type": "string"},
                    "model": _str,
                    "serial": _str,
                    "serial_raw": _str,
                    "uuid": _str,
                    "index": _int,
                    "pci_bus_id": _str,
                    "memory_mib": _int,
                    "driver_version": _str,
                    "firmware_version": _str,
                    "health": {
                        "type": "object",
                        "properties": {
                            "status": {"enum": ["ok", "degraded", "failed", "unknown", None]},
                            "xid_events": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["xid"],
                                    "properties": {"xid": {"type": "integer"}},
                                },
                            },
                        },
                    },
                },
            },
        },
        "nics": {
            "type": "array",
            "maxItems": 1024,
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "mac": _str,
                    "speed_mbps": _num,
                    "state": _str,
                    "kind": _str,
                },
            },
        },
        "infiniband": {
            "type": "array",
            "maxItems": 256,
            "items": {
                "type": "object",
                "required": ["ca"],
                "properties": {
                    "ca": {"type": "string", "minLength": 1},
                    "node_guid": _str,
                    "firmware": _str,
                    "ports": {"type": "array", "items": {"type": "object", "required": ["port"]}},
                },
            },
        },
        "software": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["component", "version"],
                "properties": {"component": {"type": "string"}, "version": {"type": ["string", "null"]}},
            },
        },
        "collector_errors": {"type": "array", "items": {"type": "object"}},
    },
}


@dataclass
class ReportProblem(Exception):
    """A report the server refuses: HTTP `status`, a machine `code`, a message and field-level `errors`."""

    status: int
    code: str
    message: str
    errors: list[dict[str, str]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.code, "detail": self.message}
        if self.errors:
            body["errors"] = self.errors
        body.update(self.extra)
        return body


def json_path(parts) -> str:
    """['accelerators', 3, 'serial'] -> '$.accelerators[3].serial'."""
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


class _SchemaCache:
    """One compiled validator per schema file, rebuilt when the file's mtime changes (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float | None, Draft202012Validator, Check | None]] = {}

    def validator(self, filename: str) -> tuple[Draft202012Validator, Check | None]:
        """(jsonschema validator for the errors, fast yes/no check or None when the schema is beyond it)."""
        path = SCHEMA_DIR / filename
        try:
            mtime: float | None = path.stat().st_mtime
        except OSError:
            mtime = None
        cached = self._cache.get(filename)
        if cached is not None and cached[0] == mtime:
            return cached[1], cached[2]
        with self._lock:
            schema = FALLBACK_SCHEMA
            if mtime is not None:
                try:
                    schema = json.loads(path.read_text(encoding="utf-8"))
                    Draft202012Validator.check_schema(schema)
                except (OSError, ValueError, SchemaError):
                    # A half-written or broken schema file must not take ingestion down; the minimal checks hold.
                    schema = FALLBACK_SCHEMA
            validator = Draft202012Validator(schema)
            try:
                fast: Check | None = schema_compile(schema)
            except Unsupported as exc:
                logger.warning("schema %s uses %s: validating with jsonschema only (slower)", filename, exc)
                fast = None
            self._cache[filename] = (mtime, validator, fast)
            return validator, fast


_schemas = _SchemaCache()


def _no_constant(name: str) -> None:
    # Python reads NaN / Infinity, which JSON does not have: the database refuses them in a JSON column.
    raise ValueError(f"{name} is not JSON")


def report_parse(body: bytes) -> dict[str, Any]:
    """JSON object from the body, or ReportProblem(400, malformed_json)."""
    try:
        payload = json.loads(body, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReportProblem(400, "malformed_json", f"The body is not valid JSON: {exc}") from None
    except RecursionError:
        raise ReportProblem(400, "malformed_json", "The body is nested too deeply.") from None
    if not isinstance(payload, dict):
        raise ReportProblem(400, "malformed_json", "The body must be a JSON object.")
    return payload


# NUL and unpaired surrogates: valid JSON escapes, but PostgreSQL refuses them in text and jsonb (and psycopg
# cannot even encode a lone surrogate), so a report carrying one would fail at the first write.
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")


def _bad_strings(value: Any, path: list, out: list[dict[str, str]]) -> None:
    if isinstance(value, str):
        if _BAD_TEXT.search(value):
            kind = "a NUL character" if "\x00" in value else "an unpaired UTF-16 surrogate"
            out.append({"path": json_path(path), "message": f"the string contains {kind}"})
    elif isinstance(value, dict):
        for key, item in value.items():
            if _BAD_TEXT.search(key):
                out.append({"path": json_path(path), "message": "a key contains a NUL or an unpaired surrogate"})
            _bad_strings(item, [*path, storable(key)], out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _bad_strings(item, [*path, i], out)


def report_text_check(payload: dict[str, Any], body: bytes) -> None:
    """Refuse strings the database cannot store (ReportProblem(400, invalid_text) with each field's path).

    Such characters reach a parsed payload only through a `\\u` escape or raw surrogate bytes (0xED..): a body
    without either, nearly every report, is not walked."""
    if b"\\u" not in body and b"\xed" not in body:
        return
    errors: list[dict[str, str]] = []
    try:
        _bad_strings(payload, [], errors)
    except RecursionError:
        raise ReportProblem(400, "malformed_json", "The body is nested too deeply.") from None
    if errors:
        raise ReportProblem(
            400,
            "invalid_text",
            "The report holds strings with NUL characters or unpaired surrogates, which cannot be stored.",
            errors=errors[:MAX_ERRORS],
        )


def storable(value: Any) -> Any:
    """`value` with NULs written as the text `\\u0000` and unpaired surrogates as U+FFFD, for storing a refused
    report as it came (the database refuses both)."""
    if isinstance(value, str):
        if not _BAD_TEXT.search(value):
            return value
        return re.sub("[\ud800-\udfff]", "\ufffd", value.replace("\x00", "\\u0000"))
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v) for v in value]
    return value


def _error_entry(error: SchemaError) -> dict[str, str]:
    parts = list(error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [name for name in error.validator_value if name not in error.instance]
        if missing:
            parts.append(missing[0])
    return {"path": json_path(parts), "message": error.message[:300]}


def report_validate(payload: dict[str, Any]) -> str:
    """Check the schema version and the document; returns the schema id. Raises ReportProblem(400)."""
    schema_id = payload.get("schema")
    if not isinstance(schema_id, str) or schema_id not in SUPPORTED_SCHEMAS:  # a list or object is unhashable
        raise ReportProblem(
            400,
            "unsupported_schema",
            f"Report schema {schema_id!r} is not supported by this server; supported: "
            f"{', '.join(sorted(SUPPORTED_SCHEMAS))}.",
            extra={"supported": sorted(SUPPORTED_SCHEMAS), "path": "$.schema"},
        )
    validator, fast = _schemas.validator(SUPPORTED_SCHEMAS[schema_id])
    if fast is not None and fast(payload):
        return schema_id
    errors = sorted(validator.iter_errors(payload), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        raise ReportProblem(
            400,
            "invalid_report",
            f"The report does not match {schema_id}.",
            errors=[_error_entry(e) for e in errors[:MAX_ERRORS]],
        )
    return schema_id
