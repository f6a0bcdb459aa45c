"""The working state of one reconciliation pass, shared by the card, network and health steps.

Steps only collect what must change (objects to create/update with their before-snapshots, signals, placements);
`reconcile.report_apply` writes each kind of row with one bulk statement at the end, which is what keeps the
number of queries independent of the number of cards and ports.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from cmdb.models import Accelerator, AcceleratorPlacement, HealthEvent, Node, TrackedModel

from .health import PolicyBook
from .normalize import Observed, Signal

# Liveness, not history: refreshed on every report without a change record or a version bump.
QUIET_FIELDS = frozenset({"last_seen_at"})


@dataclass
class PendingSignal:
    """A signal to turn into (or count on) a HealthEvent once every card has an id."""

    signal: Signal
    vendor_id: int | None
    accelerator: Accelerator | None = None
    dedup_key: str = ""  # set for node-level signals; card signals get theirs once the card has an id


@dataclass
class Pass:
    node: Node
    observed: Observed
    now: dt.datetime
    policies: PolicyBook
    known_fingerprints: frozenset[str]
    created: list[TrackedModel] = field(default_factory=list)
    updated: dict[int, tuple[dict[str, Any], TrackedModel]] = field(default_factory=dict)
    signals: list[PendingSignal] = field(default_factory=list)
    placements_close: list[int] = field(default_factory=list)
    placements_new: list[AcceleratorPlacement] = field(default_factory=list)
    events_new: list[HealthEvent] = field(default_factory=list)
    # Nodes whose last digest no longer describes the CMDB (a card left them): their next report is reconciled.
    invalidate_nodes: set[int] = field(default_factory=set)
    # Cards on this node after the pass (reported, missing, moved in, created): node health is their worst.
    node_cards: list[Accelerator] = field(default_factory=list)
    summary: Counter = field(default_factory=Counter)

    def track(self, obj: TrackedModel) -> None:
        """Remember obj's values before this pass changes it (once per object)."""
        key = id(obj)
        if key not in self.updated:
            self.updated[key] = (obj.snapshot(), obj)


def has_changes(before: dict[str, Any], obj: TrackedModel) -> bool:
    after = obj.snapshot()
    return any(after.get(k) != before.get(k) for k in after if k not in QUIET_FIELDS)


def changed_fields(before: dict[str, Any], obj: TrackedModel) -> set[str]:
    """Field names (not attnames: `node`, not `node_id`) whose tracked value differs from `before`."""
    after = obj.snapshot()
    names = {f.attname: f.name for f in obj._meta.concrete_fields}
    return {names[k] for k in after if k not in QUIET_FIELDS and after.get(k) != before.get(k)}


def bulk_save(
    model: type[TrackedModel],
    pairs: list[tuple[dict[str, Any], TrackedModel]],
    now: dt.datetime,
    *,
    bump_version: bool = True,
    always: tuple[str, ...] = (),
) -> list[TrackedModel]:
    """One UPDATE for the changed objects of `pairs`, naming only the fields that changed (Django's bulk_update
    builds a CASE per field and object in Python: with every field of eight cards that cost more than the rest
    of the pass). Bumps `version`. Returns the objects written."""
    written, fields = [], set()
    for before, obj in pairs:
        changed = changed_fields(before, obj)
        if not changed:
            continue
        fields |= changed
        obj.updated_at = now
        if bump_version:
            obj.version += 1
        written.append(obj)
    if written:
        extra = ["updated_at", "version"] if bump_version else ["updated_at"]
        model.objects.bulk_update(written, sorted(fields | set(always)) + extra)
    return written
