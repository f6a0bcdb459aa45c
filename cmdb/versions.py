"""Comparing the version strings firmware and drivers really carry.

    "96.00.89.00.01" < "96.00.9A.00.01"   dotted hex bytes (NVIDIA VBIOS) compare byte by byte
    "1.0.0-rc2"      < "1.0.0"           a pre-release (rc, alpha, beta, pre, dev) sorts before its release
    "22.39.1002"     < "22.41.1000"
    "2.1.6 (MT_0000000838)"              a trailing "(PSID)" or "(build ...)" is not part of the version
    "8.70 0x8000d3e9 1.3295.0"           only the first word counts (Intel NVM version, eetrack, combo)

A version is split into runs of digits and runs of letters; digit runs compare as numbers, letter runs as
lower-case text, a number sorts after text at the same place (so "2.0a" < "2.0.1"), and a shorter version that
is a prefix of a longer one sorts first ("1.2" < "1.2.1"). A string with no digit at all (N/A, "unknown", an
empty string) or longer than 100 characters is unparsable: version_key returns None and the compliance report
counts it as `unknown`.
"""

from __future__ import annotations

import re

_TOKEN_RE = re.compile(r"\d+|[A-Za-z]+")
_PRERELEASE = {"rc", "alpha", "beta", "pre", "dev", "preview"}
# NVIDIA VBIOS versions are hex bytes: 90.16.25.00.4C, 96.00.9A.00.01.
_HEX_BYTES_RE = re.compile(r"^[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f]{2}){3,}$")
_SUFFIX_RE = re.compile(r"\s*\([^)]*\)\s*$")

VersionKey = tuple[tuple[int, int, str], ...]


def version_clean(raw: str | None) -> str:
    """The comparable part of a version string: trailing "(...)" and everything after the first blank dropped."""
    text = (raw or "").strip()
    while True:
        stripped = _SUFFIX_RE.sub("", text)
        if stripped == text:
            break
        text = stripped
    return text.split()[0] if text.split() else ""


def version_key(raw: str | None) -> VersionKey | None:
    """A sortable key for `raw`, or None when it cannot be compared (no digit, too long)."""
    text = version_clean(raw)
    if not text or len(text) > 100 or not any(ch.isdigit() for ch in text):
        return None
    if _HEX_BYTES_RE.match(text):
        return (*tuple((2, int(part, 16), "") for part in text.split(".")), (1, 0, ""))
    key: list[tuple[int, int, str]] = []
    for token in _TOKEN_RE.findall(text):
        if token.isdigit():
            key.append((2, int(token), ""))
        elif token.lower() in _PRERELEASE and key:
            key.append((0, 0, token.lower()))  # 1.0.0-rc2 < 1.0.0 (which ends here, sorting as (1,...) below)
        else:
            key.append((1, 0, token.lower()))
    # A release is (1, 0, "") at the end: after its pre-releases (0, ...), before any further number (2, ...).
    key.append((1, 0, ""))
    return tuple(key)


def version_compare(a: str | None, b: str | None) -> int | None:
    """-1, 0 or 1; None when either side is unparsable."""
    ka, kb = version_key(a), version_key(b)
    if ka is None or kb is None:
        return None
    return (ka > kb) - (ka < kb)
