"""Server-side identity checks. The agent nulls placeholder serials already; the server checks again because
the CMDB, not the node, decides what may become an identity (an older agent, or a hand-made report, may not).

Junk: vendor placeholders (N/A, Not Supported, To be filled by O.E.M.), runs of one character (all zeros,
FFFF), masking done by whoever captured the output (xxx, ***), control characters.
"""

from __future__ import annotations

import re

_PLACEHOLDERS = frozenset(
    {
        "",
        "-",
        "--",
        "0",
        "n/a",
        "na",
        "none",
        "null",
        "nil",
        "unknown",
        "undefined",
        "invalid",
        "not supported",
        "not specified",
        "not available",
        "not applicable",
        "not present",
        "no serial",
        "serial",
        "serial number",
        "system serial number",
        "chassis serial number",
        "to be filled by o.e.m.",
        "to be filled by oem",
        "default string",
        "redacted",
        "masked",
        "hidden",
        "removed",
        "123456789",
        "0123456789",
        "1234567890",
    }
)
_MASK = re.compile(r"[xX]{3,}|[*#?]")
# NVIDIA "GPU-<uuid>", Hygon / ROCm unique ids "0x<hex>", plain UUIDs.
_UUID_BODY = re.compile(r"^(?:GPU-|MIG-|NPU-|DCU-|0x)?([0-9a-fA-F-]+)$")
_PCI = re.compile(r"^(?:PCI:)?(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.([0-7]))?$")


def is_junk_serial(raw: str | None) -> bool:
    if raw is None:
        return True
    text = raw.strip().strip("[]()<>").strip()
    if text.lower() in _PLACEHOLDERS:
        return True
    if not (text.isascii() and text.isprintable()):
        return True  # control characters or non-ASCII: a garbled read, never an identity
    if len(set(text.lower())) == 1:
        return True
    return bool(_MASK.search(text))


def clean_serial(raw: str | None) -> str | None:
    """The serial to use as an identity, or None. Capped at the CMDB column width."""
    if raw is None or is_junk_serial(raw):
        return None
    return raw.strip()[:100]


def clean_uuid(raw: str | None) -> str | None:
    """A usable UUID or None: junk words, zeroed or masked bodies, hex with at most two distinct digits."""
    if raw is None or is_junk_serial(raw):
        return None
    text = raw.strip()
    match = _UUID_BODY.match(text)
    if not match:
        return None
    digits = match.group(1).replace("-", "").lower()
    if len(digits) < 8 or len(set(digits)) <= 2:
        return None
    return text[:64]


def normalize_pci(raw: str | None) -> str:
    """'00000000:3B:00.0', 'PCI:0000:3b:00', '3b:00.0' -> '0000:3b:00.0'; '' when unparseable."""
    if not raw:
        return ""
    match = _PCI.match(raw.strip())
    if not match:
        return ""
    domain, bus, device, function = match.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{function or '0'}"
