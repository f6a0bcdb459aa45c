"""Port configuration push for provisioning: implements integrations.ports.SwitchConfigurator.

Flow (dry_run=True by default): read the interface's running config -> render the wanted lines from the
platform template -> diff -> (apply with netmiko send_config_set, commit where the platform needs it; on
Cumulus `nv set` at the shell, then `nv config apply`) -> read back and verify. The lines the push replaced
are kept as rollback commands; `rollback` re-applies them.

Attributes (integrations.ports.PortConfig): description, access VLAN, MTU and admin state on every platform
here. A PKey is refused with where InfiniBand partitions are really set: on the subnet manager, by HCA port
GUID - no switch port CLI has one.

Rendering and diffing are pure functions (also used by the in-memory fake), so a plan can be reviewed in a
ticket before anything touches a switch.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from integrations.exceptions import PermanentError
from integrations.ports import CliTarget, ConfigDiff, ConfigPushResult, PortConfig

from .cli import netmiko_session, send_show
from .cli_parse import platform_spec

Render = Callable[[str, Any], list[str]]  # (interface, value) -> lines


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
    """How one platform's port configuration is read, rendered and applied.

    Block-style CLIs (`header` "interface {interface}") are read from their running config and applied with
    netmiko's send_config_set; set-style ones (`header` None) list the interface's statements as lines starting
    with `prefix`. `parse` turns a read-back that is not such text (NVUE's JSON) into lines, `running` is its
    inverse (what the device would print for those lines: the in-memory fake answers with it). `shell_apply`:
    the commands are run one by one at the shell and then this one applies them (NVUE), instead of config mode.
    """

    header: str | None
    rules: dict[str, AttrRule]
    needs_commit: bool = False
    prefix: str = ""
    parse: Callable[[str, str], list[str]] | None = None  # (interface, read-back) -> lines
    running: Callable[[str, list[str]], str] | None = None  # (interface, lines) -> read-back
    shell_apply: str = ""
    quote: str = ""  # a character a description must not contain (it closes the quoting the template uses)


def _no(line: str) -> str:
    return f"no {line}"


def _undo(line: str) -> str:
    return f"undo {line}"


_IOS_LIKE = PortTemplate(
    header="interface {interface}",
    rules={
        "description": AttrRule(r"^description\b", lambda _, v: [f"description {v}"], lambda _: "no description"),
        "vlan": AttrRule(r"^switchport access vlan\b", lambda _, v: [f"switchport access vlan {v}"], _no),
        "mtu": AttrRule(r"^mtu\b", lambda _, v: [f"mtu {v}"], _no),
        "enabled": AttrRule(
            r"^(no )?shutdown$", lambda _, v: ["no shutdown" if v else "shutdown"], _no, default=("no shutdown",)
        ),
    },
)


def _huawei(mtu_command: str, needs_commit: bool) -> PortTemplate:
    return PortTemplate(
        header="interface {interface}",
        needs_commit=needs_commit,
        rules={
            "description": AttrRule(r"^description\b", lambda _, v: [f"description {v}"], lambda _: "undo description"),
            # An access VLAN needs the access link type first; both lines belong to the attribute.
            "vlan": AttrRule(
                r"^port (default vlan|link-type)\b",
                lambda _, v: ["port link-type access", f"port default vlan {v}"],
                _undo,
            ),
            "mtu": AttrRule(rf"^{mtu_command}\b", lambda _, v: [f"{mtu_command} {v}"], lambda _: f"undo {mtu_command}"),
            "enabled": AttrRule(
                r"^(undo )?shutdown$",
                lambda _, v: ["undo shutdown" if v else "shutdown"],
                _undo,
                default=("undo shutdown",),
            ),
        },
    )


def _junos() -> PortTemplate:
    def drop_value(line: str) -> str:
        # `delete interfaces X description` (Junos rejects a value after delete for scalar leaves)
        words = line.split()
        return " ".join(["delete", *words[1:4]])

    return PortTemplate(
        header=None,
        prefix="set interfaces {interface} ",
        needs_commit=True,
        quote='"',
        rules={
            "description": AttrRule(
                r"^set interfaces \S+ description\b", lambda i, v: [f'set interfaces {i} description "{v}"'], drop_value
            ),
            "vlan": AttrRule(
                r"^set interfaces \S+ unit 0 family ethernet-switching vlan members\b",
                lambda i, v: [f"set interfaces {i} unit 0 family ethernet-switching vlan members {v}"],
                lambda line: "delete" + line.removeprefix("set"),
            ),
            "mtu": AttrRule(r"^set interfaces \S+ mtu\b", lambda i, v: [f"set interfaces {i} mtu {v}"], drop_value),
            "enabled": AttrRule(
                r"^set interfaces \S+ disable$",
                lambda i, v: [] if v else [f"set interfaces {i} disable"],
                lambda line: "delete" + line.removeprefix("set"),
            ),
        },
    )


# --- Cumulus Linux 5 (NVUE) ---------------------------------------------------------------------------------------
# The `linux` platform is pushed to with NVUE, the configuration model of Cumulus Linux 5 (NCLU's `net add` is gone
# since 5.0; SONiC has no `nv` and is refused with a clear message). An interface's applied configuration is read as
# JSON (`nv show --applied interface swp1 -o json`) and spelled as the `nv set` commands that would build it, so it
# diffs, verifies and rolls back like the other set-style CLIs. Changes go into the session's pending revision
# (`nv set` / `nv unset`, no root needed for a user in the nvset/nvapply groups) and take effect with
# `nv config apply -y`; a rejected command detaches the pending revision, so nothing half-done is left to a later
# apply. The access VLAN must already be a VLAN of bridge br_default (`nv set bridge domain br_default vlan N` is a
# fabric change, not a port push): NVUE refuses the apply otherwise, which fails the push visibly.

NVUE_BRIDGE = "br_default"
_NVUE_CHOICES = {"state"}  # leaves NVUE renders as {"<choice>": {}}: `link state down` is {"state": {"down": {}}}


def _nv_word(value: Any) -> str:
    return shlex.quote(str(value))


def _nv_set(interface: str, *words: Any) -> str:
    return " ".join(["nv set interface", _nv_word(interface), *(_nv_word(w) for w in words)])


def _nv_unset(path_words: int) -> Callable[[str], str]:
    """`nv set interface X <path> <value>` -> `nv unset interface X <path>`: the path is `path_words` long."""

    def remove(line: str) -> str:
        words = shlex.split(line)
        return " ".join(["nv unset interface", *(_nv_word(w) for w in words[3 : 4 + path_words])])

    return remove


def _nvue_flatten(tree: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    words: list[tuple[str, ...]] = []
    for key, value in sorted(tree.items()):
        if isinstance(value, dict) and value:
            words += _nvue_flatten(value, (*path, key))
        elif isinstance(value, dict):
            words.append((*path, key))  # a choice: `state: {down: {}}` -> link state down
        else:
            words.append((*path, key, str(value)))
    return words


def _nvue_parse(interface: str, text: str) -> list[str]:
    """The applied configuration of one interface as the `nv set` lines that build it."""
    raw = text.strip()
    if "does not exist" in raw:
        return []  # an interface with nothing applied yet
    try:
        tree = json.loads(raw[raw.index("{") :]) if "{" in raw else None
    except json.JSONDecodeError:
        tree = None
    if not isinstance(tree, dict):
        raise PermanentError(
            f"no NVUE configuration of {interface} in the answer (the linux push template speaks "
            f"Cumulus Linux 5 NVUE): {raw[:200]!r}"
        )
    lines = [_nv_set(interface, *words) for words in _nvue_flatten(tree)]
    # `link state up` is NVUE's default: spelled or not, the port is up (a rule default would be rolled back as a
    # `set`, leaving a line the saved block did not have).
    return [line for line in lines if line != _nv_set(interface, "link", "state", "up")]


def _nvue_running(interface: str, lines: list[str]) -> str:
    tree: dict[str, Any] = {}
    for line in lines:
        *path, leaf, value = shlex.split(line)[4:]
        node = tree
        for key in path:
            node = node.setdefault(key, {})
        node[leaf] = {value: {}} if leaf in _NVUE_CHOICES else (int(value) if value.isdigit() else value)
    return json.dumps(tree)


_NVUE = PortTemplate(
    header=None,
    prefix="nv set interface {interface} ",
    parse=_nvue_parse,
    running=_nvue_running,
    shell_apply="nv config apply -y",
    rules={
        "description": AttrRule(
            r"^nv set interface \S+ description\b", lambda i, v: [_nv_set(i, "description", v)], _nv_unset(1)
        ),
        "vlan": AttrRule(
            r"^nv set interface \S+ bridge domain \S+ access\b",
            lambda i, v: [_nv_set(i, "bridge", "domain", NVUE_BRIDGE, "access", v)],
            _nv_unset(4),
        ),
        "mtu": AttrRule(r"^nv set interface \S+ link mtu\b", lambda i, v: [_nv_set(i, "link", "mtu", v)], _nv_unset(2)),
        # Up is the default (no line, see _nvue_parse); down is `link state down`, removed by unsetting the state.
        "enabled": AttrRule(
            r"^nv set interface \S+ link state \S+$",
            lambda i, v: [] if v else [_nv_set(i, "link", "state", "down")],
            _nv_unset(2),
        ),
    },
)


TEMPLATES: dict[str, PortTemplate] = {
    "cisco_nxos": _IOS_LIKE,
    "arista_eos": _IOS_LIKE,
    "huawei": _huawei("jumboframe enable", needs_commit=False),
    "huawei_vrpv8": _huawei("mtu", needs_commit=True),
    "juniper_junos": _junos(),
    "linux": _NVUE,
}


def port_template(platform: str) -> PortTemplate:
    template = TEMPLATES.get(platform)
    if template is None:
        raise PermanentError(
            f"port configuration push is not supported on {platform!r} (supported: {', '.join(sorted(TEMPLATES))})"
        )
    return template


def interface_block(platform: str, interface: str, running: str) -> list[str]:
    """The interface's own config lines (stripped) out of the read-back of `running_interface`."""
    template = port_template(platform)
    if template.parse is not None:
        return template.parse(interface, running)
    lines = [line.rstrip() for line in running.splitlines()]
    if template.header is None:
        prefix = template.prefix.format(interface=interface)
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


def running_text(platform: str, interface: str, lines: list[str]) -> str:
    """What the platform's `running_interface` command prints when the interface has exactly `lines` (for fakes:
    the inverse of `interface_block`)."""
    template = port_template(platform)
    if template.running is not None:
        return template.running(interface, lines)
    if template.header is None:
        return "\n".join(lines)
    return "\n".join([template.header.format(interface=interface), *(f"  {line}" for line in lines)])


def _attribute_values(change: PortConfig) -> dict[str, Any]:
    values = {"description": change.description, "vlan": change.vlan, "mtu": change.mtu, "enabled": change.enabled}
    return {k: v for k, v in values.items() if v is not None}


def _pkey_refusal(platform: str, pkey: str) -> PermanentError:
    return PermanentError(
        f"PKey {pkey}: an InfiniBand partition is configured on the subnet manager, not on a switch port "
        f"({platform} port configuration has no partition key). Add the node's HCA port GUIDs to the partition "
        "there: in UFM (PKeys window, or POST /ufmRest/resources/pkeys with the port GUIDs and membership), or "
        f"for OpenSM as a partitions.conf line `<name>={pkey} : <port GUID>=full ;` followed by a reload of "
        "opensm (SIGHUP). Then push this port without a pkey."
    )


def _check_values(platform: str, template: PortTemplate, change: PortConfig) -> None:
    """Refuse what no switch takes before anything is rendered: a VLAN id outside 1-4094, a non-positive MTU, a
    description that would end the command line (a newline starts a new command) or close the template's quotes."""
    if change.vlan is not None and not 1 <= change.vlan <= 4094:
        raise PermanentError(f"{change.interface}: VLAN {change.vlan} is outside 1-4094")
    if change.mtu is not None and change.mtu <= 0:
        raise PermanentError(f"{change.interface}: MTU {change.mtu} is not a positive number of bytes")
    text = change.description or ""
    if any(not ch.isprintable() for ch in text):
        raise PermanentError(f"{change.interface}: the description contains a control character")
    if template.quote and template.quote in text:
        raise PermanentError(f"{change.interface}: a {platform} description cannot contain a double quote")


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
        raise _pkey_refusal(platform, change.pkey)  # first: also the answer on platforms with no template
    template = port_template(platform)
    _check_values(platform, template, change)
    before = interface_block(platform, change.interface, running)
    after = list(before)
    commands: list[str] = []
    rollback: list[str] = []
    for attr, value in _attribute_values(change).items():
        rule = template.rules[attr]
        old = [line for line in before if re.match(rule.match, line)] or list(rule.default)
        new = rule.render(change.interface, value)
        forward = _transition(rule, old, new)
        if not forward:
            continue
        commands += forward
        rollback += _transition(rule, new, old)
        after = [line for line in after if not re.match(rule.match, line)] + [n for n in new if n not in rule.default]
    if template.parse is not None:
        after.sort()  # a tree (NVUE) has no line order: spell it as the read-back does
    header = [template.header.format(interface=change.interface)] if template.header else []
    unified = "\n".join(
        difflib.unified_diff(
            before, after, f"{change.interface} (running)", f"{change.interface} (planned)", lineterm=""
        )
    )
    diff = ConfigDiff(
        interface=change.interface,
        before=tuple(before),
        after=tuple(after),
        commands=tuple(header + commands) if commands else (),
        unified=unified,
    )
    return diff, tuple(header + rollback) if rollback else ()


def verify_port_change(platform: str, change: PortConfig, running: str) -> list[str]:
    """Problems left after a push: attributes whose lines are not what was asked for."""
    template = port_template(platform)
    block = interface_block(platform, change.interface, running)
    problems = []
    for attr, value in _attribute_values(change).items():
        rule = template.rules[attr]
        have = [line for line in block if re.match(rule.match, line)] or list(rule.default)
        want = rule.render(change.interface, value)
        if have != want:
            problems.append(f"{attr}: wanted {want}, running config has {have}")
    return problems


# NVUE and bash answers that mean "not done": `Error: Invalid Command ...`, `Invalid config [rev_id: 3]`, no `nv`.
_SHELL_ERROR = re.compile(r"(?im)^\s*(error|invalid)\b|command not found")


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
        return ConfigPushResult(
            diff=diff,
            applied=True,
            verified=not problems,
            rollback_commands=rollback,
            output=output,
            problems=tuple(problems),
        )

    def rollback(self, target: CliTarget, result: ConfigPushResult) -> ConfigPushResult:
        if not result.applied or not result.rollback_commands:
            return ConfigPushResult(diff=result.diff, applied=False, verified=True)
        with netmiko_session(target) as conn:
            output = self._apply(conn, target, list(result.rollback_commands))
            block = interface_block(
                target.platform, result.diff.interface, self._running(conn, target, result.diff.interface)
            )
        restored = block == list(result.diff.before)
        problems = () if restored else (f"running config {block} differs from the saved {list(result.diff.before)}",)
        return ConfigPushResult(diff=result.diff, applied=True, verified=restored, output=output, problems=problems)

    def _apply(self, conn: Any, target: CliTarget, commands: list[str]) -> str:
        template = port_template(target.platform)
        if template.shell_apply:
            return self._apply_shell(conn, target, template, commands)
        output = conn.send_config_set(commands, read_timeout=target.timeout_s, error_pattern=r"% ?Invalid|Error:")
        if template.needs_commit:
            output += conn.commit()
        return output

    def _apply_shell(self, conn: Any, target: CliTarget, template: PortTemplate, commands: list[str]) -> str:
        """NVUE: each command at the shell prompt, then the apply. A rejected one detaches the pending revision
        (nothing half-done waits for someone else's apply) and fails the push."""
        output = ""
        # An apply restarts services (ifreload, frr): slower than a show command.
        for command, timeout in [
            *((c, target.timeout_s) for c in commands),
            (template.shell_apply, max(target.timeout_s, 120.0)),
        ]:
            answer = send_show(conn, command, timeout)
            output += f"{command}\n{answer}\n"
            if _SHELL_ERROR.search(answer):
                send_show(conn, "nv config detach", target.timeout_s)
                hint = " (no NVUE here: the linux push speaks Cumulus Linux 5)" if "not found" in answer else ""
                raise PermanentError(f"the switch rejected {command!r}{hint}: {answer.strip()[:300]}", peer=target.host)
        return output
