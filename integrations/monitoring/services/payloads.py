"""Parsing alert bodies into `IncomingAlert`s: Alertmanager's webhook (version "4") and the generic JSON intake.

A malformed body raises `PayloadError` naming the field (`alerts[2].startsAt`), which the view answers with a 400.
Alertmanager writes RFC 3339 times with nanoseconds (Go's time format) and "0001-01-01T00:00:00Z" for "no end";
old releases (2018) sent alerts without `status` and `fingerprint`: the group's status is used, and the
fingerprint is computed from the labels the way it identifies an alert (a hash of the sorted label set).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

MAX_ALERTS = 1000
_FRACTION = re.compile(r"(\.\d{1,6})\d*")


class PayloadError(ValueError):
    def __init__(self, field_name: str, reason: str) -> None:
        super().__init__(f"{field_name}: {reason}")
        self.field = field_name
        self.reason = reason


@dataclass(frozen=True)
class IncomingAlert:
    status: str  # "firing" | "resolved"
    alertname: str
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: dt.datetime
    ends_at: dt.datetime | None
    fingerprint: str
    value: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def parse_time(value: Any, where: str, *, required: bool) -> dt.datetime | None:
    if value in (None, ""):
        if required:
            raise PayloadError(where, "This field is required.")
        return None
    if not isinstance(value, str):
        raise PayloadError(where, "Expected an RFC 3339 time string.")
    text = _FRACTION.sub(lambda m: m.group(1), value.strip()).replace("Z", "+00:00").replace("z", "+00:00")
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        raise PayloadError(where, f"Not an RFC 3339 time: {value[:40]!r}.") from None
    if parsed.year <= 1:  # Go's zero time: Alertmanager's "not ended"
        if required:
            raise PayloadError(where, "The zero time is not a start time.")
        return None
    if parsed.tzinfo is None:
        raise PayloadError(where, "The time needs a UTC offset.")
    return parsed


def _string_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PayloadError(where, "Expected an object of strings.")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(item, str | int | float) or isinstance(item, bool):
            raise PayloadError(f"{where}.{key}", "Expected a string.")
        out[str(key)[:200]] = str(item)[:2000]
    return out


def labels_fingerprint(labels: dict[str, str]) -> str:
    raw = "\x00".join(f"{k}\xff{labels[k]}" for k in sorted(labels))
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]


def _status(value: Any, where: str) -> str:
    if value not in ("firing", "resolved"):
        raise PayloadError(where, 'Expected "firing" or "resolved".')
    return value


def _alerts_list(body: Any, key: str) -> list[Any]:
    if not isinstance(body, dict):
        raise PayloadError("body", "Expected a JSON object.")
    alerts = body.get(key)
    if not isinstance(alerts, list):
        raise PayloadError(key, "This field is required and must be a list.")
    if len(alerts) > MAX_ALERTS:
        raise PayloadError(key, f"At most {MAX_ALERTS} alerts per notification.")
    return alerts


def alertmanager_parse(body: Any) -> list[IncomingAlert]:
    """Alertmanager's webhook body (version "4") -> alerts."""
    alerts = _alerts_list(body, "alerts")
    version = body.get("version")
    if version is not None and str(version) != "4":
        raise PayloadError("version", f'Only webhook version "4" is understood, not {str(version)[:10]!r}.')
    group_status = body.get("status", "firing")
    if "status" in body:
        _status(group_status, "status")
    common_labels = _string_map(body.get("commonLabels"), "commonLabels")
    out = []
    for i, raw in enumerate(alerts):
        where = f"alerts[{i}]"
        if not isinstance(raw, dict):
            raise PayloadError(where, "Expected an object.")
        labels = _string_map(raw.get("labels"), f"{where}.labels") or dict(common_labels)
        if not labels:
            raise PayloadError(f"{where}.labels", "An alert needs its labels.")
        annotations = _string_map(raw.get("annotations"), f"{where}.annotations")
        status = _status(raw.get("status", group_status), f"{where}.status")
        fingerprint = raw.get("fingerprint") or labels_fingerprint(labels)
        if not isinstance(fingerprint, str) or len(fingerprint) > 64:
            raise PayloadError(f"{where}.fingerprint", "Expected a string of at most 64 characters.")
        out.append(
            IncomingAlert(
                status=status,
                alertname=labels.get("alertname", "")[:200],
                labels=labels,
                annotations=annotations,
                starts_at=parse_time(raw.get("startsAt"), f"{where}.startsAt", required=True),
                ends_at=parse_time(raw.get("endsAt"), f"{where}.endsAt", required=False),
                fingerprint=fingerprint,
                value=annotations.get("value", "")[:64],
                extra={"generatorURL": str(raw.get("generatorURL", ""))[:500]},
            )
        )
    return out


def generic_parse(body: Any) -> list[IncomingAlert]:
    """The generic intake (docs/monitoring.md): {"alerts": [{"id", "alertname", "status", "starts_at",
    "ends_at"?, "labels"?, "annotations"?, "value"?}]}; a single alert object is accepted too."""
    if isinstance(body, dict) and "alerts" not in body and "alertname" in body:
        body = {"alerts": [body]}
    alerts = _alerts_list(body, "alerts")
    out = []
    for i, raw in enumerate(alerts):
        where = f"alerts[{i}]"
        if not isinstance(raw, dict):
            raise PayloadError(where, "Expected an object.")
        name = raw.get("alertname")
        if not isinstance(name, str) or not name.strip():
            raise PayloadError(f"{where}.alertname", "This field is required.")
        ident = raw.get("id")
        if not isinstance(ident, str | int) or isinstance(ident, bool) or not str(ident).strip():
            raise PayloadError(f"{where}.id", "This field is required (the monitor's id of the problem).")
        if len(str(ident)) > 64:
            raise PayloadError(f"{where}.id", "At most 64 characters.")
        labels = _string_map(raw.get("labels"), f"{where}.labels")
        labels["alertname"] = name.strip()[:200]
        value = raw.get("value", "")
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise PayloadError(f"{where}.value", "Expected a string or a number.")
        out.append(
            IncomingAlert(
                status=_status(raw.get("status"), f"{where}.status"),
                alertname=labels["alertname"],
                labels=labels,
                annotations=_string_map(raw.get("annotations"), f"{where}.annotations"),
                starts_at=parse_time(raw.get("starts_at"), f"{where}.starts_at", required=True),
                ends_at=parse_time(raw.get("ends_at"), f"{where}.ends_at", required=False),
                fingerprint=str(ident).strip(),
                value=str(value)[:64],
            )
        )
    return out
