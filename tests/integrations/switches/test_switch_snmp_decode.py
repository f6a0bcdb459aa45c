"""Pure SNMP value decoding and the quirks that the recordings do not all show (no agent needed)."""

from __future__ import annotations

import json

import pytest

from integrations.exceptions import PermanentError
from integrations.switches.credentials import cli_credential_resolve, snmp_credential_resolve
from integrations.switches.snmp_decode import (
    ENT_CLASS,
    ENT_DESCR,
    ENT_MODEL,
    ENT_SERIAL,
    IF_DESCR,
    IF_HIGH_SPEED,
    IF_NAME,
    IF_SPEED,
    LLDP_LOC_PORT_ID,
    LLDP_REM_CHASSIS_ID,
    LLDP_REM_CHASSIS_SUBTYPE,
    LLDP_REM_PORT_ID,
    LLDP_REM_PORT_SUBTYPE,
    RawSnmpData,
    build_snapshot,
    decode_mac,
    decode_text,
    normalize_mac,
    unmasked,
)


def test_decode_text_utf8_or_hex():
    # Huawei VRP sysDescr arrives with CR/LF inside; still text.
    assert decode_text(b"S5720-56C-PWR-EI-AC\nHuawei Versatile\r\n") == "S5720-56C-PWR-EI-AC\nHuawei Versatile\r\n"
    assert decode_text(b"\x00\x1b!\xbb\xe6\xf0") == "001b21bbe6f0"  # binary -> hex
    assert decode_text(b"leaf01\x00") == "leaf01"  # NUL-terminated
    assert decode_text(None) == "" and decode_text(42) == "42"


def test_macs_and_masks():
    assert decode_mac(b"\x00\x1c\x73\x65\x8e\x3a") == "00:1c:73:65:8e:3a"
    assert decode_mac(b"\x00" * 6) == "" and decode_mac(b"") == ""
    assert normalize_mac("b8d6-f6ff-7390") == normalize_mac("B8D6.F6FF.7390") == "b8:d6:f6:ff:73:90"
    assert normalize_mac("Ethernet1/1") == "Ethernet1/1"
    assert unmasked("<private>") is None and unmasked("Not Advertised") is None and unmasked(" leaf ") == "leaf"


def test_ifdescr_fallback_ifspeed_and_lldp_subtypes():
    raw = RawSnmpData(
        columns={
            IF_DESCR: {(1,): b"GigabitEthernet0/1", (2,): b"Ethernet2"},
            IF_NAME: {(2,): b"Et2"},
            IF_SPEED: {(1,): 1_000_000_000},
            IF_HIGH_SPEED: {(2,): 100000},
            LLDP_LOC_PORT_ID: {(1,): b"\x00\x11\x22\x33\x44\x55"},  # a MAC-type local port id: fall back to ifIndex
            LLDP_REM_CHASSIS_SUBTYPE: {(0, 1, 1): 5},
            LLDP_REM_CHASSIS_ID: {(0, 1, 1): b"\x01\x0a\x00\x00\x01"},  # network address subtype, IPv4
            LLDP_REM_PORT_SUBTYPE: {(0, 1, 1): 3},
            LLDP_REM_PORT_ID: {(0, 1, 1): b"\x02\x00\x00\x00\x00\x07"},
            ENT_CLASS: {(1,): 3},
            ENT_MODEL: {(1,): b""},
            ENT_DESCR: {(1,): b"HUAWEI S5720 Routing Switch"},
            ENT_SERIAL: {(1,): b"<private>"},
        }
    )
    snap = build_snapshot(raw)
    ports = {p.index: p for p in snap.ports}
    assert ports[1].name == "GigabitEthernet0/1" and ports[1].speed_mbps == 1000  # ifName missing -> ifDescr
    assert ports[2].name == "Et2" and ports[2].speed_mbps == 100000
    (nb,) = snap.lldp_neighbors
    assert (nb.local_port, nb.remote_chassis_id, nb.remote_port) == (
        "GigabitEthernet0/1",
        "10.0.0.1",
        "02:00:00:00:00:07",
    )
    assert snap.system.model == "HUAWEI S5720 Routing Switch" and snap.system.serial is None


def test_credentials_from_env_and_file(monkeypatch, tmp_path):
    monkeypatch.setenv(
        "GPUOPS_CREDENTIAL_SNMP_FABRIC_A",
        json.dumps(
            {"version": "v3", "user": "ops", "auth_key": "a" * 12, "auth_protocol": "sha256", "priv_key": "p" * 12}
        ),
    )
    cred = snmp_credential_resolve("snmp-fabric-a")
    assert (cred.version, cred.user, cred.auth_protocol) == ("3", "ops", "sha256")
    assert "aaaa" not in repr(cred)
    secrets = tmp_path / "creds.json"
    secrets.write_text(json.dumps({"cli-leaf": {"username": "netops", "password": "pw"}}))
    secrets.chmod(0o600)
    monkeypatch.setenv("GPUOPS_CREDENTIALS_FILE", str(secrets))
    assert cli_credential_resolve("cli-leaf").username == "netops"
    assert "pw" not in repr(cli_credential_resolve("cli-leaf"))
    with pytest.raises(PermanentError, match="unknown credential reference"):
        snmp_credential_resolve("missing")
