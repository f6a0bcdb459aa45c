"""Small parsing helpers shared by the collectors: identities, PCI addresses, numbers with units."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

# Words vendor tools (and people masking captures) put where a serial or UUID should be.
_PLACEHOLDER_WORDS = {
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
_MASK_RUN = re.compile(r"[xX]{3,}|[*#?]")
_HEX_ASCENDING = "0123456789abcdef"


def _strip_brackets(text: str) -> str:
    text = text.strip()
    while len(text) >= 2 and text[0] in "[(<" and text[-1] in "])>":
        text = text[1:-1].strip()
    return text


def is_placeholder_serial(raw: Optional[str]) -> bool:
    """True when `raw` is not a usable serial: N/A, Not Supported, all zeros, masked (xxx, ***), junk bytes."""
    if raw is None:
        return True
    text = _strip_brackets(raw)
    if text.lower() in _PLACEHOLDER_WORDS:
        return True
    if any(not (32 < ord(ch) < 127) and ch != " " for ch in text):
        return True  # control characters or non-ASCII: a garbled read, never an identity
    if len(set(text.lower())) == 1:
        return True  # 0000000000000, FFFFFFFF, xxxxxxxx
    return bool(_MASK_RUN.search(text))


def clean_serial(raw: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """(serial, serial_raw): the serial is None when the raw text is a placeholder; raw keeps the tool's text."""
    if raw is None:
        return None, None
    raw = raw.strip()
    if is_placeholder_serial(raw):
        return None, raw
    return raw, raw


def _has_ascending_run(hex_digits: str, length: int) -> bool:
    return any(
        _HEX_ASCENDING[start : start + length] in hex_digits for start in range(len(_HEX_ASCENDING) - length + 1)
    )


def is_placeholder_uuid(raw: Optional[str]) -> bool:
    """True for zeroed, masked or obviously hand-made UUIDs (GPU-00000000-..., GPU-12345678-aaaa-bbbb-...)."""
    if raw is None or is_placeholder_serial(raw):
        return True
    text = _strip_brackets(raw)
    body = re.sub(r"^(GPU-|MIG-|NPU-|DCU-|0x)", "", text, flags=re.IGNORECASE)
    groups = [g for g in body.lower().split("-") if g]
    digits = "".join(groups)
    if not digits or not re.fullmatch(r"[0-9a-f]+", digits):
        return True
    if len(set(digits)) <= 2:
        return True
    # A random 128-bit UUID with two 4-digit groups of one repeated digit, or eight ascending digits in a row,
    # is so unlikely that it only shows up in anonymised captures.
    repeated_groups = sum(1 for g in groups if len(g) >= 4 and len(set(g)) == 1)
    return repeated_groups >= 2 or _has_ascending_run(digits, 8)


def clean_uuid(raw: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """(uuid, uuid_raw), like clean_serial."""
    if raw is None:
        return None, None
    raw = raw.strip()
    if is_placeholder_uuid(raw):
        return None, raw
    return raw, raw


def is_masked_text(raw: Optional[str]) -> bool:
    """True when a model name was masked by whoever captured it ("Ascend xxx", "DCU xxxx")."""
    if raw is None:
        return True
    text = raw.strip()
    return not text or bool(_MASK_RUN.search(text)) or text.lower() in {"n/a", "na", "unknown"}


_PCI_RE = re.compile(r"^(?:PCI:)?(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.([0-7]))?$")


def normalize_pci_bus_id(raw: Optional[str]) -> Optional[str]:
    """'00000000:3B:00.0', '0000:3b:00', 'PCI:0000:3b:00', '3b:00.0' -> '0000:3b:00.0' (None when unparseable)."""
    if not raw:
        return None
    match = _PCI_RE.match(raw.strip())
    if not match:
        return None
    domain, bus, device, function = match.groups()
    return "{:04x}:{:02x}:{:02x}.{}".format(int(domain or "0", 16), int(bus, 16), int(device, 16), function or "0")


_NUMBER_RE = re.compile(r"[-+]?\d+(?:\.\d+)?")
_NA_VALUES = {"", "n/a", "na", "[n/a]", "not supported", "[not supported]", "unknown", "[unknown error]", "-"}


def is_na(raw: Optional[str]) -> bool:
    return raw is None or raw.strip().lower() in _NA_VALUES


def parse_float(raw: Optional[str]) -> Optional[float]:
    """First number in '67.03 W', '27 C', '41.0' (None for N/A and friends)."""
    if is_na(raw):
        return None
    match = _NUMBER_RE.search(raw or "")
    if not match:
        return None
    try:
        return float(match.group(0))
    except ValueError:
        return None


def parse_int(raw: Optional[str]) -> Optional[int]:
    value = parse_float(raw)
    if value is None:
        return None
    return round(value)


def parse_mib(raw: Optional[str]) -> Optional[int]:
    """Memory size as MiB: '81920 MiB', '32 GB', '65520', '68702699520 B'."""
    value = parse_float(raw)
    if value is None or raw is None:
        return None
    unit = raw.strip().lower()
    if unit.endswith(("gib", "gb", " g")):
        value *= 1024
    elif unit.endswith(("tib", "tb")):
        value *= 1024 * 1024
    elif unit.endswith(("kib", "kb")):
        value /= 1024
    elif unit.endswith(" b") or unit.endswith("bytes"):
        value /= 1024 * 1024
    return round(value)


def parse_yes_no(raw: Optional[str]) -> Optional[bool]:
    if raw is None:
        return None
    text = raw.strip().lower()
    if text in {"yes", "true", "enabled", "1"}:
        return True
    if text in {"no", "false", "disabled", "0"}:
        return False
    return None


def text_or_none(raw: Optional[str]) -> Optional[str]:
    """Stripped text, None for empty / N/A values."""
    if raw is None:
        return None
    text = raw.strip()
    return None if is_na(text) else text


def parse_colon_blocks(text: str) -> List[Dict[str, str]]:
    """Split 'Key : value' output (npu-smi -t ...) into blank-line separated blocks of ordered pairs."""
    blocks: List[Dict[str, str]] = []
    current: Dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        if ":" not in line:
            continue
        key, _, value = line.partition(":")
        key = key.strip()
        if key:
            # A key seen again inside one block starts a new block (some versions print no blank lines).
            if key in current:
                blocks.append(current)
                current = {}
            current[key] = value.strip()
    if current:
        blocks.append(current)
    return blocks
