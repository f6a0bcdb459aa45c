"""SSH CLI adapter (netmiko): implements integrations.ports.DeviceCli.

Only this module and config_push.py (through `netmiko_session`) touch netmiko. Output is parsed by
cli_parse.parse_cli (TextFSM templates from ntc-templates), the same function `switch_parse` uses on saved
files.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from netmiko import ConnectHandler
from netmiko.exceptions import (
    ConfigInvalidException,
    NetmikoAuthenticationException,
    NetmikoTimeoutException,
    ReadTimeout,
)
from paramiko.ssh_exception import SSHException

from integrations.exceptions import PermanentError, TransientError
from integrations.ports import CliTarget, LldpNeighbor

from .cli_parse import is_lldp_command, normalize_lldp, parse_cli, platform_spec


@contextlib.contextmanager
def netmiko_session(target: CliTarget) -> Iterator[Any]:
    """An open netmiko connection; library errors become TransientError/PermanentError."""
    platform_spec(target.platform)  # unsupported platform: fail before opening a socket
    params: dict[str, Any] = {
        "device_type": target.platform,
        "host": target.host,
        "port": target.port,
        "username": target.username,
        "password": target.password,
        "conn_timeout": target.timeout_s,
        "auth_timeout": target.timeout_s,
        "banner_timeout": target.timeout_s,
    }
    if target.key_file:
        params.update(use_keys=True, key_file=target.key_file)
    else:
        # Never fall back to the operator's ~/.ssh keys or agent: a CliTarget names its credential.
        params.update(use_keys=False, allow_agent=False)
    try:
        conn = ConnectHandler(**params)
    except NetmikoAuthenticationException as exc:
        raise PermanentError(f"SSH authentication failed for {target.username}", peer=target.host) from exc
    except (NetmikoTimeoutException, OSError) as exc:
        raise TransientError(f"SSH connect failed: {exc}", peer=f"{target.host}:{target.port}") from exc
    except (SSHException, EOFError) as exc:
        raise TransientError(f"SSH session failed: {exc}", peer=f"{target.host}:{target.port}") from exc
    try:
        yield conn
    except ReadTimeout as exc:
        raise TransientError(f"command timed out: {exc}", peer=target.host) from exc
    except ConfigInvalidException as exc:
        raise PermanentError(f"device rejected the configuration: {exc}", peer=target.host) from exc
    except (SSHException, EOFError, OSError) as exc:
        raise TransientError(f"SSH session lost: {exc}", peer=target.host) from exc
    finally:
        with contextlib.suppress(Exception):
            conn.disconnect()


def send_show(conn: Any, command: str, timeout_s: float = 30.0) -> str:
    # Raw text, parsed by parse_cli, not send_command(use_textfsm=True): netmiko (4.8, ntc-templates 9.3) looks
    # templates up by its own device type (`huawei` finds none; ntc calls it `huawei_vrp`) and answers an empty
    # table (no LLDP neighbours) exactly as a missing template - the raw string, or with raise_parsing_error the
    # same NetmikoParsingException - so "no neighbours" could not be told from "cannot parse".
    return conn.send_command(command, read_timeout=timeout_s)


class NetmikoDeviceCli:
    """The real DeviceCli: one SSH session per call (switch CLIs limit concurrent sessions; don't hold them)."""

    def run_raw(self, target: CliTarget, command: str) -> str:
        with netmiko_session(target) as conn:
            return send_show(conn, command, target.timeout_s)

    def run(self, target: CliTarget, command: str) -> list[dict[str, str]]:
        return parse_cli(target.platform, command, self.run_raw(target, command))

    def lldp_neighbors(self, target: CliTarget) -> list[LldpNeighbor]:
        command = platform_spec(target.platform).lldp
        return normalize_lldp(target.platform, self.run(target, command))

    def version(self, target: CliTarget) -> dict[str, str]:
        rows = self.run(target, platform_spec(target.platform).version)
        return rows[0] if rows else {}

    def interface_status(self, target: CliTarget) -> list[dict[str, str]]:
        return self.run(target, platform_spec(target.platform).interfaces)


def parse_saved(platform: str, command: str, raw: str) -> list[dict[str, str]] | list[LldpNeighbor]:
    """What `switch_parse` prints: TextFSM rows, or for LLDP commands the normalised neighbours."""
    rows = parse_cli(platform, command, raw)
    return normalize_lldp(platform, rows) if is_lldp_command(command) else rows
