"""Interfaces (typing.Protocol) between gpuops and the outside world, and the dataclasses they return.

Callers depend on these, never on a library: the adapters (integrations/<peer>/) implement them with
pysnmp, netmiko, HTTP clients; the fakes implement them in memory. Settings pick the implementation.
Adapters raise only integrations.exceptions.TransientError / PermanentError.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

# --- Switches: what SNMP and the CLI tell us ------------------------------------------------------------------

LinkStateValue = Literal["up", "down", "unknown"]


@dataclass(frozen=True)
class SnmpCredential:
    """v2c (community) or v3 (user + optional auth/priv). Resolved from a reference at run time, never stored."""

    version: Literal["2c", "3"] = "2c"
    community: str = ""
    user: str = ""
    auth_key: str = ""
    auth_protocol: str = "sha"  # md5, sha, sha224, sha256, sha384, sha512
    priv_key: str = ""
    priv_protocol: str = "aes"  # des, aes (=aes128), aes192, aes256
    context: str = ""

    def __repr__(self) -> str:  # never print a secret into a log or a traceback
        who = self.user if self.version == "3" else "community=***"
        return f"SnmpCredential(v{self.version}, {who})"


@dataclass(frozen=True)
class SnmpTarget:
    host: str
    credential: SnmpCredential
    port: int = 161
    timeout_s: float = 2.0
    retries: int = 1

    @property
    def label(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class SwitchModule:
    """A field-replaceable part from ENTITY-MIB (entPhysicalClass module/chassis)."""

    index: int
    name: str
    description: str
    model: str | None
    serial: str | None


@dataclass(frozen=True)
class SwitchSystem:
    name: str | None
    description: str
    object_id: str
    model: str | None
    serial: str | None
    uptime_s: int | None
    modules: tuple[SwitchModule, ...] = ()


@dataclass(frozen=True)
class SwitchPortInfo:
    index: int
    name: str
    alias: str
    speed_mbps: int | None
    admin_state: LinkStateValue
    oper_state: LinkStateValue
    mac: str
    if_type: int | None = None

    @property
    def is_physical(self) -> bool:
        """Ethernet-like (6, 62, 69, 117) or InfiniBand (199): a port a cable can plug into."""
        return self.if_type in {6, 62, 69, 117, 199}


@dataclass(frozen=True)
class LldpNeighbor:
    """One LLDP neighbour, normalised across SNMP and every platform's CLI."""

    local_port: str
    remote_chassis_id: str
    remote_port: str
    remote_system: str
    remote_port_description: str = ""


@dataclass(frozen=True)
class SwitchSnapshot:
    """Everything one poll learned about a switch."""

    system: SwitchSystem
    ports: tuple[SwitchPortInfo, ...]
    lldp_neighbors: tuple[LldpNeighbor, ...]


@runtime_checkable
class SnmpPoller(Protocol):
    def poll(self, target: SnmpTarget) -> SwitchSnapshot:
        """System, ENTITY, IF-MIB and LLDP-MIB of one switch. Raises TransientError on timeout."""
        ...

    def poll_many(self, targets: Sequence[SnmpTarget]) -> list[SwitchSnapshot | Exception]:
        """Poll concurrently (bounded); one entry per target, in order: a snapshot or the error it raised."""
        ...


@dataclass(frozen=True)
class CliTarget:
    host: str
    platform: str  # netmiko device type: cisco_nxos, arista_eos, juniper_junos, huawei, linux, ...
    username: str
    password: str = ""
    port: int = 22
    key_file: str = ""
    timeout_s: float = 20.0

    def __repr__(self) -> str:
        return f"CliTarget({self.username}@{self.host}:{self.port}, {self.platform})"


@runtime_checkable
class DeviceCli(Protocol):
    def run(self, target: CliTarget, command: str) -> list[dict[str, str]]:
        """Run a show command and return its TextFSM (ntc-templates) rows."""
        ...

    def lldp_neighbors(self, target: CliTarget) -> list[LldpNeighbor]: ...

    def version(self, target: CliTarget) -> dict[str, str]: ...

    def interface_status(self, target: CliTarget) -> list[dict[str, str]]: ...


# --- Port configuration push ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PortConfig:
    """The wanted state of one switch port. None leaves an attribute as it is.

    description, vlan (access VLAN, 1-4094), mtu and enabled (admin state) apply to every Ethernet platform.
    `pkey` is an InfiniBand partition key (e.g. "0x8001"): partitions are set on the subnet manager by HCA port
    GUID, never on a switch port, so a configurator refuses it with a PermanentError saying where to set it.
    """

    interface: str
    description: str | None = None
    vlan: int | None = None
    pkey: str | None = None
    mtu: int | None = None
    enabled: bool | None = None


@dataclass(frozen=True)
class ConfigDiff:
    interface: str
    before: tuple[str, ...]
    after: tuple[str, ...]
    commands: tuple[str, ...]  # what will be sent in config mode
    unified: str  # human-readable diff of before -> after

    @property
    def is_empty(self) -> bool:
        return not self.commands


@dataclass(frozen=True)
class ConfigPushResult:
    diff: ConfigDiff
    applied: bool
    verified: bool
    rollback_commands: tuple[str, ...] = ()
    output: str = ""
    problems: tuple[str, ...] = field(default_factory=tuple)


@runtime_checkable
class SwitchConfigurator(Protocol):
    def plan(self, target: CliTarget, change: PortConfig) -> ConfigDiff:
        """Read the interface's running config and compute what would change (no write)."""
        ...

    def push(self, target: CliTarget, change: PortConfig, *, dry_run: bool = True) -> ConfigPushResult:
        """Show the diff; unless dry_run, apply it, keep the previous lines for rollback and verify."""
        ...

    def rollback(self, target: CliTarget, result: ConfigPushResult) -> ConfigPushResult:
        """Re-apply the lines saved by `push`."""
        ...
