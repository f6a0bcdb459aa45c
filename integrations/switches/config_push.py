"""Port configuration push for provisioning: implements integrations.ports.SwitchConfigurator.

Flow (dry_run=True by default): read the interface's running config -> render the wanted lines from the
platform template -> diff -> (apply with netmiko send_config_set, commit where the platform needs it) ->
read back and verify. The lines the push replaced are kept as rollback commands; `rollback` re-applies them.

Rendering and diffing are pure functions (also used by the in-memory fake), so a plan can be reviewed in a
ticket before anything touches a switch.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from integrations.exceptions import PermanentError
from integrations.ports import CliTarget, ConfigDiff, ConfigPushResult, PortConfig

from .cli import netmiko_session, send_show
from .cli_parse import platform_spec

Render = Callable[[Any], list[str]]


@dataclass(frozen=True)
class AttrRule:
    """One port attribute: which running-config lines carry it, how to render a value, how to remove a line.
    `default` stands in for "no line" (absent `shutdown` means enabled), so defaults never show as changes."""

    match: str  # regex on a stripped running-config line
    render: Render
    remove: Callable[[str], str]
    default: tuple[str, ...] = ()


@dataclass(frozen=True)
class PortTemplate:
    header: str | None  # "interface {interface}" for block-style CLIs, None for Junos set-style
    rules: dict[str, AttrRule]
    needs_commit: bool = False


def _no(line: str) -> str:
    return f"no {line}"


def _undo(line: str) -> str:
    return f"undo {line}"


_IOS_LIKE = PortTemplate(
    header="interface {interface}",
    rules={
        "description": AttrRule(r"^description\b", lambda v: [f"description {v}"], lambda _: "no description"),
        "vlan": AttrRule(r"^switchport access vlan\b", lambda v: [f"switchport access vlan {v}"], _no),
        "mtu": AttrRule(r"^mtu\b", lambda v: [f"mtu {v}"], _no),
        "enabled": AttrRule(r"^(no )?shutdown$", lambda v: ["no shutdown" if v else "shutdown"], _no,
                            default=("no shutdown",)),
    },
)


def _huawei(mtu_command: str, needs_commit: bool) -> PortTemplate:
    return PortTemplate(
        header="interface {interface}",
        needs_commit=needs_commit,
        rules={
            "description": AttrRule(r"^description\b", lambda v: [f"description {v}"], lambda _: "undo description"),
            # An access VLAN needs the access link type first; both lines belong to the attribute.
            "vlan": AttrRule(r"^port (default vlan|link-type)\b",
                             lambda v: ["port link-type access", f"port default vlan {v}"], _undo),
            "mtu": AttrRule(rf"^{mtu_command}\b", lambda v: [f"{mtu_command} {v}"], lambda _: f"undo {mtu_command}"),
            "enabled": AttrRule(r"^(undo )?shutdown$", lambda v: ["undo shutdown" if v else "shutdown"], _undo,
                                default=("undo shutdown",)),
        },
    )


def _junos() -> PortTemplate:
    base = "set interfaces {interface}"

    def drop_value(line: str) -> str:
        # `delete interfaces X description` (Junos rejects a value after delete for scalar leaves)
        words = line.split()
        return " ".join(["delete", *words[1:4]])

    return PortTemplate(
        header=None,
        needs_commit=True,
        rules={
            "description": AttrRule(r"^set interfaces \S+ description\b",
                                    lambda v: [f'{base} description "{v}"'], drop_value),
            "vlan": AttrRule(r"^set interfaces \S+ unit 0 family ethernet-switching vlan members\b",
                             lambda v: [f"{base} unit 0 family ethernet-switching vlan members {v}"],
                             lambda line: "delete" + line.removeprefix("set")),
            "mtu": AttrRule(r"^set interfaces \S+ mtu\b", lambda v: [f"{base} mtu {v}"], drop_value),
            "enabled": AttrRule(r"^set interfaces \S+ disable$", lambda v: [] if v else [f"{base} disable"],
                                lambda line: "delete" + line.removeprefix("set")),
        },
    )


TEMPLATES: dict[str, PortTemplate] = {
    "cisco_nxos": _IOS_LIKE,
    "arista_eos": _IOS_LIKE,
    "huawei": _huawei("jumboframe enable", needs_commit=False),
    "huawei_vrpv8": _huawei("mtu", needs_commit=True),
    "juniper_junos": _junos(),
}


def port_template(platform: str) -> PortTemplate:
    template = TEMPLATES.get(platform)
    if template is None:
        raise PermanentError(f"port configuration push is not supported on {platform!r}")
    return template


def interface_block(platform: str, interface: str, running: str) -> list[str]:
    """The interface's own config lines (stripped) out of `show running-config interface X` output."""
    template = port_template(platform)
    lines = [line.rstrip() for line in running.splitlines()]
    if template.header is None:
        prefix = f"set interfaces {interface} "
        return [line.strip() for line in lines if line.strip().startswith(prefix)]
    header = re.compile(rf"^interface\s+{re.escape(interface)}\s*$", re.IGNORECASE)
    block: list[str] = []
    inside = False
    for line in lines:
        if header.match(line.strip()) and not line.startswith((" ", "\t")):
            inside = True
            continue
        if inside:
            if line.startswith((" ", "\t")) and line.strip():
                block.append(line.strip())
            elif line.strip():  # next top-level statement, "!" or "#"
                break
    return block


