"""The rule table: which health signal (kind, code) an alert is, or None when no rule knows it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..models import AlertRule
from .payloads import IncomingAlert


@dataclass(frozen=True)
class SignalSpec:
    rule: AlertRule
    kind: str
    code: str
    node_only: bool


@lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None  # a broken pattern in the admin matches nothing rather than failing every alert


def _matches(expected: str, actual: str | None) -> bool:
    if actual is None:
        return False
    if expected.startswith("~"):
        pattern = _regex(expected[1:])
        return bool(pattern and pattern.fullmatch(actual))
    return expected == actual


def rule_matches(rule: AlertRule, alert: IncomingAlert) -> bool:
    if rule.alertname != "*" and not _matches(rule.alertname, alert.alertname):
        return False
    return all(_matches(str(v), alert.labels.get(k)) for k, v in (rule.matchers or {}).items())


def rules_load() -> list[AlertRule]:
    return list(AlertRule.objects.filter(is_active=True).order_by("priority", "name"))


def signal_for(alert: IncomingAlert, rules: list[AlertRule]) -> SignalSpec | None:
    for rule in rules:
        if not rule_matches(rule, alert):
            continue
        code = rule.code
        if rule.code_label and alert.labels.get(rule.code_label, "").strip():
            code = alert.labels[rule.code_label].strip()
        elif rule.code_from_value and alert.value.strip():
            code = alert.value.strip()
        # "79" and "79.000000" (a gauge's value as Prometheus prints it) are the same code.
        if re.fullmatch(r"\d+\.0*", code):
            code = code.split(".")[0]
        return SignalSpec(rule=rule, kind=rule.kind, code=code[:32], node_only=rule.scope == "node")
    return None
