"""A fake switch reachable over real SSH (paramiko server in a thread on 127.0.0.1), NX-OS-like or Cumulus-like.

NX-OS (`platform="cisco_nxos"`): it answers show commands from recorded outputs, accepts the session set-up
netmiko sends (`terminal width`, `terminal length 0`), has exec/config/config-if modes with NX-OS prompts, and
remembers interface config lines so `show running-config interface X` reflects what was pushed.

Cumulus Linux 5 (`platform="linux"`): a bash prompt (`cumulus@leaf01:mgmt:~$`) and NVUE's model of
configuration: `nv set` / `nv unset` edit a pending revision, `nv config apply -y` makes it the applied one,
`nv config detach` drops it, and `nv show --applied interface X -o json` prints the applied tree of X as NVUE
does (a choice such as `link state down` is `{"state": {"down": {}}}`; numbers are numbers).

So netmiko's real connect, prompt detection, send_command and send_config_set code paths run against it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import shlex
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

import paramiko

_INVALID = "% Invalid command at '^' marker."


def _line_key(line: str) -> str:
    """Which earlier line a config line replaces: `no shutdown` replaces `shutdown`, `mtu 9000` an `mtu`."""
    words = line.removeprefix("no ").split()
    if not words:
        return ""
    if words[0] == "switchport":
        return " ".join(words[:3])
    return words[0]


# NVUE leaves whose value is a choice, rendered as {"<choice>": {}} (`link state up|down`).
_NVUE_CHOICES = {"state"}


def _nvue_set(tree: dict[str, Any], words: list[str]) -> None:
    *path, leaf, value = words
    node = tree
    for key in path:
        node = node.setdefault(key, {})
    node[leaf] = {value: {}} if leaf in _NVUE_CHOICES else (int(value) if value.isdigit() else value)


def _nvue_unset(tree: dict[str, Any], words: list[str]) -> None:
    trail = [tree]
    for key in words[:-1]:
        trail.append(trail[-1].get(key, {}))
    trail[-1].pop(words[-1], None)
    for parent, key in reversed(list(zip(trail[:-1], words[:-1], strict=True))):
        if parent.get(key) == {}:
            del parent[key]  # NVUE prunes what is left empty


@dataclass
class SwitchState:
    hostname: str = "leaf01"
    platform: str = "cisco_nxos"  # or "linux": Cumulus Linux with NVUE
    show_outputs: dict[str, str] = field(default_factory=dict)
    interfaces: dict[str, list[str]] = field(default_factory=dict)
    # Cumulus: the applied NVUE configuration of each interface, and the pending revision (None: none open).
    nvue: dict[str, dict[str, Any]] = field(default_factory=dict)
    nvue_pending: dict[str, dict[str, Any]] | None = None
    nvue_revisions: int = 1
    # Cumulus: `nv set` arguments the switch rejects (what NVUE does with a value out of range).
    nvue_rejects: tuple[str, ...] = ()
    commands_seen: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def nv(self, line: str) -> str:
        """One `nv ...` command line, as Cumulus Linux 5 answers it."""
        words = shlex.split(line)
        with self.lock:
            if words[1:3] in (["set", "interface"], ["unset", "interface"]) and len(words) >= 5:
                if any(bad in line for bad in self.nvue_rejects):
                    return f"Error: Invalid Command: {line}"
                if self.nvue_pending is None:
                    self.nvue_pending = copy.deepcopy(self.nvue)
                tree = self.nvue_pending.setdefault(words[3], {})
                (_nvue_set if words[1] == "set" else _nvue_unset)(tree, words[4:])
                return ""
            if words[1:4] == ["config", "apply", "-y"]:
                if self.nvue_pending is None:
                    return "Warning: no pending configuration"
                self.nvue, self.nvue_pending = self.nvue_pending, None
                self.nvue_revisions += 1
                return f"applied [rev_id: {self.nvue_revisions}]"
            if words[1:3] == ["config", "detach"]:
                self.nvue_pending = None
                return ""
            if words[1:4] == ["show", "--applied", "interface"] and words[-2:] == ["-o", "json"]:
                if words[4] not in self.nvue:
                    return "Error: The requested item does not exist."
                return json.dumps(self.nvue[words[4]], indent=2)
        return f"Error: Invalid Command: {line}"

    def configure(self, interface: str, line: str) -> str:
        with self.lock:
            lines = self.interfaces.setdefault(interface, [])
            key = _line_key(line)
            kept = [existing for existing in lines if _line_key(existing) != key]
            if line.startswith("no ") and key != "shutdown":
                self.interfaces[interface] = kept  # `no description` removes the line
            else:
                self.interfaces[interface] = [*kept, line]
        return ""

    def running_interface(self, interface: str) -> str:
        with self.lock:
            if interface not in self.interfaces:
                return _INVALID
            body = "\n".join(f"  {line}" for line in self.interfaces[interface])
        return (
            f"!Command: show running-config interface {interface}\n\nversion 9.3(8) Bios:version\n\n"
            f"interface {interface}\n{body}\n"
        )


class _Server(paramiko.ServerInterface):
    def __init__(self, username: str, password: str) -> None:
        self.username, self.password = username, password

    def check_auth_password(self, username: str, password: str) -> int:
        ok = (username, password) == (self.username, self.password)
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def get_allowed_auths(self, username: str) -> str:
        return "password"

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return paramiko.OPEN_SUCCEEDED if kind == "session" else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_pty_request(self, *args) -> bool:
        return True

    def check_channel_shell_request(self, channel) -> bool:
        return True


class _Shell:
    """One interactive CLI session: echo what is typed, run each line, print the prompt."""

    def __init__(self, channel: paramiko.Channel, state: SwitchState) -> None:
        self.channel, self.state = channel, state
        self.mode = "exec"
        self.interface = ""

    @property
    def prompt(self) -> str:
        if self.state.platform == "linux":
            return f"cumulus@{self.state.hostname}:mgmt:~$ "
        suffix = {"exec": "#", "config": "(config)#", "config-if": "(config-if)#"}[self.mode]
        return f"{self.state.hostname}{suffix} "

    def run(self) -> None:
        self.channel.sendall(f"\r\n{self.prompt}".encode())
        buffer = b""
        while True:
            data = self.channel.recv(4096)
            if not data:
                return
            buffer += data
            while b"\n" in buffer or b"\r" in buffer:
                cut = min(i for i in (buffer.find(b"\n"), buffer.find(b"\r")) if i >= 0)
                line, buffer = buffer[:cut].decode(errors="replace"), buffer[cut + 1 :]
                if buffer[:1] == b"\n":
                    buffer = buffer[1:]
                output = self.execute(line.strip())
                text = f"{line}\r\n" + (output.replace("\n", "\r\n") + "\r\n" if output else "") + self.prompt
                self.channel.sendall(text.encode())

    def execute(self, line: str) -> str:
        if not line:
            return ""
        self.state.commands_seen.append(line)
        if self.state.platform == "linux":
            if line.startswith("nv "):
                return self.state.nv(line)
            if line == "exit":
                return "logout"
            return self.state.show_outputs.get(line, f"-bash: {line.split()[0]}: command not found")
        if line in {"terminal length 0", "terminal width 511"} or line.startswith("terminal "):
            return ""
        if line == "end":
            self.mode, self.interface = "exec", ""
            return ""
        if line == "exit":
            self.mode = "config" if self.mode == "config-if" else "exec"
            return ""
        if self.mode == "exec":
            if line in {"configure terminal", "conf t"}:
                self.mode = "config"
                return "Enter configuration commands, one per line. End with CNTL/Z."
            if line.startswith("show running-config interface "):
                return self.state.running_interface(line.removeprefix("show running-config interface ").strip())
            return self.state.show_outputs.get(line, _INVALID)
        if line.startswith("interface "):
            self.interface = line.removeprefix("interface ").strip()
            self.state.interfaces.setdefault(self.interface, [])
            self.mode = "config-if"
            return ""
        if self.mode == "config-if":
            return self.state.configure(self.interface, line)
        return _INVALID


class FakeSshSwitch:
    """Start with `with FakeSshSwitch(state) as switch:`; connect to switch.host:switch.port."""

    def __init__(self, state: SwitchState, *, username: str = "admin", password: str = "secret") -> None:
        self.state, self.username, self.password = state, username, password
        self.host_key = paramiko.RSAKey.generate(2048)  # throwaway, per test server
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.host, self.port = self.sock.getsockname()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> FakeSshSwitch:
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        accept = threading.Thread(target=self._accept_loop, daemon=True)
        accept.start()
        self._threads.append(accept)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self.sock.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, client: socket.socket) -> None:
        transport = paramiko.Transport(client)
        transport.add_server_key(self.host_key)
        try:
            transport.start_server(server=_Server(self.username, self.password))
            channel = transport.accept(timeout=10)
            if channel is None:
                return
            channel.settimeout(None)
            with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
                _Shell(channel, self.state).run()
        except (paramiko.SSHException, EOFError, OSError):
            return
        finally:
            transport.close()