def _attribute_values(change: PortConfig) -> dict[str, Any]:
    values = {"description": change.description, "vlan": change.vlan, "mtu": change.mtu, "enabled": change.enabled}
    return {k: v for k, v in values.items() if v is not None}


def _transition(rule: AttrRule, old: list[str], new: list[str]) -> list[str]:
    if old == new:
        return []
    # Setting a line replaces the old value on every supported CLI, except list-valued leaves (Junos VLAN
    # members add up) and the removal-only case (no new line): remove explicitly there.
    # Reverse order: undo `port default vlan` before the `port link-type` it depends on.
    removals = [rule.remove(line) for line in reversed(old) if line not in new and line not in rule.default]
    if new and not any("vlan members" in line for line in new):
        removals = []
    return [*removals, *(line for line in new if line not in old)]


def plan_port_change(platform: str, change: PortConfig, running: str) -> tuple[ConfigDiff, tuple[str, ...]]:
    """(diff to apply, commands that restore the previous lines). Pure: no device access."""
    if change.pkey is not None:
        raise PermanentError(
            f"{platform}: a PKey is an InfiniBand partition set on the subnet manager, not a switch port"
        )
    template = port_template(platform)
    fill = {"interface": change.interface}
    before = interface_block(platform, change.interface, running)
    after = list(before)
    commands: list[str] = []
    rollback: list[str] = []
    for attr, value in _attribute_values(change).items():
        rule = template.rules[attr]
        old = [line for line in before if re.match(rule.match, line)] or list(rule.default)
        new = [line.format(**fill) for line in rule.render(value)]
        forward = _transition(rule, old, new)
        if not forward:
            continue
        commands += forward
        rollback += _transition(rule, new, old)
        after = [line for line in after if not re.match(rule.match, line)] + [n for n in new if n not in rule.default]
    header = [template.header.format(**fill)] if template.header else []
    unified = "\n".join(difflib.unified_diff(before, after, f"{change.interface} (running)",
                                             f"{change.interface} (planned)", lineterm=""))
    diff = ConfigDiff(interface=change.interface, before=tuple(before), after=tuple(after),
                      commands=tuple(header + commands) if commands else (), unified=unified)
    return diff, tuple(header + rollback) if rollback else ()


def verify_port_change(platform: str, change: PortConfig, running: str) -> list[str]:
    """Problems left after a push: attributes whose lines are not what was asked for."""
    template = port_template(platform)
    block = interface_block(platform, change.interface, running)
    problems = []
    for attr, value in _attribute_values(change).items():
        rule = template.rules[attr]
        have = [line for line in block if re.match(rule.match, line)] or list(rule.default)
        want = [line.format(interface=change.interface) for line in rule.render(value)]
        if have != want:
            problems.append(f"{attr}: wanted {want}, running config has {have}")
    return problems


class NetmikoConfigurator:
    """The real SwitchConfigurator (one SSH session per call)."""

    def _running(self, conn: Any, target: CliTarget, interface: str) -> str:
        command = platform_spec(target.platform).running_interface.format(interface=interface)
        return send_show(conn, command, target.timeout_s)

    def plan(self, target: CliTarget, change: PortConfig) -> ConfigDiff:
        port_template(target.platform)
        with netmiko_session(target) as conn:
            return plan_port_change(target.platform, change, self._running(conn, target, change.interface))[0]

    def push(self, target: CliTarget, change: PortConfig, *, dry_run: bool = True) -> ConfigPushResult:
        port_template(target.platform)
        with netmiko_session(target) as conn:
            diff, rollback = plan_port_change(target.platform, change, self._running(conn, target, change.interface))
            if dry_run or diff.is_empty:
                return ConfigPushResult(diff=diff, applied=False, verified=diff.is_empty, rollback_commands=rollback)
            output = self._apply(conn, target, list(diff.commands))
            problems = verify_port_change(target.platform, change, self._running(conn, target, change.interface))
        return ConfigPushResult(diff=diff, applied=True, verified=not problems, rollback_commands=rollback,
                                output=output, problems=tuple(problems))

    def rollback(self, target: CliTarget, result: ConfigPushResult) -> ConfigPushResult:
        if not result.applied or not result.rollback_commands:
            return ConfigPushResult(diff=result.diff, applied=False, verified=True)
        with netmiko_session(target) as conn:
            output = self._apply(conn, target, list(result.rollback_commands))
            block = interface_block(target.platform, result.diff.interface,
                                    self._running(conn, target, result.diff.interface))
        restored = block == list(result.diff.before)
        problems = () if restored else (f"running config {block} differs from the saved {list(result.diff.before)}",)
        return ConfigPushResult(diff=result.diff, applied=True, verified=restored, output=output, problems=problems)

    def _apply(self, conn: Any, target: CliTarget, commands: list[str]) -> str:
        output = conn.send_config_set(commands, read_timeout=target.timeout_s, error_pattern=r"% ?Invalid|Error:")
        if port_template(target.platform).needs_commit:
            output += conn.commit()
        return output
