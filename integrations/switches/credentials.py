"""Resolve credential *references* (Switch.snmp_credential_ref / cli_credential_ref) to secrets at run time.

The CMDB stores only a name such as "snmp-fabric-a". The secret comes from, in order:
1. an environment variable GPUOPS_CREDENTIAL_<NAME> (name upper-cased, other characters as "_"), holding
   a JSON object - how a vault agent or a Kubernetes secret usually lands in a process;
2. the JSON file named by GPUOPS_CREDENTIALS_FILE: {"<name>": {...}, ...} (keep it mode 0600).

SNMP objects: {"version": "2c", "community": "..."} or {"version": "3", "user": "...", "auth_key": "...",
"auth_protocol": "sha256", "priv_key": "...", "priv_protocol": "aes", "context": ""}.
CLI objects: {"username": "...", "password": "...", "key_file": "..."}.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from integrations.exceptions import PermanentError
from integrations.ports import SnmpCredential

log = logging.getLogger(__name__)

ENV_PREFIX = "GPUOPS_CREDENTIAL_"
FILE_ENV = "GPUOPS_CREDENTIALS_FILE"


@dataclass(frozen=True)
class CliCredential:
    username: str
    password: str = ""
    key_file: str = ""

    def __repr__(self) -> str:
        return f"CliCredential({self.username}, password=***)"


def _env_name(ref: str) -> str:
    return ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", ref).upper()


def _load_file() -> dict[str, Any]:
    path = os.environ.get(FILE_ENV)
    if not path:
        return {}
    file = Path(path)
    try:
        mode = file.stat().st_mode
        if mode & (stat.S_IRGRP | stat.S_IROTH):
            log.warning("credentials file %s is readable by group/others; chmod 600 it", file)
        data = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise PermanentError(f"cannot read credentials file {file}: {exc}") from exc
    if not isinstance(data, dict):
        raise PermanentError(f"credentials file {file} must hold a JSON object")
    return data


def credential_lookup(ref: str) -> dict[str, Any]:
    """The raw JSON object for a reference. PermanentError when unknown (retrying cannot help)."""
    if not ref:
        raise PermanentError("no credential reference set")
    env_value = os.environ.get(_env_name(ref))
    if env_value:
        try:
            value = json.loads(env_value)
        except ValueError as exc:
            raise PermanentError(f"{_env_name(ref)} is not JSON") from exc
    else:
        value = _load_file().get(ref)
    if not isinstance(value, dict):
        raise PermanentError(f"unknown credential reference {ref!r} (set {_env_name(ref)} or {FILE_ENV})")
    return value


def snmp_credential_resolve(ref: str) -> SnmpCredential:
    data = credential_lookup(ref)
    version = str(data.get("version", "2c")).lower().removeprefix("v")
    if version not in {"2c", "3"}:
        raise PermanentError(f"credential {ref!r}: SNMP version {version!r} unsupported (2c or 3)")
    fields = {k: str(v) for k, v in data.items() if k in SnmpCredential.__dataclass_fields__ and k != "version"}
    return SnmpCredential(version=version, **fields)  # type: ignore[arg-type]


def cli_credential_resolve(ref: str) -> CliCredential:
    data = credential_lookup(ref)
    if not data.get("username"):
        raise PermanentError(f"credential {ref!r} has no username")
    return CliCredential(
        username=str(data["username"]), password=str(data.get("password", "")), key_file=str(data.get("key_file", ""))
    )
