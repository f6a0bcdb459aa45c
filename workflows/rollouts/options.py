"""A rollout's options: how to cut waves (PlanOptions) plus how long each node may take. Stored as JSON on the
Rollout, so a rollout keeps running under the options it was approved with even if the defaults change."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from .conf import rollouts_setting
from .planning import PlanOptions


def _int_or_none(value: Any) -> int | None:
    if value is None or value == "":
        return None
    return int(value)


def _float_or_none(value: Any) -> float | None:
    if value is None or value == "":
        return None
    return float(value)


@dataclass(frozen=True)
class RolloutOptions:
    """Everything an operator chooses for one rollout. Timeouts of None take the app settings; a limit of 0 per
    cluster or rack means no limit beyond the capacity floor."""

    plan: PlanOptions = field(default_factory=PlanOptions)
    pause_after_canary: bool = False
    drain_timeout_minutes: int | None = None
    verify_timeout_minutes: float | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> RolloutOptions:
        """Parse form/API/JSON input (strings allowed). Unknown keys are ignored; ValueError on bad numbers."""
        data = dict(data or {})
        plan_kwargs: dict[str, Any] = {}
        for f in fields(PlanOptions):
            if f.name not in data or data[f.name] in ("", None):
                continue
            raw = data[f.name]
            if f.name == "eligible_statuses":
                plan_kwargs[f.name] = frozenset(
                    raw if isinstance(raw, list | tuple | set | frozenset) else str(raw).replace(",", " ").split()
                )
            elif f.name in ("wave_percent", "failure_budget_percent"):
                plan_kwargs[f.name] = _float_or_none(raw)
            elif f.name in ("max_per_cluster", "max_per_rack"):
                # 0 says "no limit" (blank keeps the default): a form cannot send an explicit null.
                plan_kwargs[f.name] = _int_or_none(raw) or None
            else:
                plan_kwargs[f.name] = _int_or_none(raw)
        if "wave_size" in plan_kwargs and plan_kwargs["wave_size"] is not None:
            plan_kwargs.setdefault("wave_percent", None)
        plan = PlanOptions(**plan_kwargs)
        if "eligible_statuses" not in plan_kwargs:
            plan = replace(plan, eligible_statuses=frozenset(rollouts_setting("ELIGIBLE_STATUSES")))
        return cls(
            plan=plan,
            pause_after_canary=str(data.get("pause_after_canary", "")).lower() in {"1", "true", "yes", "on"},
            drain_timeout_minutes=_int_or_none(data.get("drain_timeout_minutes")),
            verify_timeout_minutes=_float_or_none(data.get("verify_timeout_minutes")),
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON for the Rollout row; `from_dict` of it gives these options back (the plan is written from it on a
        worker, and "roll back all" reads it again)."""
        plan = asdict(self.plan)
        plan["eligible_statuses"] = sorted(self.plan.eligible_statuses)
        # No limit is stored as 0, as a form sends it: from_dict reads None as "the default" (1 per rack).
        for name in ("max_per_cluster", "max_per_rack"):
            plan[name] = plan[name] or 0
        return {
            **plan,
            "pause_after_canary": self.pause_after_canary,
            "drain_timeout_minutes": self.drain_timeout_minutes,
            "verify_timeout_minutes": self.verify_timeout_minutes,
        }

    @property
    def drain_timeout_s(self) -> float:
        minutes = self.drain_timeout_minutes
        return 60.0 * (minutes if minutes is not None else rollouts_setting("DRAIN_TIMEOUT_MINUTES"))

    @property
    def verify_timeout_s(self) -> float:
        minutes = self.verify_timeout_minutes
        return 60.0 * (minutes if minutes is not None else rollouts_setting("VERIFY_TIMEOUT_MINUTES"))

    def describe(self) -> str:
        p = self.plan
        waves = f"{p.wave_size} nodes" if p.wave_size else f"{p.wave_percent:g}% of the nodes"
        limits = [
            f"at most {p.max_per_cluster} per cluster" if p.max_per_cluster else "",
            f"at most {p.max_per_rack} per rack" if p.max_per_rack else "",
        ]
        budget = (
            f"{p.failure_budget_percent:g}% of a wave"
            if p.failure_budget_percent is not None
            else f"{p.failure_budget} per wave"
        )
        parts = [
            f"canary of {p.canary_size}",
            f"then waves of {waves}",
            *[x for x in limits if x],
            f"failure budget {budget} (canary {p.canary_failure_budget})",
        ]
        if self.pause_after_canary:
            parts.append("pause after the canary")
        return ", ".join(parts)


__all__ = ["RolloutOptions"]
