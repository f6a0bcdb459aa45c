"""Holds: a node an open change works on (a repair draining it, a rollout's lock, a cabling ticket's drain) is
not changed under it by anyone else.

cmdb does not know tickets, so the workflows app registers a provider at start-up (`hold_provider_register`)
that answers "who holds these nodes". The CMDB writers (cmdb.services.nodes, cmdb.services.accelerators) call
`holds_check` inside their transaction:

- a change made for the holder itself passes: its change context carries one of the holder's correlation ids
  (a ticket's steps run under the ticket's correlation id);
- a workflow step of another change may still take a held node further *out* of service (drain, cordon,
  maintenance): workflows coordinate among themselves and withdrawing a node never puts a broken one to work;
- a system context without an actor (engine internals, beat sweeps) is trusted, as for permissions;
- everyone else gets HeldError (HTTP 409 in the API, an error message in the admin), unless they pass an
  explicit override and hold the `cmdb.override_hold` permission; an override is reported to the holder
  through the `hold_overridden` receivers (the workflows app records it on the ticket and pauses it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import PermissionDenied

from gpuops.context import ChangeSource, current_context

OVERRIDE_PERMISSION = "cmdb.override_hold"


@dataclass(frozen=True)
class Holder:
    """An open change holding a node: `ticket_ref` is what people see ("REP-12"), `kind` what it is (repair,
    rollout, provisioning, cabling, decommission). `correlation_ids` identify its own changes."""

    ticket_ref: str
    ticket_id: int | None
    kind: str
    correlation_ids: frozenset[str] = field(default_factory=frozenset)


class HeldError(Exception):
    """A write touches a node held by another open change."""

    code = "held"
    http_conflict = True  # the API answers 409 with `held_by` (gpuops.api.exceptions)

    def __init__(self, holders: Mapping[int, Holder], *, what: str, labels: Mapping[int, str] | None = None) -> None:
        self.holders = dict(holders)
        first_id, first = next(iter(self.holders.items()))
        self.held_by = first.ticket_ref
        name = (labels or {}).get(first_id) or f"node {first_id}"
        more = f" (and {len(self.holders) - 1} more held nodes)" if len(self.holders) > 1 else ""
        self.message = (
            f"Cannot {what} {name}: it is held by {first.ticket_ref} ({first.kind}){more}. "
            f"Let {first.ticket_ref} finish, or override the hold with the override_hold permission."
        )
        self.extra = {"held_by": self.held_by, "held_kind": first.kind}
        super().__init__(self.message)


@dataclass(frozen=True)
class HoldOverride:
    """What an override did, for the holder's receivers: who forced which change on which node."""

    holder: Holder
    node_id: int
    node_label: str
    what: str
    actor: Any
    source: str


HoldProvider = Callable[[list[int]], Mapping[int, Iterable[Holder]]]
HoldOverriddenReceiver = Callable[[HoldOverride], None]
_providers: list[HoldProvider] = []
_override_receivers: list[HoldOverriddenReceiver] = []


def hold_provider_register(provider: HoldProvider) -> None:
    """`provider(node_ids) -> {node id: [Holder, ...]}` for the held ones among `node_ids`."""
    if provider not in _providers:
        _providers.append(provider)


def hold_overridden_register(receiver: HoldOverriddenReceiver) -> None:
    """`receiver(override)` runs inside the overriding transaction (record it; register on-commit work only)."""
    if receiver not in _override_receivers:
        _override_receivers.append(receiver)


def holds_for(*, node_ids: Iterable[int]) -> dict[int, list[Holder]]:
    """Every holder of each held node among `node_ids` (one query per provider, whatever the count)."""
    ids = sorted({i for i in node_ids if i is not None})
    out: dict[int, list[Holder]] = {}
    if not ids:
        return out
    for provider in list(_providers):
        for node_id, holders in provider(ids).items():
            out.setdefault(node_id, []).extend(holders)
    return out


def may_override(actor: Any) -> bool:
    return bool(
        actor is not None
        and getattr(actor, "is_authenticated", False)
        and actor.is_active
        and actor.has_perm(OVERRIDE_PERMISSION)
    )


def holds_blocking(node_ids: Iterable[int], *, withdraws: bool = False) -> dict[int, Holder]:
    """{node id: the holder in the way} for a change of `node_ids` in the current change context; no side
    effects (forms use it to show the refusal before saving)."""
    ctx = current_context()
    if ctx.actor_id is None and ctx.source == ChangeSource.SYSTEM:
        return {}
    if withdraws and ctx.source == ChangeSource.WORKFLOW:
        return {}
    blocking: dict[int, Holder] = {}
    for node_id, holders in holds_for(node_ids=node_ids).items():
        others = [h for h in holders if ctx.correlation_id not in h.correlation_ids]
        if others:
            blocking[node_id] = others[0]
    return blocking


def holds_check(
    node_ids: Iterable[int],
    *,
    what: str,
    withdraws: bool = False,
    override: bool = False,
    labels: Mapping[int, str] | None = None,
) -> list[HoldOverride]:
    """Refuse (HeldError) a change of `node_ids` that another open change holds; see the module docstring.

    `withdraws`: the change takes the nodes further out of service (drain, cordon, maintenance).
    `override`: the caller asked to force it; PermissionDenied without the override permission. The holders
    are told (in this transaction) and the overrides returned.
    """
    ctx = current_context()
    blocking = holds_blocking(node_ids, withdraws=withdraws)
    if not blocking:
        return []
    if not override:
        raise HeldError(blocking, what=what, labels=labels)
    if not may_override(ctx.user):
        raise PermissionDenied(f"Overriding a hold needs the {OVERRIDE_PERMISSION} permission.")
    done = [
        HoldOverride(
            holder=h,
            node_id=n,
            node_label=(labels or {}).get(n) or f"node {n}",
            what=what,
            actor=ctx.user,
            source=ctx.source,
        )
        for n, h in blocking.items()
    ]
    for item in done:
        for receiver in list(_override_receivers):
            receiver(item)
    return done


__all__ = [
    "OVERRIDE_PERMISSION",
    "HeldError",
    "HoldOverride",
    "Holder",
    "hold_overridden_register",
    "hold_provider_register",
    "holds_blocking",
    "holds_check",
    "holds_for",
    "may_override",
]
