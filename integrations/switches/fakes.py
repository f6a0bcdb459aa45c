"""In-memory fakes of the switch adapters, for other workflows' unit tests (provisioning, repair tickets).

They implement the same Protocols (integrations.ports) and reuse the pure parts of the real adapters
(LLDP normalisation, config rendering and diff), so a workflow tested against them sees the same shapes and
the same diffs as in production. No sockets, no threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from integrations.exceptions import PermanentError, TransientError
from integrations.ports import (
    CliTarget,
    ConfigDiff,
    ConfigPushResult,
    LldpNeighbor,
    PortConfig,
    SnmpTarget,
    SwitchSnapshot,
    SwitchSystem,
)

from .config_push import interface_block, plan_port_change, running_text, verify_port_change


class FakeSnmpPoller:
    """Answers from `responses`, keyed by "host" or "host:port": a SwitchSnapshot, or an exception to raise.
    Unknown hosts time out (TransientError), like a real unreachable switch."""

    def __init__(self, responses: dict[str, SwitchSnapshot | Exception] | None = None, **_: object) -> None:
        self.responses = dict(responses or {})
        self.polled: list[SnmpTarget] = []

    def poll(self, target: SnmpTarget) -> SwitchSnapshot:
        self.polled.append(target)
        answer = self.responses.get(target.label, self.responses.get(target.host))
        if answer is None:
            raise TransientError("no SNMP response (fake: unknown host)", peer=target.label)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def poll_many(self, targets: Sequence[SnmpTarget]) -> list[SwitchSnapshot | Exception]:
        results: list[SwitchSnapshot | Exception] = []
        for target in targets:
            try:
                results.append(self.poll(target))
            except (TransientError, PermanentError) as exc:
                results.append(exc)
        return results


def empty_snapshot(name: str = "fake-switch") -> SwitchSnapshot:
    return SwitchSnapshot(
        system=SwitchSystem(
            name=name, description="fake", object_id="1.3.6.1.4.1.0", model=None, serial=None, uptime_s=0
        ),
        ports=(),
        lldp_neighbors=(),
    )


@dataclass
class FakeDeviceCli:
    """Rows per (host, command); LLDP neighbours per host."""

    rows: dict[tuple[str, str], list[dict[str, str]]] = field(default_factory=dict)
    neighbors: dict[str, list[LldpNeighbor]] = field(default_factory=dict)
    versions: dict[str, dict[str, str]] = field(default_factory=dict)
    commands: list[tuple[str, str]] = field(default_factory=list)

    def run(self, target: CliTarget, command: str) -> list[dict[str, str]]:
        self.commands.append((target.host, command))
        if (target.host, command) not in self.rows:
            raise PermanentError(f"fake CLI has no output for {command!r}", peer=target.host)
        return self.rows[(target.host, command)]

    def lldp_neighbors(self, target: CliTarget) -> list[LldpNeighbor]:
        self.commands.append((target.host, "lldp"))
        return list(self.neighbors.get(target.host, []))

    def version(self, target: CliTarget) -> dict[str, str]:
        return dict(self.versions.get(target.host, {}))

    def interface_status(self, target: CliTarget) -> list[dict[str, str]]:
        return self.rows.get((target.host, "interfaces"), [])


@dataclass
class FakeSwitchConfigurator:
    """Keeps each switch's interface lines in memory: {host: {interface: [lines]}}; same diff/rollback logic as
    the real configurator."""

    running: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    applied: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    def _render(self, target: CliTarget, interface: str) -> str:
        return running_text(target.platform, interface, self.running.get(target.host, {}).get(interface, []))

    def _store(self, target: CliTarget, interface: str, lines: Sequence[str]) -> None:
        self.running.setdefault(target.host, {})[interface] = list(lines)

    def plan(self, target: CliTarget, change: PortConfig) -> ConfigDiff:
        return plan_port_change(target.platform, change, self._render(target, change.interface))[0]

    def push(self, target: CliTarget, change: PortConfig, *, dry_run: bool = True) -> ConfigPushResult:
        diff, rollback = plan_port_change(target.platform, change, self._render(target, change.interface))
        if dry_run or diff.is_empty:
            return ConfigPushResult(diff=diff, applied=False, verified=diff.is_empty, rollback_commands=rollback)
        self.applied.append((target.host, diff.commands))
        self._store(target, change.interface, diff.after)
        problems = verify_port_change(target.platform, change, self._render(target, change.interface))
        return ConfigPushResult(
            diff=diff, applied=True, verified=not problems, rollback_commands=rollback, problems=tuple(problems)
        )

    def rollback(self, target: CliTarget, result: ConfigPushResult) -> ConfigPushResult:
        if not result.applied:
            return ConfigPushResult(diff=result.diff, applied=False, verified=True)
        self.applied.append((target.host, result.rollback_commands))
        self._store(target, result.diff.interface, result.diff.before)
        block = interface_block(target.platform, result.diff.interface, self._render(target, result.diff.interface))
        return ConfigPushResult(diff=result.diff, applied=True, verified=block == list(result.diff.before))
